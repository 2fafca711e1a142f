"""Expansion and backup, shared by every search strategy (numba).

:func:`expand_and_backup` attaches the node created by one simulation below its parent in every
tree of the batch and backs its value up to the root, mctx style: a node's visit count
includes its own expansion, ``V(s) = (raw value + sum of backed-up returns) / N(s)``, and the
return through edge ``child -> parent`` is ``G <- r(child) + discount * G``. It also keeps the
tree-wide min-max of the Q values seen (pUCT normalises with it; Gumbel ignores it).
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
def expand_and_backup(children_index, children_prior, node_visits, node_value_sum, node_reward, node_raw_value,
                      node_parent, node_action, discount, min_max, new_node, parents, actions, rewards, values,
                      policy_logits):
    """Attach node ``new_node`` below ``parents[b]`` via ``actions[b]`` in every tree and back up.

    rewards, values: [B] float32 predicted reward of the edge and value of the new node.
    policy_logits: [B, A] float32 priors of the new node (every action legal inside the tree).
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
        softmax_into(policy_logits[b], all_legal, children_prior[b, n])

        disc = discount[b]
        v = values[b]
        node = n
        while True:
            node_visits[b, node] += 1
            node_value_sum[b, node] += v
            if node == 0:
                break
            q = node_reward[b, node] + disc * node_value_sum[b, node] / node_visits[b, node]
            if q < min_max[b, 0]:
                min_max[b, 0] = q
            if q > min_max[b, 1]:
                min_max[b, 1] = q
            v = node_reward[b, node] + disc * v
            node = node_parent[b, node]
