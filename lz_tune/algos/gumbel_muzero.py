"""Gumbel MuZero (Danihelka et al. 2022, "Policy improvement by planning with Gumbel").

MuZero composed with two other parts (:mod:`lz_tune.algos.parts`), no subclass:

- search (:func:`~lz_tune.algos.parts.gumbel_rule`): :class:`lz_tune.mcts.Gumbel`: Gumbel top-k
  of the root actions with sequential halving over the simulation budget, deterministic
  interior selection by the improved policy, completed Q with the mixed value (``gumbel.*``
  keys). The Gumbel noise is drawn fresh for every root and every search from the run's RNG
  (the original draws one fixed vector for every root), the "logits" are log-probabilities of
  the prior (the original uses the probabilities), and the considered actions are capped at
  each root's legal ones;
- acting: the search's own choice, argmax over the considered actions of g + logits +
  sigma(completed Q) (the Gumbel-max trick samples; ``collector.temperature`` is unused).
  Evaluation searches without noise, so it acts greedily;
- policy target and loss (:class:`~lz_tune.algos.parts.ImprovedPolicyKL`): the improved policy
  softmax(logits + sigma(completed Q)) over the legal actions, with KL(improved || policy)
  summed over the actions (the original averages over the actions, i.e. divides by A).
"""

from __future__ import annotations

from typing import Optional

import torch

from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size
from lz_tune.algos.parts import ImprovedPolicyKL, gumbel_rule
from lz_tune.buffer import StepColumn
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["make_policy", "make_learner", "step_columns", "policy_target_size"]


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """The improved policy is the policy target itself: no extra column."""
    return ()


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> MuZeroPolicy:
    """The MuZero network with the Gumbel search."""
    return MuZeroPolicy(cfg, spec, device=device, network=network, search_rule=gumbel_rule)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    """MuZero's loss with KL(improved policy || predicted policy) as the policy term."""
    return MuZeroLearner(cfg, spec, policy_factory=make_policy, policy_loss=ImprovedPolicyKL())
