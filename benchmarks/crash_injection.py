"""Crash injection at every write of a checkpoint save: the process is killed (``os._exit``, no
cleanup runs, as with SIGKILL or a power cut after the page cache reached the disk) at each file
operation of one evaluation's save in turn, and the run folder is then checked as a resume would
find it.

The save under test is a ``train`` run's evaluation checkpoint: the replay buffer's chunks and
manifest (``save_for_evaluation``), ``ckpt_latest.pt`` / ``ckpt_best.pt``, then the deletion of
the manifests and chunks no checkpoint refers to any more (``commit_run_files``: unlinks and the
chunk garbage collection). The operations, each one injection point: creating a temporary file,
a write to it, an fsync (file or folder), a rename, an unlink.

After each kill, in a fresh process:

- every checkpoint of the run verifies (``python -m lz_tune verify``: file, manifest digest,
  every chunk re-hashed);
- ``ckpt_latest.pt`` is exactly the previous evaluation's or exactly the new one's (its
  evaluated train_iter), and the manifest it names is the one written for that evaluation
  (the snapshot version in the file name), never a mix;
- ``train --resume`` restores it with its whole replay buffer (the transitions its manifest
  records).

    python benchmarks/crash_injection.py                      # every point (~5 s each on 2 cores)
    python benchmarks/crash_injection.py --every 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

#: the tiny CartPole run whose save is injected (tests/conftest.py's TINY_OVERRIDES plus evaluations)
OVERRIDES = [
    "env.collector_env_num=2",
    "env.evaluator_env_num=2",
    "evaluator.n_evaluator_episode=2",
    "env.max_episode_steps=40",
    "mcts.num_simulations=4",
    "learner.batch_size=16",
    "buffer.game_segment_length=10",
    "buffer.num_unroll_steps=3",
    "buffer.td_steps=3",
    "model.latent_dim=16",
    "model.hidden_sizes=(16,)",
    "model.value_support_size=10",
    "model.reward_support_size=5",
    "model.projection_dim=16",
    "learner.num_threads=1",
    "evaluator.eval_freq=8",
]
UPDATES_BEFORE_SAVE = 3

#: the child: resume the run, train a few updates, then one evaluation and its save with the
#: injector armed at operation K (-1: count the operations, kill nothing)
CHILD = r"""
import os, sys, tempfile
sys.path.insert(0, sys.argv[3])
import torch
torch.set_num_threads(1)
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver

run, kill_at = sys.argv[1], int(sys.argv[2])
overrides = sys.argv[5:]
cfg = load_config_module(os.path.join(sys.argv[3], "zoo/classic_control/cartpole_muzero.py")).with_overrides(overrides)
driver = Driver(cfg, exp_dir=run, resume_from=os.path.join(run, "ckpt", "ckpt_latest.pt"), print_fn=None)
for _ in range(int(sys.argv[4])):
    driver.train_one_update()
count = [0]

def point(kind):
    count[0] += 1
    if count[0] == kill_at:
        os._exit(137)  # no cleanup, no flush: as SIGKILL

real = {name: getattr(os, name) for name in ("fsync", "replace", "rename", "unlink", "fdopen")}
real_mkstemp = tempfile.mkstemp

