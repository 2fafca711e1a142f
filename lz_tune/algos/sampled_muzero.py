"""Sampled MuZero (Hubert et al. 2021, "Learning and Planning in Complex Action Spaces"):
MuZero that plans over K actions sampled from its policy, for continuous (Box) action spaces
and for large discrete ones.

Search. The tree is MuZero's pUCT tree (:class:`lz_tune.mcts.PUCT`) over K child slots per
node instead of A actions. A node's K actions are samples of its predicted policy
(:mod:`lz_tune.algos.sampling`: i.i.d. tanh-Gaussian samples, or K distinct discrete actions
by Gumbel-top-k), kept in the per-node state store beside the latent, so the search loop, the
selection kernel and the backup are the ones every type uses. The recurrent step takes the real
action of the chosen slot, runs the type's own model step (MuZero's, or EfficientZero's value
prefix in ``sampled_efficientzero``) and prepares the new node's actions. Discrete: the K
distinct actions are drawn at the node's expansion. Continuous: the root's K are drawn at once
(they are the step's ``sampled_actions``), an interior node keeps its policy output and each of
its edges draws its action when the search first expands it. Under the uniform prior of i.i.d.
samples the selection of an unexpanded slot never depends on its action, so this is the same
distribution as K draws at expansion, with one draw per expanded edge instead of K per node
(at D = 6, K = 20 the draws were the largest piece of a simulation).
Child priors are the paper's ``beta_hat / beta * pi`` (uniform 1/K for
i.i.d. samples; pi renormalised over a distinct discrete sample), and collection mixes
Dirichlet noise into the root priors, which therefore changes the root selection.

Acting. A root slot is picked from the visit counts (``collector.temperature``; the most
visited in evaluation) and its action is played: an index, or a ``[D]`` vector in [-1, 1]
that the env scales to its bounds.

Targets and loss. Every step stores its K root actions (step column ``sampled_actions``,
``[K, D]`` float32 or ``[K]`` int64) and the visit distribution over them (the policy target,
``[K]``); reanalysis replaces both together. The policy loss is the cross-entropy
``-sum_k pi_hat_k log pi(a_k)`` with the exact log-density of each sample (or the KL,
``sampled.policy_loss_type``), and ``learner.policy_entropy_weight`` weighs the entropy of
the Gaussian (or categorical) policy. Value, reward and SSL terms are MuZero's.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from lz_tune.algos.base import ActResult, Reanalysis, SearchModel, Temperature
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy
from lz_tune.algos.sampling import TanhGaussian, make_sampler
from lz_tune.buffer import StepColumn, TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.mcts import RootInput, SearchOutput, run_search, select_action

__all__ = [
    "SampledActing",
    "SampledPolicyLoss",
    "make_policy",
    "make_learner",
    "step_columns",
    "policy_target_size",
    "check_num_samples",
]


def check_num_samples(cfg: Config, spec: EnvSpecInfo) -> int:
    """K = ``sampled.num_samples``; raises ConfigError naming the key and the env when K
    distinct discrete actions cannot be drawn (K > A)."""
    k = cfg.sampled.num_samples
    if not spec.is_continuous and k > spec.action_space_size:
        raise ConfigError(
            f"sampled.num_samples: K={k} distinct actions cannot be sampled from the "
            f"{spec.action_space_size} actions of env {cfg.env.env_id!r}; use K <= {spec.action_space_size}"
        )
    return k


class SampledActing:
    """The sampled search and acting over a MuZero-family policy's search model: reuses its
    ``search_backend`` (root state + recurrent step) and ``strategy`` (pUCT), and keeps each
    node's K sampled actions beside the model state."""

    continuous_actions = True

    def __init__(self, cfg: Config, spec: EnvSpecInfo) -> None:
        self.num_samples = check_num_samples(cfg, spec)
        """K, the sampled actions per node."""
        s = cfg.sampled
        self.sampler = make_sampler(
            action_dim=spec.action_dim, num_actions=spec.action_space_size, min_std=s.min_std, max_std=s.max_std
        )

    def search(
        self,
        policy: SearchModel,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        *,
        num_simulations: int,
        noise: bool,
        rng: np.random.Generator,
        root_latent=None,
    ) -> tuple[SearchOutput, np.ndarray, np.ndarray]:
        """Batched sampled search from observations ``[B, *obs_shape]`` (or from the prepared
        roots ``root_latent`` of ``act_root``).

        Returns ``(SearchOutput over the K root slots, pred_value [B], root_actions [B, K, *action_shape])``.
        """
        k, sampler = self.num_samples, self.sampler
        with torch.inference_mode():
            inner_state, pred_value, policy_out, inner_fn = (
                policy.search_backend(obs)
                if root_latent is None
                else policy.search_backend(obs, root_latent=root_latent)
            )
            root_actions, root_logits, valid = sampler.sample(policy_out, k, rng, action_mask)
            is_tuple = isinstance(inner_state, tuple)
            parts = inner_state if is_tuple else (inner_state,)
            width = len(parts)
            batch = obs.shape[0]
            rows = np.arange(batch)
            if sampler.draws_at_edges:
                assert isinstance(sampler, TanhGaussian)  # the sampler that draws at the edges
                # a node keeps its policy output (+ a root flag), each edge draws its own action
                uniform = np.zeros((batch, k), np.float32)
                node_out = np.empty((batch, policy_out.shape[1] + 1), np.float32)
                node_out[:, :-1], node_out[:, -1] = policy_out, 1.0
                child_out_buf = np.zeros_like(node_out)

                def recurrent_fn(state, slot: np.ndarray):
                    """state = (*model state, node output [B, 2D + 1]); slot: [B] chosen child slots."""
                    inner, parent_out = state[:width], state[width]
                    action = sampler.edge_actions(parent_out, slot, root_actions, rng)
                    next_inner, reward, value, child_out = inner_fn(inner if is_tuple else inner[0], action)
                    child_out_buf[:, :-1] = child_out
                    next_parts = next_inner if is_tuple else (next_inner,)
                    return (*next_parts, child_out_buf), reward, value, uniform

                node_state = node_out
            else:

                def recurrent_fn(state, slot: np.ndarray):
                    """state = (*model state, sampled actions [B, K, ...]); slot: [B] chosen child slots."""
                    inner, sampled = state[:width], state[width]
                    action = np.ascontiguousarray(sampled[rows, slot])
                    next_inner, reward, value, child_out = inner_fn(inner if is_tuple else inner[0], action)
                    child_actions, child_logits, _ = sampler.sample(child_out, k, rng)
                    next_parts = next_inner if is_tuple else (next_inner,)
                    return (*next_parts, child_actions), reward, value, child_logits

                node_state = root_actions

            root = RootInput(
                latent=(*parts, node_state),
                value=pred_value,
                policy_logits=root_logits,
                action_mask=valid,
                to_play=to_play,
            )
            out = run_search(
                strategy=policy.strategy(noise=noise),
                root=root,
                recurrent_fn=recurrent_fn,
                num_simulations=num_simulations,
                discount=policy.cfg.mcts.discount_factor,
                rng=rng,
            )
        return out, pred_value, root_actions

    def act(
        self,
        policy: SearchModel,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        root=None,
    ) -> ActResult:
        """A root slot picked from the visit counts; its action is played; the K root actions
        are the step's ``sampled_actions`` column."""
        collect = mode == "collect"
        out, pred_value, root_actions = self.search(
            policy,
            batch.observation,
            batch.action_mask,
            batch.to_play,
            num_simulations=policy.num_simulations(collect=collect),
            noise=collect,
            rng=rng,
            root_latent=root,
        )
        slot = select_action(out.visit_counts, temperature=temperature, rng=rng, deterministic=not collect)
        action = root_actions[np.arange(slot.shape[0]), slot]
        return ActResult(
            action=action,
            root_value=out.root_value,
            pred_value=pred_value,
            policy_target=out.policy_target,
            extras={"sampled_actions": root_actions},
        )

    def reanalyze(
        self,
        policy: SearchModel,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        rng: np.random.Generator,
        root=None,
    ) -> Reanalysis:
        """A fresh sampled search: new K root actions AND the visits over them, together."""
        out, _, root_actions = self.search(
            policy,
            obs,
            action_mask,
            to_play,
            num_simulations=policy.cfg.mcts.num_simulations,
            noise=False,
            rng=rng,
            root_latent=root,
        )
        return Reanalysis(
            policy_target=out.policy_target, root_value=out.root_value, extras={"sampled_actions": root_actions}
        )


