"""GPU scaling on Atari Pong (``zoo/atari/pong_muzero.py``), in two parts.

1. Learner updates/s, ``learner.device=cpu`` against ``learner.device=cuda``: one learner per
   device, same initial weights, over ONE buffer filled by a 2-simulation collector, timed in
   interleaved repeats (``benchmarks/learner_speed.py``'s ``fill_buffer`` and ``Bench``; an
   update = sample + targets + forward + backward + optimizer step + priorities, with a
   ``torch.cuda.synchronize()`` after each GPU update). The GPU rows are skipped, with a note,
   when ``torch.cuda.is_available()`` is False. Defaults: the zoo config at batch 256, learner
   on ``--threads 2`` torch threads (as learner_speed.py).
2. Env steps/s of the async pipeline with 1, 2, 4, 8 collector actors: the real driver on Ray
   (``async_pipeline.enabled=True``, ``async_pipeline.num_collector_actors=N``,
   ``max_collect_inflight`` left at its default N), on ``benchmarks/async_vs_sync.py``'s Pong
   setup (its ``base_config``: 8 simulations, batch 64, replay ratio 0.25, evaluations off, a
   ~0 learning rate so the workload stays fixed), measured over a ``--seconds`` wall-clock window
   after a warm-up (async_vs_sync's ``window``: env steps and updates from the driver's
   counters). Ray is started with this machine's resources (``num_cpus=os.cpu_count()``,
   ``num_gpus=torch.cuda.device_count()``); when N collectors at
   ``async_pipeline.collector_num_cpus`` (1) do not fit beside the evaluator actor,
   each gets a fractional share of the cores, and the output says so. The learner trains in the
   driver's process at the replay ratio, so a learner-bound pipeline shows up as "learner
   busy" near 100% and env steps/s near updates/s / replay ratio, flat in N (to see the
   collectors' own scaling, pass e.g. ``learner.replay_ratio=0.01``). Short windows also count
   the collects queued ahead of the learner (up to 2N train budgets): keep ``--seconds`` long.

Both parts take ``key=value`` config overrides (positional; applied after each part's defaults),
e.g. ``mcts.num_simulations=50`` for the zoo's own search in part 2.

Prints one markdown table per part (rows ready to paste into benchmarks/README.md, under a line
describing the machine) and, as the LAST line, one JSON object: ``learner_updates_per_s_cpu``,
``learner_updates_per_s_gpu`` (null without a GPU), ``learner_gpu_over_cpu``,
``env_steps_per_s`` ({"1": ..., "2": ...}), ``async_updates_per_s``, ``learner_busy``,
``collector_num_cpus``, ``collector_num_gpus``, ``machine``, ...

Full run, on a GPU box (the README's table must be filled from such a run, not from the CPU box;
part 1's CPU rows take most of its time: ~60 updates of a few seconds each at batch 256, then
4 x (warm-up + 120 s) for part 2):

    python benchmarks/gpu_scaling.py --updates 20 --repeats 3 --collectors 1 2 4 8 --seconds 120

CPU smoke (any machine; ~40 s on the idle 2-core project box; the figures mean nothing):

    python benchmarks/gpu_scaling.py --updates 1 --repeats 1 --batch-size 4 --fill 100 \\
        --collectors 1 --seconds 5 --warmup 0 env.collector_env_num=2 mcts.num_simulations=2

Only one part: ``--parts learner`` or ``--parts env``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from async_vs_sync import base_config, window  # noqa: E402
from learner_speed import CONFIGS, Bench  # noqa: E402

from lz_tune.config import Config  # noqa: E402
from lz_tune.config_loader import load_config_module  # noqa: E402
from lz_tune.pipeline import Driver  # noqa: E402

PONG_ZOO, PONG_OVERRIDES, PONG_FILL = CONFIGS["pong"]
STARTUP_TIMEOUT_S = 900.0  # the first collect of every actor (process start, envs, numba compile)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="learner,env", help="comma-separated: learner (part 1), env (part 2)")
    # part 1: learner updates/s, cpu vs cuda
    p.add_argument("--updates", type=int, default=20, help="learner updates per timed repeat (part 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per device, interleaved (part 1)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="learner.batch_size of both parts (default: the zoo's 256 in part 1, 64 in part 2)",
    )
    p.add_argument("--threads", type=int, default=2, help="torch threads of the part-1 learner (learner.num_threads)")
    p.add_argument("--fill", type=int, default=PONG_FILL, help="transitions collected into part 1's buffer")
    # part 2: async env steps/s vs collector actors
    p.add_argument(
        "--collectors", type=int, nargs="+", default=[1, 2, 4, 8], help="collector actor counts to measure (part 2)"
    )
    p.add_argument("--seconds", type=float, default=120.0, help="measurement window per collector count (s)")
    p.add_argument(
        "--warmup",
        type=float,
        default=20.0,
        help="extra warm-up window (s) after every actor's first collect is back, before measuring",
    )
    p.add_argument(
        "--collector-gpus",
        type=float,
        default=0.0,
        help="async_pipeline.collector_num_gpus: GPUs per collector actor (fractional allowed)",
    )
    p.add_argument(
        "--learner-device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="learner.device of the driver in part 2 (default: cuda if available, else cpu)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for both parts")
    args = p.parse_args()
    args.parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if not args.parts or args.parts - {"learner", "env"}:
        p.error(f"--parts: expected learner and/or env, got {sorted(args.parts)}")
    if args.learner_device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--learner-device {args.learner_device}: torch.cuda.is_available() is False here")
    if args.collector_gpus > 0 and torch.cuda.device_count() == 0:
        p.error("--collector-gpus > 0 needs a GPU: torch sees none here")
    if min(args.collectors) < 1:
        p.error("--collectors: counts must be >= 1")
    return args


def machine() -> dict:
    cpu_model = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "gpus": torch.cuda.device_count(),
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
    }


def describe(m: dict) -> str:
    cpu = f"{m['cpus']} CPUs" + (f" ({m['cpu_model']})" if m["cpu_model"] else "")
    gpu = f"{m['gpus']} x {m['gpu']}" if m["gpu"] else "no GPU"
    return f"Machine: {cpu}, {gpu}, torch {m['torch']}, {m['date']}"


# ------------------------------------------------------------------------------ part 1: learner


class DeviceBench(Bench):
    """learner_speed.Bench with one learner per torch device (same seed, so the same initial
    weights) instead of one per update path; ``timed(device, n)`` gives updates/s."""

    def __init__(self, cfg: Config, devices: list[str], fill: int) -> None:
        self._init_learners(cfg, fill, {device: cfg.with_overrides([f"learner.device={device}"]) for device in devices})

    def update(self, device: str) -> None:
        super().update(device)
        if device.startswith("cuda"):
            torch.cuda.synchronize()  # time the update's kernels, not just their launches


def learner_part(args: argparse.Namespace) -> dict:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if len(devices) == 1:
        print(f"part 1: GPU rows skipped: torch.cuda.is_available() is False (torch {torch.__version__})")
    batch = [f"learner.batch_size={args.batch_size}"] if args.batch_size else []
    cfg = load_config_module(os.path.join(ROOT, PONG_ZOO)).with_overrides(
        [*PONG_OVERRIDES, f"learner.num_threads={args.threads}", *batch, *args.overrides]
    )
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    bench = DeviceBench(cfg, devices, args.fill)
    print(f"part 1: buffer of {bench.buffer.num_transitions} transitions filled in {time.perf_counter() - t0:.1f} s")
    for device in devices:  # warm-up: first-call allocations, cuDNN autotuning, lazy imports
        bench.timed(device, 2)
    rates: dict[str, list[float]] = {d: [] for d in devices}
    for _ in range(args.repeats):
        for device in devices:
            rates[device].append(bench.timed(device, args.updates))
    med = {d: float(np.median(r)) for d, r in rates.items()}
    gpu = torch.cuda.get_device_name(0) if "cuda" in med else None
    print(
        f"\nLearner updates/s, Pong MuZero (conv), batch {cfg.learner.batch_size}, {args.updates} updates x "
        f"{args.repeats} repeats, learner on {args.threads} torch threads:\n"
    )
    print("| learner.device | batch | updates/s (median) | min | max | vs cpu |")
    print("|---|---|---|---|---|---|")
    for device, r in rates.items():
        name = device if device == "cpu" else f"cuda ({gpu})"
        print(
            f"| {name} | {cfg.learner.batch_size} | {med[device]:.2f} | {min(r):.2f} | {max(r):.2f} | "
            f"{med[device] / med['cpu']:.1f}x |"
        )
    return {
        "learner_batch_size": cfg.learner.batch_size,
        "learner_threads": args.threads,
        "learner_updates_per_s_cpu": round(med["cpu"], 3),
        "learner_updates_per_s_gpu": round(med["cuda"], 3) if "cuda" in med else None,
        "learner_gpu_over_cpu": round(med["cuda"] / med["cpu"], 2) if "cuda" in med else None,
    }


# ------------------------------------------------------------------------------ part 2: async env steps/s


def fit_collectors(cfg: Config, n: int, cpus: int, gpus: int, collector_gpus: float) -> tuple[float, float, str]:
    """(CPUs, GPUs) per collector actor so that N of them and the evaluator fit into Ray's
    resources, and a note when they had to be shared fractionally."""
    ap = cfg.async_pipeline
    free_cpus = cpus - ap.num_evaluator_actors * ap.evaluator_num_cpus
    num_cpus = min(ap.collector_num_cpus, int(free_cpus / n * 100) / 100)
    notes = []
    if num_cpus < ap.collector_num_cpus:
        notes.append(
            f"{n} collectors x {ap.collector_num_cpus:g} CPU do not fit in {cpus} CPUs (evaluator: "
            f"{ap.evaluator_num_cpus:g}): async_pipeline.collector_num_cpus={num_cpus:g} each, "
            f"the cores are oversubscribed"
        )
    if num_cpus <= 0:
        raise SystemExit(f"{n} collectors cannot get any CPU share on {cpus} CPUs")
    num_gpus = collector_gpus
    if num_gpus > 0 and n * num_gpus > gpus:
        num_gpus = int(gpus / n * 1000) / 1000
        notes.append(
            f"{n} collectors x {collector_gpus:g} GPU do not fit in {gpus} GPUs: "
            f"async_pipeline.collector_num_gpus={num_gpus:g} each"
        )
    return num_cpus, num_gpus, "; ".join(notes)


def measure_collectors(cfg: Config, n: int, warmup: float, seconds: float) -> dict:
    """Env steps/s (and updates/s, learner busy share) of the async driver with ``n`` actors."""
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    try:
        t0 = time.perf_counter()
        while driver.metrics()["collects"] < n:  # every actor started, built its envs, compiled its search
            driver.step(max_seconds=1.0)
            if driver.stop:
                raise RuntimeError(f"the driver stopped during the warm-up: {driver.stop}")
            if time.perf_counter() - t0 > STARTUP_TIMEOUT_S:
                raise RuntimeError(f"{n} collectors: fewer than {n} collects back after {STARTUP_TIMEOUT_S:.0f} s")
        startup = time.perf_counter() - t0
        if warmup > 0:
            window(driver, warmup)
        out = window(driver, seconds)
    finally:
        driver.close()
    return out | {"startup_s": startup}


def env_part(args: argparse.Namespace) -> dict:
    import ray

    torch.set_num_threads(1)
    cpus, gpus = os.cpu_count() or 1, torch.cuda.device_count()
    batch = [f"learner.batch_size={args.batch_size}"] if args.batch_size else []
    cfg = base_config(pong=True).with_overrides([f"learner.device={args.learner_device}", *batch, *args.overrides])
    ray.init(num_cpus=cpus, num_gpus=gpus, include_dashboard=False, configure_logging=False, log_to_driver=False)
    rows, notes = {}, []
    try:
        for n in args.collectors:
            num_cpus, num_gpus, note = fit_collectors(cfg, n, cpus, gpus, args.collector_gpus)
            if note:
                print(f"part 2: note: {note}")
                notes.append(note)
            ncfg = cfg.with_updates(
                {
                    "async_pipeline.enabled": True,
                    "async_pipeline.num_collector_actors": n,
                    "async_pipeline.collector_num_cpus": num_cpus,
                    "async_pipeline.collector_num_gpus": num_gpus,
                }
            )
            r = measure_collectors(ncfg, n, args.warmup, args.seconds)
            rows[n] = r | {"num_cpus": num_cpus, "num_gpus": num_gpus}
            print(
                f"part 2: {n} collector(s): {r['env_steps_per_s']:.1f} env steps/s, {r['updates_per_s']:.2f} "
                f"updates/s (start-up {r['startup_s']:.0f} s)",
                flush=True,
            )
    finally:
        ray.shutdown()
    e = cfg.env
    print(
        f"\nAsync pipeline env steps/s, Pong MuZero, {e.collector_env_num} envs per collector, "
        f"{cfg.mcts.num_simulations} simulations, learner batch {cfg.learner.batch_size} on "
        f"{args.learner_device}, replay ratio {cfg.learner.replay_ratio:g}, {args.seconds:g} s window after "
        f"warm-up, Ray with {cpus} CPUs and {gpus} GPUs:\n"
    )
    first_n = args.collectors[0]
    print(
        f"| collector actors | CPUs / actor | GPUs / actor | env steps/s | vs {first_n} actor{'s' * (first_n > 1)} "
        "| updates/s | learner busy |"
    )
    print("|---|---|---|---|---|---|---|")
    first = rows[first_n]["env_steps_per_s"]
    for n, r in rows.items():
        scale = f"{r['env_steps_per_s'] / first:.2f}x" if first > 0 else "-"
        print(
            f"| {n} | {r['num_cpus']:g} | {r['num_gpus']:g} | {r['env_steps_per_s']:.1f} | {scale} | "
            f"{r['updates_per_s']:.2f} | {r['train_busy']:.0%} |"
        )
    for note in notes:
        print(f"note: {note}")
    return {
        "env_steps_per_s": {str(n): round(r["env_steps_per_s"], 2) for n, r in rows.items()},
        "async_updates_per_s": {str(n): round(r["updates_per_s"], 3) for n, r in rows.items()},
        "learner_busy": {str(n): round(r["train_busy"], 3) for n, r in rows.items()},
        "collector_num_cpus": {str(n): r["num_cpus"] for n, r in rows.items()},
        "collector_num_gpus": {str(n): r["num_gpus"] for n, r in rows.items()},
        "learner_device_async": args.learner_device,
        "window_s": args.seconds,
    }


def main() -> None:
    args = parse_args()
    os.chdir(ROOT)  # async_vs_sync.base_config loads the zoo by a path relative to the repository root
    start = time.perf_counter()
    m = machine()
    print(describe(m))
    out: dict = {
        "learner_updates_per_s_cpu": None,
        "learner_updates_per_s_gpu": None,
        "learner_gpu_over_cpu": None,
        "env_steps_per_s": {},
    }
    if "learner" in args.parts:
        out |= learner_part(args)
    if "env" in args.parts:
        out |= env_part(args)
    out["machine"] = m
    out["overrides"] = args.overrides
    out["total_s"] = round(time.perf_counter() - start, 1)
    print(f"\n{describe(m)}; total {out['total_s']:.0f} s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
