"""The ``gumbel`` config section: Gumbel MuZero's search (``cfg.gumbel``, overrides
``gumbel.<key>=...``). Owned by the policy type ``gumbel_muzero``: its entry in
:mod:`lz_tune.policy_registry` names this class, and every :class:`lz_tune.config.Config` holds it.
A module apart from :mod:`lz_tune.algos.gumbel_muzero` so that a config is checked without importing
torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from lz_tune.config import Section

__all__ = ["GumbelConfig"]


@dataclass(frozen=True)
class GumbelConfig(Section):
    """Gumbel MuZero (``policy_type=gumbel_muzero``) search. Ignored by other types. The Gumbel
    search has no Dirichlet root noise and no pUCT constants: ``mcts.root_*`` and ``mcts.pb_c_*``
    do not apply to it, nor does ``collector.temperature`` (the search chooses the action)."""

    section_name = "gumbel"
    max_num_considered_actions: int = 16
    """m: actions sampled without replacement at the root (Gumbel top-k) and halved by
    sequential halving; capped at the legal actions of each root."""
    gumbel_scale: float = 1.0
    """Scale of the root Gumbel noise during collection (evaluation uses none)."""
    c_visit: float = 50.0
    """sigma(q) = (c_visit + max visits) * c_scale * q (paper's constants)."""
    c_scale: float = 0.1
    """See c_visit."""

    def validate(self) -> None:
        self.require_positive("max_num_considered_actions", "c_visit", "c_scale")
        self.require_non_negative("gumbel_scale")
