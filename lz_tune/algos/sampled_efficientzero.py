"""Sampled EfficientZero: the sampled search and policy loss of :mod:`lz_tune.algos.sampled_muzero`
on EfficientZero's model (value-prefix LSTM, :mod:`lz_tune.algos.efficientzero`).

A composition, no subclass: EfficientZero's policy and learner with the sampled acting
(:class:`~lz_tune.algos.sampled_muzero.SampledActing`) and policy loss
(:class:`~lz_tune.algos.sampled_muzero.SampledPolicyLoss`). The per-node search state is
EfficientZero's ``(latent, lstm_h, lstm_c, prefix, depth)`` plus the node's K sampled actions; the loss is
EfficientZero's with the policy term over the K stored root samples. The log-density of a continuous sample sums
``log(1 - tanh^2)`` over the action dimensions (the original subtracts the log of their sum).
"""

from __future__ import annotations

from typing import Optional

import torch

from lz_tune.algos.efficientzero import EfficientZeroLearner, EfficientZeroPolicy
from lz_tune.algos.sampled_muzero import SampledActing, SampledPolicyLoss, policy_target_size, step_columns
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["make_policy", "make_learner", "step_columns", "policy_target_size"]


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> EfficientZeroPolicy:
    """EfficientZero network (Gaussian policy head for Box actions) with the sampled search."""
    return EfficientZeroPolicy(cfg, spec, device=device, network=network, acting=SampledActing(cfg, spec))


def make_learner(cfg: Config, spec: EnvSpecInfo) -> EfficientZeroLearner:
    """EfficientZero's unrolled loss with the policy term over the K sampled root actions."""
    return EfficientZeroLearner(cfg, spec, policy_factory=make_policy, policy_loss=SampledPolicyLoss(cfg, spec))
