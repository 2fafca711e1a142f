"""One rank of the data-parallel learner: the policy type's own learner, its loss run through
PyTorch DDP (a Ray actor of :class:`lz_tune.parallel.group.LearnerGroup`).

Every rank holds the whole learner (network, target network, optimizer, train_iter) and runs the
type's ``learn`` on its shard; ``learn`` hands its loss closure to ``learner.run_forward``, which
here is the DDP module, so the backward pass all-reduces (averages) the gradients. Gradient
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

from lz_tune.pipeline.ray_backend import WorkerBody, take_normal_priority

__all__ = ["LearnerWorker", "time_all_reduce", "to_float64", "weights_from_numpy", "weights_to_numpy"]


class _Forward(torch.nn.Module):
    """``forward(fn) = fn()`` over the learner network's parameters: what DDP wraps, so that the
    whole loss of a policy type (any mix of representation / dynamics / prediction calls) is one
    DDP forward."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, fn):
        return fn()


class LearnerWorker(WorkerBody):
    """Ray actor body: one learner rank. Built from the run's config dict and env spec; the
    process group is set up by Ray Train's torch backend before :meth:`wrap_data_parallel`."""

    object_store = None

    def __init__(self, cfg_dict: dict[str, Any], spec, num_threads: int) -> None:
        from lz_tune.algos import get_algorithm
        from lz_tune.config import Config

        take_normal_priority()  # on the critical path of every update, like a collector
        torch.set_num_threads(max(1, int(num_threads)))
        self.cfg = Config.from_dict(cfg_dict)
        torch.manual_seed(self.cfg.seed)
        self.learner = get_algorithm(self.cfg.policy_type).make_learner(self.cfg, spec)
        self.learner.data_parallel = None
        self.rank: Optional[int] = None
        self._sync_batchnorm = False
        self._probe_unused = False

    def wrap_data_parallel(self, sync_batchnorm: bool, *, find_unused_parameters: bool = True) -> int:
        """Wrap the loss in DDP (after the process group exists); returns this worker's rank.

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
        self.learner.data_parallel = DistributedDataParallel(
            _Forward(net),
            device_ids=[device.index or 0] if device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
            # buffers (BatchNorm running statistics) are read from rank 0 only (snapshots, checkpoints);
            # training mode normalises with batch statistics: no broadcast of them before every forward
            broadcast_buffers=False,
        )
        self._probe_unused = find_unused_parameters
        if self.rank is None:  # the first wrap: each rank its own random stream (dropout masks, noise)
            torch.manual_seed(self.cfg.seed + dist.get_rank())
        self.rank = dist.get_rank()
        return self.rank

    def _drop_unused_search(self) -> None:
        """After the first update: wrap DDP without the unused-parameter search when every rank's
        every trainable parameter got a gradient (a collective: every rank calls it)."""
        import torch.distributed as dist

        self._probe_unused = False
        params = [p for p in self.learner.policy.network.parameters() if p.requires_grad]
        # on the parameters' device: NCCL (the GPU process group) takes CUDA tensors only
        unused = torch.tensor([float(sum(p.grad is None for p in params))], device=params[0].device)
        dist.all_reduce(unused)
        if unused.item() == 0:
            self.wrap_data_parallel(self._sync_batchnorm, find_unused_parameters=False)

    def learn(self, shard, train_iter: int) -> tuple[dict[str, float], np.ndarray, int]:
        """One update on this rank's shard: (logs, priorities [n_i], train_iter after). The logs
        carry ``timing/worker_update_s``: this rank's seconds in ``learn`` (forward, backward with
        DDP's all-reduce overlapped, optimizer step)."""
        start = time.perf_counter()
        with warnings.catch_warnings():  # the shard's arrays view Ray's read-only object store; learn only reads them
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            logs, priorities = self.learner.learn(shard, train_iter=train_iter)
        logs["timing/worker_update_s"] = time.perf_counter() - start
        if self._probe_unused:
            self._drop_unused_search()
        return logs, priorities, self.learner.train_iter

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

    def apply(self, fn):
        """``fn(learner)`` on this rank's learner, then DDP wrapped anew (``fn`` may have changed the
        parameters' dtype or device, which DDP's gradient buckets were built for); returns ``fn``'s
        result. For diagnostics and tests (e.g. :func:`to_float64`); every rank must call it."""
        result = fn(self.learner)
        self.wrap_data_parallel(self._sync_batchnorm)
        return result

    def set_config(self, cfg_dict: dict[str, Any]) -> None:
        """Take a config whose learner.* keys changed live (Tune's reset_config, PBT)."""
        from lz_tune.config import Config

        self.cfg = self.learner.cfg = Config.from_dict(cfg_dict)
        if self.learner.data_parallel is not None:  # loss weights may have changed which parameters are used
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
