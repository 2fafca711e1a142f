"""The learner workers on Ray: Ray Train's worker group, its torch backend for the process group.

Why not ``TorchTrainer``: its ``fit()`` runs one training function to completion on the workers
(Ray Train V2, the default in Ray 2.60, through a controller actor that reserves its own placement
group). The learner here is fed one global batch at a time by the driver, which owns the replay
buffer (the single-owner boundary), and under Tune its workers must live in the trial's own bundles. So the group
is built from the parts ``TorchTrainer`` itself is made of: Ray Train's ``WorkerGroup`` (actors
that run our :class:`~lz_tune.parallel.worker.LearnerWorker`), and the backend of the public
``ray.train.torch.TorchConfig`` (``TorchConfig().backend_cls().on_start``), which picks gloo or
NCCL, sets MASTER_ADDR / MASTER_PORT from rank 0 and calls ``init_process_group`` on every
worker. No process group or all-reduce is hand-written here.

Placement: inside a Tune trial, worker r is pinned to bundle ``learner_bundle_index(cfg, r)`` of
the trial's placement group (after the driver, collector and evaluator bundles); outside Tune,
Ray's default scheduling (SPREAD when ``async_pipeline.placement_strategy`` asks for it).
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Sequence

from lz_tune.config import Config, ConfigError
from lz_tune.parallel.resources import learner_bundle_index
from lz_tune.pipeline.ray_backend import import_ray, init_ray

__all__ = ["LearnerGroup", "LearnerWorkerError"]

#: seconds to wait for the learner workers to be placed before giving up with an error naming the
#: keys that size them (a request the cluster cannot hold would otherwise wait forever)
START_TIMEOUT_S = float(os.environ.get("LZ_TUNE_LEARNER_START_TIMEOUT_S", "300"))


class LearnerWorkerError(RuntimeError):
    """A learner worker died or failed; the message names its rank, process and node."""


def _worker_group_class():
    """Ray Train's WorkerGroup with each worker placed by explicit scheduling options (a Tune
    trial's bundle), instead of the parent's placement group at large: mixing pinned actors
    (collectors, evaluators) with unpinned ones in one group can deadlock (the unpinned ones take the resources the
    pinned ones wait for)."""
    import ray
    from ray.train._internal.worker_group import Worker, WorkerGroup, construct_metadata

    class PinnedWorkerGroup(WorkerGroup):
        def __init__(self, *, worker_options: Sequence[dict[str, Any]], **kwargs: Any) -> None:
            self._worker_options = list(worker_options)
            super().__init__(**kwargs)

        def add_workers(self, num_workers: int) -> None:
            first = len(self.workers)
            actors: list[Any] = [  # Ray actor handles (Ray types .remote() of an actor class loosely)
                self._remote_cls.options(**self._worker_options[first + i]).remote(
                    *self._actor_cls_args, **self._actor_cls_kwargs
                )
                for i in range(num_workers)
            ]
            refs = [a._RayTrainWorker__execute.remote(construct_metadata) for a in actors]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=START_TIMEOUT_S)
            if len(ready) < len(refs):
                for a in actors:
                    ray.kill(a)
                raise ConfigError(
                    f"learner.num_workers / learner.worker_num_cpus / learner.worker_num_gpus: {num_workers} learner "
                    f"worker(s) could not be placed within {START_TIMEOUT_S:.0f} s (the cluster has "
                    f"{ray.cluster_resources()}); lower them or add nodes"
                )
            self.workers.extend(Worker(actor=a, metadata=m) for a, m in zip(actors, ray.get(refs)))

    return PinnedWorkerGroup


def check_cluster_fits(cfg: Config, nodes: Sequence[dict[str, float]]) -> None:
    """ConfigError naming the key when one learner worker's CPUs or GPUs exceed every node of the
    cluster (``nodes``: total resources of each alive node), or all workers exceed the cluster."""
    lc = cfg.learner
    for key, resource, per_worker in (
        ("worker_num_cpus", "CPU", lc.worker_num_cpus),
        ("worker_num_gpus", "GPU", lc.worker_num_gpus),
    ):
        largest = max((float(n.get(resource, 0.0)) for n in nodes), default=0.0)
        total = sum(float(n.get(resource, 0.0)) for n in nodes)
        if per_worker > largest + 1e-9:
            raise ConfigError(
                f"learner.{key}: one learner worker asks for {per_worker:g} {resource}, but no node of "
                f"the cluster has that many (largest: {largest:g})"
            )
        if lc.num_workers * per_worker > total + 1e-9:
            raise ConfigError(
                f"learner.num_workers / learner.{key}: {lc.num_workers} workers x {per_worker:g} "
                f"{resource} = {lc.num_workers * per_worker:g}, but the cluster has {total:g} {resource}"
            )


class LearnerGroup:
    """N learner workers (one DDP process group). :meth:`learn_async` sends one shard to each."""

    def __init__(self, cfg: Config, spec, *, initial_state: dict[str, Any]) -> None:
        ray = import_ray()
        self.ray = ray
        self.cfg = cfg
        lc = cfg.learner
        self._started_ray = init_ray(cfg)
        self._closed = False
        try:
            pg = ray.util.get_current_placement_group()
            options = [self._options(cfg, pg, rank) for rank in range(lc.num_workers)]
            from ray.train.torch import TorchConfig

            from lz_tune.parallel.worker import LearnerWorker

            resources = {"CPU": float(lc.worker_num_cpus)} | (
                {"GPU": float(lc.worker_num_gpus)} if lc.worker_num_gpus > 0 else {}
            )
            self._group = _worker_group_class()(
                num_workers=lc.num_workers,
                resources_per_worker=resources,
                actor_cls=LearnerWorker,
                actor_cls_args=(cfg.to_dict(), spec, max(1, int(lc.worker_num_cpus))),
                worker_options=options,
            )
            self.workers = [w.actor for w in self._group.workers]
            self.metadata = [w.metadata for w in self._group.workers]
            self._torch_config = TorchConfig(backend="nccl" if lc.worker_num_gpus > 0 else "gloo")
            self._backend = self._torch_config.backend_cls()
            self._backend.on_start(self._group, self._torch_config)  # init_process_group on every worker
            ranks = self.get([w.wrap_data_parallel.remote(lc.sync_batchnorm) for w in self.workers], "DDP setup")
            if ranks != list(range(lc.num_workers)):
                raise LearnerWorkerError(
                    f"learner workers came up with ranks {ranks}, expected 0..{lc.num_workers - 1}"
                )
            self.load_state_dict(initial_state)
        except BaseException:
            self.close(failed=True)
            raise

    @staticmethod
    def _options(cfg: Config, pg, rank: int) -> dict[str, Any]:
        if pg is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            return {
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=pg,
                    placement_group_bundle_index=learner_bundle_index(cfg, rank),
                    placement_group_capture_child_tasks=True,
                )
            }
        if cfg.async_pipeline.placement_strategy in ("SPREAD", "STRICT_SPREAD"):
            return {"scheduling_strategy": "SPREAD"}
        return {}

    # ------------------------------------------------------------------------------ calls

    def describe(self, rank: int) -> str:
        m = self.metadata[rank]
        return f"learner worker {rank} (pid {m.pid}, node {m.node_ip})"

    def get(self, refs: list, what: str, timeout: Optional[float] = None) -> list:
        """``ray.get`` of one ref per worker, failing at the first worker that failed (the others
        may be blocked in a collective with it) with a :class:`LearnerWorkerError` naming it."""
        ray = self.ray
        pending = {ref: rank for rank, ref in enumerate(refs)}
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not ready:
                raise ray.exceptions.GetTimeoutError(
                    f"learner workers {sorted(pending.values())} did not finish {what} within {timeout} s"
                )
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    raise LearnerWorkerError(
                        f"{self.describe(rank)} died during {what}: {str(e).strip().splitlines()[0]}"
                    ) from e
                except ray.exceptions.RayTaskError as e:
                    raise LearnerWorkerError(
                        f"{self.describe(rank)} failed during {what}: {str(e).strip().splitlines()[-1]}"
                    ) from e
        return ray.get(refs)

    def learn_async(self, shards: list, train_iter: int) -> list:
        """Start one update: shard r to worker r; returns one ref per worker."""
        return [w.learn.remote(shard, train_iter) for w, shard in zip(self.workers, shards)]

    def state_dict(self) -> dict[str, Any]:
        """Rank 0's learner state (all ranks hold the same)."""
        return self.get([self.workers[0].state_dict.remote()], "state_dict")[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ref = self.ray.put(state)
        self.get([w.load_state_dict.remote(ref) for w in self.workers], "load_state_dict")

    def weights(self, which: str) -> dict[str, Any]:
        """Rank 0's weights (CPU tensors) of ``which``: "policy" (the learner network) or
        "target_policy"."""
        from lz_tune.parallel.worker import weights_from_numpy

        return weights_from_numpy(self.get([self.workers[0].weights.remote(which)], f"fetching {which} weights")[0])

    def apply(self, fn) -> list:
        """``fn(learner)`` on every rank's learner (diagnostics and tests); results in rank order."""
        return self.get([w.apply.remote(fn) for w in self.workers], "apply")

    def placement(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Where the workers run: ``{"placement_group_ids": [...], "node_ids": [...], "pids": [...]}`` in
        rank order (hex ids; placement group None outside a Tune trial)."""
        pgs = self.get([w.placement_group_id.remote() for w in self.workers], "placement", timeout=timeout)
        nodes = self.get([w.node_id.remote() for w in self.workers], "placement", timeout=timeout)
        return {"placement_group_ids": pgs, "node_ids": nodes, "pids": [m.pid for m in self.metadata]}

    def set_config(self, cfg: Config) -> None:
        self.cfg = cfg
        self.get([w.set_config.remote(cfg.to_dict()) for w in self.workers], "set_config")

    def close(self, *, failed: bool = False) -> None:
        """Destroy the process group and end the workers (at once when a worker failed: the others
        may be stuck in a collective)."""
        if self._closed:
            return
        self._closed = True
        group = getattr(self, "_group", None)
        if group is not None:
            if not failed:
                try:
                    self._backend.on_shutdown(group, self._torch_config)
                except Exception:
                    failed = True
            try:
                group.shutdown(patience_s=0 if failed else 5)
            except Exception:
                pass
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False
