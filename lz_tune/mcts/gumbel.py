"""Gumbel MuZero search kernels (Danihelka et al. 2022), compiled with numba, following mctx 0.0.71.

Kernels work in place on a :class:`~lz_tune.mcts.tree.Tree`, each over the whole batch:

- :func:`init_roots`: root priors (softmax over the legal logits, no Dirichlet noise), root
  value and visit count 1.
- :func:`select_leaves`: root rule at depth 0, interior rule below, down to an unexpanded edge.
- :func:`finish`: improved policy and chosen action per root.
- expansion + backup is the shared :func:`lz_tune.mcts.backup.expand_and_backup`.

At a node with child visits ``N [A]``, prior probabilities ``P [A]`` and raw value ``v``::

    logit(a) = log(max(P(a), 1e-30))               # = logits - logsumexp: same softmax/argmax
    Q(a)     = r(child) + discount * V(child)      # only where N(a) > 0
    v_mix    = (v + sumN * sum_{N>0} P Q / sum_{N>0} P) / (1 + sumN)     # P floored at tiny
    Q~(a)    = Q(a) if N(a) > 0 else v_mix
    Q~       = (Q~ - min Q~) / max(max Q~ - min Q~, 1e-8)                # over all A actions
    sigma(a) = (c_visit + max N) * c_scale * Q~(a)                       # 0 while sumN == 0

Root (sequential halving): ``k* = min(m, #legal)``, ``cv = table[k*, sumN]``; pick
``argmax g(a) + logit(a) + sigma(a)`` over the legal actions with ``N(a) == cv``, where
``g = gumbel_scale * Gumbel(0, 1)`` is drawn once per search and root. Interior:
``pi' = softmax(logit + sigma)``, pick ``argmax pi'(a) - N(a) / (1 + sumN)`` (first index wins).
Finish: improved policy ``softmax(logit + sigma)`` over the legal actions (no ``g``); action =
the root score with ``cv = max N``.

Root rescaling choice: like mctx, the min-max runs over all A actions at the root too, so an
illegal root action (never visited) enters it with ``v_mix``. This differs from rescaling over
the legal actions only when every legal action has been visited and ``v_mix`` lies outside
their Q range. The root logits are the log of the legal softmax (constant shift from mctx's
``logits - max``), finite everywhere, so mctx's ``max(-1e9, .)`` clamp never binds.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lz_tune.mcts.backup import softmax_into

FLOAT32_TINY = 1.1754943508222875e-38
"""float32 tiny: mctx's floor of a prior in v_mix."""
_TINY = FLOAT32_TINY
_LOG_FLOOR = 1e-30


