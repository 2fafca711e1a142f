"""Learner updates per second: the default update path (``learner.update_path=fused``) against the
plain eager reference path (``learner.update_path=eager``), for the CartPole MLP config (batch
256) and the Pong conv config, interleaved repeat by repeat so that box noise hits both alike.

One update = what the driver does per learner step: sample a batch, build its targets (the
target-network bootstrap over the distinct bootstrap observations), forward the unroll, backward,
clip + optimizer step, priorities. The buffer is filled once per config by a collector with
2-simulation searches (the data do not change the arithmetic). Then one profiled pass per path
says where the time goes per update (sample + targets, forward, backward, optimizer, rest).

Prints a table, then as the LAST line one JSON object (``cartpole_updates_per_s``,
``cartpole_updates_per_s_eager``, ``pong_updates_per_s``, ``pong_updates_per_s_eager``, ...).

    python benchmarks/learner_speed.py [--repeats 5] [--updates 20] [--threads 2] [--configs cartpole,pong]
    THP_MEM_ALLOC_ENABLE=0 python benchmarks/learner_speed.py ...   # without huge pages (lz_tune's default: on)

Large tensors go on transparent huge pages as in every lz_tune process (``THP_MEM_ALLOC_ENABLE=1``,
set by ``import lz_tune``, imported here before torch); both paths share the setting, and the
JSON says which it was (``thp``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import lz_tune  # noqa: E402,F401  first: it sets THP_MEM_ALLOC_ENABLE before torch's first allocation
from lz_tune.algos import get_algorithm  # noqa: E402
from lz_tune.buffer import GameBuffer  # noqa: E402
from lz_tune.config import Config  # noqa: E402
from lz_tune.config_loader import load_config_module  # noqa: E402
from lz_tune.workers import SegmentCollector, env_spec_for  # noqa: E402

CONFIGS = {
    # CartPole: the MLP at batch 256 with the 256-wide SSL projector (the zoo config before its
    # time-to-solve search; the zoo now trains at batch 64 with a narrower projector)
    "cartpole": (
        "zoo/classic_control/cartpole_muzero.py",
        ("learner.batch_size=256", "model.projection_dim=256", "model.projection_hidden_dim=256"),
        3000,
    ),
    # Pong: the zoo config with a smaller buffer fill (the update cost does not depend on it)
    "pong": ("zoo/atari/pong_muzero.py", ("env.collector_env_num=4",), 800),
    # UniZero's CartPole config (use with --policy-type unizero; it has one update path)
    "cartpole_unizero": ("zoo/classic_control/cartpole_unizero.py", (), 3000),
}
PATHS = ("fused", "eager")
PHASES = ("learn/forward", "learn/backward", "learn/optimizer")


def fill_buffer(cfg: Config, transitions: int) -> GameBuffer:
    spec = env_spec_for(cfg)
    b = cfg.buffer
    buffer = GameBuffer(
        capacity_transitions=max(transitions * 2, 10_000),
        num_unroll_steps=b.num_unroll_steps,
        td_steps=b.td_steps,
        discount=cfg.mcts.discount_factor,
        frame_stack=spec.frame_stack,
        action_space_size=spec.action_space_size,
        use_priority=b.use_priority,
        seed=0,
    )
    collector = SegmentCollector(cfg.with_overrides(["mcts.num_simulations=2"]), seed=0)
    while buffer.num_transitions < transitions:
        buffer.push(collector.collect(temperature=1.0).segments)
    collector.close()
    return buffer


class Bench:
    """One learner per path over one shared buffer."""

    def __init__(self, name: str, threads: int, policy_type: str = "muzero") -> None:
        zoo, overrides, fill = CONFIGS[name]
        base = load_config_module(os.path.join(ROOT, zoo)).with_overrides(
            [*overrides, f"policy_type={policy_type}", f"learner.num_threads={threads}"]
        )
        self._init_learners(base, fill, {path: base.with_overrides([f"learner.update_path={path}"]) for path in PATHS})

    def _init_learners(self, base: Config, fill: int, variants: dict[str, Config]) -> None:
        """Fill one buffer from ``base`` with ``fill`` transitions, then build one learner per
        ``variants`` config, each from torch seed 0 (the same initial weights)."""
        self.buffer = fill_buffer(base, fill)
        self.learners = {}
        for key, cfg in variants.items():
            torch.manual_seed(0)
            self.learners[key] = get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))
        self.batch_size = base.learner.batch_size
        self.rng = np.random.default_rng(0)

    def update(self, path: str) -> None:
        learner = self.learners[path]
        index = self.buffer.sample(self.batch_size)
        batch = learner.make_batch(self.buffer, index, rng=self.rng)
        learner.learn(batch)

    def timed(self, path: str, updates: int) -> float:
        """updates/s over ``updates`` updates."""
        start = time.perf_counter()
        for _ in range(updates):
            self.update(path)
        return updates / (time.perf_counter() - start)

    def breakdown(self, path: str, updates: int) -> dict[str, float]:
        """ms per update in each phase (profiled pass; the profiler adds a little overhead)."""
        from torch.profiler import ProfilerActivity, profile

        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(updates):
                self.update(path)
        total = (time.perf_counter() - start) * 1e3 / updates
        events = {e.key: e.cpu_time_total / 1e3 / updates for e in prof.key_averages() if e.key in PHASES}
        out = {phase.split("/")[1]: events.get(phase, 0.0) for phase in PHASES}
        out["targets_and_rest"] = total - sum(out.values())
        out["total"] = total
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--updates", type=int, default=20, help="updates per timed repeat")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the learner (the zoo's CartPole: 2)")
    parser.add_argument("--configs", default="cartpole,pong")
    parser.add_argument("--policy-type", default="muzero")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, object] = {"thp": os.environ["THP_MEM_ALLOC_ENABLE"] not in ("0", "false", "False")}
    print(
        f"{'config':<10}{'path':<7}{'updates/s (median)':>19}{'min':>8}{'max':>8}   ms/update: forward backward "
        "optimizer targets+rest"
    )
    for name in args.configs.split(","):
        bench = Bench(name, args.threads, args.policy_type)
        for path in PATHS:  # warm-up: first-call allocations, lazy imports
            bench.timed(path, 3)
        rates: dict[str, list[float]] = {p: [] for p in PATHS}
        for _ in range(args.repeats):
            for path in PATHS:
                rates[path].append(bench.timed(path, args.updates))
        for path in PATHS:
            br = bench.breakdown(path, max(3, args.updates // 4))
            med = float(np.median(rates[path]))
            suffix = "" if path == "fused" else "_eager"
            results[f"{name}_updates_per_s{suffix}"] = round(med, 2)
            results[f"{name}_ms_per_update{suffix}"] = {k: round(v, 2) for k, v in br.items()}
            print(
                f"{name:<10}{path:<7}{med:>19.2f}{min(rates[path]):>8.2f}{max(rates[path]):>8.2f}   "
                f"{br['forward']:>17.1f}{br['backward']:>9.1f}{br['optimizer']:>10.1f}{br['targets_and_rest']:>13.1f}"
            )
        results[f"{name}_speedup"] = round(results[f"{name}_updates_per_s"] / results[f"{name}_updates_per_s_eager"], 3)
        print(f"{name:<10}fused / eager = {results[f'{name}_speedup']:.2f}x")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
