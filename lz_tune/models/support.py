"""Categorical value/reward supports (MuZero appendix F, Pohlen et al. 2018).

MuZero predicts values and rewards as a categorical distribution over the
integer support ``-S..S`` (``2 * S + 1`` bins) of the *transformed* scalar
``h(x)``, where

    h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x

squashes large returns into a small range. Training targets are the two-hot
encoding of ``h(x)`` (:func:`scalar_to_support`); predictions are decoded with
``h^-1(E_softmax[support])`` (:func:`support_to_scalar`).

:func:`support_to_scalar_np` is a numba twin of :func:`support_to_scalar` for
the tree search hot path; it can also be called from other ``@njit`` code.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

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
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps must be a finite float >= 0, got {eps!r}")


def _check_support_size(support_size: int) -> None:
    if isinstance(support_size, bool) or not isinstance(support_size, int) or support_size < 1:
        raise ValueError(f"support_size must be a positive int, got {support_size!r}")


def scalar_transform(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x, elementwise.

    Args:
        x: float tensor ``[...]``.
        eps: the linear term that keeps ``h`` invertible with a Lipschitz inverse.

    Returns:
        ``[...]`` tensor of the same dtype.
    """
    _check_eps(eps)
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1.0) - 1.0) + eps * x


def inverse_scalar_transform(y: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Exact closed-form inverse of :func:`scalar_transform`, elementwise.

    The textbook form ``sign(y) * (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)``
    cancels catastrophically in float32 for small ``eps * |y|`` and small ``|y|``.
    It is algebraically rewritten as ``sign(y) * d * (d + 2)`` with
    ``d = 2 |y| / (s + 1 + 2 eps)`` and ``s = sqrt(1 + 4 eps (|y| + 1 + eps))``,
    which has no cancellation and is also exact for ``eps = 0``.

    Args:
        y: float tensor ``[...]`` of transformed values.
        eps: must match the ``eps`` used by :func:`scalar_transform`.

    Returns:
        ``[...]`` tensor of the same dtype.
    """
    _check_eps(eps)
    abs_y = torch.abs(y)
    s = torch.sqrt(1.0 + 4.0 * eps * (abs_y + (1.0 + eps)))
    d = 2.0 * abs_y / (s + (1.0 + 2.0 * eps))
    return torch.sign(y) * d * (d + 2.0)


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
    _check_support_size(support_size)
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
    probs = torch.softmax(logits, dim=-1)
    # E = sum_k k * (p[S + k] - p[S - k]): mirrored bins cancel before the sum, so a
    # symmetric (e.g. zero-initialised, uniform) distribution decodes to exactly 0.
    mirrored = probs[..., half + 1 :] - probs[..., :half].flip(-1)
    magnitudes = torch.arange(1, half + 1, dtype=probs.dtype, device=probs.device)
    return inverse_scalar_transform(torch.matmul(mirrored, magnitudes), eps)


@numba.njit(cache=True)
def support_to_scalar_np(logits: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Numba twin of :func:`support_to_scalar` for the tree search hot path.

    Softmax is computed stably (max subtracted) with float64 accumulation, so it
    agrees with the float32 torch version to float32 rounding (~1e-6 relative).
    Mirrored bins are paired as in the torch version: symmetric logits give exactly 0.
    Callable from Python and from other ``@njit`` functions.

    Args:
        logits: ``[B, 2 * S + 1]`` float32 (any float dtype / strides accepted).
        eps: the ``h`` epsilon.

    Returns:
        ``[B]`` float32 raw scalars.
    """
    batch, num_bins = logits.shape
    if num_bins % 2 != 1:
        raise ValueError("support_to_scalar_np: logits.shape[1] must be odd (2 * support_size + 1)")
    half = (num_bins - 1) // 2
    out = np.empty(batch, dtype=np.float32)
    for b in range(batch):
        peak = np.float64(logits[b, 0])
        for j in range(1, num_bins):
            v = np.float64(logits[b, j])
            if v > peak:
                peak = v
        norm = np.exp(np.float64(logits[b, half]) - peak)
        moment = 0.0
        for k in range(1, half + 1):
            above = np.exp(np.float64(logits[b, half + k]) - peak)
            below = np.exp(np.float64(logits[b, half - k]) - peak)
            norm += above + below
            moment += k * (above - below)
        y = moment / norm
        abs_y = abs(y)
        s = np.sqrt(1.0 + 4.0 * eps * (abs_y + 1.0 + eps))
        d = 2.0 * abs_y / (s + 1.0 + 2.0 * eps)
        x = d * (d + 2.0)
        out[b] = -x if y < 0.0 else x
    return out