class Writes:  # a file object whose first write is an injection point (torch.save writes in many pieces)
    def __init__(self, f):
        self._f, self._started = f, False
    def write(self, data):
        if not self._started:
            self._started = True
            point("write")
        return self._f.write(data)
    def __getattr__(self, name):
        return getattr(self._f, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self._f.__exit__(*exc)

def arm():
    for name in ("fsync", "replace", "rename", "unlink"):
        def patched(*a, _name=name, **k):
            point(_name)
            return real[_name](*a, **k)
        setattr(os, name, patched)
    os.fdopen = lambda *a, **k: Writes(real["fdopen"](*a, **k))
    def mkstemp(*a, **k):
        point("create")
        return real_mkstemp(*a, **k)
    tempfile.mkstemp = mkstemp

arm()
driver._launch_eval()
driver.consume_finished()
for name, fn in real.items():
    setattr(os, name, fn)
tempfile.mkstemp = real_mkstemp
print("POINTS", count[0], "TRAIN_ITER", driver.train_iter, flush=True)
driver.close()
"""


def make_base_run(folder: str) -> dict:
    """A run with one evaluated checkpoint (the 'previous' one of every injection)."""
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.cli.main import main

    code = main(
        [
            "train",
            "zoo/classic_control/cartpole_muzero.py",
            *OVERRIDES,
            "max_env_step=240",
            "--quiet",
            "--exp-dir",
            folder,
        ]
    )
    if code != 0:
        raise SystemExit(f"base run failed ({code})")
    ck = load_checkpoint(os.path.join(folder, "ckpt", "ckpt_latest.pt"))
    return {"train_iter": ck["eval"]["train_iter"]}


def child(run: str, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, run, str(kill_at), REPO, str(UPDATES_BEFORE_SAVE), *OVERRIDES],
        capture_output=True,
        text=True,
        timeout=600,
    )


CHECK = r"""
import json, os, re, sys
sys.path.insert(0, sys.argv[2])
from lz_tune.checkpoint import load_checkpoint
from lz_tune.cli.verify import checkpoints_in, verify_checkpoint
from lz_tune.buffer.snapshot import read_manifest
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver
run = sys.argv[1]
problems = [f"{f.name}: {p}" for f in checkpoints_in(run) for p in [verify_checkpoint(f)] if p]
latest = load_checkpoint(os.path.join(run, "ckpt", "ckpt_latest.pt"))
name = latest["buffer_manifest"]
m = re.fullmatch(r"replay_buffer\.v(\d+)(\.[0-9a-f]{8})?\.json", name or "")
if not m or int(m.group(1)) != latest["eval"]["version"]:
    problems.append(f"ckpt_latest.pt names manifest {name} for evaluation version {latest['eval']['version']}")
cfg = load_config_module(os.path.join(sys.argv[2], "zoo/classic_control/cartpole_muzero.py"))
cfg = cfg.with_overrides(sys.argv[3:])
expected = read_manifest(os.path.join(run, "ckpt", name))["transitions"]
driver = Driver(cfg, exp_dir=run, resume_from=os.path.join(run, "ckpt", "ckpt_latest.pt"), print_fn=None)
restored = driver.buffer.num_transitions
driver.close()
if restored != expected:
    problems.append(f"restored {restored} transitions, the manifest records {expected}")
print(json.dumps({"train_iter": latest["eval"]["train_iter"], "problems": problems}))
"""


def check(run: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHECK, run, REPO, *OVERRIDES], capture_output=True, text=True, timeout=600
    )
    if out.returncode != 0:
        return {"train_iter": None, "problems": [f"check failed: {out.stderr.strip().splitlines()[-1:]}"]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=int, default=1, help="inject at every N-th point only")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args()
    os.chdir(REPO)
    start = time.time()
    work = tempfile.mkdtemp(prefix="lz_crash_")
    try:
        base = os.path.join(work, "base")
        previous = make_base_run(base)
        counting = os.path.join(work, "counting")
        shutil.copytree(base, counting)
        out = child(counting, -1)
        found = re.search(r"POINTS (\d+) TRAIN_ITER (\d+)", out.stdout)
        if not found:
            raise SystemExit(f"counting run failed: {out.stderr[-2000:]}")
        points, new_train_iter = int(found.group(1)), int(found.group(2))
        rows = []
        for k in range(1, points + 1, args.every):
            run = os.path.join(work, f"k{k}")
            shutil.copytree(base, run)
            killed = child(run, k)
            result = check(run)
            which = (
                "previous"
                if result["train_iter"] == previous["train_iter"]
                else "new"
                if result["train_iter"] == new_train_iter
                else f"other ({result['train_iter']})"
            )
            if which.startswith("other"):
                result["problems"].append(f"latest checkpoint is neither the previous nor the new one: {which}")
            rows.append({"point": k, "exit": killed.returncode, "restored": which, "problems": result["problems"]})
            print(
                f"point {k:3d}/{points}: child exit {killed.returncode}, restored the {which} checkpoint"
                + (f"; PROBLEMS: {result['problems']}" if result["problems"] else ""),
                flush=True,
            )
            shutil.rmtree(run, ignore_errors=True)
        bad = [r for r in rows if r["problems"]]
        summary = {
            "points": points,
            "injected": len(rows),
            "restores_exact": len(rows) - len(bad),
            "restored_previous": sum(r["restored"] == "previous" for r in rows),
            "restored_new": sum(r["restored"] == "new" for r in rows),
            "seconds": round(time.time() - start),
            "date": time.strftime("%Y-%m-%d"),
            "rows": rows,
        }
        print(
            f"{len(rows)} of {points} points injected: {summary['restores_exact']} exact restores "
            f"({summary['restored_previous']} previous, {summary['restored_new']} new), {len(bad)} with problems, "
            f"{summary['seconds']} s"
        )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
        if bad:
            raise SystemExit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
