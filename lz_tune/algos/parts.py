"""The parts a MuZero-family type is composed of (the hooks of :mod:`lz_tune.algos.base`), as
:mod:`lz_tune.mcts.strategies` composes search rules:

- search rules: :func:`puct_rule` (MuZero, EfficientZero, the sampled types), :func:`gumbel_rule`;
- acting: :class:`DiscreteActing` (visit counts over the A actions; the Gumbel search's own
  choice); the sampled types' :class:`lz_tune.algos.sampled_muzero.SampledActing`;
- target builders: :func:`n_step_targets` (MuZero's n-step values bootstrapped by the target
  network, plus reanalysed policy rows);
- policy losses: :class:`VisitPolicyLoss` (cross-entropy with the visit distribution),
  :class:`ImprovedPolicyKL` (Gumbel MuZero);
- :func:`map_policy_target`, for unrolls over policy targets that are tuples;
- plumbing every search model shares: :func:`check_action_space`, :func:`simulations_per_search`,
  :func:`obs_to_tensor`, :func:`float32_numpy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from lz_tune.algos.base import Acting, ActResult, Learner, Reanalysis, SearchModel, Temperature
from lz_tune.algos.common import entropy, soft_ce
from lz_tune.algos.targets import make_train_batch
from lz_tune.buffer import GameBuffer, SampledIndex, TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.mcts import PUCT, Gumbel, RootInput, SearchOutput, run_search, select_action

__all__ = [
    "check_action_space",
    "simulations_per_search",
    "obs_to_tensor",
    "float32_numpy",
    "puct_rule",
    "gumbel_rule",
    "search_tree",
    "DiscreteActing",
    "n_step_targets",
    "VisitPolicyLoss",
    "ImprovedPolicyKL",
    "map_policy_target",
    "policy_target_step",
]


def check_action_space(cfg: Config, spec: EnvSpecInfo, acting: Acting) -> None:
    """Raise ConfigError naming policy_type when the env's actions are continuous (Box) and
    ``acting`` plans over discrete actions only."""
    if spec.is_continuous and not acting.continuous_actions:
        raise ConfigError(
            f"policy_type: {cfg.policy_type!r} plans over discrete actions, but env "
            f"{cfg.env.env_id!r} has a continuous (Box) action space; use sampled_muzero, "
            f"sampled_efficientzero or sampled_unizero"
        )


def simulations_per_search(cfg: Config, *, collect: bool) -> int:
    """mcts.num_simulations, or mcts.eval_num_simulations when set and not collecting."""
    m = cfg.mcts
    return m.num_simulations if collect else (m.eval_num_simulations or m.num_simulations)


def obs_to_tensor(obs: np.ndarray, device: torch.device) -> torch.Tensor:
    """Observations [K, *obs_shape] as a tensor on ``device``."""
    return torch.from_numpy(np.ascontiguousarray(obs)).to(device)


def float32_numpy(t: torch.Tensor, *, zero_copy: bool) -> np.ndarray:
    """float32 numpy array of ``t``: a view when ``zero_copy`` (a float32 CPU tensor: this runs
    once per simulation), else a converted copy."""
    return t.numpy() if zero_copy else t.float().cpu().numpy()


def puct_rule(cfg: Config, *, noise: bool) -> PUCT:
    """pUCT (``mcts.*``), with root Dirichlet noise when ``noise`` (collection)."""
    m = cfg.mcts
    return PUCT(
        pb_c_base=m.pb_c_base,
        pb_c_init=m.pb_c_init,
        root_dirichlet_alpha=m.root_dirichlet_alpha,
        root_noise_weight=m.root_noise_weight if noise else 0.0,
        value_delta_max=m.value_delta_max,
    )


def gumbel_rule(cfg: Config, *, noise: bool) -> Gumbel:
    """Gumbel top-k with sequential halving (``gumbel.*``); no Gumbel noise unless ``noise``."""
    g = cfg.gumbel
    return Gumbel(
        max_num_considered_actions=g.max_num_considered_actions,
        gumbel_scale=g.gumbel_scale if noise else 0.0,
        c_visit=g.c_visit,
        c_scale=g.c_scale,
    )


def search_tree(
    policy: SearchModel,
    obs: np.ndarray,
    action_mask: np.ndarray,
    to_play: np.ndarray,
    *,
    num_simulations: int,
    noise: bool,
    rng: np.random.Generator,
    root_latent: Any = None,
) -> tuple[SearchOutput, np.ndarray]:
    """Batched search from stacked observations [K, *obs_shape] (or from ``root_latent`` when
    given) with the policy's search model and rule; returns (SearchOutput, pred_value [K])."""
    with torch.inference_mode():
        roots = (
            policy.search_backend(obs) if root_latent is None else policy.search_backend(obs, root_latent=root_latent)
        )
        root = RootInput(
            latent=roots.state,
            value=roots.value,
            policy_logits=roots.policy_logits,
            action_mask=action_mask,
            to_play=to_play,
        )
        out = run_search(
            strategy=policy.strategy(noise=noise),
            root=root,
            recurrent_fn=roots.recurrent_fn,
            num_simulations=num_simulations,
            discount=policy.cfg.mcts.discount_factor,
            rng=rng,
        )
    return out, roots.value


