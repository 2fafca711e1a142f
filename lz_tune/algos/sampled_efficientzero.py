"""Sampled EfficientZero: the sampled search and policy loss of :mod:`lz_tune.algos.sampled_muzero`
on EfficientZero's model (value-prefix LSTM, :mod:`lz_tune.algos.efficientzero`).

The per-node search state is EfficientZero's ``(latent, lstm_h, lstm_c, prefix, depth)`` plus
the node's K sampled actions; the loss is EfficientZero's with the policy term over the K
stored root samples. The log-density of a continuous sample sums ``log(1 - tanh^2)`` over
the action dimensions (the original subtracts the log of their sum).
"""

from __future__ import annotations

from lz_tune.algos.efficientzero import EfficientZeroLearner, EfficientZeroPolicy
from lz_tune.algos.sampled_muzero import SampledLoss, SampledSearch, policy_target_size, step_columns
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["SampledEfficientZeroPolicy", "SampledEfficientZeroLearner", "make_policy", "make_learner",
           "step_columns", "policy_target_size"]


class SampledEfficientZeroPolicy(SampledSearch, EfficientZeroPolicy):
    """EfficientZero network (Gaussian policy head for Box actions) + the sampled search."""


class SampledEfficientZeroLearner(SampledLoss, EfficientZeroLearner):
    """EfficientZero's unrolled loss with the policy term over the K sampled root actions."""

    policy_class = SampledEfficientZeroPolicy


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> SampledEfficientZeroPolicy:
    return SampledEfficientZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> SampledEfficientZeroLearner:
    return SampledEfficientZeroLearner(cfg, spec)
