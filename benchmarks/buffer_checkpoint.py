"""What keeping the replay buffer in every checkpoint costs, and a restore after SIGKILL.

Three parts (``--parts``):

``cartpole``: a CartPole MuZero trial (the zoo config, stop value off, 1 learner thread) run
    through ``MuZeroTrainable`` in this process for ``--cartpole-seconds``, checkpointed exactly
    as under Tune: after every result with a new evaluation (the default frequency), into a
    temporary folder that is then copied to ``<trial>/checkpoint_00000N`` with the 3 newest kept
    (the CLI's ``num_to_keep=3``). Per save: seconds (``save_checkpoint`` + Tune's copy + deleting
    the oldest) and bytes written (checkpoint files + new chunk files); their sum as a share of
    the trial's wall-clock.
``pong``: the Pong zoo config's buffer after 100k env steps. Collecting them for real takes ~1 h
    on 2 cores (31.8 env steps/s sync), so the buffer is filled with REAL Pong frames (the
    project's Atari env, 8 envs, random actions: 64x64 grayscale, stack 4, stored once each)
    cut into the config's segments (length 20, U = T = 5) with synthetic search statistics
    (Dirichlet visit distributions, normal values). Saves: the first one into an empty store
    (the cost once per trial, or after a PBT exploit), then the next one at the default
    frequency: ``evaluator.eval_freq`` = 5000 updates at ``replay_ratio`` 0.25 = 20,000 new env
    steps per save. Share = save seconds / the seconds those 20,000 env steps take at
    ``--pong-env-steps-per-s`` (default 31.8: sync Pong, ``benchmarks/README.md``, Async vs sync).
    Also: the restore (load) time.
``kill``: ``python -m lz_tune train`` CartPole in a subprocess, SIGKILLed after ``--kill-after``
    evaluations, then ``--resume``d for 3 more, once as it is (the buffer comes back) and once
    from a copy of the killed folder with ``buffer.save_in_checkpoint=False`` (the old empty
    buffer): env steps collected before the first update after the restore
    (``restore/env_steps_before_first_update`` in result.json) and the first evaluation after the
    restore against the last three before the kill (their range, and their mean +- std band).

Prints a table and, as the LAST line, one JSON object with the same figures.

    python benchmarks/buffer_checkpoint.py                         # all three parts (~15 min)
    python benchmarks/buffer_checkpoint.py --parts pong --pong-env-steps 20000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _bytes_in(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


class _LocalStorage:
    """The two attributes of Tune's StorageContext that the trainable reads (a local trial folder)."""

    def __init__(self, trial_dir: str) -> None:
        import pyarrow.fs

        self.trial_fs_path = trial_dir
        self.storage_filesystem = pyarrow.fs.LocalFileSystem()


def _trial(config: dict[str, Any], trial_dir: str):
    """A MuZeroTrainable whose buffer store and checkpoint folders are ``trial_dir`` (as under Tune)."""
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.tune.trial_storage import TrialStorage

    t = MuZeroTrainable(config=config)
    t._write_placement = lambda: None  # (it would start a Ray instance: not part of a checkpoint's cost)
    t._trial_storage = TrialStorage(_LocalStorage(trial_dir), fallback_dir=trial_dir)
    t.driver.buffer_checkpoints = t._trial_storage.checkpointer(t.cfg)
    return t


def _tune_save(t, trial_dir: str, index: int, keep: int = 3) -> tuple[float, int, float, int]:
    """One checkpoint the way Tune takes it: save into a temporary folder, copy it into the trial
    folder, delete the oldest beyond ``keep``. Returns (seconds, bytes written, and of them the
    replay buffer's: seconds of its save, bytes of its new chunks and manifest)."""
    from lz_tune.tune.trial_storage import MANIFEST_FILE

    start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="lz_ckpt_")
    t.save_checkpoint(tmp)
    target = os.path.join(trial_dir, f"checkpoint_{index:06d}")
    shutil.copytree(tmp, target)
    shutil.rmtree(tmp)
    folders = sorted(d for d in os.listdir(trial_dir) if d.startswith("checkpoint_"))
    for old in folders[:-keep]:
        shutil.rmtree(os.path.join(trial_dir, old))
    seconds = time.perf_counter() - start
    stats = t.driver.buffer_checkpoints.last_save  # chunk files this save wrote
    manifest = os.path.join(target, MANIFEST_FILE)
    buffer_bytes = stats.file_bytes + os.path.getsize(manifest) if stats is not None else 0
    return (
        seconds,
        _bytes_in(target) + (stats.file_bytes if stats is not None else 0),
        stats.seconds if stats is not None else 0.0,
        buffer_bytes,
    )


