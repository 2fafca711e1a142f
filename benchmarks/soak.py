"""Soak: does memory stay flat once the replay buffer is full?  (Not run in CI; ~30 minutes.)

Trains CartPole MuZero (the zoo config, stop value off, so it never stops on its own) with a
small ``buffer.replay_buffer_size`` so that the buffer fills within the first minutes and then
evicts on every collect. Every ``--interval`` seconds it samples

* the resident memory (RSS) of this process, and with ``--async-pipeline`` also of every
  process below it (Ray's GCS, raylet and the collector / evaluator actor workers are all
  descendants of the driver process when Ray is started here);
* the buffer's transitions, segments and bytes, env steps and learner updates.

The buffer counts as *full* from its first eviction (``GameBuffer.clear_time > 0``). The
growth figures compare the end of the run with the first sample taken after the buffer was
full. Prints a table while it runs and, as its LAST line, one JSON object with the figures.

    nice -n 19 python benchmarks/soak.py                      # 30 min, sync pipeline
    nice -n 19 python benchmarks/soak.py --async-pipeline     # Ray collector / evaluator actors
    python benchmarks/soak.py --minutes 2 buffer.replay_buffer_size=1000   # quick look

RSS is read from /proc (Linux only; psutil is not needed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver

MB = 1024 * 1024


# ------------------------------------------------------------------------------------- memory


def _rss_bytes(pid: int) -> int:
    """VmRSS of one process (0 if it is gone or has no memory, e.g. a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _descendants(root: int) -> list[int]:
    """All processes below ``root`` (from /proc/*/stat parent ids)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the command name may hold spaces
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def memory_sample() -> dict[str, float]:
    me = os.getpid()
    kids = _descendants(me)
    own = _rss_bytes(me)
    return {"rss_mb": own / MB, "rss_children_mb": sum(_rss_bytes(p) for p in kids) / MB, "num_children": len(kids)}


# ------------------------------------------------------------------------------------- run


def soak(
    minutes: float,
    interval_s: float,
    async_pipeline: bool,
    buffer_size: int,
    overrides: list[str],
    keep_dir: Optional[str],
) -> dict:
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        [
            "evaluator.stop_value=None",
            "max_env_step=1000000000",
            f"buffer.replay_buffer_size={buffer_size}",
            "learner.num_threads=1",
            "exp_name=soak",
        ]
        + overrides
    )
    if async_pipeline:
        import ray

        cfg = cfg.with_updates(
            {
                "async_pipeline.enabled": True,
                "async_pipeline.num_collector_actors": 1,
                "async_pipeline.collector_num_cpus": 1.0,
                "async_pipeline.evaluator_num_cpus": 0.5,
            }
        )
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    # a real experiment folder (TensorBoard events and checkpoints are written as in a normal run)
    exp_dir = keep_dir or tempfile.mkdtemp(prefix="lz_soak_")
    driver = Driver(cfg, exp_dir=exp_dir, print_fn=None)
    rows: list[dict] = []
    full_row: Optional[dict] = None
    header = (
        f"{'t_s':>7} {'rss_MB':>8} {'rss_all_MB':>10} {'buf_trans':>9} {'buf_segs':>8} {'buf_MB':>7} "
        f"{'env_steps':>9} {'updates':>7} {'full':>4}"
    )
    print(
        f"soak: {minutes} min, {'async (Ray actors)' if async_pipeline else 'sync'}, "
        f"replay_buffer_size={cfg.buffer.replay_buffer_size}, exp_dir={exp_dir}",
        flush=True,
    )
    print(header, flush=True)
    t0 = time.perf_counter()
    end = t0 + minutes * 60
    try:
        while True:
            now = time.perf_counter()
            if now >= end or driver.done:
                break
            driver.step(max_seconds=min(interval_s, end - now))
            gc.collect()
            mem = memory_sample()
            m = driver.metrics()
            full = driver.buffer.clear_time > 0
            row = {
                "t_s": round(time.perf_counter() - t0, 1),
                "rss_mb": round(mem["rss_mb"], 1),
                "rss_all_mb": round(mem["rss_mb"] + mem["rss_children_mb"], 1),
                "buffer_transitions": driver.buffer.num_transitions,
                "buffer_segments": driver.buffer.num_segments,
                "buffer_bytes": driver.buffer.nbytes,
                "env_steps": m["env_steps"],
                "updates": m["train_iter"],
                "full": full,
            }
            rows.append(row)
            if full and full_row is None:
                full_row = row
            print(
                f"{row['t_s']:>7.0f} {row['rss_mb']:>8.1f} {row['rss_all_mb']:>10.1f} "
                f"{row['buffer_transitions']:>9} {row['buffer_segments']:>8} {row['buffer_bytes'] / MB:>7.2f} "
                f"{row['env_steps']:>9} {row['updates']:>7} {'yes' if full else 'no':>4}",
                flush=True,
            )
    finally:
        driver.close()
        if async_pipeline:
            import ray

            ray.shutdown()
        if keep_dir is None:
            shutil.rmtree(exp_dir, ignore_errors=True)
    last = rows[-1]
    out: dict = {
        "mode": "async" if async_pipeline else "sync",
        "minutes": round(last["t_s"] / 60, 2),
        "replay_buffer_size": cfg.buffer.replay_buffer_size,
        "buffer_full_at_s": None if full_row is None else full_row["t_s"],
        "rss_at_full_mb": None if full_row is None else full_row["rss_mb"],
        "rss_end_mb": last["rss_mb"],
        "rss_min_after_full_mb": None if full_row is None else min(r["rss_mb"] for r in rows if r["full"]),
        "rss_max_after_full_mb": None if full_row is None else max(r["rss_mb"] for r in rows if r["full"]),
        "rss_all_at_full_mb": None if full_row is None else full_row["rss_all_mb"],
        "rss_all_end_mb": last["rss_all_mb"],
        "buffer_transitions": last["buffer_transitions"],
        "buffer_segments": last["buffer_segments"],
        "buffer_bytes": last["buffer_bytes"],
        "buffer_bytes_at_full": None if full_row is None else full_row["buffer_bytes"],
        "env_steps": last["env_steps"],
        "updates": last["updates"],
        "samples": len(rows),
    }
    if full_row is not None:
        growth = last["rss_mb"] - full_row["rss_mb"]
        out["growth_after_full_mb"] = round(growth, 1)
        out["growth_after_full_pct"] = round(100 * growth / full_row["rss_mb"], 2)
        growth_all = last["rss_all_mb"] - full_row["rss_all_mb"]
        out["growth_all_after_full_mb"] = round(growth_all, 1)
        out["growth_all_after_full_pct"] = round(100 * growth_all / full_row["rss_all_mb"], 2)
        # a leak shows as a trend: least-squares slope of RSS over the whole full phase (the samples
        # scatter by a few MB as the allocator returns and takes pages, so read it with the min/max)
        after = [r for r in rows if r["full"]]
        if len(after) >= 3:
            ts = [r["t_s"] for r in after]
            ys = [r["rss_mb"] for r in after]
            tm, ym = sum(ts) / len(ts), sum(ys) / len(ys)
            den = sum((t - tm) ** 2 for t in ts) or 1.0
            out["rss_slope_after_full_mb_per_h"] = round(
                3600 * sum((t - tm) * (y - ym) for t, y in zip(ts, ys)) / den, 2
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="run length (default 30)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between samples (default 30)")
    parser.add_argument("--async-pipeline", action="store_true", help="collector / evaluator Ray actors")
    parser.add_argument(
        "--buffer-size",
        type=int,
        default=2000,
        help="buffer.replay_buffer_size in transitions (default 2000: full after a few collects)",
    )
    parser.add_argument("--keep-dir", default=None, help="write the experiment folder here and keep it")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="further config overrides")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = soak(args.minutes, args.interval, args.async_pipeline, args.buffer_size, args.overrides, args.keep_dir)
    print()
    width = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k:<{width}}  {v}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
