"""One rank of the data-parallel learner: the policy type's own learner, its loss run through
PyTorch DDP (a Ray actor of :class:`lz_tune.parallel.group.LearnerGroup`).

Every rank holds the whole learner (network, target network, optimizer, train_iter) and runs the
type's ``learn`` on its shard; ``learn`` hands its loss closure to the learner's collective
(:class:`DataParallelCollective`, injected through ``Learner.set_collective``), which runs it
through the DDP module, so the backward pass all-reduces (averages) the gradients. Gradient
clipping, the optimizer step, the schedule in train_iter and the target update then run on the
same averaged gradients everywhere, so all ranks keep identical weights; rank 0's are the ones
the driver publishes and checkpoints.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Optional

import numpy as np
import torch

from lz_tune.algos.collective import Collective
from lz_tune.buffer import TrainBatch
from lz_tune.pipeline.ray_backend import WorkerBody, take_normal_priority

__all__ = [
    "DataParallelCollective",
    "LearnerWorker",
    "time_all_reduce",
    "to_float64",
    "weights_from_numpy",
    "weights_to_numpy",
]


class _Forward(torch.nn.Module):
    """``forward(fn) = fn()`` over the learner network's parameters: what DDP wraps, so that the
    whole loss of a policy type (any mix of representation / dynamics / prediction calls) is one
    DDP forward."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, fn):
        return fn()


class DataParallelCollective(Collective):
    """The collective of one rank: the loss through DDP (the backward pass all-reduces the
    gradients), all-reduces over the process group on the tensor's own device, and this rank's
    shard scale on the loss (see :mod:`lz_tune.parallel.shards`)."""

    distributed = True

    def __init__(self, ddp: torch.nn.Module, *, rank: int, world_size: int) -> None:
        self.ddp = ddp
        self.rank = rank
        self.world_size = world_size
        self.loss_scale = 1.0
        """``n_i * N / B`` of the shard being learned (a Python float: float64)."""

    def run_forward(self, forward):
        loss, *rest = self.ddp(forward)
        return (loss * self.loss_scale, *rest)

    def all_reduce(self, t: torch.Tensor, op: str = "sum") -> torch.Tensor:
        import torch.distributed as dist

        t = t.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return t


