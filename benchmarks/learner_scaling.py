"""Learner updates per second with the data-parallel learner (``learner.num_workers = N``) against
the in-process learner (N = 1), at the SAME global batch, for the CartPole MLP
(``zoo/classic_control/cartpole_muzero.py``, batch 64) and the Pong conv config
(``zoo/atari/pong_muzero.py``, batch 256).

One update = what the driver does per learner step (``lz_tune/pipeline/driver.py``): sample one
global batch of ``learner.batch_size`` and build its targets (``learner.make_batch``), run the
update (N = 1: ``learner.learn`` in this process; N >= 2: ``start_update`` splits the batch into N
shards and sends them to N learner workers (Ray actors) running one DDP update, ``finish_update`` collects
logs and priorities), write the priorities back (``buffer.update_priorities``, when the config
uses PER). Every row has its own learner (torch seed 0: the same initial weights) over ONE buffer
filled once per config (``benchmarks/learner_speed.py``'s ``fill_buffer`` through its ``Bench``);
rows are timed in interleaved repeats so that box noise hits them alike; warm-up updates are
not counted.

Per row, the mean split of one update in milliseconds:

- prepare: ``buffer.sample`` + ``learner.make_batch`` in the driver (the driver's share: with
  ``learner.targets_on_workers`` it only draws the padding actions and puts the buffer changes
  since the last batch into Ray's object store);
- rank targets (N >= 2 with ``targets_on_workers``): the slowest worker's
  ``timing/worker_targets_s``, building its shard's targets from its buffer replica;
- transfer (N >= 2): the update's wall time from ``start_update`` to ``finish_update`` minus the
  slowest worker's ``timing/worker_update_s``: splitting and sending the shards, fetching the
  results back (Ray's object store, task scheduling);
- compute: the slowest worker's ``timing/worker_update_s`` minus its targets and the all-reduce
  bound (floor 0); N = 1: the whole ``learn`` call;
- all-reduce (N >= 2): one all-reduce of a gradient-sized buffer over the process group
  (``lz_tune.parallel.worker.time_all_reduce`` on every rank, the slowest rank's median); DDP
  overlaps it with the backward pass, so this is what it costs at most;
- priorities: ``buffer.update_priorities`` (0 for a config without PER, as Pong's).

An N >= 2 row is measured twice, once per place the targets are built (``--targets driver
ranks``: ``learner.targets_on_workers`` False / True); "sent" is the mean megabytes of numpy
arrays sent to the workers per update (``DataParallelLearner.bytes_sent_last_update``; with the
targets on the ranks the frames travel once per pushed segment, not per update, and the bench's
buffer is filled before the first update, so they travel once in the warm-up).

Threads: an N = 1 row runs on ``learner.num_threads`` torch threads (``--threads``, one row per
value); an N >= 2 row's workers run on ``int(learner.worker_num_cpus)`` threads each
(``--worker-cpus``) and the driver prepares batches on ``--driver-threads``. On a 2-core box the
fair comparison is N = 1 on 1 and on 2 threads against N = 2 with 1 CPU each (the defaults).

Ray is started here when a row has N >= 2 (``ray.init(num_cpus=...)`` with room for the workers of
every such row: they all stay up, idle while another row runs) and shut down at the end. Prints a
markdown table, then as the LAST line one JSON object with the same figures (``rows``: one object
per row, ``machine``, ``overrides``).

    python benchmarks/learner_scaling.py [--configs cartpole,pong] [--workers 1 2 [4]] [--threads 1 2]
        [--worker-cpus 1] [--targets driver ranks] [--updates U] [--repeats R] [--warmup W] [--device cuda]
        [key=value ...]
    python benchmarks/learner_scaling.py --configs pong learner.batch_size=64   # a quicker Pong

``key=value`` overrides apply to every config and row (e.g. ``learner.batch_size=128``); after
``--workers`` or ``--threads`` (lists) put them behind ``--``: ``--workers 1 2 4 -- learner.batch_size=128``.
``--device cuda`` sets ``learner.device=cuda`` and ``learner.worker_num_gpus=1`` (one GPU per worker);
it stops with a message where torch sees no GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpu_scaling import describe, machine  # noqa: E402
from learner_speed import CONFIGS as SPEED_CONFIGS  # noqa: E402
from learner_speed import Bench  # noqa: E402

import lz_tune  # noqa: E402,F401  first: it sets THP_MEM_ALLOC_ENABLE before torch's first allocation
from lz_tune.config import Config  # noqa: E402
from lz_tune.config_loader import load_config_module  # noqa: E402
from lz_tune.parallel import make_learner  # noqa: E402
from lz_tune.parallel.worker import time_all_reduce  # noqa: E402
from lz_tune.workers import env_spec_for  # noqa: E402

CONFIGS = {
    # the zoo config as committed (batch 64); buffer fill as learner_speed.py's
    "cartpole": (SPEED_CONFIGS["cartpole"][0], (), SPEED_CONFIGS["cartpole"][2]),
    # the zoo config (batch 256) with learner_speed.py's smaller collector for the fill
    "pong": SPEED_CONFIGS["pong"],
}
#: default (timed updates per repeat, repeats, warm-up updates) per config: each config ~1-4 min on 2 cores
BUDGETS = {"cartpole": (40, 5, 5), "pong": (3, 3, 1)}


@dataclasses.dataclass
class Row:
    """One measured variant: N learner workers, its threads, its config."""

    workers: int
    threads: int  # N = 1: learner.num_threads; N >= 2: torch threads per worker
    driver_threads: int  # torch threads of this process while the row runs
    cfg: Config
    targets: str = "driver"  # where the batches' targets are built: "driver" or "ranks" (N >= 2)

    @property
    def key(self) -> str:
        return f"N={self.workers}, {self.threads} thread{'s' * (self.threads > 1)}, targets {self.targets}"


def budgets(which: str) -> str:
    i = ("updates", "repeats", "warmup").index(which)
    return ", ".join(f"{name} {b[i]}" for name, b in BUDGETS.items())


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="cartpole,pong", help=f"comma-separated, from {', '.join(CONFIGS)}")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="learner.num_workers values (1 2 4)")
    p.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, 2],
        help="learner.num_threads of the N = 1 rows (one row per value)",
    )
    p.add_argument(
        "--worker-cpus",
        type=float,
        default=1.0,
        help="learner.worker_num_cpus of the N >= 2 rows (torch threads per worker: its integer part)",
    )
    p.add_argument(
        "--driver-threads",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="torch threads of this process (the driver: sample + targets) in the N >= 2 rows",
    )
    p.add_argument(
        "--targets",
        nargs="+",
        choices=("driver", "ranks"),
        default=["driver", "ranks"],
        help="where the N >= 2 rows build the targets (learner.targets_on_workers False / True; one row each)",
    )
    p.add_argument(
        "--updates",
        type=int,
        default=None,
        help=f"timed updates per row and repeat (default per config: {budgets('updates')})",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"timed repeats, rows interleaved (default per config: {budgets('repeats')})",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help=f"updates per row before timing, not counted (default per config: {budgets('warmup')})",
    )
    p.add_argument("--fill", type=int, default=None, help="transitions in each config's buffer (default: per config)")
    p.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="cuda: learner.device=cuda and learner.worker_num_gpus=1",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every config and row")
    args = p.parse_args()
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not args.configs or set(args.configs) - set(CONFIGS):
        p.error(f"--configs: expected some of {', '.join(CONFIGS)}, got {args.configs}")
    if min(args.workers) < 1 or min(args.threads) < 1 or args.driver_threads < 1 or args.worker_cpus <= 0:
        p.error("--workers, --threads and --driver-threads must be >= 1, --worker-cpus > 0")
    if (
        (args.updates is not None and args.updates < 1)
        or (args.repeats is not None and args.repeats < 1)
        or (args.warmup is not None and args.warmup < 0)
    ):
        p.error("--updates and --repeats must be >= 1, --warmup >= 0")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            p.error(
                f"--device cuda: torch.cuda.is_available() is False here (torch {torch.__version__}, "
                f"CUDA build: {torch.version.cuda or 'no'}); the GPU rows need a machine with a GPU"
            )
        if max(args.workers) > torch.cuda.device_count():
            p.error(
                f"--device cuda: {max(args.workers)} workers x 1 GPU, but torch sees {torch.cuda.device_count()} GPU(s)"
            )
    return args


def make_rows(base: Config, args: argparse.Namespace) -> list[Row]:
    device = [f"learner.device={args.device}"] + (["learner.worker_num_gpus=1"] if args.device == "cuda" else [])
    rows = []
    for n in sorted(set(args.workers)):
        if n == 1:
            rows += [
                Row(1, t, t, base.with_overrides([*device, f"learner.num_threads={t}"]))
                for t in sorted(set(args.threads))
            ]
        else:
            rows += [
                Row(
                    n,
                    max(1, int(args.worker_cpus)),
                    args.driver_threads,
                    base.with_overrides(
                        [
                            *device,
                            f"learner.num_workers={n}",
                            f"learner.worker_num_cpus={args.worker_cpus:g}",
                            f"learner.num_threads={args.driver_threads}",
                            f"learner.targets_on_workers={where == 'ranks'}",
                        ]
                    ),
                    targets=where,
                )
                for where in dict.fromkeys(args.targets)
            ]
    return rows


class ScalingBench(Bench):
    """learner_speed.Bench with one learner per :class:`Row` over one shared buffer: the N = 1
    rows the type's own learner, the N >= 2 rows a DataParallelLearner whose workers start here."""

    def __init__(self, base: Config, rows: list[Row], fill: int) -> None:
        self._init_learners(base, fill, {r.key: r.cfg for r in rows if r.workers == 1})
        for row in rows:
            if row.workers >= 2:
                torch.manual_seed(0)
                self.learners[row.key] = make_learner(row.cfg, env_spec_for(row.cfg))
                self.learners[row.key].start()
        self.use_priority = base.buffer.use_priority
        self.cuda = base.learner.device.startswith("cuda")

    def close(self) -> None:
        for learner in self.learners.values():
            if hasattr(learner, "close"):
                learner.close()

    def batch_megabytes(self) -> float:
        """MB of the arrays of one training batch built in this process (what an N >= 2 row with
        the targets at the driver sends to its workers per update)."""
        first = next(iter(self.learners.values()))
        learner = getattr(first, "local", first)  # an N >= 2 row's mirror: the type's own learner
        batch = learner.make_batch(self.buffer, self.buffer.sample(self.batch_size), rng=self.rng)
        arrays = [v for v in vars(batch).values() if isinstance(v, np.ndarray)] + list(batch.extras.values())
        return sum(a.nbytes for a in arrays) / 1e6

    def all_reduce_s(self, row: Row) -> float:
        """The slowest rank's median seconds of one gradient-sized all-reduce (0 for N = 1)."""
        if row.workers < 2:
            return 0.0
        return max(self.learners[row.key].group.apply(time_all_reduce))

    def split_update(self, row: Row) -> dict[str, float]:
        """One update; seconds of prepare, update (wall), worker (the slowest worker's learn;
        None for N = 1) and priorities."""
        learner = self.learners[row.key]
        t0 = time.perf_counter()
        index = self.buffer.sample(self.batch_size)
        batch = learner.make_batch(self.buffer, index, rng=self.rng)
        t1 = time.perf_counter()
        targets, sent = None, None
        if row.workers >= 2:
            logs, priorities = learner.finish_update(learner.start_update(batch))
            worker, targets = logs["timing/worker_update_s"], logs["timing/worker_targets_s"]
            sent = learner.bytes_sent_last_update
        else:
            logs, priorities = learner.learn(batch)
            if self.cuda:
                torch.cuda.synchronize()  # time the update's kernels, not just their launches
            worker = None
        t2 = time.perf_counter()
        if self.use_priority:
            self.buffer.update_priorities(index, priorities)
        t3 = time.perf_counter()
        return {
            "prepare": t1 - t0,
            "update": t2 - t1,
            "worker": worker,
            "targets": targets,
            "priorities": t3 - t2,
            "total": t3 - t0,
            "sent": sent,
        }


