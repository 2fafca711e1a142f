"""EfficientZero (Ye et al. 2021): MuZero with a value-prefix LSTM (and the SSL consistency loss,
which this project's MuZero already has, weight ``learner.ssl_loss_weight``).

Value prefix. The dynamics no longer predicts each reward: an LSTM running along the unroll
(or the search path) predicts the *value prefix*, the sum of the rewards since its last reset.
With H = ``efficientzero.lstm_horizon_len`` the LSTM state is zeroed after every H model steps,
counted from the root of each search and from each sampled position of a batch:

    training, step k = 1..U:  target prefix_k = sum_{j=r}^{k-1} r_{t+j},  r = H * floor((k-1) / H)
                              LSTM state zeroed after step k when k % H == 0
    search, node at depth d:  reward(d) = prefix(d) - prefix(d-1)   if (d-1) % H != 0
                                        = prefix(d)                 if (d-1) % H == 0 (parent is a reset point)
                              children of a node at depth d start from a zero LSTM state if d % H == 0

so the reward the tree sees at depth d is exactly the one-step difference of the targets it was
trained on. The original's buffer counts the reset points with a counter that is not reset per
sample, so for every sample but the first they drift; here they are a pure
function of the unroll step (:func:`value_prefix_targets`). The prefix is decoded with the
reward support (the original uses the value support).

Per-node search state: ``(latent, lstm_h, lstm_c, prefix [B, 1], depth [B, 1])`` on the torch path;
``(latent, h, c, prefix [B], depth [B])`` numpy arrays on the CPU engine
(:mod:`lz_tune.models.efficientzero_inference`, ``mcts.inference=auto`` with an MLP network).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from lz_tune.algos.base import SearchRoots
from lz_tune.algos.common import build_network, resolve_model_kind, scale_gradient
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size
from lz_tune.algos.targets import with_extras
from lz_tune.buffer import GameBuffer, SampledIndex, StepColumn, TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.efficientzero import EfficientZeroNetwork
from lz_tune.models.efficientzero_inference import EfficientZeroSearchInference
from lz_tune.models.support import support_to_scalar_np

__all__ = [
    "EfficientZeroPolicy",
    "EfficientZeroLearner",
    "value_prefix_targets",
    "prefix_rewards",
    "make_policy",
    "make_learner",
    "step_columns",
    "policy_target_size",
]


def value_prefix_targets(rewards: np.ndarray, horizon: int) -> np.ndarray:
    """``[B, U] float32`` value-prefix targets of unroll steps k = 1..U from the rewards
    ``[B, U]`` (r_{t+k-1} in column k-1, 0 past an episode end): column k-1 holds the sum of
    the rewards since the last reset, resets after every ``horizon`` steps counted from each
    sample's own position t."""
    rewards = np.asarray(rewards, np.float32)
    out = np.empty_like(rewards)
    running = np.zeros(rewards.shape[0], np.float32)
    for k in range(1, rewards.shape[1] + 1):
        if (k - 1) % horizon == 0:
            running = np.zeros_like(running)
        running = running + rewards[:, k - 1]
        out[:, k - 1] = running
    return out


def prefix_rewards(
    parent_prefix: np.ndarray, parent_depth: np.ndarray, child_prefix: np.ndarray, horizon: int
) -> np.ndarray:
    """``[B]`` search rewards of edges parent -> child from value prefixes: the difference of the
    prefixes, or the child's prefix alone when the parent sits at a reset depth
    (``parent_depth % horizon == 0``, the root included)."""
    at_reset = np.asarray(parent_depth) % horizon == 0
    return (np.asarray(child_prefix, np.float32) - np.where(at_reset, 0.0, parent_prefix)).astype(np.float32)


