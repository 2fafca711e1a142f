"""Stochastic MuZero selection (Antonoglou et al. 2022), compiled with numba.

The tree alternates decision nodes (states) and chance nodes (afterstates), with ``A + C``
child slots per node (see :class:`lz_tune.mcts.tree.Tree`):

- at a decision node: the pUCT rule of :mod:`lz_tune.mcts.puct` over the action slots
  ``[0, A)``, where ``Q(s, a) = V(afterstate)`` (reward 0, discount 1 on that edge) and the
  tree-wide min-max holds only these decision-node Q values;
- at a chance node: ``argmax_c  sigma(c) / (N(c) + 1)`` over the chance slots ``[A, A + C)``,
  the paper's rule (no Q, no noise; the first index wins ties), so visit frequencies follow the
  predicted chance distribution sigma.

Expansion + backup is the shared :func:`lz_tune.mcts.backup.expand_and_backup`, which applies
gamma once per real env step (on the chance -> decision edge).
"""

from __future__ import annotations

import numba

from lz_tune.mcts.puct import choose_child


@numba.njit(cache=True, nogil=True, inline="always")
def choose_chance(children_index, children_prior, node_visits, b, node, num_actions, num_chance):
    """Slot ``A + c`` of the chance outcome ``argmax_c prior(c) / (N(c) + 1)`` at chance node ``node``."""
    best = -1.0
    best_slot = num_actions
    for c in range(num_chance):
        slot = num_actions + c
        child = children_index[b, node, slot]
        visits = node_visits[b, child] if child >= 0 else 0
        score = children_prior[b, node, slot] / (visits + 1.0)
        if score > best:
            best = score
            best_slot = slot
    return best_slot


@numba.njit(cache=True, nogil=True)
def select_leaves(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    node_is_chance,
    root_legal,
    min_max,
    num_chance,
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
    """Descend every stochastic tree to an unexpanded slot.

    num_chance: C; the action slots are ``[0, A)`` with ``A = slots - C``.
    out_parent: [B] int32 node to expand from; out_action: [B] int64 slot (``< A``: an action,
    ``>= A``: chance outcome ``slot - A``); out_flat: [B] int64 ``parent * B + b``.
    """
    B, N, S = children_index.shape
    A = S - num_chance
    for b in range(B):
        node = 0
        parent_q = 0.0
        is_root = True
        lo = min_max[b, 0]
        hi = min_max[b, 1]
        while True:
            if node_is_chance[b, node]:
                slot = choose_chance(children_index, children_prior, node_visits, b, node, A, num_chance)
            else:
                slot, parent_q = choose_child(
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
                    1.0,
                    A,
                    pb_c_base,
                    pb_c_init,
                    value_delta_max,
                    node_norm,
                    noise_seed,
                    sim,
                )
                is_root = False
            child = children_index[b, node, slot]
            if child < 0:
                out_parent[b] = node
                out_action[b] = slot
                out_flat[b] = node * B + b
                break
            node = child