def part_cartpole(seconds: float) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    trial_dir = tempfile.mkdtemp(prefix="lz_bench_cartpole_")
    config = {
        "config": "lz_tune.zoo.classic_control.cartpole_muzero",
        "step_seconds": 5.0,
        "learner.num_threads": 1,
        "evaluator.stop_value": 1e9,
        "max_env_step": 10_000_000,
    }
    t = _trial(config, trial_dir)
    saves: list[tuple[float, int, float, int]] = []
    start = time.perf_counter()
    try:
        while time.perf_counter() - start < seconds:
            result = t.train()
            if result.get("should_checkpoint"):
                saves.append(_tune_save(t, trial_dir, len(saves) + 1))
        wall = time.perf_counter() - start
        transitions = t.driver.buffer.num_transitions
        env_steps = t.driver.counters.env_steps
    finally:
        t.stop()
        shutil.rmtree(trial_dir, ignore_errors=True)
    save_s, save_b, buf_s, buf_b = (np.array(column) for column in zip(*saves))
    return {
        "wall_s": wall,
        "saves": len(saves),
        "env_steps": env_steps,
        "buffer_transitions": transitions,
        "save_s_mean": float(save_s.mean()),
        "save_s_max": float(save_s.max()),
        "save_bytes_mean": float(save_b.mean()),
        "save_bytes_max": int(save_b.max()),
        "buffer_s_mean": float(buf_s.mean()),
        "buffer_bytes_mean": float(buf_b.mean()),
        "seconds_between_saves": wall / max(1, len(saves)),
        "share": float(save_s.sum() / wall),
        "buffer_share": float(buf_s.sum() / wall),
    }


def _pong_segments(env_steps: int, cfg, seed: int = 0):
    """Segments of real Pong frames (random actions), the config's segment layout, synthetic
    search statistics. Yields lists of segments (one per 1,000 env steps of all envs)."""
    from lz_tune.buffer import SegmentBuilder
    from lz_tune.envs.factory import make_vector_env

    n = 8
    env = make_vector_env(env_id="ALE/Pong-v5", num_envs=n, seed=seed, mode="collect")
    rng = np.random.default_rng(seed)
    b = cfg.buffer
    builders = [
        SegmentBuilder(
            segment_length=b.game_segment_length,
            num_unroll_steps=b.num_unroll_steps,
            td_steps=b.td_steps,
            frame_stack=cfg.env.frame_stack,
            action_space_size=6,
        )
        for _ in range(n)
    ]
    batch = env.reset()
    s = cfg.env.frame_stack
    for i, builder in enumerate(builders):
        builder.begin_episode(batch.observation[i].reshape((s, -1) + batch.observation.shape[2:]))
    steps, out, episode = 0, [], 400
    while steps < env_steps:
        actions = rng.integers(0, 6, n)
        res = env.step(actions)
        for i, builder in enumerate(builders):
            done = (res.batch.timestep[i] % episode) == episode - 1
            out += builder.add_step(
                action=int(actions[i]),
                reward=float(res.reward[i]),
                root_value=float(rng.normal()),
                pred_value=float(rng.normal()),
                policy_target=rng.dirichlet(np.ones(6)).astype(np.float32),
                action_mask=np.ones(6, bool),
                to_play=-1,
                timestep=int(res.batch.timestep[i]),
                next_frame=res.batch.frame[i],
                done=bool(done),
            )
            if done:
                builder.begin_episode(res.batch.observation[i].reshape((s, -1) + res.batch.observation.shape[2:]))
        steps += n
        if len(out) >= 50:
            yield out
            out = []
    if out:
        yield out