def ms_split(updates: list[dict[str, float]], all_reduce_s: float) -> dict[str, float]:
    """Mean milliseconds per update of each part (see the module docstring)."""

    def mean(f) -> float:
        return float(np.mean([f(u) for u in updates])) * 1e3

    parallel = updates[0]["worker"] is not None
    return {
        "prepare": mean(lambda u: u["prepare"]),
        "rank_targets": mean(lambda u: u["targets"]) if parallel else 0.0,
        "transfer": mean(lambda u: u["update"] - u["worker"]) if parallel else 0.0,
        "compute": (
            mean(lambda u: max(u["worker"] - u["targets"] - all_reduce_s, 0.0))
            if parallel
            else mean(lambda u: u["update"])
        ),
        "all_reduce": all_reduce_s * 1e3,
        "priorities": mean(lambda u: u["priorities"]),
        "total": mean(lambda u: u["total"]),
    }


def measure_config(name: str, args: argparse.Namespace) -> list[dict]:
    zoo, overrides, fill = CONFIGS[name]
    n_updates, repeats, warmup = (
        given if given is not None else default
        for given, default in zip((args.updates, args.repeats, args.warmup), BUDGETS[name])
    )
    base = load_config_module(os.path.join(ROOT, zoo)).with_overrides([*overrides, *args.overrides])
    rows = make_rows(base, args)
    t0 = time.perf_counter()
    bench = ScalingBench(base, rows, args.fill or fill)
    print(
        f"{name}: buffer of {bench.buffer.num_transitions} transitions and {len(rows)} learners ready in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    try:
        all_reduce = {row.key: bench.all_reduce_s(row) for row in rows}  # before the warm-up: apply rewraps DDP
        for row in rows:
            torch.set_num_threads(row.driver_threads)
            for _ in range(warmup):
                bench.split_update(row)
        mb = bench.batch_megabytes()
        rates: dict[str, list[float]] = {row.key: [] for row in rows}
        updates: dict[str, list[dict]] = {row.key: [] for row in rows}
        for _ in range(repeats):
            for row in rows:
                torch.set_num_threads(row.driver_threads)
                start = time.perf_counter()
                updates[row.key] += [bench.split_update(row) for _ in range(n_updates)]
                rates[row.key].append(n_updates / (time.perf_counter() - start))
    finally:
        bench.close()
    out = []
    for row in rows:
        r, ms = rates[row.key], ms_split(updates[row.key], all_reduce[row.key])
        out.append(
            {
                "config": name,
                "batch_size": base.learner.batch_size,
                "workers": row.workers,
                "targets": row.targets if row.workers >= 2 else None,
                "sent_mb_per_update": (
                    round(float(np.mean([u["sent"] for u in updates[row.key]])) / 1e6, 4) if row.workers >= 2 else None
                ),
                "threads": row.threads,
                "driver_threads": row.driver_threads,
                "worker_num_cpus": row.cfg.learner.worker_num_cpus if row.workers >= 2 else None,
                "device": row.cfg.learner.device,
                "updates_per_s": round(float(np.median(r)), 3),
                "updates_per_s_min": round(min(r), 3),
                "updates_per_s_max": round(max(r), 3),
                "ms_per_update": {k: round(v, 2) for k, v in ms.items()},
                "batch_mb": round(mb, 2),
                "updates": n_updates,
                "repeats": repeats,
                "warmup": warmup,
            }
        )
    best_single = max((o["updates_per_s"] for o in out if o["workers"] == 1), default=None)
    for o in out:
        o["vs_best_n1"] = round(o["updates_per_s"] / best_single, 3) if best_single else None
    return out


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    print(
        f"\nLearner updates/s at the same global batch, learner.device={args.device} (timed: repeats x updates "
        "per row, rows interleaved, after the warm-up); threads: N = 1 learner.num_threads, N >= 2 per worker "
        f"(int(learner.worker_num_cpus)), the driver's sample + targets on {args.driver_threads}; ms per update, "
        "mean:\n"
    )
    print(
        "| config | batch | N | targets | threads | timed | updates/s (median) | min - max | vs best N=1 | prepare | "
        "rank targets | transfer | compute | all-reduce | priorities | total | sent MB/update |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for o in rows:
        ms = o["ms_per_update"]
        vs = f"{o['vs_best_n1']:.2f}x" if o["vs_best_n1"] else "-"
        parallel = o["workers"] >= 2
        on_ranks = o["targets"] == "ranks"
        print(
            f"| {o['config']} | {o['batch_size']} | {o['workers']} | {o['targets'] or '-'} | {o['threads']} | "
            f"{o['repeats']} x {o['updates']} | {o['updates_per_s']:.2f} | "
            f"{o['updates_per_s_min']:.2f} - {o['updates_per_s_max']:.2f} | {vs} | {ms['prepare']:.1f} | "
            + (f"{ms['rank_targets']:.1f}" if on_ranks else "-")
            + f" | {ms['transfer']:.1f} | {ms['compute']:.1f} | "
            + (f"{ms['all_reduce']:.1f}" if parallel else "-")
            + f" | {ms['priorities']:.2f} | {ms['total']:.1f} | "
            + (f"{o['sent_mb_per_update']:.4f}" if parallel else "-")
            + " |"
        )
    for name in dict.fromkeys(o["config"] for o in rows):
        mb = next(o["batch_mb"] for o in rows if o["config"] == name)
        print(f"{name}: one global batch is {mb:.2f} MB of arrays (what N >= 2 with the targets at the driver sends)")


def main() -> None:
    args = parse_args()
    start = time.perf_counter()
    m = machine()
    print(describe(m))
    parallel = max(args.workers) >= 2
    notes = []
    if parallel:
        import ray

        # every row's workers stay up (rows are interleaved; idle ones cost no CPU): Ray needs room for all
        per_targets = sum(math.ceil(n * args.worker_cpus) for n in set(args.workers) if n >= 2)
        cpus = max(os.cpu_count() or 1, len(set(args.targets)) * per_targets)
        if max(args.workers) * args.worker_cpus > (os.cpu_count() or 1):
            notes.append(
                f"{max(args.workers)} workers x {args.worker_cpus:g} CPU > {os.cpu_count()} cores: "
                "the cores are oversubscribed"
            )
            print(f"note: {notes[-1]}")
        ray.init(
            num_cpus=cpus,
            num_gpus=torch.cuda.device_count() if args.device == "cuda" else 0,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
        )
    rows: list[dict] = []
    try:
        for name in args.configs:
            rows += measure_config(name, args)
    finally:
        if parallel:
            ray.shutdown()
    print_table(rows, args)
    for note in notes:
        print(f"note: {note}")
    total = round(time.perf_counter() - start, 1)
    print(f"\n{describe(m)}; total {total:.0f} s")
    print(
        json.dumps(
            {
                "rows": rows,
                "device": args.device,
                "driver_threads": args.driver_threads,
                "notes": notes,
                "machine": m,
                "overrides": args.overrides,
                "total_s": total,
            }
        )
    )


if __name__ == "__main__":
    main()
