"""The learner workers: plain Ray actors joined in one torch process group (public APIs only).

Why not ``TorchTrainer`` or Ray Train's worker group: ``TorchTrainer.fit()`` runs one training
function to completion on the workers (Ray Train V2, the default in Ray 2.60, through a
controller actor that reserves its own placement group), and Ray Train V2 has no public
long-lived worker group. The learner here is fed one global batch at a time by the driver, which
owns the replay buffer (the single-owner boundary), and under Tune its workers must live in the
trial's own bundles. So the group is built from public parts only:

1. N actors of :class:`~lz_tune.parallel.worker.LearnerWorker` (``ray.remote``), each pinned to
   its bundle of the trial's placement group (after the driver, collector and evaluator
   bundles), or placed by Ray's default scheduling outside Tune (SPREAD when
   ``async_pipeline.placement_strategy`` asks for it);
2. ranks in the order Ray Train's executor gives them: sorted by node, then by GPU id, so the
   ranks of one node are neighbours;
3. on GPUs, every worker of a node sees all the node's learner GPUs (one ``CUDA_VISIBLE_DEVICES``
   per node, as Ray Train shares it) and drives its own one of them, so NCCL can use peer-to-peer
   and NVLink between them;
4. rank 0 publishes its node address and a free port; every rank calls torch's public
   ``init_process_group`` with the composite backend ``cpu:gloo,cuda:nccl`` (GPU ranks:
   collectives on CPU tensors go through gloo, on CUDA tensors through NCCL) or ``cpu:gloo``.

Ray internals used: none. :data:`PROCESS_GROUP_ENV` lists the environment Ray's own torch
backend sets for NCCL, which is set here too.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Optional, Sequence

from lz_tune.config import Config, ConfigError
from lz_tune.parallel.resources import learner_bundle_index
from lz_tune.pipeline.ray_backend import async_actor_demand, import_ray, init_ray

__all__ = [
    "LearnerGroup",
    "LearnerWorkerError",
    "WorkerPlacement",
    "assign_ranks",
    "check_cluster_fits",
    "process_group_backend",
]

#: seconds to wait for the learner workers to be placed before giving up with an error naming the
#: keys that size them (a request the cluster cannot hold would otherwise wait forever)
START_TIMEOUT_S = float(os.environ.get("LZ_TUNE_LEARNER_START_TIMEOUT_S", "300"))
#: seconds a collective may block before the process group raises (a dead peer)
PROCESS_GROUP_TIMEOUT_S = float(os.environ.get("LZ_TUNE_PROCESS_GROUP_TIMEOUT_S", "600"))
#: seconds the other workers get to report once one failed, so that the error names the worker
#: that died rather than a peer whose collective failed because of it
FAILURE_GRACE_S = 10.0
#: seconds ``close()`` gives healthy workers to leave the process group before they are killed
CLOSE_PATIENCE_S = 5.0
#: what Ray's torch backend sets on its workers for NCCL: a failed or hung collective raises
#: (instead of blocking the worker forever), so the driver sees the error and the run can restore
PROCESS_GROUP_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}


class LearnerWorkerError(RuntimeError):
    """A learner worker died or failed; the message names its rank, process and node."""


def process_group_backend(worker_num_gpus: float) -> str:
    """The torch process-group backend of the learner ranks, in torch's composite form: with GPUs
    ``cpu:gloo,cuda:nccl`` (every collective works on tensors of either device), else
    ``cpu:gloo``."""
    return "cpu:gloo,cuda:nccl" if worker_num_gpus > 0 else "cpu:gloo"


@dataclasses.dataclass(frozen=True)
class WorkerPlacement:
    """Where one learner actor came up (reported by the actor itself)."""

    node_id: str
    node_ip: str
    pid: int
    gpu_ids: tuple[str, ...]
    """The GPU ids Ray assigned to this actor (physical ids on its node; empty on CPU)."""


@dataclasses.dataclass(frozen=True)
class RankAssignment:
    """One actor's rank and device in the process group."""

    actor_index: int
    """Position of the actor in the list :func:`assign_ranks` was given."""
    rank: int
    cuda_visible_devices: Optional[str]
    """``CUDA_VISIBLE_DEVICES`` for the actor: every learner GPU of its node (None on CPU)."""
    local_device: Optional[int]
    """The actor's own GPU as a CUDA index within ``cuda_visible_devices`` (None on CPU)."""


