"""Batched tree search over preallocated arrays (one tree per env, all envs at once).

- :mod:`lz_tune.mcts.search`: THE simulation loop (:func:`run_search`), shared by every
  strategy, the per-node state store and action choice from visit counts.
- :mod:`lz_tune.mcts.strategies`: the strategies (:class:`PUCT`, :class:`Gumbel`,
  :class:`StochasticPUCT`): root set-up,
  selection and read-out, each calling its numba kernels.
- :mod:`lz_tune.mcts.puct`, :mod:`lz_tune.mcts.gumbel`, :mod:`lz_tune.mcts.stochastic`: those kernels;
  :mod:`lz_tune.mcts.backup`: expansion + backup, shared by all.
- :mod:`lz_tune.mcts.tree`: the tree arrays.

Sampled (K children per node) and stochastic (chance nodes) searches are further strategies
over the same loop.
"""

from lz_tune.mcts.search import RootInput, SearchOutput, StateStore, run_search, select_action
from lz_tune.mcts.strategies import PUCT, Gumbel, StochasticPUCT, dirichlet_noise, gumbel_search, puct_search
from lz_tune.mcts.tree import Tree, allocate_tree

__all__ = [
    "Gumbel",
    "PUCT",
    "StochasticPUCT",
    "RootInput",
    "SearchOutput",
    "StateStore",
    "Tree",
    "allocate_tree",
    "dirichlet_noise",
    "gumbel_search",
    "puct_search",
    "run_search",
    "select_action",
]
