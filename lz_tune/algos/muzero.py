"""MuZero: network + pUCT search (:class:`MuZeroPolicy`) and the unrolled loss (:class:`MuZeroLearner`).

Loss of one batch (B samples, U unroll steps), per sample, summed over k = 0..U:

    policy  : CE(policy_logits_k, target_policy_k)               weight policy_loss_weight
    value   : CE(value_logits_k, two_hot(h(target_value_k)))     weight value_loss_weight
    reward  : CE(reward_logits_k, two_hot(h(target_reward_k-1))) weight reward_loss_weight (k >= 1)
    ssl     : -cos(pred(proj(s_k)), proj(repr(o_{t+k}))) * mask  weight ssl_loss_weight (k >= 1)
    entropy : -H(policy_k)                                       weight policy_entropy_weight

Every step k counts equally; the summed loss is divided by U (the original's 1/U gradient
hook on the total loss) and the latent's gradient is halved at the entry of every dynamics
step (MuZero paper, appendix G), so the gradient through the dynamics does not grow with U.
Samples are weighted by their PER importance weights; new priorities are |predicted value -
target value| at k = 0.

These two classes implement the hooks of :mod:`lz_tune.algos.base` and take the parts a
variant swaps as keyword arguments (:mod:`lz_tune.algos.parts`): the search rule and the
acting (:class:`MuZeroPolicy`), the policy factory, the policy loss and the target builder
(:class:`MuZeroLearner`). Gumbel MuZero is MuZero with ``search_rule=gumbel_rule`` and
``policy_loss=ImprovedPolicyKL()``. A type with another model supplies the model hooks
(``build_network``, ``search_backend``, ``recurrent_inference``; ``initial_state`` /
``unroll_step``, optionally a batched ``unroll_all``, or the whole ``unroll_losses``), see
``efficientzero.py``.
"""

from __future__ import annotations

from typing import Any, Optional, cast

import numpy as np
import torch

from lz_tune.algos.base import (
    Acting,
    ActResult,
    Learner,
    Policy,
    PolicyFactory,
    PolicyLoss,
    Reanalysis,
    SearchRoots,
    SearchRule,
    TargetBuilder,
    Temperature,
    UnrollTerms,
)
from lz_tune.algos.common import build_network, cosine, learning_rate_at, scale_gradient, soft_ce
from lz_tune.algos.parts import (
    DiscreteActing,
    VisitPolicyLoss,
    check_action_space,
    float32_numpy,
    map_policy_target,
    n_step_targets,
    obs_to_tensor,
    policy_target_step,
    puct_rule,
    search_tree,
    simulations_per_search,
)
from lz_tune.algos.update import (
    build_learner_networks,
    learner_state,
    load_learner_state,
    one_unroll_path_notice,
    run_forward,
    unrolled_update,
)
from lz_tune.buffer import GameBuffer, SampledIndex, StepColumn, TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.mcts import SearchOutput
from lz_tune.models.base import MuZeroNetwork
from lz_tune.models.mlp_inference import MLPSearchInference
from lz_tune.models.support import support_to_scalar, support_to_scalar_np


