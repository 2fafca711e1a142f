"""Categorical value/reward supports (MuZero appendix F, Pohlen et al. 2018).

MuZero predicts values and rewards as a categorical distribution over the
integer support ``-S..S`` (``2 * S + 1`` bins) of the *transformed* scalar
``h(x)``, where

    h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x

squashes large returns into a small range. Training targets are the two-hot
encoding of ``h(x)`` (:func:`scalar_to_support`); predictions are decoded with
``h^-1(E_softmax[support])`` (:func:`support_to_scalar`).

:func:`support_to_scalar_np` (defined in :mod:`lz_tune.models.support_np`, re-exported
here) is the numba twin of :func:`support_to_scalar` for the tree search hot path.
"""

from __future__ import annotations

import math
import numbers

import torch

from lz_tune.models import _validation as check
from lz_tune.models.support_np import support_to_scalar_np

__all__ = [
    "scalar_transform",
    "inverse_scalar_transform",
    "two_hot",
    "scalar_to_support",
    "support_to_scalar",
    "support_to_scalar_np",
]

DEFAULT_EPS = 0.001


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps must be a finite float >= 0, got {eps!r}")


def scalar_transform(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x, elementwise.

    Args:
        x: float tensor ``[...]``.
        eps: the linear term that keeps ``h`` invertible with a Lipschitz inverse.

    Returns:
        ``[...]`` tensor of the same dtype.
    """
    _check_eps(eps)
    # sign(x) (sqrt(|x| + 1) - 1) == x / (sqrt(|x| + 1) + 1), without the cancellation
    # that loses all float32 precision for |x| < ~1e-5.
    return x / (torch.sqrt(torch.abs(x) + 1.0) + 1.0) + eps * x


def inverse_scalar_transform(y: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Exact closed-form inverse of :func:`scalar_transform`, elementwise.

    The textbook form ``sign(y) * (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)``
    cancels catastrophically in float32 for small ``eps * |y|`` and small ``|y|``.
    It is algebraically rewritten as ``sign(y) * d * (d + 2)`` with
    ``d = 2 |y| / (s + 1 + 2 eps)`` and ``s = sqrt(1 + 4 eps (|y| + 1 + eps))``
    (the sign is folded into ``d``), which has no cancellation and is also exact for
    ``eps = 0``.

    Args:
        y: float tensor ``[...]`` of transformed values.
        eps: must match the ``eps`` used by :func:`scalar_transform`.

    Returns:
        ``[...]`` tensor of the same dtype.
    """
    _check_eps(eps)
    s = torch.sqrt(1.0 + 4.0 * eps * (torch.abs(y) + (1.0 + eps)))
    d = 2.0 * y / (s + (1.0 + 2.0 * eps))
    return d * (torch.abs(d) + 2.0)


def two_hot(y: torch.Tensor, support_size: int) -> torch.Tensor:
    """Two-hot encoding of *already transformed* values over the support ``-S..S``.

    ``y`` is clipped to ``[-S, S]``; its mass is split linearly between the two
    neighbouring integer bins, so an exact integer gives a one-hot vector and
    the expectation over the support equals the clipped ``y``.

    Args:
        y: tensor ``[...]``.
        support_size: ``S``; the output has ``2 * S + 1`` bins, bin ``i`` is value ``i - S``.

    Returns:
        ``[..., 2 * S + 1]`` probabilities (``y``'s dtype if floating, else float32).
    """
    support_size = check.positive_int("support_size", support_size)
    dtype = y.dtype if y.is_floating_point() else torch.float32
    y = y.to(dtype).clamp(-support_size, support_size)
    low = torch.floor(y)
    upper_weight = (y - low).unsqueeze(-1)
    low_index = (low.long() + support_size).unsqueeze(-1)
    high_index = (low_index + 1).clamp_max(2 * support_size)
    out = torch.zeros(*y.shape, 2 * support_size + 1, dtype=dtype, device=y.device)
    out.scatter_(-1, low_index, 1.0 - upper_weight)
    # At y == S the upper index is clamped onto the lower one with weight 0.
    out.scatter_add_(-1, high_index, upper_weight)
    return out


def scalar_to_support(x: torch.Tensor, support_size: int, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Two-hot training target of ``h(x)`` over the integer support ``-S..S``.

    Applies :func:`scalar_transform` (``h``) *inside*: pass raw returns/rewards,
    not transformed ones. Equivalent to ``two_hot(scalar_transform(x, eps), S)``.

    Args:
        x: raw scalars ``[...]``.
        support_size: ``S``; ``h(x)`` outside ``[-S, S]`` is clipped.
        eps: the ``h`` epsilon.

    Returns:
        ``[..., 2 * S + 1]`` target probabilities.
    """
    return two_hot(scalar_transform(x, eps), support_size)


def support_to_scalar(logits: torch.Tensor, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Decode categorical logits into raw scalars: ``h^-1(E_softmax(logits)[support])``.

    Computed in float64 (float32 on MPS) and returned in ``logits``' dtype.

    Args:
        logits: ``[..., 2 * S + 1]`` float logits over the support ``-S..S``.
        eps: the ``h`` epsilon.

    Returns:
        ``[...]`` raw scalars.
    """
    num_bins = logits.shape[-1]
    if num_bins % 2 != 1:
        raise ValueError(f"logits.shape[-1] must be odd (2 * support_size + 1), got {num_bins}")
    half = (num_bins - 1) // 2
    # float32 softmax + a 600-term float32 dot product err by up to ~3e-5 relative; work
    # in float64 like the numba twin (MPS has no float64).
    work_dtype = torch.float32 if logits.device.type == "mps" else torch.float64
    probs = torch.softmax(logits.to(work_dtype), dim=-1)
    # E = sum_k k * (p[S + k] - p[S - k]): mirrored bins cancel before the sum, so a
    # symmetric (e.g. zero-initialised, uniform) distribution decodes to exactly 0.
    mirrored = probs[..., half + 1 :] - probs[..., :half].flip(-1)
    magnitudes = torch.arange(1, half + 1, dtype=work_dtype, device=probs.device)
    return inverse_scalar_transform(torch.matmul(mirrored, magnitudes), eps).to(logits.dtype)
