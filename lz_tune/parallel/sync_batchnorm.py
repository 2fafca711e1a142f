"""BatchNorm over the global batch of a data-parallel learner (``learner.sync_batchnorm``).

torch's ``nn.SyncBatchNorm`` refuses CPU tensors (its forward raises for anything but CUDA), and
the learner workers run on CPUs as often as on GPUs, so this module computes the same thing with
torch.distributed's differentiable all-reduce: the per-channel sum and count of every shard are
all-reduced to the global mean, then the squared deviations to the global (biased) variance, two
passes as one process's ``F.batch_norm`` would. The backward of that all-reduce
all-reduces the gradient of the statistics, so each worker's input gets the gradient of the
whole batch's loss, as with one process on the whole batch.

Running statistics follow ``nn.BatchNorm``: ``r <- (1 - m) r + m s`` with the unbiased global
variance. Parameters and buffers keep their names: a state dict loads into the plain layer and
back.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["GlobalBatchNorm", "convert_to_global_batchnorm", "has_batchnorm"]


def has_batchnorm(module: nn.Module) -> bool:
    """Whether ``module`` holds any BatchNorm layer (what ``learner.sync_batchnorm`` acts on)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t`` over the default process group, differentiable (its backward sums the
    gradients over the ranks): torch's functional collective, or on older torch the one of
    ``torch.distributed.nn`` (deprecated since)."""
    try:
        from torch.distributed import _functional_collectives as funcol

        return funcol.all_reduce(t, "sum", cast("dist.ProcessGroup", dist.group.WORLD))  # (initialised: see forward)
    except (ImportError, AttributeError):  # pragma: no cover - torch without the functional collectives
        from torch.distributed.nn.functional import all_reduce

        return all_reduce(t)


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm{1,2,3}d whose training-mode statistics are those of the global batch over all
    ranks of the default process group. Inputs ``[B, C]`` or ``[B, C, *spatial]``; in eval mode,
    or without an initialised process group, it is the plain layer."""

    #: every call is one batch for the statistics: grouped callers call it once per group
    per_call_statistics = True

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f"expected a [B, C, ...] input, got shape {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not (self.training and dist.is_available() and dist.is_initialized()):
            return super().forward(x)
        channels = x.shape[1]
        dims = [0, *range(2, x.dim())]
        local = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # statistics in >= float32
        count = torch.tensor([x.numel() / channels], dtype=local.dtype, device=x.device)
        sums = _all_reduce_sum(torch.cat([local.sum(dims), count]))
        total = sums[-1]
        mean = sums[:-1] / total
        shape = (1, channels) + (1,) * (x.dim() - 2)
        centered = local - mean.view(shape)
        var = _all_reduce_sum((centered * centered).sum(dims)) / total  # biased, as batch_norm
        out = centered * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats and self.running_mean is not None:
            assert self.running_var is not None and self.num_batches_tracked is not None  # with running_mean
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                # momentum=None: a cumulative average, as torch's BatchNorm
                momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                self.running_mean.mul_(1 - momentum).add_(momentum * mean.detach().to(self.running_mean.dtype))
                unbiased = var.detach() * total / (total - 1).clamp_min(1)
                self.running_var.mul_(1 - momentum).add_(momentum * unbiased.to(self.running_var.dtype))
        return out.to(x.dtype)


def convert_to_global_batchnorm(module: nn.Module) -> nn.Module:
    """Replace every BatchNorm layer of ``module`` (in place) by a :class:`GlobalBatchNorm` that
    holds the same parameter and buffer objects; returns ``module``."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.modules.batchnorm._BatchNorm) and not isinstance(child, GlobalBatchNorm):
            new = GlobalBatchNorm(
                child.num_features,
                eps=child.eps,
                momentum=child.momentum,
                affine=child.affine,
                track_running_stats=child.track_running_stats,
            )
            for name_ in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
                setattr(new, name_, getattr(child, name_))  # the same Parameter / buffer objects: an
                #                                           optimizer built on the module keeps working
            new.train(child.training)
            setattr(module, name, new)
        else:
            convert_to_global_batchnorm(child)
    return module
