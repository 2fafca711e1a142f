"""Stochastic MuZero (Antonoglou et al. 2022, "Planning in Stochastic Environments with a
Learned Model"): afterstates and chance codes in the model and the tree.

Search: :class:`lz_tune.mcts.StochasticPUCT` over trees whose decision and chance nodes
alternate (A action slots + C chance slots per node). Every simulation is ONE call of
:meth:`StochasticMuZeroPolicy.recurrent_inference` for all trees: the trees that expand a decision
node get ``phi`` + ``psi`` (afterstate, sigma, Q), the ones that expand a chance node get
``g`` + ``f`` (next state, reward, policy, value), each sub-batch run once.

Loss of one batch, per sample, for unroll steps k = 1..U on top of MuZero's (policy, value,
reward, optional SSL, entropy bonus), with ``as_{k-1} = phi(s_{k-1}, a_{k-1})``:

    afterstate value : CE(Q_{k-1}, two_hot(h(z_{k-1})))        stochastic.afterstate_value_loss_weight
    chance           : CE(sigma_{k-1}, sg(c_{k-1})) * mask_k    stochastic.chance_loss_weight
    commitment       : ||softmax(c^e) - sg(c)||^2 * mask_k      stochastic.commitment_loss_weight (learned codes)
    code usage       : log C - H(mean_b softmax(c^e)_k)         stochastic.code_usage_loss_weight (learned codes;
                       the batch's masked mean distribution per step, the same value for every sample)

where the code ``c_{k-1}`` is the chance encoder's straight-through one-hot of
``e(o_{t+k-1}, o_{t+k})`` (or, with ``stochastic.use_true_chance_label``, the env's true
outcome), and ``s_k = g(as_{k-1}, c_{k-1})``. The encoder gets gradient through the code
(straight-through into g, and so from the reward, value and policy losses) and through the
commitment term. The original's commitment ``MSE(c^e, ST_onehot(c^e))`` has an exactly zero
gradient (forward and straight-through path cancel), so its encoder learns nothing; here the
one-hot target is detached and the encoder's softmax is pulled to it.

Differences from the original, all following the paper: gamma once per env step in the
search (the original applies it at every tree level), chance nodes select
``argmax sigma / (N + 1)`` (the original samples), and true labels of the 32 (cell, tile)
outcomes of 2048 (the original's env reports the cell only).

``learner.update_path`` has no effect here: the unroll has one path (the eager one).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from lz_tune.algos.base import SearchRoots, UnrollTerms
from lz_tune.algos.common import (
    build_network,
    cosine,
    entropy,
    full_precision,
    resolve_model_kind,
    scale_gradient,
    soft_ce,
)
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy
from lz_tune.algos.parts import map_policy_target, policy_target_step
from lz_tune.buffer import StepColumn, TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.mcts import StochasticPUCT
from lz_tune.models.stochastic import StochasticMuZeroNetwork, straight_through_one_hot
from lz_tune.models.stochastic_inference import StochasticSearchInference
from lz_tune.models.support import support_to_scalar, support_to_scalar_np

__all__ = [
    "StochasticMuZeroPolicy",
    "StochasticMuZeroLearner",
    "make_policy",
    "make_learner",
    "step_columns",
    "policy_target_size",
    "check_chance_config",
    "code_usage_gap",
    "stochastic_puct_rule",
    "CHANCE_COLUMN",
]

CHANCE_COLUMN = "chance_outcome"
"""Name of the env's true chance outcome, in ``StepResult.info_columns`` and as a step column."""


def check_chance_config(cfg: Config, spec: EnvSpecInfo) -> None:
    """Raise ConfigError (naming the key and the env) for settings the env cannot serve."""
    st = cfg.stochastic
    if resolve_model_kind(cfg, spec) != "mlp":
        raise ConfigError(
            f"model.kind: stochastic_muzero has an MLP network only; env {cfg.env.env_id!r} gives "
            f"observations {spec.observation_shape}; set model.kind=mlp (images are then flattened)"
        )
    if st.use_true_chance_label:
        if spec.chance_space_size == 0:
            raise ConfigError(
                f"stochastic.use_true_chance_label: env {cfg.env.env_id!r} reports no chance outcomes; "
                f"set it to false (learned chance codes)"
            )
        if st.chance_space_size < spec.chance_space_size:
            raise ConfigError(
                f"stochastic.chance_space_size: {st.chance_space_size} codes cannot hold the "
                f"{spec.chance_space_size} chance outcomes of env {cfg.env.env_id!r}"
            )


def stochastic_puct_rule(cfg: Config, *, noise: bool) -> StochasticPUCT:
    """pUCT at decision nodes, ``argmax sigma / (N + 1)`` at chance nodes (``mcts.*``,
    ``stochastic.chance_space_size`` / ``q_normalization``); root noise when ``noise``."""
    m = cfg.mcts
    return StochasticPUCT(
        pb_c_base=m.pb_c_base,
        pb_c_init=m.pb_c_init,
        root_dirichlet_alpha=m.root_dirichlet_alpha,
        root_noise_weight=m.root_noise_weight if noise else 0.0,
        value_delta_max=m.value_delta_max,
        num_chance_outcomes=cfg.stochastic.chance_space_size,
        q_normalization=cfg.stochastic.q_normalization,
    )


