"""MuZero: network + pUCT search (:class:`MuZeroPolicy`) and the unrolled loss (:class:`MuZeroLearner`).

Loss of one batch (B samples, U unroll steps), per sample, summed over k = 0..U:

    policy  : CE(policy_logits_k, target_policy_k)               weight policy_loss_weight
    value   : CE(value_logits_k, two_hot(h(target_value_k)))     weight value_loss_weight
    reward  : CE(reward_logits_k, two_hot(h(target_reward_k-1))) weight reward_loss_weight (k >= 1)
    ssl     : -cos(pred(proj(s_k)), proj(repr(o_{t+k}))) * mask  weight ssl_loss_weight (k >= 1)
    entropy : -H(policy_k)                                       weight policy_entropy_weight

Every step k counts equally; the summed loss is divided by U (the original's 1/U gradient
hook on the total loss) and the latent's gradient is halved at the entry of every dynamics
step (MuZero paper, appendix G), so the gradient through the dynamics does not grow with U. Samples are weighted by their PER importance
weights; new priorities are |predicted value - target value| at k = 0.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from lz_tune.algos.base import ActResult, Learner, Policy
from lz_tune.buffer.batch import TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.mcts import RootInput, puct_search, select_action
from lz_tune.models.base import MuZeroNetwork
from lz_tune.models.mlp_inference import MLPSearchInference
from lz_tune.models.support import scalar_to_support, support_to_scalar, support_to_scalar_np


def build_network(cfg: Config, spec: EnvSpecInfo) -> MuZeroNetwork:
    """The MLP network for vector observations, the conv network for images (model.kind)."""
    m = cfg.model
    kind = m.kind
    if kind == "auto":
        kind = "conv" if len(spec.observation_shape) == 3 else "mlp"
    if kind == "mlp":
        from lz_tune.models.mlp import MuZeroMLPNetwork

        if len(spec.observation_shape) != 1:
            raise ConfigError(f"model.kind: 'mlp' needs vector observations, {cfg.env.env_id} gives "
                             f"{spec.observation_shape}; use model.kind=conv")
        return MuZeroMLPNetwork(observation_dim=spec.observation_shape[0], action_space_size=spec.action_space_size,
                                latent_dim=m.latent_dim, hidden_sizes=m.hidden_sizes,
                                value_support_size=m.value_support_size, reward_support_size=m.reward_support_size,
                                projection_dim=m.projection_dim, layer_norm=m.layer_norm)
    from lz_tune.models.conv import MuZeroConvNetwork

    if len(spec.observation_shape) != 3:
        raise ValueError(f"model.kind: 'conv' needs image observations [C, H, W], {cfg.env.env_id} gives "
                         f"{spec.observation_shape}; use model.kind=mlp")
    return MuZeroConvNetwork(observation_shape=spec.observation_shape, action_space_size=spec.action_space_size,
                             num_channels=m.num_channels, num_res_blocks=m.num_res_blocks, downsample=m.downsample,
                             value_support_size=m.value_support_size, reward_support_size=m.reward_support_size,
                             projection_dim=m.projection_dim)


class MuZeroPolicy(Policy):
    """MuZero network + batched pUCT search. All inference runs under ``torch.inference_mode``."""

    def __init__(self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu",
                 network: Optional[MuZeroNetwork] = None) -> None:
        self.cfg = cfg
        self.spec = spec
        self.device = torch.device(device)
        self.network = (network or build_network(cfg, spec)).to(self.device)
        self.network.eval()
        self._cpu_float32 = self.device.type == "cpu" and next(self.network.parameters()).dtype == torch.float32
        self._engine = MLPSearchInference()  # numpy search engine for MLP networks on the CPU (mcts.inference)

    # ------------------------------------------------------------------ search plumbing

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)

    def _numpy(self, t: torch.Tensor) -> np.ndarray:
        """float32 numpy view (no copy on CPU: this runs once per simulation)."""
        return t.numpy() if self._cpu_float32 else t.float().cpu().numpy()

    def _recurrent(self, latent: torch.Tensor, action: np.ndarray):
        out = self.network.recurrent_inference(latent, torch.from_numpy(action).to(self.device))
        reward = support_to_scalar_np(self._numpy(out.reward_logits))
        value = support_to_scalar_np(self._numpy(out.value_logits))
        return out.latent, reward, value, self._numpy(out.policy_logits)

    def _search_backend(self, obs: np.ndarray):
        """``(RootInput fields, recurrent_fn)`` for :func:`puct_search` from observations ``[K, *obs_shape]``.

        ``mcts.inference=auto`` and an MLP network on the CPU: representation in torch, then the
        numpy engine (root prediction included) on numpy latents. Otherwise torch throughout.
        Returns ``(latent, value [K], policy_logits [K, A], recurrent_fn)``; call under inference mode.
        """
        if self.cfg.mcts.inference == "auto" and MLPSearchInference.supports(self.network):
            self._engine.bind(self.network)  # fresh views: the learner may have stepped since the last search
            latent = self.network.representation(self._obs_tensor(obs)).numpy()
            value, policy_logits = self._engine.prediction(latent)
            return latent, value, policy_logits, self._engine
        init = self.network.initial_inference(self._obs_tensor(obs))
        value = support_to_scalar_np(init.value_logits.float().cpu().numpy())
        return init.latent, value, init.policy_logits.float().cpu().numpy(), self._recurrent

    def search(self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray, *, num_simulations: int,
               noise: bool, rng: np.random.Generator):
        """Batched search from stacked observations [K, *obs_shape]; returns (SearchOutput, pred_value [K])."""
        m = self.cfg.mcts
        with torch.inference_mode():
            latent, pred_value, policy_logits, recurrent_fn = self._search_backend(obs)
            root = RootInput(latent=latent, value=pred_value, policy_logits=policy_logits,
                             action_mask=action_mask, to_play=to_play)
            out = puct_search(root=root, recurrent_fn=recurrent_fn, num_simulations=num_simulations,
                              discount=m.discount_factor, rng=rng, pb_c_base=m.pb_c_base, pb_c_init=m.pb_c_init,
                              root_dirichlet_alpha=m.root_dirichlet_alpha,
                              root_noise_weight=m.root_noise_weight if noise else 0.0,
                              value_delta_max=m.value_delta_max)
        return out, pred_value

    # ------------------------------------------------------------------ Policy interface

    def act(self, batch: EnvBatch, *, mode: str, temperature: float, rng: np.random.Generator) -> ActResult:
        collect = mode == "collect"
        sims = self.cfg.mcts.num_simulations if collect else (self.cfg.mcts.eval_num_simulations
                                                              or self.cfg.mcts.num_simulations)
        out, pred_value = self.search(batch.observation, batch.action_mask, batch.to_play, num_simulations=sims,
                                      noise=collect, rng=rng)
        action = select_action(out.visit_counts, temperature=temperature, rng=rng, deterministic=not collect)
        return ActResult(action=action, root_value=out.root_value, pred_value=pred_value,
                         visit_distribution=out.visit_distribution)

    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            logits = self.network.initial_inference(self._obs_tensor(obs)).value_logits
            return support_to_scalar_np(logits.float().cpu().numpy())

    def reanalyze(self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        out, _ = self.search(obs, action_mask, to_play, num_simulations=self.cfg.mcts.num_simulations, noise=False,
                             rng=rng)
        return out.visit_distribution, out.root_value


def _scale_gradient(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Identity forward; multiplies the gradient by ``scale``."""
    return x * scale + x.detach() * (1.0 - scale)


