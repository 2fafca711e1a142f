"""Async vs sync pipeline throughput, measured in ONE run on this machine.

Steps:
1. collect-only: env steps/s of one in-process collector (C), and env steps per collect (E);
2. train-only: learner updates/s on a filled buffer (T);
3. the budget per collect is set so that collecting and training one budget take about the
   same time (U = E / C * T updates per collect, the case where overlap matters most);
   the same budget (same replay ratio) and the same number of envs are used for both runs;
4. sync: the driver with in-process workers; async: the same driver with ONE collector actor
   (Ray), both measured over the same wall-clock window after a warm-up, evaluations off.

The ideal overlap bound is (E/C + U/T) / max(E/C, U/T): the speed-up if collecting and
training overlapped perfectly. Prints a table and, as the LAST line, one JSON object.

    python benchmarks/async_vs_sync.py            # CartPole MuZero
    python benchmarks/async_vs_sync.py --pong     # Atari Pong MuZero
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from lz_tune.config import Config, load_config_module
from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import InProcessBackend


def base_config(pong: bool) -> Config:
    if pong:
        cfg = load_config_module("zoo/atari/pong_muzero.py").with_overrides([
            "mcts.num_simulations=8", "learner.batch_size=64", "learner.train_start_after_envsteps=0",
            "env.evaluator_env_num=1", "evaluator.n_evaluator_episode=1",
        ])
    else:
        cfg = load_config_module("zoo/classic_control/cartpole_muzero.py")
    # learning rate ~0: updates cost the same, but the policy (so episode lengths and env steps
    # per collect) stays fixed, so the two modes are measured on the same workload.
    return cfg.with_overrides(["evaluator.eval_freq=1000000000", "evaluator.stop_value=None",
                               "learner.learning_rate=1e-12", "learner.piecewise_decay_lr_scheduler=False",
                               "learner.num_threads=1", "async_pipeline.collector_num_cpus=1",
                               "async_pipeline.evaluator_num_cpus=0.5"])


def measure_collect_and_train(cfg: Config, collects: int) -> dict[str, float]:
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    backend = driver.backend
    assert isinstance(backend, InProcessBackend)
    collector = backend.collectors[0]
    # warm-up: fill the buffer so training is possible
    while driver.buffer.num_transitions < 2 * cfg.learner.batch_size:
        backend.launch_collect(0, driver.publisher.for_collect(0), 0.25)
        driver._consume(backend.poll(0))
    steps, t0 = 0, time.perf_counter()
    for _ in range(collects):
        snap = driver.publisher.for_collect(driver.train_iter)
        collector.load_snapshot(snap)
        r = collector.collect(temperature=0.25)
        steps += r.env_steps
        driver.buffer.push(r.segments, r.priorities)
    collect_s = time.perf_counter() - t0
    n_updates = 30
    driver._train_one()  # warm-up
    t0 = time.perf_counter()
    for _ in range(n_updates):
        driver._train_one()
    train_s = time.perf_counter() - t0
    driver.close()
    return {"collect_only_env_steps_per_s": steps / collect_s, "env_steps_per_collect": steps / collects,
            "train_only_updates_per_s": n_updates / train_s}


def measure_pipeline(cfg: Config, warmup_s: float, window_s: float) -> dict[str, float]:
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    try:
        driver.step(max_seconds=warmup_s)
        m0, t0 = driver.metrics(), time.perf_counter()
        driver.step(max_seconds=window_s)
        m1, t1 = driver.metrics(), time.perf_counter()
    finally:
        driver.close()
    dt = t1 - t0
    return {"env_steps_per_s": (m1["env_steps"] - m0["env_steps"]) / dt,
            "updates_per_s": (m1["train_iter"] - m0["train_iter"]) / dt,
            "policy_lag_launch_mean": m1["policy_lag_launch_mean"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pong", action="store_true", help="Atari Pong instead of CartPole")
    parser.add_argument("--window", type=float, default=None, help="measurement window per mode (s)")
    parser.add_argument("--collects", type=int, default=None, help="collects in the collect-only phase")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for both runs")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    torch.set_num_threads(1)
    window = args.window or (60.0 if args.pong else 40.0)
    cfg = base_config(args.pong)
    if args.overrides:
        cfg = cfg.with_overrides(args.overrides)

    base = measure_collect_and_train(cfg, args.collects or (3 if args.pong else 6))
    c, e, t = base["collect_only_env_steps_per_s"], base["env_steps_per_collect"], base["train_only_updates_per_s"]
    updates = max(1, int(round(e / c * t)))
    cfg = cfg.with_updates({"learner.update_per_collect": updates})
    collect_time, train_time = e / c, updates / t
    bound = (collect_time + train_time) / max(collect_time, train_time)

    sync = measure_pipeline(cfg, warmup_s=window / 4, window_s=window)
    import ray

    ray.init(num_cpus=3, include_dashboard=False, configure_logging=False, log_to_driver=False)
    try:
        acfg = cfg.with_updates({"async_pipeline.enabled": True, "async_pipeline.num_collector_actors": 1})
        asyn = measure_pipeline(acfg, warmup_s=window / 2, window_s=window)
    finally:
        ray.shutdown()
    ratio = asyn["env_steps_per_s"] / sync["env_steps_per_s"]
    out = {
        "task": "pong" if args.pong else "cartpole",
        "collect_only_env_steps_per_s": round(c, 1),
        "train_only_updates_per_s": round(t, 2),
        "env_steps_per_collect": round(e, 1),
        "update_per_collect": updates,
        "sync_env_steps_per_s": round(sync["env_steps_per_s"], 1),
        "async_env_steps_per_s": round(asyn["env_steps_per_s"], 1),
        "sync_updates_per_s": round(sync["updates_per_s"], 2),
        "async_updates_per_s": round(asyn["updates_per_s"], 2),
        "async_over_sync": round(ratio, 3),
        "overlap_bound": round(bound, 3),
        "share_of_bound": round(ratio / bound, 3),
        "async_policy_lag_launch_mean": round(asyn["policy_lag_launch_mean"], 2),
        "cpus": os.cpu_count(),
    }
    print(f"{'measure':<34}{'value':>12}")
    for k, v in out.items():
        print(f"{k:<34}{v!s:>12}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
