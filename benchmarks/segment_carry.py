"""How many transitions, and so how many updates, the reference's segment collector gives per env
step, against lz-tune's, on the same stream of episode ends.

LightZero's ``MuZeroSegmentCollector.collect()`` starts a new game segment for every env at the
start of each call and drops the unfinished one at its end (a full segment is held until the next
one fills, across calls). lz-tune's collector keeps every env's segment builder across collects,
so no step is dropped. With the same ``replay_ratio`` (updates = int(transitions * ratio) per
collect) lz-tune therefore pushes more transitions per env step and trains more; with a fixed
``update_per_collect`` the two make collects of different lengths.

Both rules are applied to one recorded stream of ``done`` flags per env (the envs step in lockstep,
as both collectors step them); episode ends do not depend on where collects begin, so the stream
serves both. Which rule is which:

- lz-tune (:class:`lz_tune.buffer.segment.SegmentBuilder`): a segment is emitted once it holds L
  owned steps and U + T padding steps, or at the episode's end (with every pending one).
- the reference (``muzero_segment_collector.py`` @ 9f717c80): a segment that reaches L steps is
  held; it enters the pool when the next one reaches L, or at the episode's end (with the current
  one); at the end of ``collect()`` the current segment of every env is dropped.
- both: a collect ends after the lockstep step at which at least ``num_segments`` (= env count)
  segments were completed in it.

The lz-tune rule is checked against a real collector on CartPole (``--check``: the simulation
must reproduce every collect's env steps and transitions exactly).

    python benchmarks/segment_carry.py                    # CartPole (a real training run) and Pong (random play)
    python benchmarks/segment_carry.py --env cartpole --cartpole-env-steps 30000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


@dataclass(frozen=True)
class CollectCounts:
    """One collect: env steps taken (all envs) and transitions pushed (owned positions)."""

    env_steps: int
    transitions: int


def lz_tune_collects(
    done: np.ndarray, *, segment_length: int, num_padding: int, num_segments: int
) -> list[CollectCounts]:
    """lz-tune's rule over ``done`` `[T, N]` bool (step t of env i ended its episode); the
    unfinished last collect is left out."""
    steps, n = done.shape
    current = np.zeros(n, np.int64)  # steps in each env's current segment
    pending: list[list[int]] = [[] for _ in range(n)]  # padding steps of each full, pending segment
    out, emitted, transitions, start = [], 0, 0, 0
    for t in range(steps):
        for i in range(n):
            pending[i] = [p + 1 for p in pending[i]]
            current[i] += 1
            if done[t, i]:
                emitted += len(pending[i]) + 1
                transitions += segment_length * len(pending[i]) + int(current[i])
                pending[i], current[i] = [], 0
                continue
            if current[i] == segment_length:
                pending[i].append(0)
                current[i] = 0
            while pending[i] and pending[i][0] >= num_padding:
                pending[i].pop(0)
                emitted += 1
                transitions += segment_length
        if emitted >= num_segments:
            out.append(CollectCounts(env_steps=(t + 1 - start) * n, transitions=transitions))
            emitted, transitions, start = 0, 0, t + 1
    return out


def reference_collects(done: np.ndarray, *, segment_length: int, num_segments: int) -> list[CollectCounts]:
    """The reference's rule over the same ``done`` `[T, N]` (module docstring); the unfinished
    last collect is left out."""
    steps, n = done.shape
    current = np.zeros(n, np.int64)
    held = np.zeros(n, bool)  # a full segment waiting for its successor (kept across collects)
    out, pooled, transitions, start = [], 0, 0, 0
    for t in range(steps):
        for i in range(n):
            current[i] += 1
            if current[i] >= segment_length:  # is_full(): the held one goes to the pool, this one is held
                if held[i]:
                    pooled += 1
                    transitions += segment_length
                held[i], current[i] = True, 0
            if done[t, i]:
                if held[i]:
                    pooled += 1
                    transitions += segment_length
                    held[i] = False
                if current[i] > 0:
                    pooled += 1
                    transitions += int(current[i])
                current[i] = 0
        if pooled >= num_segments:
            out.append(CollectCounts(env_steps=(t + 1 - start) * n, transitions=transitions))
            pooled, transitions, start = 0, 0, t + 1
            current[:] = 0  # collect() returns: every env's unfinished segment is dropped
    return out


def summary(collects: list[CollectCounts], *, replay_ratio: float, update_per_collect: int | None) -> dict:
    """Totals and the two rates that decide training: transitions pushed and updates per env step
    (updates as both pipelines budget them: update_per_collect, else max(1, int(transitions * ratio)))."""
    env_steps = sum(c.env_steps for c in collects)
    transitions = sum(c.transitions for c in collects)
    if update_per_collect is not None:
        updates = update_per_collect * len(collects)
    else:
        updates = sum(max(1, int(c.transitions * replay_ratio)) for c in collects)
    return {
        "collects": len(collects),
        "env_steps": env_steps,
        "transitions": transitions,
        "updates": updates,
        "transitions_per_env_step": transitions / max(env_steps, 1),
        "updates_per_env_step": updates / max(env_steps, 1),
    }


def record_cartpole(env_steps: int, *, check: bool, overrides: tuple[str, ...] = ()) -> tuple[np.ndarray, dict]:
    """A real sync training run of zoo/classic_control/cartpole_muzero.py (its policy improves, so
    episodes grow from ~20 to 500 steps), recording every collector step's done flags; with
    ``check``, lz_tune_collects must reproduce the real collector's counts. ``overrides``:
    ``key=value`` changes of the config (a smaller network and search for a quick check)."""
    from lz_tune.config_loader import load_config_module
    from lz_tune.pipeline import Driver

    cfg = load_config_module(os.path.join(REPO, "zoo/classic_control/cartpole_muzero.py")).with_overrides(
        [f"max_env_step={env_steps}", "evaluator.stop_value=1000000", *overrides]
    )
    driver = Driver(cfg, print_fn=None)
    collector = driver.backend.collectors[0]
    flags: list[np.ndarray] = []
    real: list[CollectCounts] = []
    step, collect = collector.env.step, collector.collect

    def recording_step(action):
        res = step(action)
        flags.append(np.asarray(res.done, bool).copy())
        return res

    def recording_collect(**kwargs):
        result = collect(**kwargs)
        real.append(CollectCounts(env_steps=result.env_steps, transitions=result.num_transitions))
        return result

    collector.env.step, collector.collect = recording_step, recording_collect
    try:
        driver.run()
    finally:
        driver.close()
    done = np.stack(flags)
    b = cfg.buffer
    params = {
        "segment_length": b.game_segment_length,
        "num_padding": b.num_unroll_steps + b.td_steps,
        "num_segments": cfg.collector.segments_per_collect or cfg.env.collector_env_num,
    }
    if check:
        simulated = lz_tune_collects(done, **params)
        if simulated != real[: len(simulated)] or len(real) - len(simulated) > 1:
            raise SystemExit(
                f"the simulation of lz-tune's rule does not reproduce the collector: {simulated[:5]} vs {real[:5]}"
            )
    return done, {
        "config": "zoo/classic_control/cartpole_muzero.py",
        "policy": "training (sync)",
        **params,
        "replay_ratio": cfg.learner.replay_ratio,
        "update_per_collect": cfg.learner.update_per_collect,
    }


def record_pong(env_steps: int, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Pong with zoo/atari/pong_muzero.py's env (its episodic-life and frame settings) and uniformly
    random actions: ``env_steps`` steps over the collector's env count."""
    from lz_tune.config_loader import load_config_module
    from lz_tune.workers.common import make_env

    cfg = load_config_module(os.path.join(REPO, "zoo/atari/pong_muzero.py"))
    n = cfg.env.collector_env_num
    env = make_env(cfg, num_envs=n, seed=seed, mode="collect")
    rng = np.random.default_rng(seed)
    batch = env.reset(seed=seed)
    flags = []
    try:
        for _ in range(env_steps // n):
            legal = batch.action_mask
            action = np.array([rng.choice(np.flatnonzero(m)) for m in legal])
            res = env.step(action)
            flags.append(np.asarray(res.done, bool).copy())
            batch = res.batch
    finally:
        env.close()
    b = cfg.buffer
    return np.stack(flags), {
        "config": "zoo/atari/pong_muzero.py",
        "policy": "uniformly random",
        "segment_length": b.game_segment_length,
        "num_padding": b.num_unroll_steps + b.td_steps,
        "num_segments": cfg.collector.segments_per_collect or n,
        "replay_ratio": cfg.learner.replay_ratio,
        "update_per_collect": cfg.learner.update_per_collect,
    }


def compare(done: np.ndarray, params: dict) -> dict:
    ours = lz_tune_collects(
        done,
        segment_length=params["segment_length"],
        num_padding=params["num_padding"],
        num_segments=params["num_segments"],
    )
    ref = reference_collects(done, segment_length=params["segment_length"], num_segments=params["num_segments"])
    rates = {"replay_ratio": params["replay_ratio"], "update_per_collect": params["update_per_collect"]}
    ends = done.any(axis=1).sum()
    out = {
        **params,
        "env_steps_recorded": int(done.size),
        "episode_ends": int(done.sum()),
        "mean_episode_length": float(done.size / max(done.sum(), 1)),
        "steps_with_an_end": int(ends),
        "lz_tune": summary(ours, **rates),
        "reference": summary(ref, **rates),
    }
    # what the replay ratio alone gives, had the config no update_per_collect
    out["lz_tune_ratio_only"] = summary(ours, replay_ratio=params["replay_ratio"], update_per_collect=None)
    out["reference_ratio_only"] = summary(ref, replay_ratio=params["replay_ratio"], update_per_collect=None)
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--env", choices=["cartpole", "pong", "both"], default="both")
    p.add_argument("--cartpole-env-steps", type=int, default=30_000)
    p.add_argument("--pong-env-steps", type=int, default=100_000)
    p.add_argument("--no-check", action="store_true", help="skip checking the lz-tune rule against the real collector")
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides of the CartPole run (e.g. a smaller network)",
    )
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args()
    results = {}
    if args.env in ("cartpole", "both"):
        results["cartpole"] = compare(
            *record_cartpole(args.cartpole_env_steps, check=not args.no_check, overrides=tuple(args.set))
        )
    if args.env in ("pong", "both"):
        results["pong"] = compare(*record_pong(args.pong_env_steps))
    for name, r in results.items():
        print(
            f"## {name}: {r['config']}, policy {r['policy']}, L={r['segment_length']}, "
            f"{r['env_steps_recorded']} env steps, mean episode length {r['mean_episode_length']:.0f}"
        )
        for key in ("lz_tune", "reference", "lz_tune_ratio_only", "reference_ratio_only"):
            s = r[key]
            print(
                f"  {key:22s} collects {s['collects']:5d}  transitions/env step {s['transitions_per_env_step']:.3f}  "
                f"updates/env step {s['updates_per_env_step']:.4f}"
            )
        a, b = r["lz_tune_ratio_only"], r["reference_ratio_only"]
        transitions = a["transitions_per_env_step"] / max(b["transitions_per_env_step"], 1e-12)
        updates = a["updates_per_env_step"] / max(b["updates_per_env_step"], 1e-12)
        print(f"  lz-tune / reference at the same replay_ratio: transitions x{transitions:.3f}, updates x{updates:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
