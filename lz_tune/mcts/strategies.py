"""Search strategies for :func:`lz_tune.mcts.search.run_search`: frozen dataclasses of
keyword-only hyperparameters whose methods call the strategy's numba kernels.

- :class:`PUCT`: MuZero / EfficientZero pUCT with root Dirichlet noise and tree-wide min-max
  normalisation (kernels in :mod:`lz_tune.mcts.puct`). Policy target: visit distribution;
  the caller picks the action from the visit counts (temperature).
- :class:`Gumbel`: Gumbel MuZero (Danihelka et al. 2022): Gumbel top-k + sequential halving at
  the root, deterministic interior selection, completed Q (kernels in :mod:`lz_tune.mcts.gumbel`).
  Policy target: the improved policy; the search chooses the action.
- :class:`StochasticPUCT`: Stochastic MuZero (Antonoglou et al. 2022): decision nodes use the
  pUCT rule, chance nodes ``argmax sigma / (N + 1)`` (kernels in :mod:`lz_tune.mcts.stochastic`).
  Policy target: the visit distribution over the root's actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lz_tune.mcts import gumbel, puct, stochastic
from lz_tune.mcts.search import RootInput, SearchOutput, run_search
from lz_tune.mcts.tree import Tree


def dirichlet_noise(rng: np.random.Generator, action_mask: np.ndarray, alpha: float) -> np.ndarray:
    """[B, A] float32 Dirichlet(alpha) samples over the legal actions of each row (0 elsewhere)."""
    g = rng.gamma(alpha, 1.0, size=action_mask.shape).astype(np.float32)
    g = np.where(action_mask, g, 0.0)
    total = g.sum(axis=1, keepdims=True)
    # all-zero gamma draws can happen for tiny alpha: fall back to uniform over legal actions
    uniform = action_mask / np.maximum(action_mask.sum(axis=1, keepdims=True), 1)
    return np.where(total > 0, g / np.where(total > 0, total, 1.0), uniform).astype(np.float32)


def tree_output(tree: Tree, **extra) -> SearchOutput:
    """The common part of every strategy's read-out."""
    return SearchOutput(
        visit_counts=tree.root_visit_counts(),
        root_value=tree.root_values(),
        root_q=tree.root_q_values(),
        tree=tree,
        **extra,
    )


@dataclass(frozen=True, kw_only=True)
class PUCT:
    """pUCT selection (see :mod:`lz_tune.mcts.puct` for the score)."""

    pb_c_base: float = 19652.0
    pb_c_init: float = 1.25
    root_dirichlet_alpha: float = 0.3
    root_noise_weight: float = 0.0
    """Dirichlet mix at the root (0.25 for collection, 0 for evaluation)."""
    value_delta_max: float = 0.01
    q_normalization: str = "tree"
    """``tree``: min-max over every decision-node Q of the tree (MuZero paper, LightZero);
    ``node``: mctx's per-node normalisation (unvisited children count as 0)."""

    def __post_init__(self) -> None:
        if self.q_normalization not in ("tree", "node"):
            raise ValueError(f"q_normalization must be 'tree' or 'node', got {self.q_normalization!r}")

    def init_roots(self, tree: Tree, root: RootInput, rng: np.random.Generator) -> Any:
        """Root priors over the action slots (chance slots, if any, keep prior 0)."""
        batch, num_actions = tree.root_legal.shape
        noise = (
            dirichlet_noise(rng, tree.root_legal, self.root_dirichlet_alpha)
            if self.root_noise_weight > 0
            else np.zeros((batch, num_actions), np.float32)
        )
        puct.init_roots(
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_raw_value,
            tree.root_legal,
            tree.min_max,
            np.ascontiguousarray(root.policy_logits, np.float32),
            np.ascontiguousarray(root.value, np.float32),
            noise,
            float(self.root_noise_weight),
        )
        return int(rng.integers(0, 2**63)), np.empty(batch, np.int64)  # tie-break seed, scratch rows

    def select(self, tree: Tree, ctx: Any, sim: int, parents: np.ndarray, actions: np.ndarray) -> None:
        seed, flat = ctx
        puct.select_leaves(
            tree.children_index,
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_reward,
            tree.root_legal,
            tree.discount,
            tree.min_max,
            float(self.pb_c_base),
            float(self.pb_c_init),
            float(self.value_delta_max),
            self.q_normalization == "node",
            seed,
            sim,
            parents,
            actions,
            flat,
        )

    def finish(self, tree: Tree, ctx: Any) -> SearchOutput:
        return tree_output(tree)