def _soft_ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B] cross-entropy of ``logits`` [B, K] against target probabilities [B, K]."""
    return -(target * F.log_softmax(logits, dim=-1)).sum(-1)


def make_optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    lc = cfg.learner
    if lc.optim_type == "sgd":
        return torch.optim.SGD(params, lr=lc.learning_rate, momentum=lc.momentum, weight_decay=lc.weight_decay)
    if lc.optim_type == "adam":
        return torch.optim.Adam(params, lr=lc.learning_rate, weight_decay=lc.weight_decay)
    return torch.optim.AdamW(params, lr=lc.learning_rate, weight_decay=lc.weight_decay)


def learning_rate_at(cfg: Config, train_iter: int) -> float:
    """Piecewise schedule: x1 before 50%, x0.1 before 100%, x0.01 after threshold updates."""
    lc = cfg.learner
    if not lc.piecewise_decay_lr_scheduler:
        return lc.learning_rate
    frac = train_iter / lc.threshold_training_steps_for_final_lr
    return lc.learning_rate * (1.0 if frac < 0.5 else 0.1 if frac < 1.0 else 0.01)


class MuZeroLearner(Learner):
    """Learner network, hard-copied target network, optimizer and the unrolled MuZero loss."""

    def __init__(self, cfg: Config, spec: EnvSpecInfo) -> None:
        self.cfg = cfg
        device = cfg.learner.device
        self.policy = MuZeroPolicy(cfg, spec, device=device)
        self.target_policy = MuZeroPolicy(cfg, spec, device=device, network=copy.deepcopy(self.policy.network))
        self.optimizer = make_optimizer(cfg, self.policy.network.parameters())
        self.train_iter = 0
        self.device = self.policy.device

    @property
    def learning_rate(self) -> float:
        return learning_rate_at(self.cfg, self.train_iter)

    def learn(self, batch: TrainBatch) -> tuple[dict[str, float], np.ndarray]:
        cfg, lc = self.cfg, self.cfg.learner
        net = self.policy.network
        net.train()
        dev = self.device
        obs = torch.from_numpy(batch.obs).to(dev)                       # [B, U+1, *obs]
        actions = torch.from_numpy(batch.actions).to(dev)               # [B, U]
        target_value = torch.from_numpy(batch.target_value).to(dev)     # [B, U+1]
        target_reward = torch.from_numpy(batch.target_reward).to(dev)   # [B, U]
        target_policy = torch.from_numpy(batch.target_policy).to(dev)   # [B, U+1, A]
        mask = torch.from_numpy(batch.mask).to(dev)                     # [B, U+1]
        weights = torch.from_numpy(batch.weights).to(dev)               # [B]
        num_unroll = batch.actions.shape[1]
        vs, rs = cfg.model.value_support_size, cfg.model.reward_support_size

        value_t = scalar_to_support(target_value, vs)                   # [B, U+1, 2vs+1]
        reward_t = scalar_to_support(target_reward, rs)                 # [B, U, 2rs+1]

        init = net.initial_inference(obs[:, 0])
        latent = init.latent
        value_loss = _soft_ce(init.value_logits, value_t[:, 0])
        policy_loss = _soft_ce(init.policy_logits, target_policy[:, 0])
        entropy = -(F.softmax(init.policy_logits, -1) * F.log_softmax(init.policy_logits, -1)).sum(-1)
        reward_loss = torch.zeros_like(value_loss)
        ssl_loss = torch.zeros_like(value_loss)
        with torch.no_grad():
            pred_value0 = support_to_scalar(init.value_logits)

        if num_unroll > 0:
            if lc.ssl_loss_weight > 0:
                with torch.no_grad():
                    flat_next = obs[:, 1:].reshape(-1, *obs.shape[2:])
                    target_proj = net.project(net.representation(flat_next), with_grad=False)
                    target_proj = target_proj.reshape(obs.shape[0], num_unroll, -1)
            for k in range(1, num_unroll + 1):
                latent, reward_logits = net.dynamics(_scale_gradient(latent, 0.5), actions[:, k - 1])
                policy_logits, value_logits = net.prediction(latent)
                value_loss = value_loss + _soft_ce(value_logits, value_t[:, k])
                policy_loss = policy_loss + _soft_ce(policy_logits, target_policy[:, k])
                reward_loss = reward_loss + _soft_ce(reward_logits, reward_t[:, k - 1])
                probs = F.softmax(policy_logits, -1)
                entropy = entropy + -(probs * F.log_softmax(policy_logits, -1)).sum(-1)
                if lc.ssl_loss_weight > 0:
                    pred_proj = net.project(latent, with_grad=True)
                    cos = F.cosine_similarity(pred_proj, target_proj[:, k - 1], dim=-1)
                    ssl_loss = ssl_loss + (-cos) * mask[:, k]

        per_sample = (lc.policy_loss_weight * policy_loss + lc.value_loss_weight * value_loss
                      + lc.reward_loss_weight * reward_loss + lc.ssl_loss_weight * ssl_loss
                      - lc.policy_entropy_weight * entropy)
        loss = (weights * per_sample).mean() / max(num_unroll, 1)

        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), lc.grad_clip_value)
        self.optimizer.step()
        self.train_iter += 1
        if self.train_iter % lc.target_update_freq == 0:
            self.target_policy.network.load_state_dict(net.state_dict())
        net.eval()

        priorities = (pred_value0 - target_value[:, 0]).abs().cpu().numpy().astype(np.float32) + 1e-6
        logs = {
            "loss/total": float(loss.detach()),
            "loss/policy": float(policy_loss.mean().detach()),
            "loss/value": float(value_loss.mean().detach()),
            "loss/reward": float(reward_loss.mean().detach()),
            "loss/ssl": float(ssl_loss.mean().detach()),
            "policy/entropy": float(entropy.mean().detach()),
            "learner/grad_norm": float(grad_norm),
            "learner/lr": self.optimizer.param_groups[0]["lr"],
            "learner/target_value_mean": float(target_value[:, 0].mean()),
            "learner/pred_value_mean": float(pred_value0.mean()),
        }
        return logs, priorities

    def state_dict(self) -> dict[str, Any]:
        return {
            "network": self.policy.network.state_dict(),
            "target_network": self.target_policy.network.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "train_iter": self.train_iter,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.network.load_state_dict(state["network"])
        self.target_policy.network.load_state_dict(state["target_network"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.train_iter = int(state["train_iter"])
        self.policy.on_weights_loaded()
        self.target_policy.on_weights_loaded()


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> MuZeroPolicy:
    return MuZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    return MuZeroLearner(cfg, spec)
