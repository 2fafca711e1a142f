"""sampled_unizero: UniZero's world model, caches and targets (:mod:`lz_tune.algos.unizero`) with
Sampled MuZero's search and policy loss (:mod:`lz_tune.algos.sampled_muzero`): a Gaussian
(tanh-squashed) policy head over Box actions, or K distinct discrete actions, K children per
node, the policy target over the K stored root samples.

Continuous actions enter the transformer through a linear action embedding. The search's node
state is the UniZero window plus the node's K sampled actions (the sampled search keeps them
beside any model state); reanalysis from the stored context replaces the K root actions and
the visits over them together.
"""

from __future__ import annotations

from typing import Optional

import torch

from lz_tune.algos.sampled_muzero import SampledActing, SampledPolicyLoss, policy_target_size, step_columns  # noqa: F401  (the K samples)
from lz_tune.algos.unizero import UniZeroLearner, UniZeroPolicy
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["SampledUniZeroLearner", "make_policy", "make_learner", "step_columns", "policy_target_size"]


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> UniZeroPolicy:
    """UniZero world model + per-env caches with the sampled search (reanalysis from a stored
    context searches from that context's window)."""
    return UniZeroPolicy(cfg, spec, device=device, network=network, acting=SampledActing(cfg, spec))


class SampledUniZeroLearner(UniZeroLearner):
    """UniZero's teacher-forced loss with the policy term over the K sampled root actions."""

    default_label_smoothing = 0.0  # LightZero's sampled UniZero does not smooth its value / reward targets

    def __init__(self, cfg: Config, spec: EnvSpecInfo) -> None:
        if cfg.unizero.use_adaptive_entropy_weight:
            raise ConfigError(
                "unizero.use_adaptive_entropy_weight: sampled_unizero has no adaptive entropy weight (the "
                "original's sampled UniZero has none, and its target ln(A) * ratio is an entropy over A "
                "discrete actions); set it to false"
            )
        super().__init__(cfg, spec, policy_factory=make_policy, policy_loss=SampledPolicyLoss(cfg, spec))


def make_learner(cfg: Config, spec: EnvSpecInfo) -> SampledUniZeroLearner:
    return SampledUniZeroLearner(cfg, spec)
