"""Tune overhead of a 2-trial CartPole MuZero search on this machine.

Measures, in ONE run of ``tune.run(MuZeroTrainable, ...)`` with 2 concurrent sync trials
(1 CPU each, a 2-CPU Ray cluster started beforehand):

- time to first result: from the ``tune.run`` call to the first trial result reaching the
  driver process (trial placement, process start and imports, Driver setup [``setup s``: envs,
  networks, buffer], the first step of ``step_seconds``);
- per trial: time in the driver loop (``perf/driver_step_s``, summed) vs the trial's wall time from
  its first to its last result, and vs the time Tune measured for ``step()``;
- Tune overhead share = 1 - driver loop time / trial wall time (result reporting, checkpoint
  saves after evaluations, metric building, scheduling between steps).

Prints a table and, as the LAST line, one JSON object with the same figures.

    python benchmarks/tune_overhead.py                      # 2 trials, 12 iterations of 5 s
    python benchmarks/tune_overhead.py --iters 6 --step-seconds 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np


class _FirstResult:
    """A Tune callback that records when each trial's results reach the driver process."""

    def __new__(cls):
        from ray import tune

        class Callback(tune.Callback):
            def __init__(self):
                self.times: dict[str, list[float]] = {}

            def on_trial_result(self, iteration, trials, trial, result, **info):
                self.times.setdefault(trial.trial_id, []).append(time.perf_counter())

        return Callback()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=12, help="Tune iterations per trial")
    parser.add_argument("--step-seconds", type=float, default=5.0, help="driver-loop slice per iteration")
    parser.add_argument("--storage-path", default=None, help="default: a temporary folder")
    args = parser.parse_args()

    import ray
    from ray import tune

    from lz_tune.tune import MuZeroTrainable

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    ray_init_s = time.perf_counter() - t0
    storage = args.storage_path or tempfile.mkdtemp(prefix="lz_tune_overhead_")
    space = {
        "config": "lz_tune.zoo.classic_control.cartpole_muzero",
        "step_seconds": args.step_seconds,
        "driver_num_cpus": 1,
        "learner.num_threads": 1,
        "evaluator.eval_freq": 100,
        "learner.learning_rate": tune.grid_search([3e-3, 5e-3]),
    }
    callback = _FirstResult()
    start = time.perf_counter()
    analysis = tune.run(
        MuZeroTrainable,
        config=space,
        stop={"training_iteration": args.iters},
        storage_path=storage,
        name="overhead",
        metric="evaluation/env_runners/episode_return_mean",
        mode="max",
        verbose=0,
        callbacks=[callback],
        raise_on_failed_trial=True,
    )
    total_s = time.perf_counter() - start
    ray.shutdown()

    first_result_s = min(ts[0] for ts in callback.times.values()) - start
    rows = []
    for trial in analysis.trials:
        df = analysis.trial_dataframes[trial.trial_id].sort_values("training_iteration")
        ts = callback.times[trial.trial_id]
        # wall time of iterations 2..N (from the first result to the last), against the
        # driver-loop time and Tune's step() time of the same iterations
        wall = ts[-1] - ts[0]
        driver = float(df["perf/driver_step_s"].iloc[1:].sum())
        step = float(df["time_this_iter_s"].iloc[1:].sum())
        rows.append(
            {
                "trial": trial.trial_id,
                "first_result_s": ts[0] - start,
                "setup_s": float(df["perf/driver_setup_s"].iloc[0]),
                "first_step_s": float(df["time_this_iter_s"].iloc[0]),
                "wall_s": wall,
                "driver_loop_s": driver,
                "step_s": step,
                "overhead_share": 1.0 - driver / wall,
                "outside_step_share": 1.0 - step / wall,
                "checkpoints": int(df["should_checkpoint"].fillna(False).astype(bool).sum())
                if "should_checkpoint" in df
                else 0,
                "env_steps": int(df["num_env_steps_sampled_lifetime"].iloc[-1]),
                "train_iter": int(df["train_iter"].iloc[-1]),
            }
        )

    print(
        f"Tune overhead, 2-trial CartPole MuZero search ({args.iters} iterations of {args.step_seconds:g} s, "
        f"2 CPUs, sync trials of 1 CPU)"
    )
    print(
        f"  ray.init: {ray_init_s:.1f} s; tune.run total: {total_s:.1f} s; time to first result: {first_result_s:.1f} s"
    )
    header = (
        f"  {'trial':<14}{'1st result s':>13}{'setup s':>9}{'1st step s':>11}{'wall s':>9}{'driver s':>10}"
        f"{'step() s':>10}"
        f"{'overhead':>10}{'outside step()':>16}{'ckpts':>7}{'env steps':>11}"
    )
    print(header)
    for r in rows:
        print(
            f"  {r['trial']:<14}{r['first_result_s']:>13.1f}{r['setup_s']:>9.1f}{r['first_step_s']:>11.1f}"
            f"{r['wall_s']:>9.1f}{r['driver_loop_s']:>10.1f}"
            f"{r['step_s']:>10.1f}{r['overhead_share']:>9.1%}{r['outside_step_share']:>15.1%}"
            f"{r['checkpoints']:>7}{r['env_steps']:>11}"
        )
    summary = {
        "ray_init_s": round(ray_init_s, 2),
        "tune_run_total_s": round(total_s, 2),
        "time_to_first_result_s": round(first_result_s, 2),
        "tune_overhead_share": round(float(np.mean([r["overhead_share"] for r in rows])), 4),
        "outside_step_share": round(float(np.mean([r["outside_step_share"] for r in rows])), 4),
        "iters": args.iters,
        "step_seconds": args.step_seconds,
        "trials": rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