@dataclass(frozen=True, kw_only=True)
class StochasticPUCT(PUCT):
    """Stochastic MuZero's search over trees with ``num_chance_outcomes`` chance slots per node
    (see :mod:`lz_tune.mcts.stochastic`); the pUCT hyperparameters are :class:`PUCT`'s."""

    num_chance_outcomes: int = 1
    """C, the chance outcomes (codes) of an afterstate."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_chance_outcomes < 1:
            raise ValueError(f"num_chance_outcomes must be >= 1, got {self.num_chance_outcomes}")

    def select(self, tree: Tree, ctx: Any, sim: int, parents: np.ndarray, actions: np.ndarray) -> None:
        seed, flat = ctx
        stochastic.select_leaves(
            tree.children_index,
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_reward,
            tree.node_is_chance,
            tree.root_legal,
            tree.min_max,
            int(self.num_chance_outcomes),
            float(self.pb_c_base),
            float(self.pb_c_init),
            float(self.value_delta_max),
            self.q_normalization == "node",
            seed,
            sim,
            parents,
            actions,
            flat,
        )


def puct_search(
    *,
    root: RootInput,
    recurrent_fn,
    num_simulations: int,
    discount: float,
    rng: np.random.Generator,
    pb_c_base: float = 19652.0,
    pb_c_init: float = 1.25,
    root_dirichlet_alpha: float = 0.3,
    root_noise_weight: float = 0.0,
    value_delta_max: float = 0.01,
) -> SearchOutput:
    """:func:`run_search` with :class:`PUCT` (MuZero's search)."""
    strategy = PUCT(
        pb_c_base=pb_c_base,
        pb_c_init=pb_c_init,
        root_dirichlet_alpha=root_dirichlet_alpha,
        root_noise_weight=root_noise_weight,
        value_delta_max=value_delta_max,
    )
    return run_search(
        strategy=strategy,
        root=root,
        recurrent_fn=recurrent_fn,
        num_simulations=num_simulations,
        discount=discount,
        rng=rng,
    )


@dataclass(frozen=True, kw_only=True)
class Gumbel:
    """Gumbel MuZero selection (see :mod:`lz_tune.mcts.gumbel` for the rules).

    ctx = (g [B, A] float32 root Gumbel noise of this search, table [m + 1, n] int32 considered visits).
    """

    max_num_considered_actions: int = 16
    """m: root actions kept by the Gumbel top-k before sequential halving."""
    gumbel_scale: float = 1.0
    """Scale of the root Gumbel noise (0: deterministic search, e.g. evaluation)."""
    c_visit: float = 50.0
    c_scale: float = 0.1

    def __post_init__(self) -> None:
        if self.max_num_considered_actions < 1:
            raise ValueError(f"max_num_considered_actions must be >= 1, got {self.max_num_considered_actions}")

    def init_roots(self, tree: Tree, root: RootInput, rng: np.random.Generator) -> Any:
        batch, num_actions = tree.root_legal.shape
        gumbel.init_roots(
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_raw_value,
            tree.root_legal,
            np.ascontiguousarray(root.policy_logits, np.float32),
            np.ascontiguousarray(root.value, np.float32),
        )
        noise = (self.gumbel_scale * rng.gumbel(size=(batch, num_actions))).astype(np.float32)
        return noise, gumbel.considered_visit_table(self.max_num_considered_actions, tree.num_nodes - 1)

    def select(self, tree: Tree, ctx: Any, sim: int, parents: np.ndarray, actions: np.ndarray) -> None:
        noise, table = ctx
        gumbel.select_leaves(
            tree.children_index,
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_reward,
            tree.node_raw_value,
            tree.root_legal,
            tree.discount,
            noise,
            table,
            int(self.max_num_considered_actions),
            float(self.c_visit),
            float(self.c_scale),
            parents,
            actions,
        )

    def finish(self, tree: Tree, ctx: Any) -> SearchOutput:
        noise, _ = ctx
        policy = np.empty(tree.root_legal.shape, np.float32)
        action = np.empty(tree.batch_size, np.int64)
        gumbel.finish(
            tree.children_index,
            tree.children_prior,
            tree.node_visits,
            tree.node_value_sum,
            tree.node_reward,
            tree.node_raw_value,
            tree.root_legal,
            tree.discount,
            noise,
            float(self.c_visit),
            float(self.c_scale),
            policy,
            action,
        )
        return tree_output(tree, improved_policy=policy, action=action)


def gumbel_search(
    *,
    root: RootInput,
    recurrent_fn,
    num_simulations: int,
    discount: float,
    rng: np.random.Generator,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    c_visit: float = 50.0,
    c_scale: float = 0.1,
) -> SearchOutput:
    """:func:`run_search` with :class:`Gumbel` (Gumbel MuZero's search)."""
    strategy = Gumbel(
        max_num_considered_actions=max_num_considered_actions,
        gumbel_scale=gumbel_scale,
        c_visit=c_visit,
        c_scale=c_scale,
    )
    return run_search(
        strategy=strategy,
        root=root,
        recurrent_fn=recurrent_fn,
        num_simulations=num_simulations,
        discount=discount,
        rng=rng,
    )
