"""Batched tree search over preallocated arrays (one tree per env, all envs at once).

- :mod:`lz_tune.mcts.search`: the simulation loop (:func:`puct_search`) and action choice.
- :mod:`lz_tune.mcts.puct`: the numba kernels (selection, expansion, backup) it calls.
- :mod:`lz_tune.mcts.tree`: the tree arrays.

Sampled, Gumbel (sequential halving) and stochastic (chance node) searches are separate
kernels over the same :class:`Tree` arrays and loop shape.
"""

from lz_tune.mcts.search import RootInput, SearchOutput, dirichlet_noise, puct_search, select_action
from lz_tune.mcts.tree import Tree, allocate_tree

__all__ = ["RootInput", "SearchOutput", "Tree", "allocate_tree", "dirichlet_noise", "puct_search", "select_action"]
