"""UniZero: a transformer world model (:class:`~lz_tune.models.unizero.UniZeroWorldModel`) searched
with MuZero's pUCT, and its key/value-cache lifecycle.

Inference (collection, evaluation). Each env has ONE cache: the keys and values of its last
``C - 1`` tokens (``C = 2 * unizero.infer_context_length``), a
:class:`~lz_tune.models.transformer.KVWindow` kept by the Policy. A real step appends
``[a_{t-1}, o_t]`` to it and reads the root's policy and value at ``o_t``; the search starts
from that window, and every node's state is its own window (the parent's plus the node's
action token and predicted observation token), so a simulation is one batched world-model call
for all trees and no entry is ever shared between envs. The cache of env i is tagged with the
weights version it was built with (:class:`~lz_tune.algos.history.EnvHistory`) and dropped when:

- env i's episode ends, or an evaluation starts (``reset``);
- any weights load: a snapshot in an actor, a checkpoint restore, an update in the learner
  (``on_weights_loaded`` bumps the version; a cache of another version is never read);
- env i has run ``unizero.kv_cache_clear_interval`` steps on it (0: never; counted per env).

Positions are rotary and attention is windowed in training too, so a cache is exact: it gives
the outputs of recomputing the whole sequence since its last clear (tested), and it never holds
more than ``C - 1`` tokens. The original's learner-side clearing after every collect budget has
nothing to clear here: the learner's targets keep no caches between calls (below).

Training (teacher-forced, no cache): ``[o_t, a_t, ..., a_{t+U-1}, o_{t+U}]`` through the
transformer at once; per sample, summed over the unroll::

    policy  : CE(policy_k, pi_k smoothed by eps(train_iter))   learner.policy_loss_weight
    value   : CE(value_k, two_hot(h(z_k)))                      learner.value_loss_weight
    reward  : CE(reward_k, two_hot(h(r_{t+k})))  (action tokens) learner.reward_loss_weight
    latent  : MSE(next_latent_k, sg(target_encoder(o_{t+k+1}))) learner.ssl_loss_weight, masked
    entropy : -H(policy_k)                                      learner.policy_entropy_weight

each term only where its step is real (``m_k``: o_{t+k} exists; the latent term: o_{t+k+1}):
past the episode end the buffer pads with zero observations, which are no state (on CartPole
zeros are the upright, centred cart), and no absorbing-state targets are taught to them, as the
original masks these terms with its ``mask_padding``; divided by U + 1, PER-weighted; the target
network is a momentum average (``unizero.target_momentum``). Targets (single owner: the driver's learner): the n-step
values bootstrap with the target world model, one teacher-forced pass per sample over the stored
``o_{t+n-H+1} .. o_{t+n+U}`` (H = ``infer_context_length``), so that every bootstrap position has
at least H steps of context, as the policy had when it acted there (cut at the segment's first
step); reanalysis searches from the H stored steps ending at each position.

Schedules and checks in train_iter (the ``train_iter`` handed to ``learn``: the driver's, also on
every data-parallel worker), each off by default where the original's is:

- policy label smoothing ``eps(train_iter)`` (``unizero.policy_ls_eps_*``, or the fixed
  ``continuous_ls_eps``);
- adaptive entropy weight (``unizero.use_adaptive_entropy_weight``): alpha replaces
  ``learner.policy_entropy_weight``; after the forward pass one Adam step on log alpha against a
  target entropy annealed in train_iter, then the update uses the new alpha;
- encoder latent-norm clip (``use_encoder_clip_annealing`` / ``latent_norm_clip_threshold``) and
  head clip (``head_clip_*``): between the backward pass and the optimizer step, the encoder's
  final LayerNorm (a head's parameters) scaled down when this update's largest latent norm
  (|head output|) exceeds the threshold of train_iter;
- monitoring every ``monitor_norm_freq`` updates: module parameter and gradient norms and
  output statistics, repeated in the logs until the next check.

With data-parallel workers the statistics that decide a step (the entropy, the largest latent
norm and head output) are all-reduced first, so every worker takes the same step (the original's
DDP takes each rank's own); the monitored output statistics are the workers' merged means.
"""

from __future__ import annotations

import logging
import math
from typing import Callable, Optional, cast

import numpy as np
import torch
import torch.nn.functional as F