class MuZeroPolicy(Policy):
    """MuZero network + batched search. All inference runs under ``torch.inference_mode``.

    search_rule: the search strategy's builder (:func:`lz_tune.algos.parts.puct_rule`).
    acting: how a search becomes actions and stored targets (:class:`DiscreteActing`; the
    sampled types' :class:`lz_tune.algos.sampled_muzero.SampledActing`).
    """

    network: MuZeroNetwork

    def __init__(
        self,
        cfg: Config,
        spec: EnvSpecInfo,
        *,
        device: str = "cpu",
        network: Optional[torch.nn.Module] = None,
        search_rule: SearchRule = puct_rule,
        acting: Acting = DiscreteActing(),
    ) -> None:
        self.search_rule = search_rule
        self.acting = acting
        check_action_space(cfg, spec, acting)
        self.cfg = cfg
        self.spec = spec
        self.device = torch.device(device)
        # build_network's (a subclass's own network type), or the one given: the learner's copy
        self.network = cast(MuZeroNetwork, (network or self.build_network(cfg, spec)).to(self.device))
        self.network.eval()
        self._cpu_float32 = self.device.type == "cpu" and next(self.network.parameters()).dtype == torch.float32
        self._engine = MLPSearchInference()  # numpy search engine for MLP networks on the CPU (mcts.inference)
        self.search_engines: list = [self._engine]
        """The CPU engines this policy binds (a subclass adds its own): invalidated on weight changes."""

    def on_weights_loaded(self) -> None:
        """The search engines re-read the weights at their next bind (a subclass with per-env
        state calls this too)."""
        for engine in self.search_engines:
            engine.invalidate()

    @staticmethod
    def build_network(cfg: Config, spec: EnvSpecInfo) -> torch.nn.Module:
        return build_network(cfg, spec)

    # ------------------------------------------------------------------ search plumbing

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """``obs`` [K, *obs_shape] as a tensor on the policy's device."""
        return obs_to_tensor(obs, self.device)

    def to_numpy(self, t: torch.Tensor) -> np.ndarray:
        """float32 numpy view (no copy on CPU: this runs once per simulation)."""
        return float32_numpy(t, zero_copy=self._cpu_float32)

    def recurrent_inference(self, latent: Any, action: np.ndarray):
        """The torch :class:`~lz_tune.algos.base.RecurrentFn`: latents [B, *latent], actions [B]."""
        out = self.network.recurrent_inference(latent, torch.from_numpy(action).to(self.device))
        reward = support_to_scalar_np(self.to_numpy(out.reward_logits))
        value = support_to_scalar_np(self.to_numpy(out.value_logits))
        return out.latent, reward, value, self.to_numpy(out.policy_logits)

    def search_backend(self, obs: np.ndarray, root_latent: Any = None) -> SearchRoots:
        """Root state and recurrent function for the search from observations ``[K, *obs_shape]``
        (or from given root latents ``[K, *latent]``, e.g. muzero_context's).

        ``mcts.inference=auto`` and a MuZero MLP network on the CPU: representation in torch,
        then the numpy engine (root prediction included) on numpy latents. Otherwise torch
        throughout. Call under inference mode.
        """
        if self.cfg.mcts.inference == "auto" and self._engine.try_bind(self.network):
            roots = (self.network.representation(self.obs_tensor(obs)) if root_latent is None else root_latent).numpy()
            root_value, root_logits = self._engine.prediction(roots)
            return SearchRoots(roots, root_value, root_logits, self._engine)
        if root_latent is None:
            init = self.network.initial_inference(self.obs_tensor(obs))
            latent, value_logits, policy_logits = init.latent, init.value_logits, init.policy_logits
        else:
            latent = root_latent
            policy_logits, value_logits = self.network.prediction(latent)
        value = support_to_scalar_np(value_logits.float().cpu().numpy())
        return SearchRoots(latent, value, policy_logits.float().cpu().numpy(), self.recurrent_inference)

    def strategy(self, *, noise: bool):
        """The search strategy of ``search_rule`` (MuZero: pUCT, with root Dirichlet noise when
        ``noise``: collection)."""
        return self.search_rule(self.cfg, noise=noise)

    def search(
        self,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        *,
        num_simulations: int,
        noise: bool,
        rng: np.random.Generator,
        root_latent: Optional[torch.Tensor] = None,
    ) -> tuple[SearchOutput, np.ndarray]:
        """Batched search from stacked observations [K, *obs_shape] (or from ``root_latent``
        [K, *latent] when given); returns (SearchOutput, pred_value [K])."""
        return search_tree(
            self,
            obs,
            action_mask,
            to_play,
            num_simulations=num_simulations,
            noise=noise,
            rng=rng,
            root_latent=root_latent,
        )

    def num_simulations(self, *, collect: bool) -> int:
        """Simulations per search: mcts.num_simulations, or mcts.eval_num_simulations when set
        and not collecting."""
        return simulations_per_search(self.cfg, collect=collect)

    # ------------------------------------------------------------------ Policy interface

    def act(
        self,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        previous_action: Optional[np.ndarray] = None,
    ) -> ActResult:
        """The roots of :meth:`act_root` (or the observations), searched and acted on by ``acting``."""
        root = self.act_root(batch.observation, previous_action)
        return self.acting.act(self, batch, mode=mode, temperature=temperature, rng=rng, root=root)

    def act_root(self, obs: np.ndarray, previous_action: Optional[np.ndarray]):
        """The roots' model state for acting, from per-env state carried across steps (the
        stateful types: UniZero's KV caches, muzero_context's carried latents); None: search
        from the observations (MuZero)."""
        return None

    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            logits = self.network.initial_inference(self.obs_tensor(obs)).value_logits
            return support_to_scalar_np(logits.float().cpu().numpy())

    def reanalyze(
        self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray, rng: np.random.Generator
    ) -> Reanalysis:
        """A search without noise from the stored observations, read out by ``acting``."""
        return self.acting.reanalyze(self, obs, action_mask, to_play, rng)