class EfficientZeroPolicy(MuZeroPolicy):
    """EfficientZero network + pUCT search over per-node (latent, LSTM state, prefix, depth)."""

    network: EfficientZeroNetwork  # type: ignore[assignment]  # a ComposedMuZeroNetwork, not a MuZeroNetwork: this class overrides the methods that differ

    def __init__(
        self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None, **parts
    ) -> None:
        """``parts``: the search rule and acting of :class:`MuZeroPolicy` (the sampled type's)."""
        super().__init__(cfg, spec, device=device, network=network, **parts)
        self._prefix_engine = EfficientZeroSearchInference(cfg.efficientzero.lstm_horizon_len)
        self.search_engines = [self._prefix_engine]  # MuZero's MLP engine is not used by this type

    @staticmethod
    def build_network(cfg: Config, spec: EnvSpecInfo) -> EfficientZeroNetwork:
        """The MuZero network of ``model.*`` wrapped with the value-prefix LSTM."""
        muzero = build_network(cfg, spec)
        extra: dict[str, Any] = {"fc_hidden": muzero.fc_hidden} if resolve_model_kind(cfg, spec) == "conv" else {}
        return EfficientZeroNetwork(muzero, lstm_hidden_size=cfg.efficientzero.lstm_hidden_size, **extra)

    def search_backend(self, obs: np.ndarray, root_latent: None = None) -> SearchRoots:
        """Root states, value [K], policy logits [K, A] and the recurrent function: the numpy
        engine (:class:`EfficientZeroSearchInference`) for an MLP network on the CPU under
        ``mcts.inference=auto``, else torch. Call under inference mode."""
        net = self.network
        engine = self._prefix_engine
        if self.cfg.mcts.inference == "auto" and engine.try_bind(net):
            state, value, policy_logits = engine.root(net.representation(self.obs_tensor(obs)).numpy())
            return SearchRoots(state, value, policy_logits, engine)
        init = net.initial_inference(self.obs_tensor(obs))
        batch = obs.shape[0]
        h, c = net.initial_hidden(batch)
        zeros = torch.zeros(batch, 1, device=self.device)
        state = (init.latent, h, c, zeros, zeros.clone())  # prefix 0 and depth 0 at the root
        value = support_to_scalar_np(init.value_logits.float().cpu().numpy())
        return SearchRoots(state, value, init.policy_logits.float().cpu().numpy(), self.recurrent_inference)

    def recurrent_inference(self, state, action: np.ndarray):
        """The torch model step over ``(latent, h, c, prefix [B, 1], depth [B, 1])`` node states:
        the search reward is the difference of value prefixes (:func:`prefix_rewards`)."""
        latent, h, c, prefix, depth = state
        horizon = self.cfg.efficientzero.lstm_horizon_len
        out = self.network.recurrent_inference(latent, (h, c), torch.from_numpy(action).to(self.device))
        child_prefix = support_to_scalar_np(self.to_numpy(out.value_prefix_logits))
        parent_depth = self.to_numpy(depth)[:, 0]
        reward = prefix_rewards(self.to_numpy(prefix)[:, 0], parent_depth, child_prefix, horizon)
        child_depth = depth + 1
        keep = (child_depth % horizon != 0).to(out.hidden[0].dtype)  # reset point: children start from zero
        next_state = (
            out.latent,
            out.hidden[0] * keep,
            out.hidden[1] * keep,
            torch.from_numpy(child_prefix).to(self.device)[:, None],
            child_depth,
        )
        value = support_to_scalar_np(self.to_numpy(out.value_logits))
        return next_state, reward, value, self.to_numpy(out.policy_logits)


class EfficientZeroLearner(MuZeroLearner):
    """MuZero's unrolled loss with the value-prefix LSTM carried through the unroll."""

    policy_class = EfficientZeroPolicy
    policy: EfficientZeroPolicy  # policy_class's, or sampled_efficientzero's (also an EfficientZeroPolicy)
    reward_loss_name = "loss/value_prefix"

    @property
    def reward_loss_weight(self) -> float:
        return self.cfg.efficientzero.value_prefix_loss_weight

    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        batch = super().make_batch(buffer, index, rng=rng)
        horizon = self.cfg.efficientzero.lstm_horizon_len
        return with_extras(batch, target_value_prefix=value_prefix_targets(batch.target_reward, horizon))

    def reward_targets(self, batch: TrainBatch) -> torch.Tensor:
        return torch.from_numpy(batch.extras["target_value_prefix"]).to(self.device)

    def initial_state(self, latent: torch.Tensor):
        return (latent, *self.policy.network.initial_hidden(latent.shape[0]))

    def unroll_step(self, net, state, action: torch.Tensor, k: int):
        latent, h, c = state
        next_latent, (h, c), prefix_logits = net.dynamics(scale_gradient(latent, 0.5), (h, c), action)
        if k % self.cfg.efficientzero.lstm_horizon_len == 0:
            h, c = torch.zeros_like(h), torch.zeros_like(c)
        return (next_latent, h, c), next_latent, prefix_logits

    def unroll_all(self, net, latent0: torch.Tensor, actions: torch.Tensor):
        """The latent chain step by step (it does not read the LSTM), then the value prefix of all
        U steps at once (:meth:`~lz_tune.models.efficientzero.EfficientZeroNetwork.value_prefix_unroll`):
        the numbers of :meth:`unroll_step` step by step, in a few calls."""
        latents, inputs = [latent0], []
        for k in range(actions.shape[1]):
            latent, lstm_input = net.latent_dynamics(scale_gradient(latents[-1], 0.5), actions[:, k])
            latents.append(latent)
            inputs.append(lstm_input)
        if not inputs:
            return latents, []
        logits = net.value_prefix_unroll(torch.stack(inputs), self.cfg.efficientzero.lstm_horizon_len)
        return latents, list(logits.unbind(0))


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """The value-prefix targets are built from the stored rewards: no extra column."""
    return ()


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> EfficientZeroPolicy:
    return EfficientZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> EfficientZeroLearner:
    return EfficientZeroLearner(cfg, spec)