@dataclass(frozen=True)
class DiscreteActing:
    """A search over the A actions: the action is the search's own choice (Gumbel) or picked from
    the root visit counts (``temperature`` when collecting, the most visited in evaluation); the
    policy target is the search's (visit distribution, improved policy)."""

    continuous_actions: bool = False

    def act(
        self,
        policy: SearchModel,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        root: Any = None,
    ) -> ActResult:
        collect = mode == "collect"
        out, pred_value = search_tree(
            policy,
            batch.observation,
            batch.action_mask,
            batch.to_play,
            num_simulations=policy.num_simulations(collect=collect),
            noise=collect,
            rng=rng,
            root_latent=root,
        )
        action = (
            out.action
            if out.action is not None
            else select_action(out.visit_counts, temperature=temperature, rng=rng, deterministic=not collect)
        )
        return ActResult(
            action=action, root_value=out.root_value, pred_value=pred_value, policy_target=out.policy_target
        )

    def reanalyze(
        self,
        policy: SearchModel,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        rng: np.random.Generator,
        root: Any = None,
    ) -> Reanalysis:
        out, _ = search_tree(
            policy,
            obs,
            action_mask,
            to_play,
            num_simulations=policy.cfg.mcts.num_simulations,
            noise=False,
            rng=rng,
            root_latent=root,
        )
        return Reanalysis(policy_target=out.policy_target, root_value=out.root_value)


def n_step_targets(
    learner: Learner, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator
) -> TrainBatch:
    """Window + n-step values bootstrapped by the learner's target network (+ the first
    ``int(B * buffer.reanalyze_ratio)`` rows' policy targets from a fresh search of it)."""
    b, target = learner.cfg.buffer, learner.target_policy

    def reanalyze_fn(obs, mask, to_play):
        return target.reanalyze(obs, mask, to_play, rng)

    return make_train_batch(
        buffer,
        index,
        value_fn=target.value_targets,
        reanalyze_fn=reanalyze_fn if b.reanalyze_ratio > 0 else None,
        reanalyze_ratio=b.reanalyze_ratio,
        use_root_value=b.use_root_value,
    )


@dataclass(frozen=True)
class VisitPolicyLoss:
    """Cross-entropy of the policy logits [N, A] against the stored target probabilities [N, A]."""

    def targets(self, batch: TrainBatch, device: torch.device) -> torch.Tensor:
        """[B, U+1, A] the stored policy targets."""
        return torch.from_numpy(batch.target_policy).to(device)

    def loss(self, policy_out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return soft_ce(policy_out, target)

    def entropy(self, policy_out: torch.Tensor) -> torch.Tensor:
        return entropy(policy_out)


@dataclass(frozen=True)
class ImprovedPolicyKL(VisitPolicyLoss):
    """KL(target || softmax(logits)) summed over the actions (Gumbel MuZero's improved policy;
    0 for all-zero targets past an episode end)."""

    def loss(self, policy_out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return soft_ce(policy_out, target) + torch.xlogy(target, target).sum(-1)


def map_policy_target(fn: Callable[[torch.Tensor], torch.Tensor], target):
    """``fn`` applied to a policy target: a tensor or each tensor of a tuple."""
    return tuple(fn(t) for t in target) if isinstance(target, tuple) else fn(target)


def policy_target_step(target, k: int):
    """Unroll step ``k`` of a policy target ``[B, U+1, ...]``: ``[B, ...]`` (each tensor of a tuple)."""
    return map_policy_target(lambda t: t[:, k], target)
