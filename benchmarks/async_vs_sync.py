"""Async vs sync pipeline throughput, measured in ONE run on this machine.

Steps:
1. collect-only: env steps/s of one in-process collector (C), and env steps per collect (E);
2. train-only: learner updates/s on a filled buffer (T);
3. the budget per collect is set so that collecting and training one budget take about the
   same time (U = E / C * T updates per collect, the case where overlap matters most);
   the same budget (same replay ratio) and the same number of envs are used for both runs;
4. sync: the driver with in-process workers; async: the same driver with ONE collector actor
   (Ray), both measured over the same wall-clock window after a warm-up, evaluations off.
5. steps 1, 2 and 4 are repeated in ``--rounds`` interleaved rounds (default 3; this box's
   timing noise is +-15%), each round gives its own bound and ratio, and the medians are
   reported (the budget U is fixed from the first round).

The ideal overlap bound is (E/C + U/T) / max(E/C, U/T): the speed-up if collecting and
training overlapped perfectly. Each round computes it twice: from the sync window's own phases
(the collector's seconds per collect and the learner's seconds per update while each runs
alone, in the same minute as the async window; the headline ``overlap_bound``), and from the
separate collect-only / train-only phases of steps 1-2 (``probe_overlap_bound``), which are
measured a minute earlier and so carry the box's drift. Diagnostics show how much slower the
collector and the learner get when they run side by side, and how busy the async learner was.
Prints a table and, as the LAST line, one JSON object.

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

from lz_tune.config import Config
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import InProcessBackend


def base_config(pong: bool) -> Config:
    if pong:
        cfg = load_config_module("zoo/atari/pong_muzero.py").with_overrides(
            [
                "mcts.num_simulations=8",
                "learner.batch_size=64",
                "learner.train_start_after_envsteps=0",
                "env.evaluator_env_num=1",
                "evaluator.n_evaluator_episode=1",
            ]
        )
    else:
        cfg = load_config_module("zoo/classic_control/cartpole_muzero.py")
    # learning rate ~0: updates cost the same, but the policy (so episode lengths and env steps
    # per collect) stays fixed, so the two modes are measured on the same workload.
    # no env-step / update limit: the windows of several rounds must not run into the zoo's max_env_step
    return cfg.with_overrides(
        [
            "max_env_step=1000000000000",
            "max_train_iter=1000000000000",
            "evaluator.eval_freq=1000000000",
            "evaluator.stop_value=None",
            "learner.learning_rate=1e-12",
            "learner.piecewise_decay_lr_scheduler=False",
            "learner.num_threads=1",
            "async_pipeline.collector_num_cpus=1",
            "async_pipeline.evaluator_num_cpus=0.5",
        ]
    )


class CollectTrainProbe:
    """Collect-only and train-only speed, measurable again and again (one in-process driver)."""

    def __init__(self, cfg: Config) -> None:
        self.driver = Driver(cfg, exp_dir=None, print_fn=None)
        backend = self.driver.backend
        assert isinstance(backend, InProcessBackend)
        self.collector = backend.collectors[0]
        while self.driver.buffer.num_transitions < 2 * cfg.learner.batch_size:  # fill for training
            backend.launch_collect(0, self.driver.publisher.for_collect(0), 0.25)
            self.driver.consume_finished(wait_s=0.0)
        self.driver.train_one_update()  # warm-up

    def collect_once(self) -> int:
        """One collect with the current weights, pushed to the buffer; returns its env steps."""
        d = self.driver
        self.collector.load_snapshot(d.publisher.for_collect(d.train_iter))
        r = self.collector.collect(temperature=0.25)
        d.buffer.push(r.segments, r.priorities)
        return r.env_steps

    def measure(self, collects: int, updates: int = 30) -> dict[str, float]:
        steps, t0 = 0, time.perf_counter()
        for _ in range(collects):
            steps += self.collect_once()
        collect_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(updates):
            self.driver.train_one_update()
        train_s = time.perf_counter() - t0
        return {"C": steps / collect_s, "E": steps / collects, "T": updates / train_s}

    def close(self) -> None:
        self.driver.close()


def _side_by_side_worker(cfg_dict: dict, kind: str, conn) -> None:
    """Child process: a collect-only (``kind='collect'``) or train-only loop, run on command."""
    torch.set_num_threads(1)
    probe = CollectTrainProbe(Config.from_dict(cfg_dict))
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        start_at, seconds = msg
        while time.time() < start_at:  # both children start within ~1 ms of each other
            time.sleep(0.001)
        step = probe.collect_once if kind == "collect" else probe.driver.train_one_update
        units, busy = 0, 0.0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            t = time.perf_counter()
            step()
            busy += time.perf_counter() - t
            units += 1
        conn.send(busy / max(units, 1))
    probe.close()


class SideBySide:
    """The collect-only and train-only loops as two plain processes (no Ray, no driver loop) that
    run at the same time: how much slower each gets on this machine when both cores compute.
    That sets the overlap this HARDWARE allows, whatever the pipeline does."""

    def __init__(self, cfg: Config) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for kind in ("collect", "train"):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_side_by_side_worker, args=(cfg.to_dict(), kind, child), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            assert conn.recv() == "ready"

    def measure(self, seconds: float) -> tuple[float, float]:
        """(seconds per collect, seconds per update) while both loops run together."""
        start_at = time.time() + 0.5
        for conn in self.conns:
            conn.send((start_at, seconds))
        return self.conns[0].recv(), self.conns[1].recv()

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def window(driver: Driver, seconds: float) -> dict[str, float]:
    """Env steps/s and updates/s of ``driver`` over ``seconds``; then waits for its collects in
    flight so that nothing runs in the background during the next measurement."""
    m0, t0 = driver.metrics(), time.perf_counter()
    driver.step(max_seconds=seconds)
    if driver.stop:
        raise RuntimeError(f"the driver stopped during a measurement window: {driver.stop}")
    m1, t1 = driver.metrics(), time.perf_counter()
    while driver.backend.collects_in_flight:
        driver.consume_finished(wait_s=1.0)
    dt = t1 - t0

    def seconds_in(share: str) -> float:  # collect / train seconds spent inside the window
        return m1[share] * m1["wall_time_s"] - m0[share] * m0["wall_time_s"]

    train_s = seconds_in("time_share_train")
    return {
        "env_steps_per_s": (m1["env_steps"] - m0["env_steps"]) / dt,
        "updates_per_s": (m1["train_iter"] - m0["train_iter"]) / dt,
        "policy_lag_launch_mean": m1["policy_lag_launch_mean"],
        "policy_lag_return_mean": m1["policy_lag_return_mean"],
        # the collectors' own time per collect and the learner's time per update in this window
        "collect_s": seconds_in("time_share_collect") / max(m1["collects"] - m0["collects"], 1),
        "update_s": train_s / max(m1["train_iter"] - m0["train_iter"], 1),
        "train_busy": train_s / dt,
    }


def bound_of(e: float, c: float, t: float, updates: int) -> float:
    """Ideal overlap speed-up (E/C + U/T) / max(E/C, U/T)."""
    collect_time, train_time = e / c, updates / t
    return (collect_time + train_time) / max(collect_time, train_time)


def _print_rounds(rows: list[dict], title: str, line) -> None:
    print(title)
    for i, row in enumerate(rows):
        print(f"  round {i + 1}: {line(row)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pong", action="store_true", help="Atari Pong instead of CartPole")
    parser.add_argument("--window", type=float, default=None, help="measurement window per mode and round (s)")
    parser.add_argument("--collects", type=int, default=None, help="collects in each collect-only phase")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of (collect-only, train-only, sync, async), interleaved; medians reported",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for both runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seconds = args.window or (60.0 if args.pong else 30.0)
    collects = args.collects or (3 if args.pong else 4)
    cfg = base_config(args.pong)
    if args.overrides:
        cfg = cfg.with_overrides(args.overrides)

    probe = CollectTrainProbe(cfg)
    side_by_side = SideBySide(cfg)
    first = probe.measure(collects)
    updates = max(1, int(round(first["E"] / first["C"] * first["T"])))  # collect and train times balanced
    cfg = cfg.with_updates({"learner.update_per_collect": updates})
    import ray

    ray.init(num_cpus=3, include_dashboard=False, configure_logging=False, log_to_driver=False)
    sync = Driver(cfg, exp_dir=None, print_fn=None)
    async_cfg = cfg.with_updates({"async_pipeline.enabled": True, "async_pipeline.num_collector_actors": 1})
    asyn = Driver(async_cfg, exp_dir=None, print_fn=None)
    # the same, with a second collect queued in the actor's mailbox (max_collect_inflight=2): the actor
    # starts its next collect without waiting for the driver to finish the update it is in
    piped = Driver(
        async_cfg.with_updates(
            {"async_pipeline.max_collect_inflight": 2, "async_pipeline.max_train_budget_queue_size": 4}
        ),
        exp_dir=None,
        print_fn=None,
    )
    rows = []
    try:
        window(sync, seconds / 3)  # warm-ups: buffer filled, numba compiled, actor started
        window(asyn, seconds / 2)
        window(piped, seconds / 2)
        for r in range(args.rounds):
            probe_r = first if r == 0 else probe.measure(collects)
            collect_par, update_par = side_by_side.measure(seconds / 2)
            s, a, p = window(sync, seconds), window(asyn, seconds), window(piped, seconds)
            probe_bound = bound_of(probe_r["E"], probe_r["C"], probe_r["T"], updates)
            # the same bound from the sync window's own phases (collect alone, then train alone),
            # measured in the same minute as the async window: the box's drift cancels
            collect_time, train_time = s["collect_s"], updates * s["update_s"]
            bound = (collect_time + train_time) / max(collect_time, train_time)
            ratio = a["env_steps_per_s"] / s["env_steps_per_s"]
            # what this hardware allows: alone times (probe) over the overlapped cycle at side-by-side speeds
            hw_bound = (probe_r["E"] / probe_r["C"] + updates / probe_r["T"]) / max(collect_par, updates * update_par)
            rows.append(
                {
                    "C": probe_r["C"],
                    "E": probe_r["E"],
                    "T": probe_r["T"],
                    "sync": s["env_steps_per_s"],
                    "async": a["env_steps_per_s"],
                    "sync_upd": s["updates_per_s"],
                    "async_upd": a["updates_per_s"],
                    "ratio": ratio,
                    "bound": bound,
                    "probe_bound": probe_bound,
                    "probe_share": ratio / probe_bound,
                    "hw_bound": hw_bound,
                    "hw_share": ratio / hw_bound,
                    "piped_hw_share": p["env_steps_per_s"] / s["env_steps_per_s"] / hw_bound,
                    "collect_par": collect_par,
                    "update_par": update_par,
                    "collect_alone": probe_r["E"] / probe_r["C"],
                    "update_alone": 1.0 / probe_r["T"],
                    "share": ratio / bound,
                    "lag": a["policy_lag_launch_mean"],
                    "piped": p["env_steps_per_s"],
                    "piped_ratio": p["env_steps_per_s"] / s["env_steps_per_s"],
                    "piped_share": p["env_steps_per_s"] / s["env_steps_per_s"] / bound,
                    "lag_return": a["policy_lag_return_mean"],
                    "piped_lag_return": p["policy_lag_return_mean"],
                    "collect_s_piped": p["collect_s"],
                    "train_busy_piped": p["train_busy"],
                    "collect_s_sync": s["collect_s"],
                    "collect_s_async": a["collect_s"],
                    "update_s_sync": s["update_s"],
                    "update_s_async": a["update_s"],
                    "train_busy_async": a["train_busy"],
                }
            )
    finally:
        sync.close()
        asyn.close()
        piped.close()
        side_by_side.close()
        probe.close()
        ray.shutdown()

    def med(key: str) -> float:
        return float(np.median([row[key] for row in rows]))

    print(
        f"{'round':<7}{'collect-only':>14}{'train-only':>12}{'sync':>9}{'async':>9}{'async/sync':>12}"
        f"{'bound':>8}{'share':>8}{'probe bound':>13}{'share':>8}"
    )
    print(f"{'':<7}{'env steps/s':>14}{'updates/s':>12}{'steps/s':>9}{'steps/s':>9}")
    for i, row in enumerate(rows):
        print(
            f"{i + 1:<7}{row['C']:>14.1f}{row['T']:>12.2f}{row['sync']:>9.1f}{row['async']:>9.1f}"
            f"{row['ratio']:>12.3f}{row['bound']:>8.3f}{row['share']:>8.1%}{row['probe_bound']:>13.3f}"
            f"{row['probe_share']:>8.1%}"
        )
    print("bound: from the sync window's own collect and train phases (same minute as the async window);")
    print("probe bound: from the separate collect-only / train-only phases (columns 2-3) of the round")
    _print_rounds(
        rows,
        "async, 2 collects in flight on the one actor (max_collect_inflight=2, max_train_budget_queue_size=4):",
        lambda row: (
            f"{row['piped']:.1f} env steps/s, async/sync {row['piped_ratio']:.3f}, share of bound "
            f"{row['piped_share']:.1%}, policy lag at return {row['piped_lag_return']:.2f} "
            f"(1 in flight: {row['lag_return']:.2f}), learner busy {row['train_busy_piped']:.0%}"
        ),
    )
    out = {
        "task": "pong" if args.pong else "cartpole",
        "rounds": len(rows),
        "collect_only_env_steps_per_s": round(med("C"), 1),
        "train_only_updates_per_s": round(med("T"), 2),
        "env_steps_per_collect": round(med("E"), 1),
        "update_per_collect": updates,
        "sync_env_steps_per_s": round(med("sync"), 1),
        "async_env_steps_per_s": round(med("async"), 1),
        "sync_updates_per_s": round(med("sync_upd"), 2),
        "async_updates_per_s": round(med("async_upd"), 2),
        "async_over_sync": round(med("ratio"), 3),
        "overlap_bound": round(med("bound"), 3),
        "share_of_bound": round(med("share"), 3),
        "share_of_bound_min": round(min(r["share"] for r in rows), 3),
        "share_of_bound_max": round(max(r["share"] for r in rows), 3),
        "probe_overlap_bound": round(med("probe_bound"), 3),
        "share_of_probe_bound": round(med("probe_share"), 3),
        "async_policy_lag_launch_mean": round(med("lag"), 2),
        "collect_s_sync": round(med("collect_s_sync"), 4),
        "collect_s_async": round(med("collect_s_async"), 4),
        "update_s_sync": round(med("update_s_sync"), 4),
        "update_s_async": round(med("update_s_async"), 4),
        "async_learner_busy": round(med("train_busy_async"), 3),
        "async_policy_lag_return_mean": round(med("lag_return"), 2),
        "hardware_overlap_bound": round(med("hw_bound"), 3),
        "share_of_hardware_bound": round(med("hw_share"), 3),
        "share_of_hardware_bound_pipelined": round(med("piped_hw_share"), 3),
        "async_pipelined_env_steps_per_s": round(med("piped"), 1),
        "async_pipelined_over_sync": round(med("piped_ratio"), 3),
        "share_of_bound_pipelined": round(med("piped_share"), 3),
        "share_of_bound_pipelined_min": round(min(r["piped_share"] for r in rows), 3),
        "async_pipelined_policy_lag_return_mean": round(med("piped_lag_return"), 2),
        "cpus": os.cpu_count(),
    }
    _print_rounds(
        rows,
        "diagnostics: the collector's seconds per collect and the learner's seconds per update, sync "
        "(each alone) vs async (side by side), and the share of async wall time the learner trained:",
        lambda row: (
            f"collect {row['collect_s_sync']:.3f} -> {row['collect_s_async']:.3f} s, update "
            f"{row['update_s_sync'] * 1e3:.1f} -> {row['update_s_async'] * 1e3:.1f} ms, learner busy "
            f"{row['train_busy_async']:.0%}"
        ),
    )
    _print_rounds(
        rows,
        "hardware: the collect-only and train-only loops as two plain processes running at once (no Ray):",
        lambda row: (
            f"collect {row['collect_alone']:.3f} -> {row['collect_par']:.3f} s, update "
            f"{row['update_alone'] * 1e3:.1f} -> {row['update_par'] * 1e3:.1f} ms; hardware bound "
            f"{row['hw_bound']:.3f}: async reaches {row['hw_share']:.1%}, pipelined "
            f"{row['piped_hw_share']:.1%}"
        ),
    )
    print(f"medians over {len(rows)} rounds:")
    for k, v in out.items():
        print(f"  {k:<32}{v!s:>12}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
