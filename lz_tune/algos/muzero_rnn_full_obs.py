"""muzero_rnn_full_obs: MuZero with a GRU history of the real (latent, action) sequence that
conditions prediction (:class:`lz_tune.models.rnn_full_obs.RNNFullObsNetwork`).

Inference (collection, evaluation): every real step of env i feeds its previous (encoded real
observation, real action) through the GRU, ``h_t = GRU([z_{t-1}, a_{t-1}], h_{t-1})``; the root
is ``(z_t = repr(o_t), h_t)``. The history restarts from zero at each episode start and every
``context.context_length_init`` steps of that env, and after any weight change (state tagged with
the weights version, :class:`lz_tune.algos.history.EnvHistory`). Inside the search a node's state
is ``(latent, h)``: MuZero's dynamics on the latent, the GRU step on the history.

Training (per sample, unroll k = 0..U, history zeroed at the sampled position t; ``m_k`` = 1
where ``o_{t+k}`` is a real observation, 0 past the episode end):

    z_k = repr(o_{t+k})                         the TRUE encoded observation of every step
    h_0 = 0,  h_k = GRU([sg(z_{k-1}), a_{t+k-1}], h_{k-1})
    policy, value : f(z_0, 0), f(sg(z_k), h_k) (k >= 1) against the targets of step k, * m_k
    reward        : dynamics(z_k, a_{t+k}) -> r_k * m_k           (k < U)
    consistency   : -cos(proj(dynamics(z_k, a_{t+k}).latent), sg(proj(z_{k+1}))) * m_{k+1}
                    (learner.ssl_loss_weight: the predicted next latent against the encoder)

plus the same terms along the SEARCH's chain, the states the tree search evaluates at its interior
nodes (``context.train_search_chain``, default on):

    s_0 = (z_0, 0),  s_k = (dynamics(s_{k-1}.latent, a_{t+k-1}).latent, GRU([sg(s_{k-1}.latent), a_{t+k-1}], s_{k-1}.h))
    policy, value : f(s_k) against the targets of step k            (k >= 1; k = 0 is s_0 = (z_0, 0) above)
    reward        : dynamics(s_k.latent, a_{t+k}) -> r_k            (1 <= k < U)
    consistency   : -cos(proj(s_{k+1}.latent), sg(proj(z_{k+1}))) * mask_{k+1}   (1 <= k < U)

Without them prediction is trained on encoded observations only while the search applies it to
dynamics latents (tied to the encoder only through the projected cosine term), and the
CartPole runs did not learn (best eval 85 in 10 minutes, benchmarks/README.md).

What reaches the encoder is MuZero's: the GRU reads the latents detached (``sg(z)``, both
chains), and so does prediction at the true chain's steps k >= 1. Those terms train prediction,
the history and its read-in on real encodings, as the roots of the search meet them; the encoder
itself is shaped by the k = 0 terms, the dynamics terms and the search chain, as in MuZero.
With the full gradient (U + 1 value / policy regressions per sample straight into the encoder,
against MuZero's one), two CartPole seeds in five sat for thousands of updates at eval ~130,
every episode ending with the cart drifting off the track while the pole stayed up (replays of
their checkpoints); our reading is that the encoder kept what predicts the current policy's
values and lost the slow drift, which matters only near the track's edge.

Past the episode end (``m_k = 0``) there is no observation: the buffer pads with zeros, the
absorbing state, which MuZero's chain (the search chain here) learns from its dynamics latents
(value and reward 0). The true chain masks those steps: an encoded zero observation is no
absorbing state, and on CartPole it is the upright, centred cart, the best state there is, which
the unmasked terms taught a value of 0.

With both, every CartPole seed solves in about as many updates as MuZero's, and no seed
plateaus any more (benchmarks/README.md, "History-conditioned types on CartPole", with the
command).

Bootstrap values and reanalysis (buffer side) use an EMPTY history (``initial_inference``): the
buffer keeps no per-step GRU state, and an empty history is exactly the conditioning of the
value head's k = 0 training term at every sampled position, so the bootstrap matches what was
trained (the inference history of up to ``context_length_init - 1`` steps is not rebuilt).

``learner.update_path`` has no effect here: the unroll has one path.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from lz_tune.algos.base import SearchRoots, UnrollTerms
from lz_tune.algos.common import build_network, cosine, entropy, scale_gradient, soft_ce
from lz_tune.algos.history import EnvHistory
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size, step_columns  # noqa: F401  (same as MuZero's)
from lz_tune.algos.parts import policy_target_step
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.rnn_full_obs import RNNFullObsNetwork
from lz_tune.models.rnn_inference import RNNFullObsSearchInference
from lz_tune.models.support import support_to_scalar, support_to_scalar_np

__all__ = ["RNNFullObsPolicy", "RNNFullObsLearner", "make_policy", "make_learner", "step_columns", "policy_target_size"]


class RNNFullObsPolicy(MuZeroPolicy):
    """RNN network + MuZero's search over ``(latent, history)`` node states."""

    network: RNNFullObsNetwork  # type: ignore[assignment]  # a ComposedMuZeroNetwork, not a MuZeroNetwork: this class overrides the methods that differ

    def __init__(
        self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
    ) -> None:
        super().__init__(cfg, spec, device=device, network=network)
        self.history = EnvHistory(cfg.context.context_length_init)
        self._last_latent: Optional[torch.Tensor] = None  # [N, *latent] encoded obs of each env's last step
        self._last_history: Optional[torch.Tensor] = None  # [N, H] GRU history at each env's last step
        self._history_engine = RNNFullObsSearchInference()  # the search's CPU engine (mcts.inference)
        self.search_engines = [self._history_engine]  # MuZero's MLP engine is not used by this type

    @staticmethod
    def build_network(cfg: Config, spec: EnvSpecInfo) -> RNNFullObsNetwork:
        return RNNFullObsNetwork(build_network(cfg, spec), hidden_size=cfg.context.rnn_hidden_size)

    # ------------------------------------------------------------------ per-env state

    def on_weights_loaded(self) -> None:
        super().on_weights_loaded()
        self.history.on_weights_loaded()

    def reset(self, env_ids: np.ndarray) -> None:
        self.history.reset(env_ids)

    def root_state(self, obs: np.ndarray, previous_action: Optional[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(latent [N, *L], history [N, H])`` of this step's roots; the per-env state moves on."""
        num_envs = obs.shape[0]
        carried = self.history.carried(num_envs, previous_action)
        with torch.inference_mode():
            latent = self.network.representation(self.obs_tensor(obs))
            history = self.network.empty_history(num_envs, like=latent)
            if carried.any():
                # an env is carried only after a step that stored its latent and history
                assert self._last_latent is not None and self._last_history is not None
                rows = torch.from_numpy(np.flatnonzero(carried)).to(self.device)
                action = torch.from_numpy(np.asarray(previous_action)[carried].astype(np.int64)).to(self.device)
                stepped = self.network.history_step(
                    self._last_latent.index_select(0, rows), action, self._last_history.index_select(0, rows)
                )
                history.index_copy_(0, rows, stepped)
        self.history.advance(carried)
        self._last_latent, self._last_history = latent.clone(), history.clone()
        return latent, history

    # ------------------------------------------------------------------ search

    def search_backend(self, obs: np.ndarray, root_latent: Optional[tuple] = None) -> SearchRoots:
        """Root state ``(latent, history)`` (an empty history unless ``root_latent`` gives one),
        value [K], policy logits [K, A] and the recurrent function: the numpy engine
        (:class:`RNNFullObsSearchInference`) for an MLP network on the CPU under
        ``mcts.inference=auto``, else torch."""
        if root_latent is None:
            latent = self.network.representation(self.obs_tensor(obs))
            history = self.network.empty_history(latent.shape[0], like=latent)
        else:
            latent, history = root_latent
        policy_logits, value_logits = self.network.prediction(latent, history)
        value = support_to_scalar_np(self.to_numpy(value_logits))
        engine = self._history_engine  # numpy node states, one engine call per simulation
        if self.cfg.mcts.inference == "auto" and engine.try_bind(self.network):
            return SearchRoots((latent.numpy(), history.numpy()), value, self.to_numpy(policy_logits), engine)
        return SearchRoots((latent, history), value, self.to_numpy(policy_logits), self.recurrent_inference)

    def recurrent_inference(self, state: tuple, action: np.ndarray):
        """The torch model step over ``(latent [B, *L], history [B, H])`` node states: MuZero's
        dynamics on the latent, the GRU step on the history."""
        latent, history = state
        a = torch.from_numpy(action).to(self.device)
        next_history = self.network.history_step(latent, a, history)
        next_latent, reward_logits = self.network.dynamics(latent, a)
        policy_logits, value_logits = self.network.prediction(next_latent, next_history)
        return (
            (next_latent, next_history),
            support_to_scalar_np(self.to_numpy(reward_logits)),
            support_to_scalar_np(self.to_numpy(value_logits)),
            self.to_numpy(policy_logits),
        )

    def act_root(self, obs: np.ndarray, previous_action: Optional[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """The roots of :meth:`root_state`: the encoded observations and each env's history."""
        return self.root_state(obs, previous_action)


class RNNFullObsLearner(MuZeroLearner):
    """The true-observation unroll of the module docstring."""

    policy_class = RNNFullObsPolicy

    batched_unroll = False  # one path (see the module docstring)

    def unroll_losses(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """The true-observation unroll and the search chain of the module docstring, step by step."""
        lc = self.cfg.learner
        batch, num_unroll = actions.shape[:2]
        steps = num_unroll + 1
        latents = net.representation(obs.reshape(batch * steps, *obs.shape[2:]))
        latents = latents.view(batch, steps, *latents.shape[1:])  # [B, U+1, *L] true encodings
        history = net.empty_history(batch, like=latents)
        zeros = latents.new_zeros(batch)
        policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy = (zeros.clone() for _ in range(5))
        if num_unroll and lc.ssl_loss_weight > 0:
            target_proj = self.ssl_targets(net, obs, num_unroll)
        pred_value0 = None
        for k in range(steps):
            real = mask[:, k]  # [B] 1 where o_{t+k} is a real observation (0 past the episode end)
            if k > 0:
                history = net.history_step(latents[:, k - 1].detach(), actions[:, k - 1], history)
            # k >= 1: prediction reads the encoding detached (the encoder is shaped by MuZero's terms)
            latent_k = latents[:, 0] if k == 0 else latents[:, k].detach()
            policy_logits, value_logits = net.prediction(latent_k, history)
            value_loss = value_loss + real * soft_ce(value_logits, value_t[:, k])
            target_k = policy_target_step(target_policy, k)
            policy_loss = policy_loss + real * self.policy_loss(policy_logits, target_k)
            policy_entropy = policy_entropy + real * entropy(policy_logits)
            if k == 0:
                with torch.no_grad():
                    pred_value0 = support_to_scalar(value_logits)
            if k < num_unroll:
                next_latent, reward_logits = net.dynamics(scale_gradient(latents[:, k], 0.5), actions[:, k])
                reward_loss = reward_loss + real * soft_ce(reward_logits, reward_t[:, k])
                if lc.ssl_loss_weight > 0:
                    cos = cosine(net.project(next_latent, with_grad=True), target_proj[:, k])
                    ssl_loss = ssl_loss + (-cos) * mask[:, k + 1]
            if k == 0:
                chain_latent, chain_history, chain_next = latents[:, 0], history, next_latent if num_unroll else None
        if self.cfg.context.train_search_chain:
            for k in range(1, steps):  # the search's states: dynamics latents, history over them
                chain_history = net.history_step(chain_latent.detach(), actions[:, k - 1], chain_history)
                assert chain_next is not None  # k <= U: set by the step before
                chain_latent = chain_next
                policy_logits, value_logits = net.prediction(chain_latent, chain_history)
                value_loss = value_loss + soft_ce(value_logits, value_t[:, k])
                policy_loss = policy_loss + self.policy_loss(policy_logits, policy_target_step(target_policy, k))
                policy_entropy = policy_entropy + entropy(policy_logits)
                if k < num_unroll:
                    chain_next, reward_logits = net.dynamics(scale_gradient(chain_latent, 0.5), actions[:, k])
                    reward_loss = reward_loss + soft_ce(reward_logits, reward_t[:, k])
                    if lc.ssl_loss_weight > 0:
                        cos = cosine(net.project(chain_next, with_grad=True), target_proj[:, k])
                        ssl_loss = ssl_loss + (-cos) * mask[:, k + 1]
        assert pred_value0 is not None  # set at k = 0
        return UnrollTerms(policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, pred_value0)


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> RNNFullObsPolicy:
    return RNNFullObsPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> RNNFullObsLearner:
    return RNNFullObsLearner(cfg, spec)
