"""Ctrl-C / SIGTERM on a run: exit code, one line, checkpoints kept; on an async run every process
the run started (Ray's gcs_server, raylet, agents, actor workers) is gone afterwards. The checks
look at this run's own process tree (tests/proc_tree.py), never at other Ray processes on the
machine, and wait for conditions (an output line, actors up, a file) with deadlines, not sleeps."""

import os
import signal
import subprocess
import sys
import threading

import pytest
from proc_tree import alive, cmdline, descendants, describe, require_proc, wait_gone, wait_until

pytest.importorskip("ray")

#: the actors of the default async pipeline (one collector, one evaluator), by Ray's process title
ACTOR_TITLES = ("ray::CollectorWorker", "ray::EvaluatorWorker")


class _Run:
    """``python -m lz_tune train`` on CartPole in a child process; its output read as it comes."""

    def __init__(self, exp_dir, *extra: str) -> None:
        self.exp_dir = exp_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lz_tune",
                "train",
                "zoo/classic_control/cartpole_muzero.py",
                "max_env_step=100000000",
                "--exp-dir",
                str(exp_dir),
                *extra,
            ],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in iter(self.proc.stdout.readline, ""):
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def printed(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def wait_for(self, condition, what: str, timeout_s: float = 120) -> None:
        """Wait until ``condition()``; fail if the run ends first or ``timeout_s`` passes."""
        wait_until(lambda: condition() or self.proc.poll() is not None, timeout_s, interval_s=0.02)
        assert self.proc.poll() is None, f"the run ended before {what}:\n{self.output[-3000:]}"
        assert condition(), f"no {what} within {timeout_s:.0f} s:\n{self.output[-3000:]}"

    def signal(self, sig, timeout_s: float = 90) -> int:
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=30)
        return code

    def kill(self) -> None:
        """After a failed wait: SIGKILL the run and everything it started."""
        tree = descendants(self.proc.pid)
        self.signal(signal.SIGKILL)
        for p in tree:
            try:
                if alive(p):
                    os.kill(p.pid, signal.SIGKILL)
            except OSError:
                pass


def _actor_processes(pid: int) -> list:
    return [p for p in descendants(pid) if cmdline(p).startswith(ACTOR_TITLES)]


def _signal_async_run_and_check_its_processes(tmp_path, sig, overrides, *, wait_for_line: str) -> tuple[int, str]:
    """Start an async run, wait for ``wait_for_line`` and for both actors, send ``sig``; every
    process the run had started must exit (polled, 30 s deadline)."""
    require_proc()
    run = _Run(tmp_path / "exp", "--async-pipeline", *overrides, "evaluator.eval_freq=20")
    try:
        run.wait_for(lambda: run.printed(wait_for_line), repr(wait_for_line))
        run.wait_for(
            lambda: {cmdline(p).split(".")[0] for p in _actor_processes(run.proc.pid)} >= set(ACTOR_TITLES),
            f"actor processes {ACTOR_TITLES}",
            timeout_s=60,
        )
        tree = descendants(run.proc.pid)
    except BaseException:
        run.kill()
        raise
    assert any("raylet" in cmdline(p) for p in tree) and any("gcs_server" in cmdline(p) for p in tree), describe(tree)
    code = run.signal(sig)
    left = wait_gone(tree, timeout_s=30)
    assert not left, f"processes of the run still alive 30 s after it exited:\n{describe(left)}"
    return code, run.output


@pytest.mark.slow
def test_ctrl_c_leaves_no_actor_processes(tmp_path, tiny_overrides):
    # once the driver is built (its first line) and both actors run: Ctrl-C mid-collect
    code, out = _signal_async_run_and_check_its_processes(
        tmp_path, signal.SIGINT, tiny_overrides, wait_for_line="async pipeline"
    )
    assert code == 130, out[-2000:]
    assert "interrupted (Ctrl-C)" in out, out[-2000:]


