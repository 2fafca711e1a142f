"""Expansion and backup, shared by every search strategy (numba).

:func:`expand_and_backup` attaches the node created by one simulation below its parent in every
tree of the batch and backs its value up to the root, mctx style: a node's visit count
includes its own expansion, ``V(s) = (raw value + sum of backed-up returns) / N(s)``, and the
return through edge ``child -> parent`` is ``G <- r(child) + discount * G``. It also keeps the
tree-wide min-max of the Q values seen (pUCT normalises with it; Gumbel ignores it).

In a stochastic tree (``num_chance > 0``) the new node below a decision node is a chance
node and the one below a chance node a decision node; the edge into a chance node has
discount 1 (its reward is the model's 0), and only the Q values of edges out of decision
nodes enter the min-max (the paper normalises at decision nodes).
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def softmax_into(logits, legal, out):
    """out[a] = softmax over legal actions of logits (0 where illegal). [A] arrays."""
    m = -np.inf
    for a in range(logits.shape[0]):
        if legal[a] and logits[a] > m:
            m = logits[a]
    total = 0.0
    for a in range(logits.shape[0]):
        if legal[a]:
            e = math.exp(logits[a] - m)
            out[a] = e
            total += e
        else:
            out[a] = 0.0
    for a in range(logits.shape[0]):
        out[a] /= total


@numba.njit(cache=True, nogil=True)
def expand_and_backup(
    children_index,
    children_prior,
    node_visits,
    node_value_sum,
    node_reward,
    node_raw_value,
    node_parent,
    node_action,
    discount,
    min_max,
    node_is_chance,
    num_chance,
    new_node,
    parents,
    actions,
    rewards,
    values,
    policy_logits,
):
    """Attach node ``new_node`` below ``parents[b]`` via ``actions[b]`` in every tree and back up.

    rewards, values: [B] float32 predicted reward of the edge and value of the new node.
    policy_logits: [B, A + C] float32 priors of the new node (every slot legal inside the tree;
    a stochastic model gives -inf to the slots of the other node kind).
    node_is_chance: [B, N] bool node kinds (written for the new node); num_chance: C (0: plain).
    """
    B, N, A = children_index.shape
    all_legal = np.ones(A, np.bool_)
    for b in range(B):
        p = parents[b]
        a = actions[b]
        n = new_node
        children_index[b, p, a] = n
        node_parent[b, n] = p
        node_action[b, n] = a
        node_reward[b, n] = rewards[b]
        node_raw_value[b, n] = values[b]
        node_is_chance[b, n] = num_chance > 0 and not node_is_chance[b, p]
        softmax_into(policy_logits[b], all_legal, children_prior[b, n])

        disc = discount[b]
        v = values[b]
        node = n
        while True:
            node_visits[b, node] += 1
            node_value_sum[b, node] += v
            if node == 0:
                break
            d = 1.0 if node_is_chance[b, node] else disc
            parent = node_parent[b, node]
            if not node_is_chance[b, parent]:
                q = node_reward[b, node] + d * node_value_sum[b, node] / node_visits[b, node]
                if q < min_max[b, 0]:
                    min_max[b, 0] = q
                if q > min_max[b, 1]:
                    min_max[b, 1] = q
            v = node_reward[b, node] + d * v
            node = parent