class StochasticMuZeroPolicy(MuZeroPolicy):
    """Stochastic MuZero network + the alternating decision / chance search."""

    network: StochasticMuZeroNetwork  # type: ignore[assignment]  # a ComposedMuZeroNetwork, not a MuZeroNetwork: this class overrides the methods that differ

    def __init__(
        self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
    ) -> None:
        check_chance_config(cfg, spec)
        super().__init__(cfg, spec, device=device, network=network, search_rule=stochastic_puct_rule)
        self.num_chance = cfg.stochastic.chance_space_size
        self._chance_engine = StochasticSearchInference()  # the search's CPU engine (mcts.inference)
        self.search_engines = [self._chance_engine]  # MuZero's MLP engine is not used by this type

    @staticmethod
    def build_network(cfg: Config, spec: EnvSpecInfo) -> StochasticMuZeroNetwork:
        return StochasticMuZeroNetwork(build_network(cfg, spec), chance_space_size=cfg.stochastic.chance_space_size)

    def search_backend(self, obs: np.ndarray, root_latent: None = None) -> SearchRoots:
        """Root state, value [K], policy logits [K, A] and the stochastic recurrent function: the
        numpy engine (:class:`StochasticSearchInference`, numpy latents) for an MLP network on the
        CPU under ``mcts.inference=auto``, else torch latents and :meth:`recurrent_inference`."""
        engine = self._chance_engine
        if self.cfg.mcts.inference == "auto" and engine.try_bind(self.network):
            latent = self.network.representation(self.obs_tensor(obs)).numpy()
            value, policy_logits = engine.mlp.prediction(latent)
            return SearchRoots(latent, value, policy_logits, engine)
        init = self.network.initial_inference(self.obs_tensor(obs))
        value = support_to_scalar_np(init.value_logits.float().cpu().numpy())
        return SearchRoots(init.latent, value, init.policy_logits.float().cpu().numpy(), self.recurrent_inference)

    def recurrent_inference(self, state: torch.Tensor, slot: np.ndarray):
        """One simulation for all trees. ``state [B, D]``: the parents' latents (states or
        afterstates); ``slot [B]``: ``< A`` an action from a decision node, ``>= A`` chance code
        ``slot - A`` from a chance node. Returns (child latents [B, D], reward [B], value [B],
        logits [B, A + C] with -inf in the other node kind's slots)."""
        net, A, C = self.network, self.spec.action_space_size, self.num_chance
        batch = slot.shape[0]
        decision = slot < A
        logits = np.full((batch, A + C), -np.inf, np.float32)
        reward = np.zeros(batch, np.float32)
        value = np.empty(batch, np.float32)
        rows_d, rows_c = np.flatnonzero(decision), np.flatnonzero(~decision)
        out = state if rows_c.size == 0 or rows_d.size == 0 else torch.empty_like(state)
        if rows_d.size:  # decision node -> afterstate: phi, psi
            index = torch.from_numpy(rows_d).to(state.device)
            parent = state if rows_c.size == 0 else state.index_select(0, index)
            afterstate = net.afterstate_dynamics(parent, torch.from_numpy(slot[rows_d]).to(state.device))
            chance_logits, q_logits = net.afterstate_prediction(afterstate)
            logits[rows_d, A:] = self.to_numpy(chance_logits)
            value[rows_d] = support_to_scalar_np(self.to_numpy(q_logits))
            out = afterstate if rows_c.size == 0 else out.index_copy_(0, index, afterstate)
        if rows_c.size:  # chance node -> next state: g, f
            index = torch.from_numpy(rows_c).to(state.device)
            parent = state if rows_d.size == 0 else state.index_select(0, index)
            latent, reward_logits = net.dynamics(parent, torch.from_numpy(slot[rows_c] - A).to(state.device))
            policy_logits, value_logits = net.prediction(latent)
            logits[rows_c, :A] = self.to_numpy(policy_logits)
            value[rows_c] = support_to_scalar_np(self.to_numpy(value_logits))
            reward[rows_c] = support_to_scalar_np(self.to_numpy(reward_logits))
            out = latent if rows_d.size == 0 else out.index_copy_(0, index, latent)
        return out, reward, value, logits


