"""SimSiam projector + predictor for EfficientZero's self-supervised consistency loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lz_tune.models import _validation as check

__all__ = ["SimSiamProjector", "grouped_forward"]


def _grouped_batch_norm(bn: nn.modules.batchnorm._BatchNorm, x: torch.Tensor, groups: int) -> torch.Tensor:
    """``bn`` applied to each of ``groups`` consecutive blocks of ``x [G*B, C]`` separately, as
    ``groups`` calls in a row would (batch statistics per block; running statistics updated
    block after block), in ONE batch-norm call: the blocks become separate channels."""
    if groups == 1 or not bn.training:
        return bn(x)
    if getattr(bn, "per_call_statistics", False):  # statistics over ranks (lz_tune.parallel): one call a block
        return torch.cat([bn(block) for block in x.chunk(groups)])
    rows, channels = x.shape
    batch = rows // groups
    wide = x.view(groups, batch, channels).transpose(0, 1).reshape(batch, groups * channels)
    running: list[tuple[torch.Tensor, torch.Tensor]] = []  # (running statistic, its copy per block)
    if bn.track_running_stats and bn.running_mean is not None and bn.running_var is not None:
        running = [(bn.running_mean, bn.running_mean.repeat(groups)), (bn.running_var, bn.running_var.repeat(groups))]
    mean, var = (running[0][1], running[1][1]) if running else (None, None)
    weight = bn.weight.repeat(groups) if bn.weight is not None else None
    bias = bn.bias.repeat(groups) if bn.bias is not None else None
    momentum = bn.momentum if bn.momentum is not None else 0.1
    out = F.batch_norm(wide, mean, var, weight, bias, True, momentum, bn.eps)
    if running:
        with torch.no_grad():  # copy_g = (1-m) r0 + m s_g  ->  sequential: (1-m)^G r0 + sum (1-m)^(G-1-g) m s_g
            decay = (1.0 - momentum) ** torch.arange(groups - 1, -1, -1, dtype=x.dtype, device=x.device)[:, None]
            for stat, copies in running:
                step = copies.view(groups, channels) - (1.0 - momentum) * stat
                stat.mul_((1.0 - momentum) ** groups).add_((decay * step).sum(0))
            assert bn.num_batches_tracked is not None  # registered with the running statistics
            bn.num_batches_tracked.add_(groups)
    return out.view(batch, groups, channels).transpose(0, 1).reshape(rows, channels)


def grouped_forward(layers: nn.Sequential, x: torch.Tensor, groups: int) -> torch.Tensor:
    """``layers`` over ``x [G*B, ...]`` as if called on each of the ``groups`` blocks of B rows
    in turn: linear layers and activations run once over all rows, BatchNorm1d per block."""
    for layer in layers:
        x = _grouped_batch_norm(layer, x, groups) if isinstance(layer, nn.modules.batchnorm._BatchNorm) else layer(x)
    return x


class SimSiamProjector(nn.Module):
    """EfficientZero projection (3 layers, BatchNorm) and prediction head (2 layers).

    The online branch is ``prediction_head(projection(x))`` (``with_grad=True``); the
    target branch is ``projection(x)`` only (``with_grad=False``), run by the caller
    under ``torch.no_grad()``. BatchNorm1d needs ``B > 1`` in training mode.

    Args:
        input_dim: flattened latent size.
        hidden_dim: projection hidden width.
        projection_dim: ``P``, output width of both branches.
        predictor_hidden_dim: prediction head hidden width.
    """

    def __init__(self, *, input_dim: int, hidden_dim: int, projection_dim: int, predictor_hidden_dim: int) -> None:
        super().__init__()
        input_dim = check.positive_int("input_dim", input_dim)
        hidden_dim = check.positive_int("projection_hidden_dim", hidden_dim)
        projection_dim = check.positive_int("projection_dim", projection_dim)
        predictor_hidden_dim = check.positive_int("predictor_hidden_dim", predictor_hidden_dim)
        self.projection = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, projection_dim),
            nn.BatchNorm1d(projection_dim),
        )
        self.prediction_head = nn.Sequential(
            nn.Linear(projection_dim, predictor_hidden_dim),
            nn.BatchNorm1d(predictor_hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(predictor_hidden_dim, projection_dim),
        )

    def forward(self, latent: torch.Tensor, *, with_grad: bool, groups: int = 1) -> torch.Tensor:
        """Project ``latent [B, ...]`` (flattened internally) to ``[B, P]``.

        groups: ``latent`` holds ``groups`` blocks of equal size (e.g. the unroll steps, step
        major) that must be normalised as separate batches, exactly as ``groups`` calls would.
        """
        if groups > 1:
            projected = grouped_forward(self.projection, latent.flatten(1), groups)
            return grouped_forward(self.prediction_head, projected, groups) if with_grad else projected
        projected = self.projection(latent.flatten(1))
        if with_grad:
            return self.prediction_head(projected)
        return projected