def considered_visits(max_considered: int, num_simulations: int) -> list:
    """mctx ``get_sequence_of_considered_visits(m, n)``: the visit count a root action must
    have to be considered at each simulation under sequential halving."""
    if max_considered <= 1:
        return list(range(num_simulations))
    log2max = int(math.ceil(math.log2(max_considered)))
    sequence: list = []
    visits = [0] * max_considered
    k = max_considered
    while len(sequence) < num_simulations:
        extra = max(1, num_simulations // (log2max * k))
        for _ in range(extra):
            sequence.extend(visits[:k])
            for i in range(k):
                visits[i] += 1
        k = max(2, k // 2)
    return sequence[:num_simulations]


def considered_visit_table(max_considered: int, num_simulations: int) -> np.ndarray:
    """[m + 1, n] int32: row j = :func:`considered_visits` (j, n) (rows 0 and 1 are 0..n-1)."""
    return np.array([considered_visits(j, num_simulations) for j in range(max_considered + 1)], np.int32).reshape(
        max_considered + 1, num_simulations
    )


@numba.njit(cache=True, nogil=True)
def init_roots(children_prior, node_visits, node_value_sum, node_raw_value, root_legal, policy_logits, values):
    """Root priors = softmax over the legal logits [B, A]; root visits 1, value = raw = values [B]."""
    for b in range(policy_logits.shape[0]):
        softmax_into(policy_logits[b], root_legal[b], children_prior[b, 0])
        node_visits[b, 0] = 1
        node_value_sum[b, 0] = values[b]
        node_raw_value[b, 0] = values[b]


@numba.njit(cache=True, nogil=True)
def completed_q(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    node_raw_value,
    discount,
    b,
    node,
    visits,
    logits,
    cq,
):
    """Fill ``visits [A]`` (N(a)), ``logits [A]`` and ``cq [A]`` (completed Q) of ``node`` in
    tree ``b``; return v_mix."""
    A = children_index.shape[2]
    disc = discount[b]
    sum_n = 0
    sum_p = 0.0
    sum_pq = 0.0
    for a in range(A):
        p = children_prior[b, node, a]
        logits[a] = math.log(max(p, _LOG_FLOOR))
        c = children_index[b, node, a]
        if c >= 0:
            n = node_visits[b, c]
            q = node_reward[b, c] + disc * node_value_sum[b, c] / n
            visits[a] = n
            cq[a] = q
            sum_n += n
            pf = max(p, _TINY)
            sum_p += pf
            sum_pq += pf * q
        else:
            visits[a] = 0
    v_mix = node_raw_value[b, node]
    if sum_n > 0:
        v_mix = (v_mix + sum_n * sum_pq / sum_p) / (1.0 + sum_n)
    for a in range(A):
        if visits[a] == 0:
            cq[a] = v_mix
    return v_mix


@numba.njit(cache=True, nogil=True)
def sigma_into(visits, cq, c_visit, c_scale, sigma):
    """Min-max rescale ``cq [A]`` in place over all actions, then ``sigma [A]`` =
    (c_visit + max N) * c_scale * rescaled."""
    lo = np.inf
    hi = -np.inf
    max_n = 0
    for a in range(cq.shape[0]):
        lo = min(lo, cq[a])
        hi = max(hi, cq[a])
        max_n = max(max_n, visits[a])
    scale = (c_visit + max_n) * c_scale
    spread = max(hi - lo, 1e-8)
    for a in range(cq.shape[0]):
        cq[a] = (cq[a] - lo) / spread
        sigma[a] = scale * cq[a]


@numba.njit(cache=True, nogil=True)
def interior_action(visits, logits, sigma, probs):
    """Interior rule: ``probs [A]`` = pi' = softmax(logits + sigma); return
    argmax pi'(a) - N(a) / (1 + sumN), first index on ties."""
    A = logits.shape[0]
    m = -np.inf
    sum_n = 0
    for a in range(A):
        m = max(m, logits[a] + sigma[a])
        sum_n += visits[a]
    total = 0.0
    for a in range(A):
        probs[a] = math.exp(logits[a] + sigma[a] - m)
        total += probs[a]
    best = -np.inf
    best_a = 0
    for a in range(A):
        probs[a] /= total
        score = probs[a] - visits[a] / (1.0 + sum_n)
        if score > best:
            best = score
            best_a = a
    return best_a


@numba.njit(cache=True, nogil=True)
def root_action(visits, logits, sigma, gumbel, legal, considered):
    """argmax g + logit + sigma over the legal actions with N(a) == considered (first index on
    ties; the first legal action if none qualifies)."""
    best = -np.inf
    best_a = -1
    first_legal = -1
    for a in range(logits.shape[0]):
        if not legal[a]:
            continue
        if first_legal < 0:
            first_legal = a
        if visits[a] != considered:
            continue
        score = gumbel[a] + logits[a] + sigma[a]
        if score > best:
            best = score
            best_a = a
    return best_a if best_a >= 0 else first_legal


@numba.njit(cache=True, nogil=True)
def _scratch(A):
    """Per-node work arrays [A]: visits, logits, completed Q, sigma, probabilities."""
    return (
        np.empty(A, np.int64),
        np.empty(A, np.float64),
        np.empty(A, np.float64),
        np.empty(A, np.float64),
        np.empty(A, np.float64),
    )


@numba.njit(cache=True, nogil=True)
def select_leaves(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    node_raw_value,
    root_legal,
    discount,
    gumbel,
    table,
    max_considered,
    c_visit,
    c_scale,
    out_parent,
    out_action,
):
    """Descend every tree to an unexpanded edge.

    gumbel: [B, A] float32 this search's root noise; table: [m + 1, n] int32
    (:func:`considered_visit_table`). out_parent: [B] int32 node to expand from; out_action: [B] int64.
    """
    B, N, A = children_index.shape
    visits, logits, cq, sigma, probs = _scratch(A)
    for b in range(B):
        num_legal = 0
        for a in range(A):
            if root_legal[b, a]:
                num_legal += 1
        k = min(max_considered, num_legal)
        node = 0
        while True:
            completed_q(
                children_index,
                children_prior,
                node_visits,
                node_value_sum,
                node_reward,
                node_raw_value,
                discount,
                b,
                node,
                visits,
                logits,
                cq,
            )
            sigma_into(visits, cq, c_visit, c_scale, sigma)
            if node == 0:
                sum_n = 0
                for a in range(A):
                    sum_n += visits[a]
                action = root_action(visits, logits, sigma, gumbel[b], root_legal[b], table[k, sum_n])
            else:
                action = interior_action(visits, logits, sigma, probs)
            c = children_index[b, node, action]
            if c < 0:
                out_parent[b] = node
                out_action[b] = action
                break
            node = c


@numba.njit(cache=True, nogil=True)
def finish(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    node_raw_value,
    root_legal,
    discount,
    gumbel,
    c_visit,
    c_scale,
    out_policy,
    out_action,
):
    """Per root: ``out_policy [B, A]`` float32 = softmax over the legal actions of logit + sigma
    (0 elsewhere); ``out_action [B]`` int64 = the root score's argmax among the most visited."""
    B, N, A = children_index.shape
    visits, logits, cq, sigma, probs = _scratch(A)
    for b in range(B):
        completed_q(
            children_index,
            children_prior,
            node_visits,
            node_value_sum,
            node_reward,
            node_raw_value,
            discount,
            b,
            0,
            visits,
            logits,
            cq,
        )
        sigma_into(visits, cq, c_visit, c_scale, sigma)
        max_n = 0
        m = -np.inf
        for a in range(A):
            max_n = max(max_n, visits[a])
            if root_legal[b, a]:
                m = max(m, logits[a] + sigma[a])
        total = 0.0
        for a in range(A):
            if root_legal[b, a]:
                probs[a] = math.exp(logits[a] + sigma[a] - m)
                total += probs[a]
            else:
                probs[a] = 0.0
        for a in range(A):
            out_policy[b, a] = probs[a] / total
        out_action[b] = root_action(visits, logits, sigma, gumbel[b], root_legal[b], max_n)