def part_pong(env_steps: int, new_env_steps: int, env_steps_per_s: float) -> dict[str, Any]:
    import torch

    torch.set_num_threads(2)
    trial_dir = tempfile.mkdtemp(prefix="lz_bench_pong_")
    t = _trial({"config": "lz_tune.zoo.atari.pong_muzero", "step_seconds": 5.0}, trial_dir)
    try:
        segments = _pong_segments(env_steps, t.cfg)
        filled = 0
        for chunk in segments:
            t.driver.buffer.push(chunk)
            filled += sum(sg.num_owned for sg in chunk)
            if filled >= env_steps - new_env_steps:
                break
        first_s, first_b, first_buf_s, first_buf_b = _tune_save(t, trial_dir, 1)
        for chunk in segments:  # the env steps between two saves at the default frequency
            t.driver.buffer.push(chunk)
        next_s, next_b, next_buf_s, next_buf_b = _tune_save(t, trial_dir, 2)
        stats = t.driver.buffer_checkpoints.last_save
        folder = os.path.join(trial_dir, "checkpoint_000002")
        from lz_tune.pipeline.buffer_checkpoint import live_bytes

        raw = live_bytes(t.driver.buffer)
        transitions = t.driver.buffer.num_transitions
        store_bytes = _bytes_in(os.path.join(trial_dir, "lz_tune", "buffer_store"))
        start = time.perf_counter()
        t.load_checkpoint(folder)
        load_s = time.perf_counter() - start
        assert t.driver.buffer.num_transitions == transitions
    finally:
        t.stop()
        shutil.rmtree(trial_dir, ignore_errors=True)
    interval = new_env_steps / env_steps_per_s
    return {
        "buffer_transitions": transitions,
        "buffer_raw_bytes": raw,
        "store_bytes": store_bytes,
        "first_save_s": first_s,
        "first_save_bytes": first_b,
        "next_save_s": next_s,
        "next_save_bytes": next_b,
        "first_buffer_s": first_buf_s,
        "first_buffer_bytes": first_buf_b,
        "next_buffer_s": next_buf_s,
        "next_buffer_bytes": next_buf_b,
        "next_save_new_raw_bytes": stats.new_raw_bytes,
        "load_s": load_s,
        "new_env_steps_per_save": new_env_steps,
        "seconds_between_saves": interval,
        "share": next_s / interval,
        "first_save_share": first_s / interval,
    }