def _gpu_sort_key(gpu_ids: Sequence[str]) -> tuple:
    return tuple((0, int(g), "") if g.isdigit() else (1, 0, g) for g in gpu_ids)


def assign_ranks(placements: Sequence[WorkerPlacement]) -> list[RankAssignment]:
    """Ranks for the actors at ``placements``, in rank order: sorted by node, then by GPU id (as
    Ray Train's executor orders its workers), so one node's ranks are consecutive; on GPUs each
    actor sees all its node's learner GPUs and drives its own.

    Raises:
        ValueError: an actor holds more than one GPU, or two actors hold the same GPU.
    """
    order = sorted(range(len(placements)), key=lambda i: (placements[i].node_id, _gpu_sort_key(placements[i].gpu_ids)))
    node_gpus: dict[str, list[str]] = {}
    for i in order:
        p = placements[i]
        if len(p.gpu_ids) > 1:
            raise ValueError(f"learner actor {i} holds GPUs {list(p.gpu_ids)}: one GPU per rank")
        for g in p.gpu_ids:
            if g in node_gpus.setdefault(p.node_id, []):
                raise ValueError(f"GPU {g} of node {p.node_id} was given to two learner ranks")
            node_gpus[p.node_id].append(g)
    assignments = []
    for rank, i in enumerate(order):
        p = placements[i]
        if p.gpu_ids:
            gpus = node_gpus[p.node_id]
            assignments.append(RankAssignment(i, rank, ",".join(gpus), gpus.index(p.gpu_ids[0])))
        else:
            assignments.append(RankAssignment(i, rank, None, None))
    return assignments