class MuZeroLearner(Learner):
    """Learner network, hard-copied target network, optimizer and the unrolled MuZero loss.

    policy_factory: builds the learner's policy and target policy,
    ``factory(cfg, spec, device=..., network=None)`` (default: the class's ``policy_class``).
    policy_loss: the policy term (:class:`~lz_tune.algos.parts.VisitPolicyLoss`).
    target_builder: the training batch (:func:`~lz_tune.algos.parts.n_step_targets`).
    """

    policy_class: PolicyFactory = MuZeroPolicy
    reward_loss_name = "loss/reward"
    ssl_loss_name = "loss/ssl"
    batched_unroll = True
    """Whether :meth:`unroll_losses` has the batched path of ``learner.update_path=fused``."""
    nonfinite_term: Optional[str] = None
    """The first non-finite loss term of an update that was skipped (set by ``unrolled_update``)."""

    def __init__(
        self,
        cfg: Config,
        spec: EnvSpecInfo,
        *,
        policy_factory: Optional[PolicyFactory] = None,
        policy_loss: Optional[PolicyLoss] = None,
        target_builder: Optional[TargetBuilder] = None,
    ) -> None:
        self.cfg = cfg
        self.policy_term: PolicyLoss = policy_loss or VisitPolicyLoss()
        self.target_builder: TargetBuilder = target_builder or n_step_targets
        self.policy, self.target_policy, self.optimizer = build_learner_networks(
            cfg, spec, policy_factory or self.policy_class
        )
        self.train_iter = 0
        self.device = self.policy.device

    @property
    def learning_rate(self) -> float:
        return learning_rate_at(self.cfg, self.train_iter)

    def update_path_notice(self) -> Optional[str]:
        """Types whose unroll has one path (``batched_unroll = False``) say so when the fused
        path is asked for: they get its optimizer kernel and conv layout only."""
        return None if self.batched_unroll else one_unroll_path_notice(self.cfg)

    # ------------------------------------------------------------------ what variants override

    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        """The batch of ``target_builder`` (MuZero: window + n-step values bootstrapped by the
        target network, + reanalysed policy rows)."""
        return self.target_builder(self, buffer, index, rng=rng)

    def reward_targets(self, batch: TrainBatch) -> torch.Tensor:
        """[B, U] scalar targets of the dynamics' reward head: the rewards."""
        return torch.from_numpy(batch.target_reward).to(self.device)

    @property
    def reward_loss_weight(self) -> float:
        return self.cfg.learner.reward_loss_weight

    def initial_state(self, latent: torch.Tensor):
        """Model state carried through the unroll, from the root latent (MuZero: the latent)."""
        return latent

    def unroll_step(self, net, state, action: torch.Tensor, k: int):
        """Dynamics step k (1..U): returns (next state, next latent, reward-like logits [B, R])."""
        latent, reward_logits = net.dynamics(scale_gradient(state, 0.5), action)
        return latent, latent, reward_logits

    def unroll_all(self, net, latent0: torch.Tensor, actions: torch.Tensor):
        """Steps 1..U through :meth:`initial_state` and :meth:`unroll_step` (see ``base.UnrollModel``)."""
        state = self.initial_state(latent0)
        latents, reward_logits = [latent0], []
        for k in range(1, actions.shape[1] + 1):
            state, latent, logits = self.unroll_step(net, state, actions[:, k - 1], k)
            latents.append(latent)
            reward_logits.append(logits)
        return latents, reward_logits

    def policy_targets(self, batch: TrainBatch):
        """What :meth:`policy_loss` compares the policy output with, ``[B, U+1, ...]``: a tensor
        or a tuple of tensors (``policy_term.targets``; MuZero: the target probabilities
        ``[B, U+1, A]``)."""
        return self.policy_term.targets(batch, self.device)

    def policy_loss(self, logits: torch.Tensor, target) -> torch.Tensor:
        """[N] policy loss of the policy output ``[N, ...]`` (``policy_term.loss``; MuZero: the
        cross-entropy with target probabilities [N, A]). ``target`` is one step (or the steps
        flattened) of :meth:`policy_targets`."""
        return self.policy_term.loss(logits, target)

    def policy_entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """[N] entropy of the policy output (``policy_term.entropy``; its bonus has weight
        policy_entropy_weight)."""
        return self.policy_term.entropy(logits)

    def update_target(self) -> None:
        """After every update: the target network becomes a hard copy of the learner's every
        ``learner.target_update_freq`` updates (UniZero: a momentum average)."""
        if self.train_iter % self.cfg.learner.target_update_freq == 0:
            self.target_policy.load_weights(self.policy.network.state_dict())  # through on_weights_loaded

    def policy_entropy_weight_now(self) -> float:
        """Weight of the entropy bonus in the update being computed, asked once per update right
        after its forward pass (MuZero: learner.policy_entropy_weight; UniZero's adaptive alpha
        takes its step here, from that pass's entropy)."""
        return self.cfg.learner.policy_entropy_weight

    def before_optimizer_step(self) -> None:
        """Runs between the backward pass and the gradient clipping + optimizer step of every
        update (MuZero: nothing; UniZero: gradient-norm monitoring, encoder and head clipping)."""

    def extra_losses(self, batch: TrainBatch) -> dict[str, tuple[float, torch.Tensor]]:
        """The type's loss terms beyond MuZero's, from the forward pass that just ran:
        ``{log name: (weight, [B] per-sample sum over the unroll)}`` (MuZero: none). Added to
        the per-sample loss before the importance weights and the 1/U scaling."""
        return {}

    # ------------------------------------------------------------------ the unrolled losses

    def ssl_targets(self, net, obs: torch.Tensor, num_unroll: int) -> torch.Tensor:
        """[B, U, P] target projections of the encoded next observations (no gradient)."""
        with torch.no_grad():
            flat_next = obs[:, 1:].reshape(-1, *obs.shape[2:])
            return net.project(net.representation(flat_next), with_grad=False).reshape(obs.shape[0], num_unroll, -1)

    def unroll_losses(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """Every loss term of the batch (see :class:`~lz_tune.algos.base.UnrollModel`): the
        batched path under ``learner.update_path=fused``, else the step-by-step one."""
        if self.cfg.learner.update_path == "fused":
            return self.unroll_losses_fused(net, obs, actions, value_t, reward_t, target_policy, mask)
        return self.unroll_losses_eager(net, obs, actions, value_t, reward_t, target_policy, mask)

    def unroll_losses_eager(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """The plain path (``learner.update_path=eager``): prediction and every loss term step
        by step, through :meth:`initial_state` and :meth:`unroll_step`."""
        lc = self.cfg.learner
        num_unroll = actions.shape[1]
        init = net.initial_inference(obs[:, 0])
        state = self.initial_state(init.latent)
        value_loss = soft_ce(init.value_logits, value_t[:, 0])
        policy_loss = self.policy_loss(init.policy_logits, map_policy_target(lambda t: t[:, 0], target_policy))
        policy_entropy = self.policy_entropy(init.policy_logits)
        reward_loss = torch.zeros_like(value_loss)
        ssl_loss = torch.zeros_like(value_loss)
        with torch.no_grad():
            pred_value0 = support_to_scalar(init.value_logits)

        if num_unroll > 0:
            if lc.ssl_loss_weight > 0:
                target_proj = self.ssl_targets(net, obs, num_unroll)
            for k in range(1, num_unroll + 1):
                state, latent, reward_logits = self.unroll_step(net, state, actions[:, k - 1], k)
                policy_logits, value_logits = net.prediction(latent)
                value_loss = value_loss + soft_ce(value_logits, value_t[:, k])
                policy_loss = policy_loss + self.policy_loss(policy_logits, policy_target_step(target_policy, k))
                reward_loss = reward_loss + soft_ce(reward_logits, reward_t[:, k - 1])
                policy_entropy = policy_entropy + self.policy_entropy(policy_logits)
                if lc.ssl_loss_weight > 0:
                    pred_proj = net.project(latent, with_grad=True)
                    cos = cosine(pred_proj, target_proj[:, k - 1])
                    ssl_loss = ssl_loss + (-cos) * mask[:, k]
        return UnrollTerms(policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, pred_value0)

    def unroll_losses_fused(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """The default path: the same terms as :meth:`unroll_losses_eager`, with only the dynamics
        step by step (:meth:`unroll_all`). The latents of all U+1 steps are stacked step-major ([(U+1) B, ...]) and
        run through prediction, the SSL projector and every loss once (BatchNorm layers still
        see each step as its own batch: per-step calls for prediction when the network has
        batch statistics there, grouped batch norm in the projector); the entropy is computed
        without gradient when its weight is 0."""
        lc = self.cfg.learner
        batch, num_unroll = actions.shape[:2]
        steps = num_unroll + 1
        latents, reward_logits = self.unroll_all(net, net.representation(obs[:, 0]), actions)
        flat = torch.cat(latents)  # [(U+1) B, *latent]
        if net.batch_independent_prediction:
            policy_logits, value_logits = net.prediction(flat)
        else:
            outs = [net.prediction(latent) for latent in latents]
            policy_logits, value_logits = torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])

        def step_major(x: torch.Tensor) -> torch.Tensor:  # [B, S, ...] -> [S B, ...]
            return x.transpose(0, 1).reshape(-1, *x.shape[2:])

        def per_sample(x: torch.Tensor, count: int) -> torch.Tensor:  # [S B] -> [B], summed over S
            return x.view(count, batch).sum(0)

        value_loss = per_sample(soft_ce(value_logits, step_major(value_t)), steps)
        policy_loss = per_sample(self.policy_loss(policy_logits, map_policy_target(step_major, target_policy)), steps)
        if lc.policy_entropy_weight > 0:
            policy_entropy = per_sample(self.policy_entropy(policy_logits), steps)
        else:
            with torch.no_grad():
                policy_entropy = per_sample(self.policy_entropy(policy_logits), steps)
        with torch.no_grad():
            pred_value0 = support_to_scalar(value_logits[:batch])
        if num_unroll == 0:
            zeros = torch.zeros_like(value_loss)
            return UnrollTerms(policy_loss, value_loss, zeros, zeros.clone(), policy_entropy, pred_value0)
        reward_loss = per_sample(soft_ce(torch.cat(reward_logits), step_major(reward_t)), num_unroll)
        if lc.ssl_loss_weight > 0:
            target_proj = self.ssl_targets(net, obs, num_unroll)
            pred_proj = net.project(flat[batch:], with_grad=True, groups=num_unroll)
            cos = cosine(pred_proj, step_major(target_proj))
            ssl_loss = per_sample(-cos * step_major(mask[:, 1:]), num_unroll)
        else:
            ssl_loss = torch.zeros_like(value_loss)
        return UnrollTerms(policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, pred_value0)

    # ------------------------------------------------------------------ one update

    @property
    def value_reward_label_smoothing(self) -> float:
        """eps of the value and reward targets' label smoothing (0: the plain two-hot targets)."""
        return 0.0

    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> tuple[dict[str, float], np.ndarray]:
        """One update (:func:`~lz_tune.algos.update.unrolled_update`; MuZero has no schedule in
        ``train_iter``: it is ignored)."""
        return unrolled_update(self, batch)

    def run_forward(self, forward):
        """Run ``forward`` (the closure computing ``(loss, terms, extra)`` of one update from the
        learner network); see :func:`lz_tune.algos.update.run_forward`."""
        return run_forward(self, forward)

    def target_changes_at(self, train_iter: int) -> bool:
        """Whether the update that takes ``train_iter`` to ``train_iter + 1`` changes the target
        network (MuZero: its hard copy every learner.target_update_freq updates)."""
        return (train_iter + 1) % self.cfg.learner.target_update_freq == 0

    def state_dict(self) -> dict[str, Any]:
        return learner_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_learner_state(self, state)


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """MuZero stores nothing beyond the common per-step columns."""
    return ()


def policy_target_size(cfg: Config, spec: EnvSpecInfo) -> int:
    """P, the width of the stored policy target: one entry per action."""
    return spec.action_space_size


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> MuZeroPolicy:
    return MuZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    return MuZeroLearner(cfg, spec)