def _rows(run: str) -> list[dict]:
    path = os.path.join(run, "result.json")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _run_until(cmd: list[str], run: str, rows: int, sig: int) -> None:
    """Run ``cmd`` until ``run``'s result.json has ``rows`` evaluations, then send ``sig`` to it
    and everything it started."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        while len(_rows(run)) < rows:
            if proc.poll() is not None:
                raise RuntimeError(f"{' '.join(cmd[2:5])} ended early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, sig)
        proc.wait()


def _after_restore(killed: list[dict], rows: list[dict]) -> dict[str, Any]:
    """The first evaluation after a restore against the last three before the kill: their range,
    and their band of mean +- std (each over the evaluation's episodes)."""
    key, std = "evaluation/env_runners/episode_return_mean", "evaluation/env_runners/episode_return_std"
    last3, after = killed[-3:], rows[len(killed)]
    low, high = min(r[key] - r[std] for r in last3), max(r[key] + r[std] for r in last3)
    return {
        "last3_before": [r[key] for r in last3],
        "first_after": after[key],
        "first_after_std": after[std],
        "within_range": min(r[key] for r in last3) <= after[key] <= max(r[key] for r in last3),
        "within_band": low <= after[key] <= high,
        "band": [low, high],
        "env_steps_before_first_update": after.get("restore/env_steps_before_first_update"),
        "buffer_transitions_restored": after.get("restore/buffer_transitions"),
        "env_steps_first_eval_after": after["evaluation/num_env_steps_sampled_lifetime"],
    }


def part_kill(kill_after: int) -> dict[str, Any]:
    """SIGKILL a CartPole run, resume it with its buffer (the default) and, from a copy of the
    killed folder, without (``buffer.save_in_checkpoint=False``: the old behaviour)."""
    run = tempfile.mkdtemp(prefix="lz_bench_kill_")
    common = [
        sys.executable,
        "-m",
        "lz_tune",
        "train",
        "zoo/classic_control/cartpole_muzero.py",
        "evaluator.stop_value=1e9",
        "max_env_step=10000000",
        "learner.num_threads=1",
        "--quiet",
    ]
    _run_until(common + ["--exp-dir", run], run, kill_after, signal.SIGKILL)
    killed = _rows(run)
    empty = run + "_empty"
    shutil.copytree(run, empty)
    out: dict[str, Any] = {
        "evaluations_before_kill": len(killed),
        "env_steps_at_kill_checkpoint": killed[-1]["evaluation/num_env_steps_sampled_lifetime"],
    }
    for name, folder, extra in (("with_buffer", run, []), ("empty_buffer", empty, ["buffer.save_in_checkpoint=False"])):
        _run_until(common + extra + ["--resume", folder], folder, len(killed) + 3, signal.SIGTERM)
        out[name] = _after_restore(killed, _rows(folder))
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="cartpole,pong,kill")
    parser.add_argument("--cartpole-seconds", type=float, default=180.0)
    parser.add_argument("--pong-env-steps", type=int, default=100_000)
    parser.add_argument(
        "--pong-new-env-steps",
        type=int,
        default=20_000,
        help="env steps between two saves (eval_freq 5000 updates / replay_ratio 0.25)",
    )
    parser.add_argument("--pong-env-steps-per-s", type=float, default=31.8)
    parser.add_argument("--kill-after", type=int, default=6, help="evaluations before the SIGKILL")
    args = parser.parse_args()
    parts = args.parts.split(",")
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d")}
    if "cartpole" in parts:
        out["cartpole"] = c = part_cartpole(args.cartpole_seconds)
        print(
            f"CartPole: {c['saves']} saves in {c['wall_s']:.0f} s (one every {c['seconds_between_saves']:.1f} s), "
            f"buffer {c['buffer_transitions']} transitions; per save {c['save_s_mean'] * 1e3:.0f} ms "
            f"(max {c['save_s_max'] * 1e3:.0f}), {c['save_bytes_mean'] / 1e3:.0f} kB "
            f"(max {c['save_bytes_max'] / 1e3:.0f}); share of wall-clock {100 * c['share']:.2f}%; of which the "
            f"buffer {c['buffer_s_mean'] * 1e3:.0f} ms, {c['buffer_bytes_mean'] / 1e3:.0f} kB per save "
            f"({100 * c['buffer_share']:.2f}%)"
        )
    if "pong" in parts:
        out["pong"] = p = part_pong(args.pong_env_steps, args.pong_new_env_steps, args.pong_env_steps_per_s)
        print(
            f"Pong, {p['buffer_transitions']} transitions ({p['buffer_raw_bytes'] / 1e6:.0f} MB raw, store "
            f"{p['store_bytes'] / 1e6:.1f} MB): first save {p['first_save_s']:.2f} s / "
            f"{p['first_save_bytes'] / 1e6:.1f} MB (buffer {p['first_buffer_s']:.2f} s / "
            f"{p['first_buffer_bytes'] / 1e6:.1f} MB); next save ({p['new_env_steps_per_save']} new env steps) "
            f"{p['next_save_s']:.2f} s / {p['next_save_bytes'] / 1e6:.1f} MB (buffer {p['next_buffer_s']:.2f} s / "
            f"{p['next_buffer_bytes'] / 1e6:.1f} MB) = {100 * p['share']:.3f}% of the "
            f"{p['seconds_between_saves']:.0f} s between saves (first save {100 * p['first_save_share']:.2f}%); "
            f"restore {p['load_s']:.2f} s"
        )
    if "kill" in parts:
        out["kill"] = k = part_kill(args.kill_after)
        for name in ("with_buffer", "empty_buffer"):
            r = k[name]
            print(
                f"SIGKILL after {k['evaluations_before_kill']} evaluations, resume {name}: env steps before the "
                f"first update {r['env_steps_before_first_update']}, {r['buffer_transitions_restored']} transitions "
                f"restored; first eval after {r['first_after']:.1f} (at {r['env_steps_first_eval_after']} env steps; "
                f"killed checkpoint {k['env_steps_at_kill_checkpoint']}) vs last three before "
                f"{[round(x, 1) for x in r['last3_before']]} (within their range: {r['within_range']}, within "
                f"their mean +- std band [{r['band'][0]:.1f}, {r['band'][1]:.1f}]: {r['within_band']})"
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
