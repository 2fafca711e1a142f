"""Prioritized-replay math (Schaul et al. 2016): sampling weights, sampling, IS weights.

P(i) = w_i / sum_j w_j with w_i = p_i^alpha; IS weights (N P(i))^-beta / max over the batch.

Sampling without replacement is *successive* sampling (draw from P, remove, renormalise,
repeat). `sample_proportional` gets it exactly and cheaply: it draws i.i.d. from P through the
CDF and keeps first occurrences in draw order, which has precisely the law of successive
sampling; if a few items hold most of the mass and duplicates keep coming, the rest is drawn by
Gumbel-top-k over the remaining items (also exact, O(N)).
"""

from __future__ import annotations

import numpy as np

__all__ = ["sampling_weights", "sample_proportional", "gumbel_top_k", "importance_weights"]


def sampling_weights(priorities: np.ndarray, *, alpha: float) -> np.ndarray:
    """w = p^alpha for `priorities [N]` (> 0, finite): `[N] float64` (alpha = 0: all ones)."""
    priorities = np.asarray(priorities, dtype=np.float64)
    if alpha == 0.0:
        return np.ones_like(priorities)
    return priorities**alpha


def gumbel_top_k(
    log_weights: np.ndarray, k: int, rng: np.random.Generator, *, exclude: np.ndarray | None = None
) -> np.ndarray:
    """k distinct indices drawn by successive sampling with probability ∝ exp(log_weights).

    Gumbel-top-k (Kool et al. 2019): the k largest of log_weights + Gumbel noise, in
    descending key order (= draw order, so every prefix is itself such a sample). O(N).

    Args:
      log_weights: `[N]` unnormalised log weights (-inf = never).
      k: number of draws, at most the number of items with finite weight.
      exclude: `[E] int` indices removed beforehand.
    Returns:
      `[k] int64`.
    """
    keys = np.asarray(log_weights, dtype=np.float64) + rng.gumbel(size=log_weights.shape[0])
    if exclude is not None and exclude.size:
        keys[exclude] = -np.inf
    available = int(np.isfinite(keys).sum())
    if not 0 <= k <= available:
        raise ValueError(f"cannot draw {k} distinct items from {available}")
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-keys, k - 1)[:k] if k < keys.shape[0] else np.arange(keys.shape[0])
    return top[np.argsort(-keys[top], kind="stable")].astype(np.int64)


def sample_proportional(
    weights: np.ndarray, batch_size: int, rng: np.random.Generator, *, max_rounds: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """Draws indices with P(i) = w_i / sum w: without replacement if batch_size <= N, else with.

    Args:
      weights: `[N] float64`, > 0 and finite.
      batch_size: B >= 1.
      max_rounds: rounds of i.i.d. draws (2x the missing count + 16 each) before the
        Gumbel-top-k fallback.
    Returns:
      `(indices [B] int64 in draw order, log_probs [B] float64 = log P(i) of each)`.
    """
    num_items = weights.shape[0]
    if batch_size < 1 or num_items < 1:
        raise ValueError(f"need batch_size >= 1 and a non-empty buffer, got {batch_size} and {num_items}")
    # scaled by the largest weight: a plain cumsum of weights near the float64 maximum overflows to
    # inf, and then every draw lands on the last item and every log-probability is NaN
    scale = float(weights.max())
    cdf = np.cumsum(weights / scale)
    total = cdf[-1]

    def draw(count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(count) * total, side="right"), num_items - 1)

    if batch_size > num_items:
        chosen = draw(batch_size)
    else:
        chosen = np.zeros(0, dtype=np.int64)
        for _ in range(max_rounds):
            missing = batch_size - chosen.shape[0]
            if missing == 0:
                break
            sequence = np.concatenate([chosen, draw(2 * missing + 16)])
            _, first = np.unique(sequence, return_index=True)
            chosen = sequence[np.sort(first)][:batch_size]
        missing = batch_size - chosen.shape[0]
        if missing:
            rest = gumbel_top_k(np.log(weights), missing, rng, exclude=chosen)
            chosen = np.concatenate([chosen, rest])
    chosen = chosen.astype(np.int64)
    return chosen, np.log(weights[chosen]) - (np.log(scale) + np.log(total))


def importance_weights(log_probs: np.ndarray, num_items: int, *, beta: float) -> np.ndarray:
    """IS weights of the sampled items: w = (N * P(i))^-beta / max over the batch.

    Args:
      log_probs: `[B]` log P(i) of exactly the sampled items.
      num_items: N, the number of items sampling chose from.
    Returns:
      `[B] float32` in (0, 1], 1 at the least likely sampled item.
    """
    log_w = -beta * (np.log(num_items) + np.asarray(log_probs, dtype=np.float64))
    # floored at the smallest normal float32: priorities 1e100 apart would otherwise round a weight to 0
    return np.maximum(np.exp(log_w - log_w.max()), np.finfo(np.float32).tiny).astype(np.float32)
