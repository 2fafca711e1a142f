"""Gumbel MuZero (Danihelka et al. 2022, "Policy improvement by planning with Gumbel").

The MuZero network and unrolled loss with three changes:

- search: :class:`lz_tune.mcts.Gumbel`: Gumbel top-k of the root actions with sequential
  halving over the simulation budget, deterministic interior selection by the improved
  policy, completed Q with the mixed value (``gumbel.*`` keys). The Gumbel noise is drawn
  fresh for every root and every search from the run's RNG (the original draws one fixed
  vector for every root), the "logits" are log-probabilities of the prior (the original
  uses the probabilities), and the considered actions are capped at each root's legal ones;
- acting: the search's own choice, argmax over the considered actions of g + logits +
  sigma(completed Q) (the Gumbel-max trick samples; ``collector.temperature`` is unused).
  Evaluation searches without noise, so it acts greedily;
- policy target and loss: the improved policy softmax(logits + sigma(completed Q)) over the
  legal actions, with KL(improved || policy) summed over the actions (the original averages
  over the actions, i.e. divides by A).
"""

from __future__ import annotations

import torch

from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size
from lz_tune.algos.common import soft_ce
from lz_tune.buffer import StepColumn
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.mcts import Gumbel

__all__ = ["GumbelMuZeroPolicy", "GumbelMuZeroLearner", "make_policy", "make_learner", "step_columns", "policy_target_size"]


class GumbelMuZeroPolicy(MuZeroPolicy):
    """MuZero network + Gumbel search."""

    def strategy(self, *, noise: bool) -> Gumbel:
        g = self.cfg.gumbel
        return Gumbel(max_num_considered_actions=g.max_num_considered_actions,
                      gumbel_scale=g.gumbel_scale if noise else 0.0, c_visit=g.c_visit, c_scale=g.c_scale)


class GumbelMuZeroLearner(MuZeroLearner):
    """MuZero's loss with KL(improved policy || predicted policy) as the policy term."""

    policy_class = GumbelMuZeroPolicy

    def policy_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """[B] KL(target || softmax(logits)), summed over the actions (0 for all-zero targets
        past an episode end)."""
        return soft_ce(logits, target) + torch.xlogy(target, target).sum(-1)


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """The improved policy is the policy target itself: no extra column."""
    return ()


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> GumbelMuZeroPolicy:
    return GumbelMuZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> GumbelMuZeroLearner:
    return GumbelMuZeroLearner(cfg, spec)