from lz_tune.algos.base import (
    Acting,
    ActResult,
    Learner,
    Policy,
    PolicyLoss,
    Reanalysis,
    SearchRoots,
    SearchRule,
    Temperature,
    UnrollTerms,
)
from lz_tune.algos.common import learning_rate_at, resolve_model_kind, soft_ce
from lz_tune.algos.history import EnvHistory
from lz_tune.algos.muzero import policy_target_size, step_columns  # noqa: F401  (same as MuZero's)
from lz_tune.algos.parts import (
    DiscreteActing,
    VisitPolicyLoss,
    check_action_space,
    float32_numpy,
    map_policy_target,
    obs_to_tensor,
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
from lz_tune.buffer import GameBuffer, History, SampledIndex, TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.models.support import support_to_scalar, support_to_scalar_np
from lz_tune.models.transformer import KVWindow
from lz_tune.models.transformer_inference import TransformerSearchInference
from lz_tune.models.unizero import UniZeroWorldModel

__all__ = [
    "UniZeroPolicy",
    "UniZeroLearner",
    "make_policy",
    "make_learner",
    "step_columns",
    "policy_target_size",
    "build_world_model",
]

_NEVER = np.iinfo(np.int64).max // 4
_log = logging.getLogger(__name__)

TARGET_LATENT = "target_latent"
"""``TrainBatch.extras`` key of the latent loss's targets ``[B, U, E]`` (:meth:`UniZeroLearner.make_batch`)."""


def should_run_periodic_monitor(train_iter: int, frequency: int, last_check_iter: int) -> bool:
    """The original's periodic check: at the first update of a process or after a restore
    (``last_check_iter`` < 0), then whenever train_iter is a multiple of ``frequency`` (0: never)."""
    return frequency > 0 and (last_check_iter < 0 or train_iter % frequency == 0)


def annealed(start: float, end: float, steps: int, train_iter: int, kind: str = "linear") -> float:
    """``start`` at train_iter 0 to ``end`` from ``steps`` on: linear, or ``cosine`` (half a
    cosine period, flat at both ends)."""
    progress = min(1.0, train_iter / steps)
    if kind == "cosine":
        return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return start * (1.0 - progress) + end * progress


#: head clip name -> the world model's module (``observations``: the next-latent head)
HEAD_MODULES = {"policy": "policy_head", "value": "value_head", "reward": "reward_head", "observations": "latent_head"}
#: monitored modules (the original's groups): parameter norms, gradient norms
PARAM_NORM_MODULES = {
    "encoder": "encoder",
    "transformer": "transformer",
    "head_value": "value_head",
    "head_reward": "reward_head",
    "head_policy": "policy_head",
}
GRAD_NORM_MODULES = {
    "encoder": "encoder",
    "transformer": "transformer",
    "action_embedding": "action_embedding",
    "head_observation": "latent_head",
    "head_reward": "reward_head",
    "head_value": "value_head",
    "head_policy": "policy_head",
}


def stability_warnings(m: dict[str, float]) -> list[str]:
    """The original's warnings on a monitoring check's logs: policy logits over 5 (8: critical),
    latent norms' std over 5 (10), transformer-output features nearly constant over the batch."""
    out = []
    policy_max = m.get("logits/policy_abs_max", 0.0)
    if policy_max > 5.0:
        out.append(f"{'CRITICAL' if policy_max > 8.0 else 'WARNING'}: policy logits abs max {policy_max:.2f}")
    emb_std = m.get("embeddings/obs_norm_std", 0.0)
    if emb_std > 5.0:
        out.append(f"{'CRITICAL' if emb_std > 10.0 else 'WARNING'}: latent norm std {emb_std:.2f}")
    if "activation/x_token_feature_std_mean" in m:
        std_mean, constant = m["activation/x_token_feature_std_mean"], m["activation/x_token_near_constant_fraction"]
        if std_mean < 1e-2 or constant > 0.9:
            level = "CRITICAL" if std_mean < 1e-3 or constant > 0.99 else "WARNING"
            out.append(
                f"{level}: transformer-output feature std mean {std_mean:.4g}, "
                f"{constant:.0%} of the features nearly constant"
            )
    return out


def _wide(x: torch.Tensor) -> torch.Tensor:
    """``x`` detached, in float32 at least (a float64 network's statistics stay float64)."""
    x = x.detach()
    return x if x.dtype == torch.float64 else x.float()


def _stats(prefix: str, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{prefix}_mean/_std/_max/_min`` of a tensor's entries."""
    x = _wide(x)
    return {f"{prefix}_mean": x.mean(), f"{prefix}_std": x.std(), f"{prefix}_max": x.max(), f"{prefix}_min": x.min()}


def build_world_model(cfg: Config, spec: EnvSpecInfo) -> UniZeroWorldModel:
    """The world model of ``cfg.unizero`` (and ``model.value/reward_support_size``,
    ``model.hidden_sizes`` for the vector encoder, ``model.num_channels`` for the image one; the
    encoder follows the observation rank, and ``model.kind`` must agree with it)."""
    u, m = cfg.unizero, cfg.model
    resolve_model_kind(cfg, spec)  # model.kind must fit the observations (mlp: vectors, conv: images)
    return UniZeroWorldModel(
        observation_shape=spec.observation_shape,
        action_space_size=spec.action_space_size,
        action_dim=spec.action_dim,
        embed_dim=u.embed_dim,
        num_layers=u.num_layers,
        num_heads=u.num_heads,
        context_tokens=2 * u.infer_context_length,
        value_support_size=m.value_support_size,
        reward_support_size=m.reward_support_size,
        hidden_sizes=m.hidden_sizes,
        num_channels=m.num_channels,
        dropout=u.dropout,
    )


def history_token_valid(valid: np.ndarray) -> np.ndarray:
    """``[K, 2H-1]`` bool validity of the tokens ``[o, a, ..., a, o]`` of a :class:`History`
    whose observations are ``valid [K, H]`` (the action after a real observation is real)."""
    tokens = np.repeat(valid, 2, axis=1)[:, :-1]
    return tokens


class UniZeroPolicy(Policy):
    """World model + pUCT over per-node KV windows; per-env caches (see the module docstring).

    A :class:`~lz_tune.algos.base.SearchModel` of its own; the search, the acting and the rules
    are MuZero's parts (:mod:`lz_tune.algos.parts`). search_rule: the search strategy's
    builder (pUCT). acting: :class:`~lz_tune.algos.parts.DiscreteActing`, or sampled_unizero's
    :class:`~lz_tune.algos.sampled_muzero.SampledActing`.
    """

    network: UniZeroWorldModel

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
        # build_world_model's, or the one given: the learner's copy for its target policy
        self.network = cast(UniZeroWorldModel, (network or build_world_model(cfg, spec)).to(self.device))
        self.network.eval()
        self._cpu_float32 = self.device.type == "cpu" and next(self.network.parameters()).dtype == torch.float32
        interval = cfg.unizero.kv_cache_clear_interval
        self.history = EnvHistory(interval if interval > 0 else _NEVER)
        self.cache: Optional[KVWindow] = None
        """[N] each env's window, ending at its last observation token (see ``history`` for
        which rows are current)."""
        self._window_engine = TransformerSearchInference()  # the search's CPU engine (mcts.inference)

    # ------------------------------------------------------------------ search plumbing (MuZero's parts)

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """``obs`` [K, *obs_shape] as a tensor on the policy's device."""
        return obs_to_tensor(obs, self.device)

    def to_numpy(self, t: torch.Tensor) -> np.ndarray:
        """float32 numpy view (no copy on CPU: this runs once per simulation)."""
        return float32_numpy(t, zero_copy=self._cpu_float32)

    def strategy(self, *, noise: bool):
        """The search strategy of ``search_rule`` (pUCT; root noise when ``noise``)."""
        return self.search_rule(self.cfg, noise=noise)

    def num_simulations(self, *, collect: bool) -> int:
        return simulations_per_search(self.cfg, collect=collect)

    def search(
        self,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        *,
        num_simulations: int,
        noise: bool,
        rng: np.random.Generator,
        root_latent: Optional[tuple] = None,
    ):
        """Batched search from observations [K, *obs_shape] (or prepared roots); returns
        (SearchOutput, pred_value [K])."""
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

    def act(
        self,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        previous_action: Optional[np.ndarray] = None,
    ) -> ActResult:
        """Search from the per-env caches' roots (:meth:`act_root`), acted on by ``acting``."""
        root = self.act_root(batch.observation, previous_action)
        return self.acting.act(self, batch, mode=mode, temperature=temperature, rng=rng, root=root)

    def reanalyze(
        self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray, rng: np.random.Generator
    ) -> Reanalysis:
        """A search without noise from a context of each observation alone (the learner
        reanalyses from stored contexts: :meth:`reanalyze_history`)."""
        return self.acting.reanalyze(self, obs, action_mask, to_play, rng)

    # ------------------------------------------------------------------ per-env caches

    def on_weights_loaded(self) -> None:
        self.history.on_weights_loaded()
        self._window_engine.invalidate()

    def reset(self, env_ids: np.ndarray) -> None:
        self.history.reset(env_ids)

    def cache_nbytes(self) -> int:
        """Bytes held by the per-env caches (bounded: ``N * L * (C-1) * E`` keys and values)."""
        return 0 if self.cache is None else self.cache.nbytes

    def root_windows(self, obs: np.ndarray, previous_action: Optional[np.ndarray]):
        """This step's roots ``(window [N], policy logits [N, A], value logits [N, V])``: envs
        whose cache is current append ``[a_{t-1}, o_t]`` to it, the others start from ``o_t``.
        The per-env caches move on to the new windows."""
        net = self.network
        num_envs = obs.shape[0]
        carried = self.history.carried(num_envs, previous_action)
        with torch.inference_mode():
            latent = net.encode(self.obs_tensor(obs))
            if not carried.any():
                policy_logits, value_logits, window = net.root_step(None, None, latent)
            else:
                window = net.empty_window(num_envs)
                # (the heads end in a Linear: torch types Sequential items as Module)
                policy_logits = latent.new_empty(num_envs, net.policy_head[-1].out_features)  # type: ignore[call-overload]
                value_logits = latent.new_empty(num_envs, net.value_head[-1].out_features)  # type: ignore[call-overload]
                for rows, cont in ((np.flatnonzero(carried), True), (np.flatnonzero(~carried), False)):
                    if not rows.size:
                        continue
                    index = torch.from_numpy(rows).to(self.device)
                    if cont:
                        assert self.cache is not None  # an env is carried only after a step that cached it
                        action = torch.from_numpy(np.asarray(previous_action)[rows]).to(self.device)
                        out = net.root_step(self.cache.select(index), action, latent.index_select(0, index))
                    else:
                        out = net.root_step(None, None, latent.index_select(0, index))
                    policy_logits.index_copy_(0, index, out[0])
                    value_logits.index_copy_(0, index, out[1])
                    window.scatter_(index, out[2])
        self.history.advance(carried)
        self.cache = window.clone()
        return window, policy_logits, value_logits

    def history_roots(self, hist: History):
        """Roots from stored contexts (learner side): ``(window [K], policy logits, value logits)``
        after the teacher-forced pass over each :class:`History`."""
        h_obs, window, _ = self._history_pass(hist)
        policy_logits, value_logits = self.network.observation_heads(h_obs[:, -1])
        return window, policy_logits, value_logits

    def _history_pass(self, hist: History) -> tuple[torch.Tensor, KVWindow, torch.Tensor]:
        """Teacher-forced pass over stored steps: (observation-token outputs [K, H, E], window,
        the observations' latents [K, H, E])."""
        net = self.network
        k, h = hist.valid.shape
        latents = net.encode(self.obs_tensor(hist.obs.reshape(k * h, *hist.obs.shape[2:]))).view(k, h, -1)
        actions = torch.from_numpy(np.ascontiguousarray(hist.actions)).to(self.device)
        token_valid = torch.from_numpy(history_token_valid(hist.valid)).to(self.device)
        h_obs, _, window = net.sequence(latents, actions, token_valid=token_valid)
        return h_obs, window, latents

    # ------------------------------------------------------------------ search

    def search_backend(self, obs: np.ndarray, root_latent: Optional[tuple] = None) -> SearchRoots:
        """Root windows (``root_latent``: prepared by :meth:`root_windows` / :meth:`history_roots`;
        None: a context of the observation alone), root value [K], policy logits [K, A] and the
        recurrent function over window node states."""
        if root_latent is None:
            policy_logits, value_logits, window = self.network.root_step(
                None, None, self.network.encode(self.obs_tensor(obs))
            )
        else:
            window, policy_logits, value_logits = root_latent
        value = support_to_scalar_np(self.to_numpy(value_logits))
        if not self.cfg.unizero.search_cache:
            return SearchRoots(
                self._uncached_root(window), value, self.to_numpy(policy_logits), self._recurrent_uncached
            )
        engine = self._window_engine  # node windows in the engine's arena, one engine call per simulation
        if self.cfg.mcts.inference == "auto" and engine.try_bind(self.network):
            return SearchRoots(
                engine.root(tuple(t.numpy() for t in window.as_tuple())), value, self.to_numpy(policy_logits), engine
            )
        return SearchRoots(window.as_tuple(), value, self.to_numpy(policy_logits), self.recurrent_inference)

    def recurrent_inference(self, state: tuple, action: np.ndarray):
        """The torch model step over window node states (``KVWindow.as_tuple()``): the action
        token and the predicted observation token appended to the node's window."""
        window, reward_logits, policy_logits, value_logits, _ = self.network.recurrent_step(
            KVWindow.from_tuple(state), torch.from_numpy(action).to(self.device)
        )
        return (
            window.as_tuple(),
            support_to_scalar_np(self.to_numpy(reward_logits)),
            support_to_scalar_np(self.to_numpy(value_logits)),
            self.to_numpy(policy_logits),
        )

    # the uncached reference (unizero.search_cache=False): node state = (root window, path tokens)

    def _uncached_root(self, window: KVWindow) -> tuple:
        """Root node state: its window and an empty path of ``2 * num_simulations`` token slots."""
        slots = 2 * max(self.cfg.mcts.num_simulations, self.cfg.mcts.eval_num_simulations or 0)
        tokens = window.keys.new_zeros(window.batch_size, slots, self.network.embed_dim)
        valid = torch.zeros(window.batch_size, slots, dtype=torch.bool, device=tokens.device)
        return (*window.as_tuple(), tokens, valid)

    def _run_path(self, window: KVWindow, tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Outputs [B, E] at the last path token, recomputing the whole (left-padded) path after
        the root window; positions as if the path followed the window directly."""
        shifted = KVWindow(window.keys, window.values, window.key_pos, window.valid, window.next_pos - (~valid).sum(1))
        out, _ = self.network.transformer(tokens, shifted, token_valid=valid)
        return out[:, -1]

    def _recurrent_uncached(self, state: tuple, action: np.ndarray):
        window, tokens, valid = KVWindow.from_tuple(state[:5]), state[5], state[6]
        net = self.network
        ones = torch.ones_like(valid[:, :1])

        def append(t, v, token):
            return torch.cat((t[:, 1:], token[:, None]), 1), torch.cat((v[:, 1:], ones), 1)

        tokens, valid = append(tokens, valid, net.embed_action(torch.from_numpy(action).to(self.device)))
        reward_logits, next_latent = net.action_heads(self._run_path(window, tokens, valid))
        tokens, valid = append(tokens, valid, next_latent)
        policy_logits, value_logits = net.observation_heads(self._run_path(window, tokens, valid))
        return (
            (*window.as_tuple(), tokens, valid),
            support_to_scalar_np(self.to_numpy(reward_logits)),
            support_to_scalar_np(self.to_numpy(value_logits)),
            self.to_numpy(policy_logits),
        )

    def act_root(self, obs: np.ndarray, previous_action: Optional[np.ndarray]):
        """The per-env caches' roots (:meth:`root_windows`)."""
        return self.root_windows(obs, previous_action)

    # ------------------------------------------------------------------ targets

    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        """Values of observations with no context (the learner uses :meth:`history_values`)."""
        with torch.inference_mode():
            _, value_logits, _ = self.network.root_step(None, None, self.network.encode(self.obs_tensor(obs)))
            return support_to_scalar_np(self.to_numpy(value_logits))

    def history_values(self, hist: History) -> np.ndarray:
        """[K] values at the last observation of each stored context."""
        with torch.inference_mode():
            return support_to_scalar_np(self.to_numpy(self.history_roots(hist)[2]))

    def sequence_values(self, hist: History) -> np.ndarray:
        """[K, H] values at every observation of each stored sequence, in one teacher-forced pass
        (each sees the steps of the sequence before it, up to the attention window)."""
        return self.sequence_values_and_latents(hist)[0]

    def sequence_values_and_latents(self, hist: History) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sequence_values` and the pass's observation latents ``[K, H, E]`` float32 (the
        learner reuses the target model's as latent targets)."""
        k, h = hist.valid.shape
        with torch.inference_mode():
            h_obs, _, latents = self._history_pass(hist)
            logits = self.network.value_head(h_obs.reshape(k * h, -1))
            values = support_to_scalar_np(self.to_numpy(logits)).reshape(k, h)
            return values, self.to_numpy(latents.float())

    def encode_numpy(self, obs: np.ndarray) -> np.ndarray:
        """Latents ``[K, E]`` float32 of observations ``[K, *obs_shape]``."""
        with torch.inference_mode():
            return self.to_numpy(self.network.encode(self.obs_tensor(obs)).float())

    def reanalyze_history(
        self, hist: History, action_mask: np.ndarray, to_play: np.ndarray, rng: np.random.Generator
    ) -> Reanalysis:
        """Fresh search (no root noise) from each stored context."""
        with torch.inference_mode():
            root = self.history_roots(hist)
        return self.reanalyze_from(hist.obs[:, -1], action_mask, to_play, rng, root)

    def reanalyze_from(self, obs, action_mask, to_play, rng, root) -> Reanalysis:
        """The search of :meth:`reanalyze` from prepared roots, read out by ``acting``."""
        return self.acting.reanalyze(self, obs, action_mask, to_play, rng, root=root)


class UniZeroLearner(Learner):
    """Teacher-forced world-model loss, momentum target network, train_iter schedules.

    The update is MuZero's (:func:`~lz_tune.algos.update.unrolled_update` over this learner's
    hooks). policy_factory: builds the policy and target policy (default :class:`UniZeroPolicy`);
    policy_loss: the policy term (:class:`~lz_tune.algos.parts.VisitPolicyLoss`; sampled_unizero's
    :class:`~lz_tune.algos.sampled_muzero.SampledPolicyLoss`).
    """

    reward_loss_name = "loss/reward"
    ssl_loss_name = "loss/latent"
    policy: UniZeroPolicy
    target_policy: UniZeroPolicy
    nonfinite_term: Optional[str] = None
    """The first non-finite loss term of an update that was skipped (set by ``unrolled_update``)."""

    def __init__(
        self,
        cfg: Config,
        spec: EnvSpecInfo,
        *,
        policy_factory: Optional[Callable[..., UniZeroPolicy]] = None,
        policy_loss: Optional[PolicyLoss] = None,
    ) -> None:
        self.cfg = cfg
        self.policy_term: PolicyLoss = policy_loss or VisitPolicyLoss()
        self.policy, self.target_policy, self.optimizer = build_learner_networks(
            cfg, spec, policy_factory or UniZeroPolicy
        )
        self.train_iter = 0
        self.device = self.policy.device
        self._schedule_iter = 0
        for p in self.target_policy.network.parameters():
            p.requires_grad_(False)
        self.action_space_size = spec.action_space_size
        self.log_alpha = torch.zeros(1, device=self.device, requires_grad=True)
        """ln of the adaptive entropy weight (unizero.use_adaptive_entropy_weight; alpha starts at 1)."""
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.unizero.adaptive_entropy_alpha_lr)
        self.encoder_clip_count = 0
        """Updates of this process whose encoder latent-norm clip scaled the encoder."""
        self._last_monitor_iter = -1
        self._monitor_now = False
        self._monitor_logs: dict[str, float] = {}  # the latest check's, repeated until the next
        self._update: dict = {}  # what this update's forward pass and hooks leave for the logs

    @property
    def learning_rate(self) -> float:
        return learning_rate_at(self.cfg, self.train_iter)

    @property
    def reward_loss_weight(self) -> float:
        return self.cfg.learner.reward_loss_weight

    def update_path_notice(self) -> Optional[str]:
        """One unroll path: the whole sequence is one transformer call already."""
        return one_unroll_path_notice(self.cfg)

    def reward_targets(self, batch: TrainBatch) -> torch.Tensor:
        """[B, U] the rewards."""
        return torch.from_numpy(batch.target_reward).to(self.device)

    def policy_loss(self, logits: torch.Tensor, target) -> torch.Tensor:
        """[N] ``policy_term.loss`` of the policy output against a (smoothed) target."""
        return self.policy_term.loss(logits, target)

    def policy_entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """[N] ``policy_term.entropy`` of the policy output."""
        return self.policy_term.entropy(logits)

    def extra_losses(self, batch: TrainBatch) -> dict[str, tuple[float, torch.Tensor]]:
        """No terms beyond the five of :class:`~lz_tune.algos.base.UnrollTerms`."""
        return {}

    def run_forward(self, forward):
        """See :func:`lz_tune.algos.update.run_forward` (through the learner's collective)."""
        return run_forward(self, forward)

    # ------------------------------------------------------------------ schedules (train_iter)

    def policy_label_smoothing(self, train_iter: int) -> float:
        """eps of the policy target at ``train_iter``: unizero.continuous_ls_eps when
        use_continuous_label_smoothing, else linear from policy_ls_eps_start to policy_ls_eps_end
        over policy_ls_eps_decay_steps updates when the start is > 0, else 0."""
        u = self.cfg.unizero
        if u.use_continuous_label_smoothing:
            return u.continuous_ls_eps
        if u.policy_ls_eps_start <= 0:
            return 0.0
        return annealed(u.policy_ls_eps_start, u.policy_ls_eps_end, u.policy_ls_eps_decay_steps, train_iter)

    def target_entropy_ratio(self, train_iter: int) -> float:
        """The adaptive entropy weight's target, as a fraction of ln(A), at ``train_iter``."""
        u = self.cfg.unizero
        return annealed(
            u.target_entropy_start_ratio, u.target_entropy_end_ratio, u.target_entropy_decay_steps, train_iter
        )

    def encoder_clip_threshold(self, train_iter: int) -> float:
        """The encoder latent-norm clip threshold at ``train_iter`` (0: no clipping)."""
        u = self.cfg.unizero
        if not u.use_encoder_clip_annealing:
            return u.latent_norm_clip_threshold
        return annealed(
            u.encoder_clip_start_value,
            u.encoder_clip_end_value,
            u.encoder_clip_anneal_steps,
            train_iter,
            u.encoder_clip_anneal_type,
        )

    def head_clip_threshold(self, train_iter: int) -> float:
        """The head clip threshold at ``train_iter``."""
        u = self.cfg.unizero
        if not u.head_clip_use_annealing:
            return u.head_clip_threshold
        return annealed(
            u.head_clip_start_value,
            u.head_clip_end_value,
            u.head_clip_anneal_steps,
            train_iter,
            u.head_clip_anneal_type,
        )

    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None):
        t = self._schedule_iter = self.train_iter if train_iter is None else int(train_iter)
        self._monitor_now = should_run_periodic_monitor(t, self.cfg.unizero.monitor_norm_freq, self._last_monitor_iter)
        self._update = {"logs": {}, "monitor": {}}
        if TARGET_LATENT in batch.extras:
            self._update[TARGET_LATENT] = torch.from_numpy(batch.extras[TARGET_LATENT]).to(self.device)
        logs, priorities = unrolled_update(self, batch)
        logs["learner/policy_label_smoothing"] = self.policy_label_smoothing(t)
        logs.update({k: float(v) for k, v in self._update["logs"].items()})
        if self._monitor_now:
            checked = {k: float(v) for k, v in self._update["monitor"].items()}
            warnings_issued = stability_warnings(checked)
            if warnings_issued:
                _log.warning("[training stability] update %d: %s", t, "; ".join(warnings_issued))
            checked["stability/warning_count"] = float(len(warnings_issued))
            checked["stability/last_check_iter"] = float(t)
            self._monitor_logs, self._last_monitor_iter = checked, t
        logs.update(self._monitor_logs)
        self._update = {}
        return logs, priorities

    # ------------------------------------------------------------------ hooks of the update

    def _all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """``t`` summed (``op="sum"``) or maxed (``"max"``) over the data-parallel workers, so
        that each takes the step of the whole batch; in one process ``t`` itself."""
        return self.collective.all_reduce(t, "sum" if op == "sum" else "max")

    def policy_entropy_weight_now(self):
        """learner.policy_entropy_weight, or with unizero.use_adaptive_entropy_weight alpha after
        this update's step on log alpha: loss ``log_alpha * (H - ln(A) * ratio(train_iter))``, H
        the forward pass's mean policy entropy over valid steps (a [1] tensor: no host sync)."""
        u = self.cfg.unizero
        if not u.use_adaptive_entropy_weight:
            return self.cfg.learner.policy_entropy_weight
        total, count = self._all_reduce(torch.stack(self._update["entropy"]), "sum")
        ratio = self.target_entropy_ratio(self._schedule_iter)
        with torch.enable_grad():
            alpha_loss = (
                self.log_alpha * (total / count.clamp_min(1.0) - math.log(self.action_space_size) * ratio)
            ).sum()
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
        for group in self.alpha_optimizer.param_groups:
            group["lr"] = u.adaptive_entropy_alpha_lr
        self.alpha_optimizer.step()
        with torch.no_grad():
            self.log_alpha.clamp_(math.log(u.adaptive_entropy_alpha_min), math.log(u.adaptive_entropy_alpha_max))
        alpha = self.log_alpha.detach().exp()
        self._update["logs"].update(
            {"entropy/adaptive_alpha": alpha, "entropy/target_ratio": ratio, "entropy/alpha_loss": alpha_loss.detach()}
        )
        return alpha

    def before_optimizer_step(self) -> None:
        """Monitoring's parameter and gradient norms (before any clipping), then the encoder
        latent-norm clip and the head clip of this train_iter."""
        with torch.no_grad():
            if self._monitor_now:
                self._update["monitor"].update(self._module_norms())
            self._clip_encoder(self._schedule_iter)
            self._clip_heads(self._schedule_iter)

    def _clip_encoder(self, train_iter: int) -> None:
        threshold = self.encoder_clip_threshold(train_iter)
        largest, scale = self._update["latent_norm_max"], 1.0
        if threshold > 0:
            largest = float(self._all_reduce(largest, "max"))
            if largest > threshold:
                scale = threshold / largest
                self.encoder_clip_count += 1
                net = self.policy.network
                norm = net.encoder_final_norm  # it sets the latents' scale; else the whole encoder (the original's)
                for p in (norm if norm is not None else net.encoder).parameters():
                    p.mul_(scale)
        self._update["logs"].update(
            {
                "encoder_clip/enabled": float(threshold > 0),
                "encoder_clip/applied": float(scale < 1.0),
                "encoder_clip/apply_count": float(self.encoder_clip_count),
                "encoder_clip/scale_factor": scale,
                "encoder_clip/max_latent_norm": largest,
                "encoder_clip/threshold": threshold,
            }
        )

    def _clip_heads(self, train_iter: int) -> None:
        u, outputs = self.cfg.unizero, self._update["head_abs_max"]
        names = [name for name in u.head_clip_heads if name in outputs]
        if not names or train_iter % u.head_clip_monitor_freq != 0:
            return
        threshold = self.head_clip_threshold(train_iter)
        largest = self._all_reduce(torch.stack([outputs[name] for name in names]), "max").tolist()
        logs = self._update["logs"]
        for name, value in zip(names, largest):
            logs[f"head_clip/{name}_max_logits"], logs[f"head_clip/{name}_threshold"] = value, threshold
            if value > threshold:
                scale = threshold / value
                for p in getattr(self.policy.network, HEAD_MODULES[name]).parameters():
                    p.mul_(scale)
                logs[f"head_clip/{name}_scale_factor"] = scale

    def _module_norms(self) -> dict[str, torch.Tensor]:
        """``norm/<module>``: L2 norm of its parameters; ``grad/<module>``: of their gradients,
        and ``grad/<module>_global_fraction`` of the whole network's gradient norm."""
        net = self.policy.network

        def norm(tensors: list[torch.Tensor]) -> torch.Tensor:
            if not tensors:
                return torch.zeros((), device=self.device)
            return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.float()) for t in tensors]))

        def params(module):
            return [p for p in module.parameters() if p.requires_grad]

        out = {f"norm/{name}": norm(params(getattr(net, attr))) for name, attr in PARAM_NORM_MODULES.items()}
        total = norm([p.grad for p in params(net) if p.grad is not None])
        for name, attr in GRAD_NORM_MODULES.items():
            out[f"grad/{name}"] = norm([p.grad for p in params(getattr(net, attr)) if p.grad is not None])
            if total > 0:
                out[f"grad/{name}_global_fraction"] = out[f"grad/{name}"] / total
        return out

    def policy_targets(self, batch: TrainBatch):
        """The stored targets, smoothed: ``(1 - eps) pi + eps / P`` over the P entries (the
        probabilities of a sampled type's ``(probs, actions)`` target)."""
        target = self.policy_term.targets(batch, self.device)
        eps = self.policy_label_smoothing(self._schedule_iter)
        if eps <= 0:
            return target
        probs = target[0] if isinstance(target, tuple) else target
        probs = (1.0 - eps) * probs + eps / probs.shape[-1]
        return (probs, *target[1:]) if isinstance(target, tuple) else probs

    @property
    def value_reward_label_smoothing(self) -> float:
        """unizero.label_smoothing_eps, or LightZero's default of the type (unizero 0.1)."""
        eps = self.cfg.unizero.label_smoothing_eps
        return self.default_label_smoothing if eps is None else eps

    #: LightZero's UniZero smooths its value and reward targets by 0.1 (sampled UniZero: not at all)
    default_label_smoothing = 0.1

    def target_changes_at(self, train_iter: int) -> bool:
        """The momentum average moves the target network at every update."""
        return True

    def update_target(self) -> None:
        """theta_target <- (1 - tau) theta_target + tau theta after every update."""
        tau = self.cfg.unizero.target_momentum
        with torch.no_grad():
            for mine, target in zip(self.policy.network.parameters(), self.target_policy.network.parameters()):
                target.lerp_(mine, tau)
            for mine_buffer, target_buffer in zip(self.policy.network.buffers(), self.target_policy.network.buffers()):
                target_buffer.copy_(mine_buffer)
        self.target_policy.on_weights_loaded()

    # ------------------------------------------------------------------ batch

    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        """Window + n-step values bootstrapped by the target world model over each bootstrap
        position's stored context (+ rows reanalysed from their contexts)."""
        b, target = self.cfg.buffer, self.target_policy
        length = self.cfg.unizero.infer_context_length
        win = buffer.gather_window(index)

        # One teacher-forced pass per sample over o_{t+n-H+1} .. o_{t+n+U}: the values at its
        # bootstrap positions t+n .. t+n+U, each after at least H steps of context (less at a
        # segment's start), each sample reading its own pass only (its targets do not depend on
        # the other rows: a shard on a learner rank builds the same); positions it does not cover
        # (a truncated segment's last observation) get their own H-step context.
        seq_len = length + win.positions.shape[1] - 1
        seg_ids = np.asarray(index.segment_ids, np.int64)
        ends = win.positions[:, -1] + buffer.td_steps
        seq = buffer.gather_history(seg_ids, ends, seq_len)
        chunk = max(1, buffer.mini_infer_size // seq_len)
        passes = [
            target.sequence_values_and_latents(
                History(seq.obs[i : i + chunk], seq.actions[i : i + chunk], seq.valid[i : i + chunk])
            )
            for i in range(0, len(seg_ids), chunk)
        ]
        seq_values = np.concatenate([values for values, _ in passes])
        first = ends - seq_len + 1
        target_latent = self._latent_targets(win, seq.valid, first, np.concatenate([lat for _, lat in passes]))

        def bootstrap(rows: np.ndarray, segment_ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
            # row b's own pass, where it covers the position after at least H - 1 steps of context
            offset = positions - first[rows]
            covered = (offset >= length - 1) & (offset < seq_len)
            covered[covered] &= seq.valid[rows[covered], offset[covered]]
            out = np.full(len(rows), np.nan, np.float32)
            out[covered] = seq_values[rows[covered], offset[covered]]
            missing = np.flatnonzero(~covered)
            if missing.size:
                out[missing] = target.history_values(
                    buffer.gather_history(segment_ids[missing], positions[missing], length)
                )
            return out

        target_value = buffer.n_step_values(
            win, value_fn=None, use_root_value=b.use_root_value, bootstrap_fn=None if b.use_root_value else bootstrap
        )
        target_policy, extras = win.policy_targets, dict(win.extras)
        num_reanalyzed = index.num_reanalyzed(b.reanalyze_ratio)
        if num_reanalyzed > 0:
            sel = win.valid[:num_reanalyzed]
            seg_ids = np.broadcast_to(np.asarray(index.segment_ids, np.int64)[:num_reanalyzed, None], sel.shape)[sel]
            hist = buffer.gather_history(seg_ids, win.positions[:num_reanalyzed][sel], length)
            fresh = target.reanalyze_history(
                hist, win.action_mask[:num_reanalyzed][sel], win.to_play[:num_reanalyzed][sel], rng
            )
            target_policy[:num_reanalyzed][sel] = fresh.policy_target
            for name, value in fresh.extras.items():  # sampled_unizero: the new K root actions too
                extras[name][:num_reanalyzed][sel] = value
        extras[TARGET_LATENT] = target_latent
        return TrainBatch(
            obs=win.obs,
            actions=win.actions,
            target_value=target_value,
            target_reward=win.rewards,
            target_policy=target_policy,
            mask=win.mask,
            weights=np.asarray(index.weights, np.float32),
            to_play=win.to_play,
            action_mask=win.action_mask,
            timesteps=win.timesteps,
            index=index,
            num_reanalyzed=num_reanalyzed,
            extras=extras,
        )

    def _latent_targets(self, win, seq_valid: np.ndarray, first: np.ndarray, seq_latents: np.ndarray) -> np.ndarray:
        """``[B, U, E]`` float32: the target model's latents of o_{t+1} .. o_{t+U}, the latent loss's
        targets. The bootstrap pass of :meth:`make_batch` has already encoded most of them (its
        sequences ``[B, S]`` start at o_{first}: o_{t+2} .. o_{t+U} when td_steps + 1 >= H), with the
        same target model the loss would use (UniZero's target moves at every update, so batches
        are never prepared ahead of the update before them); the others are encoded here. Steps
        past the episode end (mask 0, never read by the loss) hold the latent of the nearest
        stored frame."""
        positions = win.positions[:, 1:]  # [B, U]
        seq_len = seq_valid.shape[1]
        index = positions - first[:, None]
        inside = (index >= 0) & (index < seq_len)
        index = np.clip(index, 0, seq_len - 1)
        have = inside & np.take_along_axis(seq_valid, index, 1)
        out = np.take_along_axis(seq_latents, index[..., None], 1)  # [B, U, E]
        missing = ~have & (win.mask[:, 1:] > 0)
        if missing.any():
            out[missing] = self.target_policy.encode_numpy(win.obs[:, 1:][missing])
        return np.ascontiguousarray(out, np.float32)

    def reanalyze_segments(self, buffer: GameBuffer, segment_ids: np.ndarray, *, rng: np.random.Generator) -> None:
        """Periodic buffer reanalyze: every step of these segments searched by the target world
        model from the H stored steps ending at it (as the policy had when it acted there; cut at
        the segment's first step), H = unizero.infer_context_length."""
        target = self.target_policy
        buffer.reanalyze_segments(
            segment_ids,
            lambda hist, mask, to_play: target.reanalyze_history(hist, mask, to_play, rng),
            history_length=self.cfg.unizero.infer_context_length,
            write_root_values=self.cfg.reanalyze_writes_root_values,
        )

    # ------------------------------------------------------------------ loss

    def unroll_losses(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """The teacher-forced terms of the module docstring, as [B] sums over the unroll (the
        latent MSE in MuZero's ssl slot) and the predicted root value [B]."""
        batch, num_unroll = actions.shape[:2]
        steps = num_unroll + 1
        latents = net.encode(obs.reshape(batch * steps, *obs.shape[2:])).view(batch, steps, -1)
        h_obs, h_act, _ = net.sequence(latents, actions)
        policy_logits, value_logits = net.observation_heads(h_obs.reshape(batch * steps, -1))

        def per_sample(x: torch.Tensor, count: int) -> torch.Tensor:  # [B * count] -> [B]
            return x.view(batch, count).sum(1)

        real = mask.reshape(batch * steps)  # 1 where o_{t+k} is a real observation, 0 past the episode end
        value_loss = per_sample(soft_ce(value_logits, value_t.reshape(batch * steps, -1)) * real, steps)
        flat_target = map_policy_target(lambda t: t.reshape(batch * steps, *t.shape[2:]), target_policy)
        policy_loss = per_sample(self.policy_loss(policy_logits, flat_target) * real, steps)
        step_entropy = self.policy_entropy(policy_logits)
        policy_entropy = per_sample(step_entropy * real, steps)
        with torch.no_grad():
            pred_value0 = support_to_scalar(value_logits.view(batch, steps, -1)[:, 0])
        reward_logits, next_latent = (
            net.action_heads(h_act.reshape(batch * num_unroll, -1)) if num_unroll else (None, None)
        )
        if self._update:  # inside learn: what the schedules and checks of this update read
            self._note_forward(
                latents,
                h_obs,
                h_act,
                step_entropy,
                mask,
                {"policy": policy_logits, "value": value_logits, "reward": reward_logits, "observations": next_latent},
            )
        if num_unroll == 0:
            zeros = torch.zeros_like(value_loss)
            return UnrollTerms(policy_loss, value_loss, zeros, zeros.clone(), policy_entropy, pred_value0)
        assert reward_logits is not None and next_latent is not None  # num_unroll > 0
        reward_loss = per_sample(
            soft_ce(reward_logits, reward_t.reshape(batch * num_unroll, -1)) * mask[:, :num_unroll].reshape(-1),
            num_unroll,
        )
        shared = self._update.get(TARGET_LATENT) if self._update else None
        if shared is not None:  # make_batch's, from its bootstrap pass (same target model, same frames)
            target_latent = shared.reshape(batch * num_unroll, -1)
        else:
            with torch.no_grad():
                target_latent = self.target_policy.network.encode(
                    obs[:, 1:].reshape(batch * num_unroll, *obs.shape[2:])
                )
        latent_mse = F.mse_loss(next_latent, target_latent, reduction="none").mean(-1).view(batch, num_unroll)
        latent_loss = (latent_mse * mask[:, 1:]).sum(1)
        return UnrollTerms(policy_loss, value_loss, reward_loss, latent_loss, policy_entropy, pred_value0)

    @torch.no_grad()
    def _note_forward(self, latents, h_obs, h_act, step_entropy, mask, heads: dict) -> None:
        """Keep what this update's schedules, clips and checks read off its forward pass (as
        tensors: no host sync): the largest latent norm, the policy entropy over valid steps
        (sum, count), each clipped head's largest |output|, and on a monitoring update the
        output statistics."""
        u, up = self.cfg.unizero, self._update
        latent_norms = _wide(latents).norm(dim=-1)
        up["latent_norm_max"] = latent_norms.max()
        entropy = _wide(step_entropy)
        valid = mask.reshape(-1).to(entropy.dtype)
        up["entropy"] = [(entropy * valid).sum(), valid.sum()]
        up["head_abs_max"] = {
            name: _wide(heads[name]).abs().max() for name in u.head_clip_heads if heads[name] is not None
        }
        if not self._monitor_now:
            return
        x = _wide(torch.cat((h_obs.reshape(-1, h_obs.shape[-1]), h_act.reshape(-1, h_act.shape[-1]))))
        feature_std = x.std(0, unbiased=False)
        monitor = {
            **_stats("norm/x_token", x.norm(dim=-1)),
            "activation/x_token_feature_std_mean": feature_std.mean(),
            "activation/x_token_feature_std_min": feature_std.min(),
            "activation/x_token_near_constant_fraction": (feature_std < 1e-3).float().mean(),
            **_stats("embeddings/obs_norm", latent_norms),
        }
        for name in ("value", "policy", "reward"):
            if heads[name] is not None:
                monitor.update(_stats(f"logits/{name}", heads[name]))
                monitor[f"logits/{name}_abs_max"] = _wide(heads[name]).abs().max()
        up["monitor"].update(monitor)

    def state_dict(self) -> dict:
        """MuZero's, and with unizero.use_adaptive_entropy_weight log alpha and its optimizer."""
        state = learner_state(self)
        if self.cfg.unizero.use_adaptive_entropy_weight:
            state["log_alpha"] = self.log_alpha.detach().clone()
            state["alpha_optimizer"] = self.alpha_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restores log alpha and its optimizer when the state has them (a state without keeps
        alpha where it is); the next update runs a monitoring check."""
        load_learner_state(self, state)
        if "log_alpha" in state:
            with torch.no_grad():
                self.log_alpha.copy_(torch.as_tensor(state["log_alpha"]).to(self.log_alpha.device))
        if "alpha_optimizer" in state:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self._last_monitor_iter = -1


def make_policy(cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu") -> UniZeroPolicy:
    return UniZeroPolicy(cfg, spec, device=device)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> UniZeroLearner:
    return UniZeroLearner(cfg, spec)
