"""pUCT tree search kernels (MuZero / EfficientZero), compiled with numba.

Two kernels work in place on a :class:`~lz_tune.mcts.tree.Tree`, each over the whole batch
in one call, so one simulation costs one kernel call for selection, one model call and one
kernel call for expansion + backup:

- :func:`init_roots`: root priors (softmax over legal logits, optional Dirichlet mix), root
  value and visit count 1 (the root's own evaluation, as in mctx).
- :func:`select_leaves`: from each root, follow the child of highest pUCT score until an
  unexpanded edge; returns ``(parent node, action)`` per tree.
- expansion + backup is the shared kernel :func:`lz_tune.mcts.backup.expand_and_backup`.

Score of action ``a`` at node ``n`` (LightZero / MuZero appendix):

    N_n   = visits(n)                            # 1 + sum of the children's visits
    c     = log((N_n + c2 + 1) / c2) + c1
    U     = c * prior(n, a) * sqrt(N_n) / (1 + N(a))
    Q     = r(a) + discount * V(child)           # mean_q(n) for unvisited children
    score = U + clip(normalise(Q), 0, 1)

``mean_q(n)`` is the mean Q of the visited children, averaged together with the parent's
mean_q (plain mean at the root). ``normalise`` is min-max over every Q seen in the tree with
a minimum spread of ``value_delta_max``; before two distinct values exist, Q is used raw.
With ``q_normalization="node"`` the strategy uses mctx's rule instead: per node, over the
node's value and its visited children's Q, and 0 for unvisited children.
Exact ties are broken by ``1e-7 * noise`` where the noise is a hash of (seed, simulation,
tree, action) in [0, 1): random across searches, reproducible for a given seed, and free.

One deliberate difference from LightZero: ``N_n`` counts the node's own expansion (as mctx
does), so the very first simulation at a node follows the prior instead of a random tie
between all-zero scores.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lz_tune.mcts.backup import softmax_into as _softmax_into

_NEG_INF = -np.inf


@numba.njit(cache=True, nogil=True)
def init_roots(
    children_prior,
    node_visits,
    node_value_sum,
    node_raw_value,
    root_legal,
    min_max,
    policy_logits,
    values,
    noise,
    noise_weight,
):
    """Set up the roots of a freshly allocated tree.

    policy_logits: [B, A] float32 root policy logits.
    values: [B] float32 root value estimates.
    noise: [B, A] float32 Dirichlet sample over the legal actions (ignored if noise_weight == 0).
    """
    B, A = policy_logits.shape
    for b in range(B):
        _softmax_into(policy_logits[b], root_legal[b], children_prior[b, 0])
        if noise_weight > 0.0:
            for a in range(A):
                if root_legal[b, a]:
                    children_prior[b, 0, a] = (1.0 - noise_weight) * children_prior[b, 0, a] + noise_weight * noise[
                        b, a
                    ]
        node_visits[b, 0] = 1
        node_value_sum[b, 0] = values[b]
        node_raw_value[b, 0] = values[b]
        min_max[b, 0] = np.inf
        min_max[b, 1] = -np.inf


@numba.njit(cache=True, nogil=True)
def _normalise(q, lo, hi, value_delta_max):
    delta = hi - lo
    if delta > 0.0:
        if delta < value_delta_max:
            q = (q - lo) / value_delta_max
        else:
            q = (q - lo) / delta
    if q < 0.0:
        return 0.0
    if q > 1.0:
        return 1.0
    return q


@numba.njit(cache=True, nogil=True, inline="always")
def _tie_noise(seed, sim, b, a):
    """Uniform [0, 1) from a 64-bit mix of (seed, sim, b, a) (splitmix64 finaliser)."""
    h = (
        np.uint64(seed)
        ^ (np.uint64(sim) * np.uint64(0x9E3779B97F4A7C15))
        ^ (np.uint64(b) * np.uint64(0xBF58476D1CE4E5B9))
        ^ (np.uint64(a) * np.uint64(0x94D049BB133111EB))
    )
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True, inline="always")
def choose_child(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    root_legal,
    b,
    node,
    is_root,
    parent_q,
    lo,
    hi,
    disc,
    num_actions,
    pb_c_base,
    pb_c_init,
    value_delta_max,
    node_norm,
    noise_seed,
    sim,
):
    """The pUCT choice at ``node`` of tree ``b`` over action slots ``[0, num_actions)``.

    disc: discount of the edges into the children (gamma; 1 below a stochastic decision node,
    whose children are afterstates). parent_q: mean_q of the parent (0 at the root).
    node_norm: mctx's per-node normalisation instead of the tree-wide min-max ``lo, hi``:
    ``(Q - min S) / max(max S - min S, 1e-8)`` with S = {V(node)} and the visited children's
    Q, and 0 for unvisited children (no mean_q).
    Returns (action, mean_q of this node).
    """
    total_q = 0.0
    n_visited = 0
    node_lo = node_value_sum[b, node] / node_visits[b, node]
    node_hi = node_lo
    for a in range(num_actions):
        c = children_index[b, node, a]
        if c >= 0:
            q = node_reward[b, c] + disc * node_value_sum[b, c] / node_visits[b, c]
            total_q += q
            n_visited += 1
            node_lo = min(node_lo, q)
            node_hi = max(node_hi, q)
    node_span = max(node_hi - node_lo, 1e-8)
    if is_root and n_visited > 0:
        mean_q = total_q / n_visited
    else:
        mean_q = (parent_q + total_q) / (n_visited + 1)

    n_node = node_visits[b, node]
    pb_c = (math.log((n_node + pb_c_base + 1.0) / pb_c_base) + pb_c_init) * math.sqrt(n_node)
    best = _NEG_INF
    best_a = -1
    for a in range(num_actions):
        if is_root and not root_legal[b, a]:
            continue
        c = children_index[b, node, a]
        if c >= 0:
            visits = node_visits[b, c]
            q = node_reward[b, c] + disc * node_value_sum[b, c] / visits
            q_hat = (q - node_lo) / node_span if node_norm else _normalise(q, lo, hi, value_delta_max)
        else:
            visits = 0
            q_hat = 0.0 if node_norm else _normalise(mean_q, lo, hi, value_delta_max)
        score = pb_c * children_prior[b, node, a] / (visits + 1) + q_hat
        score += 1e-7 * _tie_noise(noise_seed, sim, b, a)
        if score > best:
            best = score
            best_a = a
    return best_a, mean_q


@numba.njit(cache=True, nogil=True)
def select_leaves(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    root_legal,
    discount,
    min_max,
    pb_c_base,
    pb_c_init,
    value_delta_max,
    node_norm,
    noise_seed,
    sim,
    out_parent,
    out_action,
    out_flat,
):
    """Descend every tree to an unexpanded edge.

    node_norm: mctx's per-node Q normalisation (see :func:`choose_child`) instead of the
    tree-wide min-max.
    noise_seed, sim: seed of the tie-breaking noise and the simulation index.
    out_parent: [B] int32, the node to expand from; out_action: [B] int64, the action to take;
    out_flat: [B] int64, ``parent * B + b`` (row of the parent's latent in the latent store).
    """
    B, N, A = children_index.shape
    for b in range(B):
        node = 0
        parent_q = 0.0
        is_root = True
        lo = min_max[b, 0]
        hi = min_max[b, 1]
        disc = discount[b]
        while True:
            best_a, parent_q = choose_child(
                children_index,
                children_prior,
                node_visits,
                node_value_sum,
                node_reward,
                root_legal,
                b,
                node,
                is_root,
                parent_q,
                lo,
                hi,
                disc,
                A,
                pb_c_base,
                pb_c_init,
                value_delta_max,
                node_norm,
                noise_seed,
                sim,
            )
            c = children_index[b, node, best_a]
            if c < 0:
                out_parent[b] = node
                out_action[b] = best_a
                out_flat[b] = node * B + b
                break
            node = c
            is_root = False
