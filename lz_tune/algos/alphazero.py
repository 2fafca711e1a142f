"""AlphaZero (``policy_type=alphazero``): pUCT search on the game's TRUE rules, for two-player
board games served by OpenSpiel (``openspiel:<game>`` envs).

Where MuZero learns a model of the rules (dynamics, reward) and plans in its latent space,
AlphaZero plans over real game states: the search (:mod:`lz_tune.mcts.rules_search`) clones the
state of every env's game, applies moves with ``apply_action``, takes legal moves from each
state and terminal values from the game's outcome, and asks the network only for the prior and
value of every new leaf (one batched call per simulation over the collector's games). The
network (:class:`lz_tune.models.alphazero.AlphaZeroMLPNetwork`) has a policy and a value head and
no dynamics.

**How the policy reads the game states.** ``Policy.act`` receives an
:class:`~lz_tune.envs.types.EnvBatch`; ``openspiel:<game>`` vector envs fill its
``game_states`` field with a clone of each game's ``pyspiel.State`` as the batch shows it
(``OpenSpielVectorEnv.current_batch``). The collector and the evaluator pass batches through
unchanged, so nothing else knows about it; an env without rules gives None and this type says
so (and refuses such an env at construction: a ConfigError naming ``env.env_id``).

**Targets and loss.** Policy target: the root visit distribution. Value target: the buffer's
n-step values, which for two-player games sign every term from the view of the player to move at
the position (``lz_tune/buffer/targets.py``); with ``buffer.td_steps`` >= the game's length and
``mcts.discount_factor=1`` (the zoo configs) that is the game's outcome for the player to move,
AlphaZero's ``z``. The loss is the MuZero learner's (:func:`lz_tune.algos.update.unrolled_update`:
optimizer, clipping, PER weights, priorities, checkpoints) with :meth:`AlphaZeroLearner.unroll_losses`
in place of the unroll: every position of the sampled window (``buffer.num_unroll_steps + 1`` of
them, 1 with the zoo's ``num_unroll_steps=0``) is a sample of its own, with cross-entropy policy
and categorical value terms, masked past the end of the game; there is no reward, dynamics or
consistency term. Reanalysis needs the game states of stored positions, which the buffer does
not keep: ``buffer.reanalyze_ratio`` and ``buffer.buffer_reanalyze_freq`` must be 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from lz_tune.algos.base import ActResult, Policy, Reanalysis, Temperature, UnrollTerms
from lz_tune.algos.common import soft_ce
from lz_tune.algos.muzero import MuZeroLearner
from lz_tune.algos.parts import gumbel_rule, simulations_per_search
from lz_tune.buffer import StepColumn
from lz_tune.config import Config, ConfigError
from lz_tune.envs.openspiel_game import encode_observation, is_openspiel_id, load_openspiel_game
from lz_tune.envs.types import EnvBatch, EnvSpecInfo
from lz_tune.mcts import select_action
from lz_tune.mcts.rules_search import RulesPUCT, RulesSearchOutput, search_game_states
from lz_tune.models.alphazero import AlphaZeroConvNetwork, AlphaZeroMLPNetwork
from lz_tune.models.support import support_to_scalar, support_to_scalar_np

__all__ = [
    "AlphaZeroPolicy",
    "AlphaZeroLearner",
    "build_network",
    "check_alphazero_config",
    "make_policy",
    "make_learner",
    "step_columns",
    "policy_target_size",
]


def check_alphazero_config(cfg: Config, spec: EnvSpecInfo) -> None:
    """Raise ConfigError naming the key for settings AlphaZero cannot run with."""
    if not is_openspiel_id(cfg.env.env_id):
        raise ConfigError(
            f"env.env_id: policy_type 'alphazero' searches on the game's true rules, which only "
            f"openspiel:<game> envs give (got {cfg.env.env_id!r}); use a MuZero-family type, which "
            f"learns a model of the env"
        )
    if cfg.env.frame_stack != 1:
        raise ConfigError(
            f"env.frame_stack: alphazero encodes the search's game states one at a time, without "
            f"history; set env.frame_stack=1 (got {cfg.env.frame_stack})"
        )
    if cfg.model.kind not in ("auto", "mlp", "conv"):
        raise ConfigError(
            f"model.kind: alphazero has an MLP network (over the flattened observation) or a "
            f"residual conv tower (over board planes); set model.kind=mlp or conv (got {cfg.model.kind!r})"
        )
    if cfg.model.kind == "conv" and len(spec.observation_shape) != 3:
        raise ConfigError(
            f"model.kind: alphazero's conv network reads board planes [C, H, W], and "
            f"{cfg.env.env_id} is served as {list(spec.observation_shape)}; set env.openspiel_planes=True "
            f"(games with a spatial observation tensor) or model.kind=mlp"
        )
    b = cfg.buffer
    for key in ("reanalyze_ratio", "buffer_reanalyze_freq"):
        if getattr(b, key) > 0:
            raise ConfigError(
                f"buffer.{key}: alphazero searches true game states, which the buffer does not "
                f"store, so it cannot reanalyse stored positions; set it to 0 (got {getattr(b, key)})"
            )


def build_network(cfg: Config, spec: EnvSpecInfo) -> torch.nn.Module:
    """The policy + value network of ``cfg.model``: on board planes ``[C, H, W]`` with
    ``model.kind`` conv or auto, AlphaZero's residual tower (num_channels, num_res_blocks,
    latent_dim: the value head's width, value_support_size); else an MLP over the flattened
    observation (latent_dim, hidden_sizes, layer_norm, value_support_size)."""
    m = cfg.model
    if m.kind in ("conv", "auto") and len(spec.observation_shape) == 3:
        return AlphaZeroConvNetwork(
            observation_shape=spec.observation_shape,
            action_space_size=spec.action_space_size,
            num_channels=m.num_channels,
            num_res_blocks=m.num_res_blocks,
            latent_dim=m.latent_dim,
            value_support_size=m.value_support_size,
        )
    return AlphaZeroMLPNetwork(
        observation_dim=math.prod(spec.observation_shape),
        action_space_size=spec.action_space_size,
        latent_dim=m.latent_dim,
        hidden_sizes=m.hidden_sizes,
        value_support_size=m.value_support_size,
        layer_norm=m.layer_norm,
    )


class AlphaZeroPolicy(Policy):
    """The network + the search over the true game states of a batch (``EnvBatch.game_states``)."""

    def __init__(
        self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
    ) -> None:
        check_alphazero_config(cfg, spec)
        self.cfg = cfg
        self.spec = spec
        self.device = torch.device(device)
        self.game_info = load_openspiel_game(cfg.env.env_id)
        self.planes = bool(cfg.env.openspiel_planes)
        self.network = (network or build_network(cfg, spec)).to(self.device)
        self.network.eval()

    # ------------------------------------------------------------------ search

    def rule(self, *, noise: bool) -> RulesPUCT:
        """The search's hyperparameters (``mcts.*``, ``alphazero.*``); root noise when ``noise``."""
        m, az, game = self.cfg.mcts, self.cfg.alphazero, self.game_info.game
        return RulesPUCT(
            pb_c_base=m.pb_c_base,
            pb_c_init=m.pb_c_init,
            root_dirichlet_alpha=m.root_dirichlet_alpha,
            root_noise_weight=m.root_noise_weight if noise else 0.0,
            discount=m.discount_factor,
            q_normalization=az.q_normalization,
            utility_range=(float(game.min_utility()), float(game.max_utility())),
            fpu_reduction=az.fpu_reduction,
        )

    def observations(self, states: Sequence[Any]) -> np.ndarray:
        """``[K, *obs_shape]`` float32 observations of non-terminal game states, from the view of
        each one's player to move (as the env encodes them)."""
        info = self.game_info
        return np.stack(
            [encode_observation(s, s.current_player(), info.tensor_shape, self.planes) for s in states]
        ).reshape(len(states), *self.spec.observation_shape)

    def evaluate(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """``(policy logits [K, A], values [K])`` of non-terminal game states (the search's
        :data:`~lz_tune.mcts.rules_search.LeafEvaluator`); call under inference mode."""
        obs = torch.from_numpy(self.observations(states)).to(self.device)
        policy_logits, value_logits = self.network(obs)
        return policy_logits.float().cpu().numpy(), support_to_scalar_np(value_logits.float().cpu().numpy())

    def search(
        self, states: Sequence[Any], *, num_simulations: int, noise: bool, rng: np.random.Generator
    ) -> RulesSearchOutput:
        """A batched search from game ``states`` (not modified)."""
        gumbel = gumbel_rule(self.cfg, noise=noise) if self.cfg.alphazero.root_selection == "gumbel" else None
        with torch.inference_mode():
            return search_game_states(
                states,
                evaluate=self.evaluate,
                num_actions=self.spec.action_space_size,
                num_simulations=num_simulations,
                rule=self.rule(noise=noise and gumbel is None),
                rng=rng,
                gumbel=gumbel,
            )

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
        """Search from ``batch.game_states``. pUCT: the action from the root visit counts (sampled
        with ``temperature`` when collecting, the most visited in evaluation), the visit shares
        as policy target. Gumbel root: the search's own action and its improved policy."""
        states = batch.game_states
        if states is None or len(states) != batch.num_envs:
            raise ValueError(
                "policy_type=alphazero searches on the game's true states, and this batch carries "
                "none (EnvBatch.game_states is None): only openspiel:<game> envs give them"
            )
        collect = mode == "collect"
        out = self.search(
            states, num_simulations=simulations_per_search(self.cfg, collect=collect), noise=collect, rng=rng
        )
        if out.action is not None and out.improved_policy is not None:  # Gumbel root
            return ActResult(
                action=out.action,
                root_value=out.root_value,
                pred_value=out.pred_value,
                policy_target=out.improved_policy,
            )
        action = select_action(out.visit_counts, temperature=temperature, rng=rng, deterministic=not collect)
        return ActResult(
            action=action,
            root_value=out.root_value,
            pred_value=out.pred_value,
            policy_target=out.visit_distribution,
        )

    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        """The network's values of stored observations (n-step bootstraps when td_steps is
        shorter than the game)."""
        with torch.inference_mode():
            _, value_logits = self.network(torch.from_numpy(np.ascontiguousarray(obs)).to(self.device))
            return support_to_scalar_np(value_logits.float().cpu().numpy())

    def reanalyze(
        self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray, rng: np.random.Generator
    ) -> Reanalysis:
        """Not available: the search needs game states, the buffer stores observations (the
        config check refuses ``buffer.reanalyze_ratio`` / ``buffer_reanalyze_freq`` > 0)."""
        raise ConfigError(
            "buffer.reanalyze_ratio: alphazero cannot reanalyse stored positions (the buffer keeps "
            "observations, not game states)"
        )


class AlphaZeroLearner(MuZeroLearner):
    """The MuZero learner's update, optimizer, target network and checkpoints with AlphaZero's
    loss (:meth:`unroll_losses`): policy and value at every window position, nothing unrolled."""

    policy_class = AlphaZeroPolicy

    def unroll_losses(self, net, obs, actions, value_t, reward_t, target_policy, mask) -> UnrollTerms:
        """Every position of the window ``obs [B, S, *obs]`` (S = U + 1) through the network
        once: ``policy = sum_k mask_k CE(pi_k, visits_k)``, ``value = sum_k mask_k CE(v_k,
        two_hot(z_k))``; reward and consistency terms are 0 (no dynamics)."""
        batch, steps = obs.shape[:2]
        flat = obs.reshape(batch * steps, *obs.shape[2:])
        policy_logits, value_logits = net.prediction(net.representation(flat))
        weight = mask.reshape(batch * steps)
        value_loss = (soft_ce(value_logits, value_t.reshape(batch * steps, -1)) * weight).view(batch, steps).sum(1)
        target = target_policy.reshape(batch * steps, -1)
        policy_loss = (self.policy_loss(policy_logits, target) * weight).view(batch, steps).sum(1)
        grad = self.cfg.learner.policy_entropy_weight > 0
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            policy_entropy = (self.policy_entropy(policy_logits) * weight).view(batch, steps).sum(1)
        with torch.no_grad():
            pred_value0 = support_to_scalar(value_logits.view(batch, steps, -1)[:, 0])
        zeros = torch.zeros_like(value_loss)
        return UnrollTerms(policy_loss, value_loss, zeros, zeros.clone(), policy_entropy, pred_value0)


def step_columns(cfg: Config, spec: EnvSpecInfo) -> tuple[StepColumn, ...]:
    """AlphaZero stores nothing beyond the common per-step columns."""
    return ()


def policy_target_size(cfg: Config, spec: EnvSpecInfo) -> int:
    """P: one visit share per action."""
    return spec.action_space_size


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> AlphaZeroPolicy:
    return AlphaZeroPolicy(cfg, spec, device=device, network=network)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> AlphaZeroLearner:
    return AlphaZeroLearner(cfg, spec)
