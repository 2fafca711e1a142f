"""Search trees as preallocated arrays over a batch (one tree per env), mctx style.

Node 0 of every tree is the root; the node created by simulation ``s`` has index ``s + 1``,
so a search of ``num_simulations`` needs ``N = num_simulations + 1`` nodes per tree. Nothing
is a Python object per node: the numba kernels in :mod:`lz_tune.mcts.puct` read and write
these arrays in place.

Value convention: ``node_value_sum / node_visits`` is the value of a node from the view of
the player to move there; the value of taking action ``a`` at ``parent`` is
``Q = reward(child) + discount_sign * gamma * V(child)``, where ``discount_sign`` is -1 for
two-player alternating games (zero-sum: the child's value is the opponent's) and +1 else.

Stochastic trees (Stochastic MuZero, ``num_chance_outcomes = C > 0``): every node has
``A + C`` child slots, ``[0, A)`` for actions and ``[A, A + C)`` for chance outcomes, and the
levels alternate: a decision node's children are chance nodes (afterstates) and a chance
node's children are decision nodes. The edge into a chance node has reward 0 and discount 1
(``Q(s, a) = V(afterstate)``); the edge into a decision node carries the env reward and the
(signed) discount, so gamma applies once per real env step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tree:
    """B search trees of N nodes over A actions. Arrays are mutated in place by the kernels."""

    children_index: np.ndarray
    """[B, N, A] int32: node index of child ``a`` of node ``n``; -1 where not expanded."""
    children_prior: np.ndarray
    """[B, N, A] float32: prior probability of each action at each expanded node."""
    node_visits: np.ndarray
    """[B, N] int32: visit count (a node counts its own expansion as one visit)."""
    node_value_sum: np.ndarray
    """[B, N] float32: sum of backed-up values (view of the player to move at the node)."""
    node_reward: np.ndarray
    """[B, N] float32: predicted reward on the edge into the node (0 at the root)."""
    node_raw_value: np.ndarray
    """[B, N] float32: the network's value estimate when the node was expanded."""
    node_parent: np.ndarray
    """[B, N] int32: parent index (-1 at the root)."""
    node_action: np.ndarray
    """[B, N] int32: action leading from the parent (-1 at the root)."""
    root_legal: np.ndarray
    """[B, A] bool: legal actions at the root (interior nodes allow every action, as MuZero)."""
    discount: np.ndarray
    """[B] float32: signed discount per tree (gamma, or -gamma for two-player games)."""
    min_max: np.ndarray
    """[B, 2] float32: running (min, max) of the Q values of the edges out of decision nodes."""
    node_is_chance: np.ndarray
    """[B, N] bool: the node is a chance node (an afterstate); all False unless stochastic."""
    num_chance_outcomes: int = 0
    """C: chance slots per node after the A action slots (0: a plain tree)."""

    @property
    def batch_size(self) -> int:
        return self.children_index.shape[0]

    @property
    def num_nodes(self) -> int:
        return self.children_index.shape[1]

    @property
    def num_actions(self) -> int:
        """A, the action slots of a node (the chance slots follow them)."""
        return self.children_index.shape[2] - self.num_chance_outcomes

    @property
    def num_slots(self) -> int:
        """A + C child slots per node."""
        return self.children_index.shape[2]

    def root_visit_counts(self) -> np.ndarray:
        """[B, A] int32: visits of each root child (0 for unexpanded children)."""
        idx = self.children_index[:, 0, : self.num_actions]
        rows = np.arange(self.batch_size)[:, None]
        visits = self.node_visits[rows, np.maximum(idx, 0)]
        return np.where(idx >= 0, visits, 0).astype(np.int32)

    def root_values(self) -> np.ndarray:
        """[B] float32: mean backed-up value of each root."""
        return (self.node_value_sum[:, 0] / np.maximum(self.node_visits[:, 0], 1)).astype(np.float32)

    def root_q_values(self) -> np.ndarray:
        """[B, A] float32: Q of each root child; NaN for unexpanded children."""
        idx = self.children_index[:, 0, : self.num_actions]
        rows = np.arange(self.batch_size)[:, None]
        safe = np.maximum(idx, 0)
        value = self.node_value_sum[rows, safe] / np.maximum(self.node_visits[rows, safe], 1)
        discount = np.where(self.node_is_chance[rows, safe], np.float32(1.0), self.discount[:, None])
        q = self.node_reward[rows, safe] + discount * value
        return np.where(idx >= 0, q, np.nan).astype(np.float32)


def allocate_tree(batch_size: int, num_nodes: int, num_actions: int, num_chance_outcomes: int = 0) -> Tree:
    """Zeroed arrays for ``batch_size`` trees of ``num_nodes`` nodes with ``num_actions`` action
    slots (+ ``num_chance_outcomes`` chance slots) per node (see :class:`Tree`)."""
    b, n, a = batch_size, num_nodes, num_actions + num_chance_outcomes
    return Tree(
        children_index=np.full((b, n, a), -1, np.int32),
        children_prior=np.zeros((b, n, a), np.float32),
        node_visits=np.zeros((b, n), np.int32),
        node_value_sum=np.zeros((b, n), np.float32),
        node_reward=np.zeros((b, n), np.float32),
        node_raw_value=np.zeros((b, n), np.float32),
        node_parent=np.full((b, n), -1, np.int32),
        node_action=np.full((b, n), -1, np.int32),
        root_legal=np.zeros((b, a), np.bool_),
        discount=np.zeros((b,), np.float32),
        min_max=np.zeros((b, 2), np.float32),
        node_is_chance=np.zeros((b, n), np.bool_),
        num_chance_outcomes=int(num_chance_outcomes),
    )