def test_sigterm_closes_the_run_cleanly_and_keeps_its_checkpoint(tmp_path, tiny_overrides):
    run = _Run(tmp_path / "exp", *tiny_overrides, "evaluator.eval_freq=20")
    try:
        run.wait_for(lambda: run.printed("train_iter="), "first evaluation line")  # its checkpoint is written
    except BaseException:
        run.kill()
        raise
    code, out = run.signal(signal.SIGTERM), run.output
    assert code == 143, out[-2000:]
    assert "interrupted (SIGTERM)" in out and "Traceback" not in out, out[-2000:]
    from lz_tune.checkpoint import load_checkpoint

    ckpt = load_checkpoint(tmp_path / "exp" / "ckpt" / "ckpt_latest.pt", policy_type="muzero")
    assert ckpt["counters"]["train_iter"] > 0


def test_a_second_sigterm_during_the_shutdown_does_not_cut_it_short(tmp_path, tiny_overrides):
    """``timeout`` forwards its SIGTERM to a run that may already have one (pkill of both, a
    second Ctrl-C): the close still runs to its end and the process exits with 143."""
    run = _Run(tmp_path / "exp", *tiny_overrides, "evaluator.eval_freq=20")
    try:
        run.wait_for(lambda: run.printed("train_iter="), "first evaluation line")
        run.proc.send_signal(signal.SIGTERM)
        run.wait_for(lambda: run.printed("interrupted (SIGTERM)"), "the shutdown line", timeout_s=60)
    except BaseException:
        run.kill()
        raise
    code, out = run.signal(signal.SIGTERM, timeout_s=60), run.output
    assert code == 143, out[-2000:]
    assert "before training started" not in out and "Traceback" not in out, out[-2000:]
    from lz_tune.checkpoint import load_checkpoint

    assert (
        load_checkpoint(tmp_path / "exp" / "ckpt" / "ckpt_latest.pt", policy_type="muzero")["counters"]["train_iter"]
        > 0
    )


def _loading_torch(pid: int) -> bool:
    """The child has mapped libtorch: it is inside (or just past) ``import torch``."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return False


#: moments of the start-up, each a condition on the child: while torch loads; once the driver
#: wrote config.json (learner built, workers being built)
START_PHASES = {
    "importing_torch": lambda run: _loading_torch(run.proc.pid),
    "building_the_driver": lambda run: (run.exp_dir / "config.json").exists(),
}


@pytest.mark.parametrize("phase", list(START_PHASES))
def test_ctrl_c_or_sigterm_while_the_run_starts_exits_cleanly(tmp_path, phase):
    """A signal while modules load or the driver is built: exit 130 / 143 with one line, no
    traceback."""
    require_proc()
    for sig, expected in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        run = _Run(tmp_path / f"exp{int(sig)}")
        try:
            run.wait_for(lambda run=run: START_PHASES[phase](run), phase.replace("_", " "), timeout_s=90)
        except BaseException:
            run.kill()
            raise
        code, out = run.signal(sig), run.output
        assert "Traceback" not in out, out[-3000:]
        assert code in (expected, 130, 143, -sig), out[-2000:]


@pytest.mark.slow
def test_sigterm_on_an_async_run_leaves_no_actor_processes(tmp_path, tiny_overrides):
    # after the first evaluation: SIGTERM while training
    code, out = _signal_async_run_and_check_its_processes(
        tmp_path, signal.SIGTERM, tiny_overrides, wait_for_line="train_iter="
    )
    assert code == 143, out[-2000:]
    assert "interrupted (SIGTERM)" in out and "Traceback" not in out, out[-2000:]


def test_a_signal_swallowed_inside_a_c_callback_still_stops_the_run():
    """numba compiles through ctypes callbacks; a KeyboardInterrupt raised there is swallowed
    ("Exception ignored ..."). The CLI records the signal, prints no traceback, and raises it at
    its next check."""
    script = (
        "import ctypes, os, signal, time\n"
        "from lz_tune.cli.signals import SIGNALS\n"
        "SIGNALS.install()\n"
        "@ctypes.CFUNCTYPE(None)\n"
        "def callback():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "callback()\n"
        "print('after the callback', flush=True)\n"
        "try:\n"
        "    SIGNALS.check()\n"
        "except KeyboardInterrupt:\n"
        "    print('raised at the check', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert "after the callback" in text and "raised at the check" in text, text
    assert "Traceback" not in text, text
