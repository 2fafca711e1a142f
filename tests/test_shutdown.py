"""Ctrl-C on an async run closes the Ray actors and leaves no Ray process behind (slow: ~30 s)."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")


def _ray_processes() -> int:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith(("ray::", "/")) and
               ("raylet" in line or "gcs_server" in line or line.startswith("ray::")))


@pytest.mark.slow
def test_ctrl_c_leaves_no_actor_processes(tmp_path):
    assert _ray_processes() == 0, "another Ray cluster is running; this test needs a quiet machine"
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lz_tune", "train", "zoo/classic_control/cartpole_muzero.py", "--async-pipeline",
         "max_env_step=100000000", "--exp-dir", str(tmp_path / "exp")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(20)
    assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out[-2000:]
    assert "interrupted" in out
    time.sleep(3)
    assert _ray_processes() == 0


def _start_and_signal(tmp_path, sig, *extra, wait_for="train_iter="):
    """Start a CartPole run, wait for its first progress line (or ``wait_for``), send ``sig``."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lz_tune", "train", "zoo/classic_control/cartpole_muzero.py", "max_env_step=100000000",
         "evaluator.eval_freq=20", "--exp-dir", str(tmp_path / "exp"), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if wait_for in line:
            break
    assert proc.poll() is None, "".join(lines)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=90)
    return proc.returncode, "".join(lines) + out


def test_sigterm_closes_the_run_cleanly_and_keeps_its_checkpoint(tmp_path):
    code, out = _start_and_signal(tmp_path, signal.SIGTERM)
    assert code == 143, out[-2000:]
    assert "interrupted (SIGTERM)" in out and "Traceback" not in out, out[-2000:]
    from lz_tune.checkpoint import load_checkpoint

    ckpt = load_checkpoint(tmp_path / "exp" / "ckpt" / "ckpt_latest.pt", policy_type="muzero")
    assert ckpt["counters"]["train_iter"] > 0


@pytest.mark.parametrize("delay", [1.5, 4.0])
def test_ctrl_c_or_sigterm_while_the_run_starts_exits_cleanly(tmp_path, delay):
    """A signal while modules load, the env is probed or the driver is built: exit 130 / 143 with
    one line, no traceback."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    for sig, expected in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "lz_tune", "train", "zoo/classic_control/cartpole_muzero.py",
             "max_env_step=100000000", "--exp-dir", str(tmp_path / f"exp{sig}")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(delay)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=90)
        assert "Traceback" not in out, out[-3000:]
        assert proc.returncode in (expected, 130, 143, -sig), out[-2000:]


@pytest.mark.slow
def test_sigterm_on_an_async_run_leaves_no_actor_processes(tmp_path):
    assert _ray_processes() == 0, "another Ray cluster is running; this test needs a quiet machine"
    code, out = _start_and_signal(tmp_path, signal.SIGTERM, "--async-pipeline")
    assert code == 143, out[-2000:]
    assert "interrupted (SIGTERM)" in out and "Traceback" not in out, out[-2000:]
    time.sleep(3)
    assert _ray_processes() == 0


def test_a_signal_swallowed_inside_a_c_callback_still_stops_the_run():
    """numba compiles through ctypes callbacks; a KeyboardInterrupt raised there is swallowed
    ("Exception ignored ..."). The CLI records the signal, prints no traceback, and raises it at
    its next check."""
    script = (
        "import ctypes, os, signal, time\n"
        "import lz_tune.__main__ as cli\n"
        "cli._raise_on_sigterm()\n"
        "@ctypes.CFUNCTYPE(None)\n"
        "def callback():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "callback()\n"
        "print('after the callback', flush=True)\n"
        "try:\n"
        "    cli._check_signals()\n"
        "except KeyboardInterrupt:\n"
        "    print('raised at the check', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert "after the callback" in text and "raised at the check" in text, text
    assert "Traceback" not in text, text
