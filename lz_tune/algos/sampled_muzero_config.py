"""The ``sampled`` config section: the search over sampled actions (``cfg.sampled``, overrides
``sampled.<key>=...``). Owned by the policy type ``sampled_muzero`` (also read by
``sampled_efficientzero`` and ``sampled_unizero``): its entry in :mod:`lz_tune.policy_registry`
names this class, and every :class:`lz_tune.config.Config` holds it. A module apart from
:mod:`lz_tune.algos.sampled_muzero` so that a config is checked without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lz_tune.config import Section

__all__ = ["SampledConfig"]


@dataclass(frozen=True)
class SampledConfig(Section):
    """Sampled MuZero / Sampled EfficientZero (``policy_type=sampled_muzero`` or
    ``sampled_efficientzero``): the search plans over K actions sampled from the policy at
    every expansion. Ignored by other types. The pUCT keys ``mcts.*`` (root noise included)
    apply to the K children."""

    section_name = "sampled"
    num_samples: int = 20
    """K: actions sampled at every expansion (continuous: i.i.d. from the tanh-Gaussian policy;
    discrete: K distinct actions by Gumbel-top-k, so K <= the env's action count)."""
    policy_loss_type: Literal["cross_entropy", "kl"] = "cross_entropy"
    """Policy loss against the visit distribution over the K root samples:
    ``-sum_k pi_hat_k log pi(a_k)``, or that plus ``sum_k pi_hat_k log pi_hat_k`` (KL; same
    gradient, a loss that is 0 at the optimum for discrete actions)."""
    min_std: float = 1e-3
    """Continuous: smallest standard deviation of the (pre-tanh) Gaussian policy."""
    max_std: float = 5.0
    """Continuous: largest standard deviation of the (pre-tanh) Gaussian policy."""

    def validate(self) -> None:
        self.require_positive("num_samples", "min_std", "max_std")
        self.require(self.min_std < self.max_std, "min_std", f"must be < sampled.max_std={self.max_std}")