def check_cluster_fits(cfg: Config, nodes: Sequence[dict[str, float]]) -> None:
    """ConfigError naming the keys when one learner worker's CPUs or GPUs exceed every node of the
    cluster (``nodes``: total resources of each alive node), or the run's actors together (the
    learner workers, and with the async pipeline its collector and evaluator actors) exceed the
    cluster: such a run would wait for a placement that can never come."""
    lc = cfg.learner
    workers = (("worker_num_cpus", "CPU", lc.worker_num_cpus), ("worker_num_gpus", "GPU", lc.worker_num_gpus))
    total = {r: sum(float(n.get(r, 0.0)) for n in nodes) for _, r, _ in workers}
    for key, resource, per_worker in workers:
        largest = max((float(n.get(resource, 0.0)) for n in nodes), default=0.0)
        if per_worker > largest + 1e-9:
            raise ConfigError(
                f"learner.{key}: one learner worker asks for {per_worker:g} {resource}, but no node of "
                f"the cluster has that many (largest: {largest:g})"
            )
        if lc.num_workers * per_worker > total[resource] + 1e-9:
            raise ConfigError(
                f"learner.num_workers / learner.{key}: {lc.num_workers} workers x {per_worker:g} "
                f"{resource} = {lc.num_workers * per_worker:g}, but the cluster has {total[resource]:g} {resource}"
            )
    for key, resource, per_worker in workers:
        learners = lc.num_workers * per_worker
        others = async_actor_demand(cfg, resource)
        if learners + others > total[resource] + 1e-9:
            kind = resource.lower() + "s"
            raise ConfigError(
                f"learner.num_workers / learner.{key} with async_pipeline.num_collector_actors x "
                f"collector_num_{kind} and num_evaluator_actors x evaluator_num_{kind}: the learner "
                f"workers ({learners:g} {resource}) and the collector and evaluator actors ({others:g}) "
                f"ask for {learners + others:g} {resource}, but the cluster has {total[resource]:g} {resource} "
                "(a Ray that lz_tune starts itself is sized for the run; this one was started before)"
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
        self._failed = False
        self.workers: list[Any] = []  # Ray actor handles, in rank order
        try:
            from lz_tune.parallel.worker import LearnerWorker

            pg = ray.util.get_current_placement_group()
            actor_cls = ray.remote(LearnerWorker)
            resources: dict[str, Any] = {"num_cpus": float(lc.worker_num_cpus), "num_gpus": float(lc.worker_num_gpus)}
            actors = [
                actor_cls.options(**resources, **self._options(cfg, pg, i)).remote(
                    cfg.to_dict(), spec, max(1, int(lc.worker_num_cpus))
                )
                for i in range(lc.num_workers)
            ]
            self.workers = actors  # (so that close() ends them if the start fails)
            refs = [a.placement.remote() for a in actors]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=START_TIMEOUT_S)
            if len(ready) < len(refs):
                raise ConfigError(
                    f"learner.num_workers / learner.worker_num_cpus / learner.worker_num_gpus: {lc.num_workers} "
                    f"learner worker(s) could not be placed within {START_TIMEOUT_S:.0f} s (the cluster has "
                    f"{ray.cluster_resources()}); lower them or add nodes"
                )
            placements = [WorkerPlacement(**p) for p in ray.get(refs)]
            ranks = assign_ranks(placements)
            self.workers = [actors[a.actor_index] for a in ranks]
            self.metadata = [placements[a.actor_index] for a in ranks]
            address, port = ray.get(self.workers[0].free_port.remote())
            backend = process_group_backend(lc.worker_num_gpus)
            setup = [
                w.setup.remote(
                    rank=a.rank,
                    world_size=lc.num_workers,
                    init_method=f"tcp://{address}:{port}",
                    backend=backend,
                    cuda_visible_devices=a.cuda_visible_devices,
                    local_device=a.local_device,
                    env=PROCESS_GROUP_ENV,
                    timeout_s=PROCESS_GROUP_TIMEOUT_S,
                    sync_batchnorm=lc.sync_batchnorm,
                )
                for w, a in zip(self.workers, ranks)
            ]
            got = self.get(setup, "process group setup", timeout=START_TIMEOUT_S)
            if got != list(range(lc.num_workers)):
                raise LearnerWorkerError(f"learner workers came up with ranks {got}, expected 0..{lc.num_workers - 1}")
            self.load_state_dict(initial_state)
        except BaseException:
            self.close(failed=True)
            raise

    @staticmethod
    def _options(cfg: Config, pg, index: int) -> dict[str, Any]:
        if pg is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            return {
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=pg,
                    placement_group_bundle_index=learner_bundle_index(cfg, index),
                    placement_group_capture_child_tasks=True,
                )
            }
        if cfg.async_pipeline.placement_strategy in ("SPREAD", "STRICT_SPREAD"):
            return {"scheduling_strategy": "SPREAD"}
        return {}

    # ------------------------------------------------------------------------------ calls

    def describe(self, rank: int) -> str:
        if rank >= len(getattr(self, "metadata", ())):
            return f"learner worker {rank}"
        m = self.metadata[rank]
        return f"learner worker {rank} (pid {m.pid}, node {m.node_ip})"

    def get(self, refs: list, what: str, timeout: Optional[float] = None) -> list:
        """``ray.get`` of one ref per worker. When a worker fails, the others may be blocked in a
        collective with it, or fail because of it (gloo: "Connection closed by peer"), and either
        error can arrive first. So the others get :data:`FAILURE_GRACE_S` to report too, and the
        :class:`LearnerWorkerError` names a worker that died (its process is gone) before one that
        raised; the rest of what failed follows in the message. The group is then marked failed,
        so :meth:`close` ends the workers at once."""
        ray = self.ray
        pending = {ref: rank for rank, ref in enumerate(refs)}
        deadline = None if timeout is None else time.monotonic() + timeout
        failures: dict[int, tuple[bool, Exception]] = {}  # rank -> (died, error)
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if failures:
                left = FAILURE_GRACE_S if left is None else min(left, FAILURE_GRACE_S)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not ready:
                if failures:
                    break  # the rest did not report within the grace period: blame what did
                self._failed = True
                raise ray.exceptions.GetTimeoutError(
                    f"learner workers {sorted(pending.values())} did not finish {what} within {timeout} s"
                )
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    failures[rank] = (True, e)
                except ray.exceptions.RayTaskError as e:
                    failures[rank] = (False, e)
        if failures:
            self._failed = True
            raise self._failure_error(failures, what)
        return ray.get(refs)

    def _failure_error(self, failures: dict[int, tuple[bool, Exception]], what: str) -> "LearnerWorkerError":
        """One error for the workers that failed: the first that died (else the lowest rank that
        raised) as the cause, the others listed after it."""
        order = sorted(failures, key=lambda r: (not failures[r][0], r))

        def line(rank: int) -> str:
            died, e = failures[rank]
            text = str(e).strip().splitlines()
            if died:
                return f"{self.describe(rank)} died during {what}: {text[0] if text else type(e).__name__}"
            return f"{self.describe(rank)} failed during {what}: {text[-1] if text else type(e).__name__}"

        message = line(order[0])
        if len(order) > 1:
            message = message.rstrip(".") + "; then " + "; ".join(line(r) for r in order[1:])
        error = LearnerWorkerError(message)
        error.__cause__ = failures[order[0]][1]
        return error

    @property
    def failed(self) -> bool:
        """Whether a worker died, failed or timed out (the process group is then unusable)."""
        return self._failed

    def learn_async(self, shards: list, train_iter: int, loss_scales: list[float]) -> list:
        """Start one update: shard r to worker r, its loss scaled by ``loss_scales[r]``; returns one
        ref per worker."""
        return [w.learn.remote(shard, train_iter, s) for w, shard, s in zip(self.workers, shards, loss_scales)]

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

    def put_policy_weights(self):
        """An ObjectRef of rank 0's learner-network weights (numpy arrays), put by rank 0."""
        return self.get([self.workers[0].put_policy_weights.remote()], "publishing the policy weights")[0][0]

    def apply(self, fn) -> list:
        """``fn(learner)`` on every rank's learner (diagnostics and tests); results in rank order."""
        return self.get([w.apply.remote(fn) for w in self.workers], "apply")

    def placement(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Where the workers run: ``{"placement_group_ids": [...], "node_ids": [...], "pids": [...]}`` in
        rank order (hex ids; placement group None outside a Tune trial)."""
        pgs = self.get([w.placement_group_id.remote() for w in self.workers], "placement", timeout=timeout)
        return {
            "placement_group_ids": pgs,
            "node_ids": [m.node_id for m in self.metadata],
            "pids": [m.pid for m in self.metadata],
        }

    def set_config(self, cfg: Config) -> None:
        self.cfg = cfg
        self.get([w.set_config.remote(cfg.to_dict()) for w in self.workers], "set_config")

    def close(self, *, failed: bool = False) -> None:
        """Leave the process group and end the workers. When a worker died or failed (``failed``, or
        a call through :meth:`get` saw it) the others are killed at once: they may be blocked in a
        collective with the dead one and would never answer."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        failed = failed or self._failed
        if self.workers and not failed:
            try:
                self.get([w.leave_process_group.remote() for w in self.workers], "close", timeout=CLOSE_PATIENCE_S)
            except Exception:
                pass
        for w in self.workers:
            try:
                ray.kill(w, no_restart=True)
            except Exception:
                pass
        self.workers = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