class LearnerWorker(WorkerBody):
    """Ray actor body: one learner rank (:class:`lz_tune.parallel.group.LearnerGroup` makes N of
    them). Built light (no torch device touched) so the group can set ``CUDA_VISIBLE_DEVICES``
    first; :meth:`setup` then builds the learner on the rank's device, joins the process group and
    wraps the loss in DDP."""

    object_store = None

    def __init__(self, cfg_dict: dict[str, Any], spec, num_threads: int) -> None:
        take_normal_priority()  # on the critical path of every update, like a collector
        torch.set_num_threads(max(1, int(num_threads)))
        self._cfg_dict = cfg_dict
        self._spec = spec
        self.rank: Optional[int] = None
        self._sync_batchnorm = False
        self._probe_unused = False
        self.replica = None
        """The read-only copy of the driver's buffer this rank builds its targets from (made at
        the first update that needs it; ``learner.targets_on_workers``)."""

    # ------------------------------------------------------------------ placement and setup

    def placement(self) -> dict[str, Any]:
        """Where this actor runs (fields of :class:`lz_tune.parallel.group.WorkerPlacement`)."""
        import os

        import ray

        ctx = ray.get_runtime_context()
        gpus = ctx.get_accelerator_ids().get("GPU", [])
        return {
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "gpu_ids": tuple(str(g) for g in gpus),
        }

    def free_port(self) -> tuple[str, int]:
        """(this node's address, a free TCP port on it): where rank 0 serves the process group's
        rendezvous."""
        import socket

        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), int(port)

    def setup(
        self,
        *,
        rank: int,
        world_size: int,
        init_method: str,
        backend: str,
        cuda_visible_devices: Optional[str],
        local_device: Optional[int],
        env: dict[str, str],
        timeout_s: float,
        sync_batchnorm: bool,
    ) -> int:
        """Build the learner on this rank's device (``cuda:local_device`` among
        ``cuda_visible_devices``, or the CPU), join the process group (torch's public
        ``init_process_group``), wrap the loss in DDP; returns the rank."""
        import dataclasses
        import datetime
        import os

        import torch.distributed as dist

        from lz_tune.algos import get_algorithm
        from lz_tune.config import Config

        os.environ.update(env)
        if cuda_visible_devices is not None:  # before CUDA is initialised in this process
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        cfg = Config.from_dict(self._cfg_dict)
        device = "cpu" if local_device is None else f"cuda:{local_device}"
        self.cfg = dataclasses.replace(cfg, learner=dataclasses.replace(cfg.learner, device=device))
        torch.manual_seed(self.cfg.seed)  # (the weights are replaced by the driver's state next)
        self.learner = get_algorithm(self.cfg.policy_type).make_learner(self.cfg, self._spec)
        dist.init_process_group(
            backend=backend,
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        self.rank = rank
        torch.manual_seed(self.cfg.seed + rank)  # each rank its own random stream (dropout masks, noise)
        self.wrap_data_parallel(sync_batchnorm)
        return rank

    def leave_process_group(self) -> None:
        """Destroy the process group (a clean close; every rank calls it)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

    def wrap_data_parallel(self, sync_batchnorm: bool, *, find_unused_parameters: bool = True) -> None:
        """Wrap the loss in DDP and give the learner this rank's collective.

        A type may leave parameters out of its loss (``ssl_loss_weight=0``, unused heads): DDP must
        then not wait for their gradients (they stay None, as in one process). The first update
        after wrapping runs with DDP's search for such parameters; when no rank found any, DDP is
        wrapped again without it (it costs a walk of the autograd graph every update)."""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        from lz_tune.parallel.sync_batchnorm import convert_to_global_batchnorm

        net = self.learner.policy.network
        if sync_batchnorm:
            convert_to_global_batchnorm(net)
        self._sync_batchnorm = sync_batchnorm
        device = self.learner.device
        ddp = DistributedDataParallel(
            _Forward(net),
            device_ids=[device] if device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
            # buffers (BatchNorm running statistics) are read from rank 0 only (snapshots, checkpoints);
            # training mode normalises with batch statistics: no broadcast of them before every forward
            broadcast_buffers=False,
        )
        self.learner.set_collective(DataParallelCollective(ddp, rank=dist.get_rank(), world_size=dist.get_world_size()))
        self._probe_unused = find_unused_parameters

    def _drop_unused_search(self) -> None:
        """After the first update: wrap DDP without the unused-parameter search when every rank's
        every trainable parameter got a gradient (a collective: every rank calls it)."""
        self._probe_unused = False
        params = [p for p in self.learner.policy.network.parameters() if p.requires_grad]
        # on the parameters' device (the collective goes to gloo or NCCL by that device)
        unused = torch.tensor([float(sum(p.grad is None for p in params))], device=params[0].device)
        if self.learner.collective.all_reduce(unused).item() == 0:
            self.wrap_data_parallel(self._sync_batchnorm, find_unused_parameters=False)

    def learn(self, shard, train_iter: int, loss_scale: float) -> tuple[dict[str, float], np.ndarray, int]:
        """One update on this rank's shard (a `TrainBatch`, or a
        :class:`~lz_tune.parallel.learner.ShardWork` whose batch this rank builds), its loss scaled
        by ``loss_scale`` (``n_i * N / B``): (logs, priorities [n_i], train_iter after). The logs
        carry ``timing/worker_update_s``: this rank's seconds in ``learn`` (targets when built
        here, forward, backward with DDP's all-reduce overlapped, optimizer step), and
        ``timing/worker_targets_s``: the part that built the targets."""
        start = time.perf_counter()
        targets_s = 0.0
        if not isinstance(shard, TrainBatch):  # a ShardWork: this rank builds the batch
            shard = self._build_batch(shard)
            targets_s = time.perf_counter() - start
        collective = self.learner.collective
        assert isinstance(collective, DataParallelCollective)  # (setup wrapped it)
        collective.loss_scale = float(loss_scale)
        with warnings.catch_warnings():  # the shard's arrays view Ray's read-only object store; learn only reads them
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            logs, priorities = self.learner.learn(shard, train_iter=train_iter)
        logs["timing/worker_update_s"] = time.perf_counter() - start
        logs["timing/worker_targets_s"] = targets_s
        if self._probe_unused:
            self._drop_unused_search()
        return logs, priorities, self.learner.train_iter

    def _build_batch(self, work):
        """The `TrainBatch` of a ``ShardWork``: the buffer changes applied to the replica, then the
        type's own ``make_batch`` over this rank's rows, with this rank's target network."""
        import ray

        from lz_tune.buffer.journal import FullState, apply_changes
        from lz_tune.pipeline.replay_buffer import make_game_buffer

        for _, ref in work.changes:
            changes = ray.get(ref)
            if self.replica is None:
                if not changes or not isinstance(changes[0], FullState):
                    raise RuntimeError(
                        "the learner rank's buffer replica is out of step: it never got the whole buffer"
                    )
                self.replica = make_game_buffer(self.cfg, self._spec)
            apply_changes(self.replica, changes)
        if self.replica is None:
            raise RuntimeError("the learner rank's buffer replica is out of step: no buffer changes arrived")
        rng = np.random.default_rng(list(work.seed))
        # the index arrays view Ray's read-only object store; make_batch only reads them
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return self.learner.make_batch(self.replica, work.index, rng=rng)

    def state_dict(self) -> dict[str, Any]:
        """The learner state (one copy: network, target, optimizer, train_iter) as CPU tensors."""
        return _to_cpu(self.learner.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state)

    def weights(self, which: str) -> dict[str, Any]:
        """CPU copy of the weights of ``which`` ("policy": the learner network, or "target_policy"),
        as numpy arrays (see :func:`weights_to_numpy`)."""
        if which not in ("policy", "target_policy"):
            raise ValueError(f"which: 'policy' or 'target_policy', got {which!r}")
        return weights_to_numpy(getattr(self.learner, which).weights())

    def put_policy_weights(self) -> list:
        """``[ObjectRef]`` of this rank's learner-network weights as numpy arrays, put into Ray's
        object store by this process (rank 0 publishes the snapshots: the weights do not pass
        through the driver). A list, so that the caller gets the reference, not the weights."""
        import ray

        return [ray.put(weights_to_numpy(self.learner.policy.weights()))]

    def apply(self, fn):
        """``fn(learner)`` on this rank's learner, then DDP wrapped anew (``fn`` may have changed the
        parameters' dtype or device, which DDP's gradient buckets were built for); returns ``fn``'s
        result. For diagnostics and tests (e.g. :func:`to_float64`); every rank must call it."""
        result = fn(self.learner)
        self.wrap_data_parallel(self._sync_batchnorm)
        return result

    def set_config(self, cfg_dict: dict[str, Any]) -> None:
        """Take a config whose learner.* keys changed live (Tune's reset_config, PBT)."""
        import dataclasses

        from lz_tune.config import Config

        cfg = Config.from_dict(cfg_dict)
        learner = dataclasses.replace(cfg.learner, device=self.cfg.learner.device)  # (this rank's own device)
        self.cfg = self.learner.cfg = dataclasses.replace(cfg, learner=learner)
        # loss weights may have changed which parameters are used
        self.wrap_data_parallel(self._sync_batchnorm)


def weights_to_numpy(weights: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Weights as numpy arrays for the trip through Ray (numpy buffers travel out-of-band, torch
    tensors through torch's slower pickling); bfloat16 tensors stay tensors (numpy has none)."""
    return {k: v if v.dtype == torch.bfloat16 else v.numpy() for k, v in weights.items()}


def weights_from_numpy(weights: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`weights_to_numpy` (tensors view the arrays; ``load_state_dict`` copies)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in weights.items()}


def to_float64(learner) -> None:
    """Cast a learner's networks to float64 (for :meth:`LearnerWorker.apply` in equivalence checks:
    float32 rounding of another summation order is then far below any tolerance)."""
    learner.policy.network.double()
    learner.target_policy.network.double()


def time_all_reduce(learner, repeats: int = 20) -> float:
    """Seconds of one all-reduce of a buffer as large as the learner network's gradients over the
    process group (median of ``repeats``; for :meth:`LearnerWorker.apply` in benchmarks): what the
    all-reduce of one update costs when nothing overlaps it."""
    import torch.distributed as dist

    params = [p for p in learner.policy.network.parameters() if p.requires_grad]
    buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    times = []
    for _ in range(repeats + 2):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(buffer)
        if buffer.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times[2:]))


def _to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj
