"""Collect-only env steps/s of one collector per policy type: the zoo config of each type (Pong by
default: ``zoo/atari/pong_<type>.py``), its envs and search, random initial weights, torch on one
thread (as a collector actor), no learner. Types are interleaved round by round so that box noise
spreads over all of them; each figure is the MEDIAN over the rounds of env steps / collect seconds.

With ``--inference both`` every type is also timed with ``mcts.inference=torch`` (the reference
path; for the types whose search had no CPU engine before 2026-12-03, today's torch figures are
the "before" figures). Ratios to the first type of ``--types`` come from the same rounds.

    python benchmarks/collect_speed.py [--types muzero,efficientzero,unizero] [--rounds 3]
        [--steps 160] [--inference auto|torch|both] [--task pong] [override ...]

The LAST line is one JSON object: ``<type>_env_steps_per_s`` (``_torch`` suffix for the reference
path) and ``<type>_over_<first type>``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lz_tune.config import Config  # noqa: E402
from lz_tune.workers.collector import SegmentCollector  # noqa: E402

#: task -> zoo module pattern
TASKS = {"pong": "lz_tune.zoo.atari.pong_{}", "cartpole": "lz_tune.zoo.classic_control.cartpole_{}"}


def make_collector(task: str, policy_type: str, inference: str, overrides: list[str]) -> SegmentCollector:
    cfg: Config = importlib.import_module(TASKS[task].format(policy_type)).make_config()
    cfg = cfg.with_updates({"mcts.inference": inference})
    if overrides:
        cfg = cfg.with_overrides(overrides)
    torch.manual_seed(0)
    return SegmentCollector(cfg, seed=0)


def timed_collect(collector: SegmentCollector, steps: int) -> float:
    """Env steps/s of collects until at least ``steps`` env steps were taken."""
    taken, seconds = 0, 0.0
    while taken < steps:
        result = collector.collect(temperature=1.0, num_segments=1)
        taken += result.env_steps
        seconds += result.collect_time_s
    return taken / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", default="muzero,efficientzero,unizero")
    parser.add_argument("--task", choices=sorted(TASKS), default="pong")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=160, help="env steps per type and round (all envs together)")
    parser.add_argument("--inference", choices=["auto", "torch", "both"], default="both")
    parser.add_argument(
        "overrides", nargs="*", help="dotted config overrides for every type, e.g. env.collector_env_num=4"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    types = args.types.split(",")
    engines = ["auto", "torch"] if args.inference == "both" else [args.inference]
    runs = [(t, e) for t in types for e in engines]
    collectors = {run: make_collector(args.task, *run, args.overrides) for run in runs}
    for collector in collectors.values():  # warm-up: env reset, numba compile / cache load, first allocations
        timed_collect(collector, 1)
    rates: dict[tuple, list[float]] = {run: [] for run in runs}
    for _ in range(args.rounds):
        for run in runs:
            rates[run].append(timed_collect(collectors[run], args.steps))
    for collector in collectors.values():
        collector.close()

    results: dict[str, float] = {}
    print(f"{'type':<16}{'inference':<11}{'env steps/s (median)':>22}{'min':>9}{'max':>9}{f'x {types[0]}':>12}")
    first = {e: np.array(rates[(types[0], e)]) for e in engines}
    for policy_type, engine in runs:
        r = np.array(rates[(policy_type, engine)])
        suffix = "_torch" if engine == "torch" and args.inference == "both" else ""
        ratio = float(np.median(r / first[engine]))  # per round: same noise phase
        results[f"{policy_type}_env_steps_per_s{suffix}"] = round(float(np.median(r)), 2)
        if policy_type != types[0]:
            results[f"{policy_type}_over_{types[0]}{suffix}"] = round(ratio, 3)
        print(f"{policy_type:<16}{engine:<11}{np.median(r):>22.1f}{r.min():>9.1f}{r.max():>9.1f}{ratio:>12.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