class SampledPolicyLoss:
    """The policy term over the K stored root samples (any MuZero-family learner)."""

    def __init__(self, cfg: Config, spec: EnvSpecInfo) -> None:
        s = cfg.sampled
        self.sampler = make_sampler(
            action_dim=spec.action_dim, num_actions=spec.action_space_size, min_std=s.min_std, max_std=s.max_std
        )
        self.kl = s.policy_loss_type == "kl"
        """Whether the loss is the KL (``sampled.policy_loss_type=kl``) rather than the cross-entropy."""

    def targets(self, batch: TrainBatch, device: torch.device):
        """``(visit distribution [B, U+1, K], sampled actions [B, U+1, K, *action_shape])``."""
        return (
            torch.from_numpy(batch.target_policy).to(device),
            torch.from_numpy(batch.extras["sampled_actions"]).to(device),
        )

    def loss(self, policy_out: torch.Tensor, target) -> torch.Tensor:
        """[N] ``-sum_k pi_hat_k log pi(a_k)`` (+ ``sum_k pi_hat_k log pi_hat_k`` for the KL);
        0 where the target is all zero (past an episode end)."""
        probs, actions = target
        log_prob = self.sampler.log_prob(policy_out, actions)  # [N, K]
        loss = -(probs * log_prob).sum(-1)
        if self.kl:
            loss = loss + torch.xlogy(probs, probs).sum(-1)
        return loss

    def entropy(self, policy_out: torch.Tensor) -> torch.Tensor:
        """[N] entropy of the Gaussian (pre-tanh) or categorical policy."""
        return self.sampler.entropy(policy_out)


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """The K sampled root actions of every step: ``[K, D]`` float32 (continuous) or ``[K]`` int64."""
    k = check_num_samples(cfg, spec)
    if spec.is_continuous:
        return (StepColumn("sampled_actions", (k, spec.action_dim), "float32"),)
    return (StepColumn("sampled_actions", (k,), "int64"),)


def policy_target_size(cfg: Config, spec: EnvSpecInfo) -> int:
    """P = K: the visit distribution over the sampled root actions."""
    return check_num_samples(cfg, spec)


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> MuZeroPolicy:
    """The MuZero network (Gaussian policy head for Box actions) with the sampled search."""
    return MuZeroPolicy(cfg, spec, device=device, network=network, acting=SampledActing(cfg, spec))


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    """MuZero's unrolled loss with the policy term over the K sampled root actions."""
    return MuZeroLearner(cfg, spec, policy_factory=make_policy, policy_loss=SampledPolicyLoss(cfg, spec))
