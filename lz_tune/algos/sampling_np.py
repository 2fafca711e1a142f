"""Numba kernels of the samplers in :mod:`lz_tune.algos.sampling`: the K actions a sampled search
draws at every expansion, in one compiled call each instead of ~10 numpy calls (~20 us at
batch 8, as much as a whole MuZero engine step).

Both take the random numbers from the caller (drawn from the run's ``np.random.Generator`` exactly
as before), so the samples do not depend on which path computes them.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lz_tune.models.fast_math import tanh_rows

__all__ = ["tanh_gaussian_into", "tanh_gaussian_edges_into", "gumbel_top_k_into"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def tanh_gaussian_into(policy_out, noise, min_std, max_std, action_eps, out, work, bits):
    """K tanh-Gaussian actions per row: ``out [B, K, D] = clip(tanh(mean + std noise), +-(1 - eps))``
    with ``mean = policy_out[:, :D]``, ``std = min(softplus(policy_out[:, D:]) + min_std, max_std)``.

    policy_out: ``[B, 2D]`` float32; noise: ``[B, K, D]`` standard normal (any float dtype, cast to
    float32 first); out: ``[B, K, D]`` float32 C-contiguous; ``work [>= 2 B K D]`` float32 and
    ``bits [>= B K D]`` int32 scratch (for the vectorised tanh).
    """
    batch, k, dim = out.shape
    lo = np.float32(-1.0 + action_eps)
    hi = np.float32(1.0 - action_eps)
    for b in range(batch):
        for d in range(dim):
            mean = np.float32(policy_out[b, d])
            raw = np.float32(policy_out[b, dim + d])
            # softplus in float32, as np.logaddexp(0, raw) on float32 input
            softplus = np.float32(max(raw, np.float32(0.0)) + math.log1p(math.exp(-abs(raw))))
            std = min(softplus + np.float32(min_std), np.float32(max_std))
            for s in range(k):
                out[b, s, d] = mean + std * np.float32(noise[b, s, d])
    tanh_rows(out.reshape(batch, k * dim), work, bits)
    flat = out.reshape(out.size)
    for j in range(flat.shape[0]):
        flat[j] = min(max(flat[j], lo), hi)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def tanh_gaussian_edges_into(node_out, slot, root_actions, noise, min_std, max_std, action_eps, out, work, bits):
    """The actions of B search edges ``(node, slot)``, each drawn when the edge is expanded: one
    tanh-Gaussian action of the node's policy per row, or the root's pre-drawn sample of the slot.

    node_out: ``[B, 2D + 1]`` float32, the node's policy output (mean, raw scale) and in column
    ``2D`` a root flag (non-zero: the node is a root); slot: ``[B]`` int64 chosen child slots;
    root_actions: ``[B, K, D]`` float32 the roots' K samples; noise: ``[B, 1, D]`` standard normal;
    out: ``[B, D]`` float32 C-contiguous; ``work [>= 2 B D]`` float32, ``bits [>= B D]`` int32.
    """
    batch, dim = out.shape
    tanh_gaussian_into(
        node_out[:, : 2 * dim], noise, min_std, max_std, action_eps, out.reshape(batch, 1, dim), work, bits
    )
    for b in range(batch):
        if node_out[b, 2 * dim] != 0.0:
            src = root_actions[b, slot[b]]
            dst = out[b]
            for d in range(dim):
                dst[d] = src[d]


@numba.njit(cache=True, nogil=True)
def gumbel_top_k_into(logits, gumbel, mask, actions, prior, valid):
    """K distinct actions per row by Gumbel-top-k: the K largest ``logits + gumbel`` over the
    legal actions, in descending order (ties: lower index first, as a stable argsort).

    logits: ``[B, A]`` float32; gumbel: ``[B, A]`` float32 Gumbel(0, 1) noise; mask: ``[B, A]`` bool
    legal actions (a ``[0, A]`` array: all legal). Writes ``actions [B, K]`` int64, ``prior
    [B, K]`` float32 (the logits at the sampled actions, -inf for invalid slots) and ``valid
    [B, K]`` bool; with fewer than K legal actions the extra slots are invalid and repeat the
    first sample.
    """
    batch, num_actions = logits.shape
    k = actions.shape[1]
    use_mask = mask.shape[0] > 0
    keys = np.empty(k, np.float32)
    for b in range(batch):
        filled = 0
        for a in range(num_actions):
            key = np.float32(logits[b, a] + gumbel[b, a])
            if use_mask and not mask[b, a]:
                key = np.float32(-np.inf)
            if filled == k and not key > keys[k - 1]:
                continue
            pos = filled if filled < k else k - 1  # insertion point after every key >= this one
            while pos > 0 and keys[pos - 1] < key:
                pos -= 1
            last = filled if filled < k else k - 1
            for j in range(last, pos, -1):
                keys[j] = keys[j - 1]
                actions[b, j] = actions[b, j - 1]
            keys[pos] = key
            actions[b, pos] = a
            if filled < k:
                filled += 1
        for j in range(k):
            valid[b, j] = keys[j] > -np.inf
            if not valid[b, j]:
                actions[b, j] = actions[b, 0]
            prior[b, j] = logits[b, actions[b, j]] if valid[b, j] else -np.inf
