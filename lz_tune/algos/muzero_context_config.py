"""The ``context`` config section: the history-conditioned inference (``cfg.context``, overrides
``context.<key>=...``). Owned by the policy type ``muzero_context`` (also read by
``muzero_rnn_full_obs``): its entry in :mod:`lz_tune.policy_registry` names this class, and every
:class:`lz_tune.config.Config` holds it. A module apart from :mod:`lz_tune.algos.muzero_context` so
that a config is checked without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from lz_tune.config import Section

__all__ = ["ContextConfig"]


@dataclass(frozen=True)
class ContextConfig(Section):
    """History-conditioned inference (``policy_type=muzero_context`` and ``muzero_rnn_full_obs``):
    per-env state carried across real env steps. Ignored by other types."""

    section_name = "context"
    context_length_init: int = 4
    """Restart each env's carried state from its real observation every this many env steps
    (counted per env from its episode start). muzero_context: in between, the root latent is
    ``dynamics(previous root latent, real action)``; muzero_rnn_full_obs: the GRU history is
    zeroed. 1: every step (no history)."""
    rnn_hidden_size: int = 256
    """muzero_rnn_full_obs: width H of the GRU history."""
    train_search_chain: bool = True
    """muzero_rnn_full_obs: also train prediction, reward and consistency along the search's own
    chain of states (dynamics latents, history over them), besides the true-observation unroll;
    without it the search evaluates states its heads never saw in training."""

    def validate(self) -> None:
        self.require_positive("context_length_init", "rnn_hidden_size")
