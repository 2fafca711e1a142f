"""Learner updates/s of the sync driver with N data-parallel learner workers when the next update
is sent to the workers before the current one returns (two updates in flight,
``Driver._may_send_ahead``) against waiting for every update.

Both variants run the real driver loop (``lz_tune/pipeline/driver.py``) on the CartPole zoo
config with the targets built on the ranks (``learner.targets_on_workers``, the default) and
without PER (``buffer.use_priority=False``: the next batch may be sampled before the current
priorities are written back), one train budget of ``--updates`` updates per collect and one
train chunk per budget, until ``2 x --updates`` updates; evaluations off. Updates/s = updates /
the driver's train time (``Driver.times.train``: sampling, sending, waiting, write-back).
Variants alternate repeat by repeat. Prints one line per run, then as the LAST line one JSON
object (``runs``, ``machine``).

    python benchmarks/updates_in_flight.py [--workers 2] [--updates 200] [--repeats 2] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from gpu_scaling import describe, machine  # noqa: E402

import lz_tune  # noqa: E402,F401  first: it sets THP_MEM_ALLOC_ENABLE before torch's first allocation
from lz_tune.config_loader import load_config_module  # noqa: E402
from lz_tune.pipeline.driver import Driver  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2, help="learner.num_workers (>= 2)")
    p.add_argument("--updates", type=int, default=200, help="updates per train budget (two budgets per run)")
    p.add_argument("--repeats", type=int, default=2, help="runs per variant, alternating")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    args = p.parse_args()
    if args.workers < 2 or args.updates < 2 or args.repeats < 1:
        p.error("--workers >= 2, --updates >= 2, --repeats >= 1")
    import ray

    m = machine()
    print(describe(m), flush=True)
    cfg = load_config_module(os.path.join(ROOT, "zoo/classic_control/cartpole_muzero.py")).with_overrides(
        [
            "buffer.use_priority=False",
            f"learner.num_workers={args.workers}",
            "learner.worker_num_cpus=1",
            f"learner.update_per_collect={args.updates}",
            f"max_train_iter={2 * args.updates}",
            f"async_pipeline.max_train_chunk_steps={2 * args.updates}",
            "evaluator.eval_freq=1000000000",
            "learner.train_start_after_envsteps=0",
            *args.overrides,
        ]
    )
    ray.init(num_cpus=max(os.cpu_count() or 1, args.workers), include_dashboard=False, log_to_driver=False)
    send_ahead = Driver._may_send_ahead
    runs = []
    try:
        for rep in range(args.repeats):
            for ahead in (True, False):
                Driver._may_send_ahead = send_ahead if ahead else (lambda self: False)  # type: ignore[method-assign]
                driver = Driver(cfg, print_fn=None)
                try:
                    start = time.perf_counter()
                    driver.run()
                    wall = time.perf_counter() - start
                    run = {
                        "repeat": rep,
                        "send_ahead": ahead,
                        "updates": driver.train_iter,
                        "updates_sent_ahead": driver.updates_sent_ahead,
                        "train_s": round(driver.times.train, 2),
                        "updates_per_s": round(driver.train_iter / driver.times.train, 2),
                        "wall_s": round(wall, 2),
                    }
                finally:
                    driver.close()
                runs.append(run)
                print(
                    f"repeat {rep}, {'two updates in flight' if ahead else 'one update in flight'}: "
                    f"{run['updates']} updates ({run['updates_sent_ahead']} sent ahead), "
                    f"{run['updates_per_s']:.1f} updates/s",
                    flush=True,
                )
    finally:
        Driver._may_send_ahead = send_ahead  # type: ignore[method-assign]
        ray.shutdown()
    print(json.dumps({"runs": runs, "machine": m, "workers": args.workers, "overrides": args.overrides}))


if __name__ == "__main__":
    main()
