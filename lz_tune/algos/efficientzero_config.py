"""The ``efficientzero`` config section: EfficientZero's value-prefix LSTM (``cfg.efficientzero``,
overrides ``efficientzero.<key>=...``). Owned by the policy type ``efficientzero`` (also read by
``sampled_efficientzero``): its entry in :mod:`lz_tune.policy_registry` names this class, and every
:class:`lz_tune.config.Config` holds it. A module apart from :mod:`lz_tune.algos.efficientzero` so
that a config is checked without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from lz_tune.config import Section

__all__ = ["EfficientZeroConfig"]


@dataclass(frozen=True)
class EfficientZeroConfig(Section):
    """EfficientZero (``policy_type=efficientzero``): the value-prefix LSTM. Ignored by other types."""

    section_name = "efficientzero"
    lstm_horizon_len: int = 5
    """The value prefix (sum of rewards since the last reset) and the LSTM state are reset every
    this many model steps, counted from the root of each search and from each sampled position
    of a training batch."""
    lstm_hidden_size: int = 64
    """Hidden size of the value-prefix LSTM (the original uses 512 on Atari)."""
    value_prefix_loss_weight: float = 1.0
    """Weight of the value-prefix cross-entropy (it replaces MuZero's reward loss)."""

    def validate(self) -> None:
        self.require_positive("lstm_horizon_len", "lstm_hidden_size")
        self.require_non_negative("value_prefix_loss_weight")
