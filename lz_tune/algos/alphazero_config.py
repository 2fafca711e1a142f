"""The ``alphazero`` config section: AlphaZero's search over the game's true states
(``cfg.alphazero``, overrides ``alphazero.<key>=...``). Owned by the policy type ``alphazero``: its
entry in :mod:`lz_tune.policy_registry` names this class, and every :class:`lz_tune.config.Config`
holds it. A module apart from :mod:`lz_tune.algos.alphazero` so that a config is checked without
importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lz_tune.config import Section

__all__ = ["AlphaZeroConfig"]


@dataclass(frozen=True)
class AlphaZeroConfig(Section):
    """AlphaZero (``policy_type=alphazero``): pUCT over the game's true states.

    Ignored by other types. The search also reads ``mcts.num_simulations`` / ``eval_num_simulations``,
    ``mcts.pb_c_base`` / ``pb_c_init``, ``mcts.root_dirichlet_alpha`` / ``root_noise_weight``
    (collection) and ``mcts.discount_factor``; the network ``model.latent_dim``,
    ``model.hidden_sizes``, ``model.layer_norm`` and ``model.value_support_size``."""

    section_name = "alphazero"
    q_normalization: Literal["game", "tree"] = "game"
    """How pUCT scales Q to [0, 1]: ``game``, by the game's utility range (OpenSpiel's
    min_utility / max_utility, MuZero's known bounds for board games); ``tree``, by the min-max
    of the Q values seen in each tree (MuZero's rule for unknown bounds)."""
    root_selection: Literal["puct", "gumbel"] = "puct"
    """How the root chooses its moves: ``puct`` (AlphaZero: pUCT with Dirichlet noise, the action
    sampled from the visit counts at ``collector.temperature``); ``gumbel`` (Gumbel AlphaZero:
    Gumbel top-k with sequential halving at the root, the interior rule below it, the improved
    policy as target and the search's own action; reads ``gumbel.max_num_considered_actions``,
    ``gumbel.gumbel_scale``, ``gumbel.c_visit``, ``gumbel.c_scale``; no Dirichlet noise, no
    temperature). Gumbel's policy improvement holds with few simulations."""
    fpu_reduction: float = 0.0
    """First-play urgency: an unvisited move's scaled Q (in [0, 1]) is its node's scaled value
    minus this (0: as good as the node itself; more: the search tries fewer new moves)."""

    def validate(self) -> None:
        self.require_non_negative("fpu_reduction")
        self.require(self.fpu_reduction <= 1.0, "fpu_reduction", "must be <= 1 (Q is scaled to [0, 1])")