class StochasticMuZeroLearner(MuZeroLearner):
    """MuZero's learner with the afterstate unroll and the chance losses (module docstring)."""

    policy_class = StochasticMuZeroPolicy

    def __init__(self, cfg: Config, spec: EnvSpecInfo) -> None:
        super().__init__(cfg, spec)
        self._batch: Optional[TrainBatch] = None
        self._extra: dict[str, tuple[float, torch.Tensor]] = {}

    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None):
        self._batch = batch
        try:
            return super().learn(batch, train_iter=train_iter)
        finally:
            self._batch, self._extra = None, {}

    def extra_losses(self, batch: TrainBatch) -> dict[str, tuple[float, torch.Tensor]]:
        return self._extra

    def _chance_codes(self, net: StochasticMuZeroNetwork, obs: torch.Tensor, k: int):
        """The code of transition t+k-1 -> t+k, ``[B, C]``, and the encoder's logits (None
        with true labels)."""
        if self.cfg.stochastic.use_true_chance_label:
            assert self._batch is not None, "called inside learn()"
            labels = torch.from_numpy(self._batch.extras[CHANCE_COLUMN][:, k - 1]).to(obs.device)
            return F.one_hot(labels.clamp(0, net.chance_space_size - 1), net.chance_space_size).float(), None
        encoder_logits = net.encode_chance(obs[:, k - 1], obs[:, k])
        return straight_through_one_hot(encoder_logits), encoder_logits

    batched_unroll = False  # one path (see the module docstring)

    def unroll_losses(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """MuZero's terms (returned) plus the afterstate-value, chance and commitment terms
        (kept for :meth:`extra_losses`), step by step."""
        lc, st = self.cfg.learner, self.cfg.stochastic
        num_unroll = actions.shape[1]
        latent = net.representation(obs[:, 0])
        policy_logits, value_logits = net.prediction(latent)
        value_loss = soft_ce(value_logits, value_t[:, 0])
        policy_loss = self.policy_loss(policy_logits, map_policy_target(lambda t: t[:, 0], target_policy))
        policy_entropy = entropy(policy_logits)
        with torch.no_grad():
            pred_value0 = support_to_scalar(value_logits)
        zeros = torch.zeros_like(value_loss)
        reward_loss, ssl_loss, q_loss, chance_loss, commitment, usage = (zeros.clone() for _ in range(6))
        if num_unroll and lc.ssl_loss_weight > 0:
            target_proj = self.ssl_targets(net, obs, num_unroll)
        for k in range(1, num_unroll + 1):
            afterstate = net.afterstate_dynamics(scale_gradient(latent, 0.5), actions[:, k - 1])
            chance_logits, q_logits = net.afterstate_prediction(afterstate)
            q_loss = q_loss + soft_ce(q_logits, value_t[:, k - 1])
            code, encoder_logits = self._chance_codes(net, obs, k)
            chance_loss = chance_loss + soft_ce(chance_logits, code.detach()) * mask[:, k]
            if encoder_logits is not None:
                probs = F.softmax(full_precision(encoder_logits), dim=-1)
                commitment = commitment + ((probs - code.detach()) ** 2).sum(-1) * mask[:, k]
                if st.code_usage_loss_weight > 0:
                    usage = usage + code_usage_gap(probs, mask[:, k])
            latent, reward_logits = net.dynamics(afterstate, code)
            reward_loss = reward_loss + soft_ce(reward_logits, reward_t[:, k - 1])
            policy_logits, value_logits = net.prediction(latent)
            value_loss = value_loss + soft_ce(value_logits, value_t[:, k])
            policy_loss = policy_loss + self.policy_loss(policy_logits, policy_target_step(target_policy, k))
            policy_entropy = policy_entropy + entropy(policy_logits)
            if lc.ssl_loss_weight > 0:
                cos = cosine(net.project(latent, with_grad=True), target_proj[:, k - 1])
                ssl_loss = ssl_loss + (-cos) * mask[:, k]
        self._extra = {
            "loss/afterstate_value": (st.afterstate_value_loss_weight, q_loss),
            "loss/chance": (st.chance_loss_weight, chance_loss),
        }
        if not st.use_true_chance_label:
            self._extra["loss/commitment"] = (st.commitment_loss_weight, commitment)
            if st.code_usage_loss_weight > 0:
                self._extra["loss/code_usage"] = (st.code_usage_loss_weight, usage)
        return UnrollTerms(policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, pred_value0)


def code_usage_gap(probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log C - H(p_bar)`` of the masked batch mean ``p_bar [C]`` of the encoder's code
    distributions ``probs [B, C]`` (``mask [B]``, 1 for real transitions), broadcast to ``[B]``:
    0 when the batch spreads over all C codes evenly, ``log C`` when it uses one. A batch with no
    real transition gives 0."""
    weight = mask.to(probs.dtype)
    mean = (probs * weight[:, None]).sum(0) / weight.sum().clamp_min(1.0)
    entropy_of_mean = -(mean * mean.clamp_min(1e-12).log()).sum()
    gap = (math.log(probs.shape[1]) - entropy_of_mean) * (weight.sum() > 0).to(probs.dtype)
    return gap.expand(probs.shape[0])


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """With true chance labels, the env's outcome of every step (``[m]`` int64)."""
    check_chance_config(cfg, spec)
    return (StepColumn(CHANCE_COLUMN, (), "int64"),) if cfg.stochastic.use_true_chance_label else ()


def policy_target_size(cfg: Config, spec: EnvSpecInfo) -> int:
    """P = A: the visit distribution over the root's actions."""
    return spec.action_space_size


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> StochasticMuZeroPolicy:
    return StochasticMuZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> StochasticMuZeroLearner:
    return StochasticMuZeroLearner(cfg, spec)
