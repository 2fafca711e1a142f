"""A config for any env from its id: ``python -m lz_tune train --env ID`` with no config file.

Reads top to bottom: :func:`profile_env` learns what the env is (its spec: observation shape and
layout, action space, players, time limit, reward threshold; and a short uniformly random rollout:
reward scale, episode lengths, whether the per-step reward is a constant), then
:func:`config_for_env` derives each setting from that profile and records why
(:class:`Choice`). One generic config per family (vector, small image, large image, continuous
actions, two-player board game), not a zoo file per task.

The rules, each with its reason in :func:`config_for_env`:
- observation -> network: vectors (and anything flattened) an MLP; 3-D images a conv network,
  without the stride-16 down-sampling when the image is small (MinAtar's 10 x 10);
- action space -> the policy type (continuous: ``sampled_muzero``); a type asked for that does not
  fit is refused by its own check, naming ``policy_type``, before anything starts;
- reward scale and discount -> the categorical supports: the value support covers ``h(V)`` for the
  largest value the returns can reach, the reward support ``h(max |r|)`` (``h`` = MuZero's value
  transform), so small tasks do not pay for Atari's 601 bins;
- episode length -> discount and n-step horizon (board games: no discount, Monte-Carlo targets);
- a constant cost per step (Acrobot, MountainCar: -1 until the goal) -> action repeat 3,
  temporally extended epsilon-greedy exploration and no SSL consistency loss (with constant
  rewards nothing else shapes the latent and the consistency loss alone collapses it). On
  Acrobot the action repeat is what makes MuZero learn: without it every evaluation stayed at
  -500 through 74k env steps, with it -154 at 34k decisions (benchmarks/README.md);
- two-player games -> self-play settings and evaluation against OpenSpiel's MCTS bot.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from lz_tune.config import Config, ConfigError

__all__ = [
    "EnvProfile",
    "Choice",
    "GeneratedConfig",
    "profile_env",
    "config_for_env",
    "fit_schedule_to_budget",
    "check_policy_type_fits",
    "DEFAULT_CONTINUOUS_POLICY_TYPE",
]

DEFAULT_CONTINUOUS_POLICY_TYPE = "sampled_muzero"
"""The type a Box action space gets when none is asked for (planning over sampled actions)."""

NO_TIME_LIMIT_CAP = 10_000
"""``env.max_episode_steps`` for an env that registers no time limit (agent steps)."""

BOARD_MONTE_CARLO_CAP = 200
"""Two-player games longer than this (checkers, mancala, chess: up to 1,000s of moves) get n-step
value targets of this many moves and segments of this length, instead of one game per segment."""

POLICY_TARGET_BUDGET_BYTES = 2**30
"""Vector envs: the replay buffer is sized so that its stored policy targets fit in about this."""

SMALL_IMAGE_SIDE = 32
"""Images whose sides are all at most this keep their resolution (no stride-16 down-sampling)."""


@dataclass(frozen=True)
class EnvProfile:
    """What :func:`profile_env` found out about an env.

    Attributes:
        env_id: the id.
        spec: the shapes as lz_tune serves them (:class:`lz_tune.envs.EnvSpecInfo`).
        time_limit: the registered time limit in agent steps (None: none registered).
        reward_threshold: the registered "solved" return (None: none).
        max_abs_reward: the largest |reward| of one step in the random rollout (Atari: 1, clipped).
        step_cost: every non-final step of the random rollout gave the same NEGATIVE reward
            (Acrobot, MountainCar: -1 until the goal): nothing but reaching the goal tells states
            apart, and random play rarely reaches it. (CartPole's constant +1 is not a cost: there
            the episode's end is what is bad, and random play meets it at once.)
        random_return_mean, random_return_std: over the random rollout's finished episodes
            (NaN when none finished).
        mean_episode_length: of those episodes (NaN when none finished).
        rollout_steps: agent steps the rollout played (0: not rolled out).
        max_game_length: two-player games: the longest game in moves; else 0.
        mean_legal_actions: the mean number of legal actions per step of the rollout (the
            branching factor of a board game); NaN when not rolled out or actions are continuous.
    """

    env_id: str
    spec: Any
    time_limit: Optional[int]
    reward_threshold: Optional[float]
    max_abs_reward: float
    step_cost: bool
    random_return_mean: float
    random_return_std: float
    mean_episode_length: float
    rollout_steps: int
    max_game_length: int = 0
    mean_legal_actions: float = math.nan


@dataclass(frozen=True)
class Choice:
    """One derived setting: ``key`` (dotted config key), ``value``, and ``why`` in words."""

    key: str
    value: Any
    why: str


@dataclass(frozen=True)
class GeneratedConfig:
    """A config derived from an env, with the choices behind it."""

    config: Config
    profile: EnvProfile
    choices: tuple[Choice, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        """The choices, one line each, for ``train --env`` / ``config --env`` to print."""
        p, s = self.profile, self.profile.spec
        lines = [
            f"config derived from env {p.env_id}: observations {list(s.observation_shape)} "
            f"{s.observation_dtype}, "
            + (f"{s.action_dim}-D continuous actions" if s.action_dim else f"{s.action_space_size} actions")
            + (f", {s.num_players} players" if s.num_players > 1 else "")
            + (f", time limit {p.time_limit}" if p.time_limit else "")
            + (f", solved at {p.reward_threshold:g}" if p.reward_threshold is not None else "")
        ]
        if p.rollout_steps:
            lines.append(
                f"  random play ({p.rollout_steps} steps): return {p.random_return_mean:.1f} +- "
                f"{p.random_return_std:.1f}, episode length {p.mean_episode_length:.0f}, max |reward| "
                f"{p.max_abs_reward:g}" + (", a constant cost per step" if p.step_cost else "")
            )
        width = max(len(c.key) for c in self.choices)
        lines += [f"  {c.key:<{width}} = {c.value!r:<12}  {c.why}" for c in self.choices]
        return "\n".join(lines)


def value_transform(x: float) -> float:
    """MuZero's h(x) = sign(x) (sqrt(|x| + 1) - 1) + 0.001 x for one number
    (:func:`lz_tune.models.support.scalar_transform`, the transform the supports are built for)."""
    import torch

    from lz_tune.models.support import scalar_transform

    return float(scalar_transform(torch.tensor(float(x), dtype=torch.float64)))


def support_size_for(bound: float) -> int:
    """The smallest categorical support ``[-S, S]`` that holds ``h(bound)``, with one bin of margin."""
    return max(2, int(math.ceil(value_transform(abs(bound)))) + 1)


def _random_rollout(cfg: Config, steps: int, seed: int) -> dict[str, Any]:
    """Play uniformly random legal actions in ``cfg``'s env (collect mode) for ``steps`` agent steps."""
    from lz_tune.workers.common import make_env

    n = 8
    rng = np.random.default_rng(seed)
    rewards, done_flags, returns, lengths, legal = [], [], [], [], []
    with make_env(cfg, num_envs=n, seed=seed, mode="collect") as env:
        batch = env.reset()
        for _ in range(max(1, steps // n)):
            if env.action_dim:
                action = rng.uniform(-1.0, 1.0, size=(n, env.action_dim)).astype(np.float32)
            else:
                legal.append(batch.action_mask.sum(axis=1))
                logits = np.where(batch.action_mask, rng.random(batch.action_mask.shape), -1.0)
                action = logits.argmax(axis=1)
            result = env.step(action)
            rewards.append(result.reward.astype(np.float64))
            done_flags.append(result.done)
            finished = result.real_episode_end
            returns.extend(result.episode_return[finished].tolist())
            lengths.extend(result.episode_length[finished].tolist())
            batch = result.batch
    reward = np.stack(rewards)
    done = np.stack(done_flags)
    mid = reward[~done]
    return {
        "steps": int(reward.size),
        "max_abs_reward": float(np.abs(reward).max()) if reward.size else 0.0,
        "step_cost": bool(mid.size > 0 and np.ptp(mid) == 0.0 and mid[0] < 0.0),
        "returns": np.asarray(returns, np.float64),
        "lengths": np.asarray(lengths, np.float64),
        "mean_legal_actions": float(np.mean(np.concatenate(legal))) if legal else math.nan,
    }


def profile_env(
    env_id: str,
    *,
    import_modules: Sequence[str] = (),
    observation_layout: str = "auto",
    rollout_steps: int = 2000,
    seed: int = 0,
) -> EnvProfile:
    """Read ``env_id``'s spec and play ``rollout_steps`` uniformly random steps in it.

    Raises:
        ValueError / ConfigError: an unknown id, an env lz_tune cannot serve, an ambiguous layout.
    """
    from lz_tune.envs import resolve_env_id
    from lz_tune.envs.openspiel_game import is_openspiel_id, load_openspiel_game
    from lz_tune.envs.registration import run_env_imports
    from lz_tune.workers.common import env_spec_for

    run_env_imports(import_modules)
    probe_cfg = Config.from_dict(
        {"env": {"env_id": env_id, "import_modules": list(import_modules), "observation_layout": observation_layout}}
    )
    spec = env_spec_for(probe_cfg)
    time_limit = threshold = None
    max_game_length = 0
    if is_openspiel_id(env_id):
        max_game_length = load_openspiel_game(env_id).max_game_length
        time_limit = max_game_length
    else:
        registration = resolve_env_id(env_id).spec
        time_limit, threshold = registration.max_episode_steps, registration.reward_threshold
    if spec.is_atari:  # rewards clipped to {-1, 0, 1} in collection; a rollout would cost an emulator
        return EnvProfile(
            env_id=env_id,
            spec=spec,
            time_limit=time_limit,
            reward_threshold=threshold,
            max_abs_reward=1.0,
            step_cost=False,
            random_return_mean=math.nan,
            random_return_std=math.nan,
            mean_episode_length=math.nan,
            rollout_steps=0,
        )
    # long enough for 8 envs to finish an episode that runs to its time limit (Acrobot: 4,000 steps)
    steps = min(max(rollout_steps, 8 * (time_limit or 0)), 20_000)
    r = _random_rollout(probe_cfg, steps, seed)
    returns, lengths = r["returns"], r["lengths"]
    return EnvProfile(
        env_id=env_id,
        spec=spec,
        time_limit=time_limit,
        reward_threshold=None if threshold is None else float(threshold),
        max_abs_reward=r["max_abs_reward"],
        step_cost=r["step_cost"],
        random_return_mean=float(returns.mean()) if returns.size else math.nan,
        random_return_std=float(returns.std()) if returns.size else math.nan,
        mean_episode_length=float(lengths.mean()) if lengths.size else math.nan,
        rollout_steps=r["steps"],
        max_game_length=max_game_length,
        mean_legal_actions=r["mean_legal_actions"],
    )


def _slug(env_id: str) -> str:
    name = env_id.split(":")[-1].split("/")[-1]
    name = re.sub(r"-v\d+$", "", name)
    return re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "env"


class _Builder:
    """Collects ``key -> value`` settings and the reason for each."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.choices: list[Choice] = []

    def set(self, key: str, value: Any, why: str = "") -> None:
        self.values[key] = value
        if why:
            self.choices.append(Choice(key, value, why))


def check_policy_type_fits(cfg: Config, spec: Any) -> None:
    """Build ``cfg``'s policy once for ``spec``, so that a type that cannot act in the env (discrete
    search on continuous actions, a network kind that does not fit the observations) fails here with
    its own ConfigError naming the key, before anything starts."""
    from lz_tune.algos import get_algorithm

    get_algorithm(cfg.policy_type).make_policy(cfg, spec)


def config_for_env(
    env_id: str,
    *,
    policy_type: Optional[str] = None,
    import_modules: Sequence[str] = (),
    observation_layout: str = "auto",
    seed: int = 0,
    profile: Optional[EnvProfile] = None,
) -> GeneratedConfig:
    """The generic config for ``env_id`` (see the module docstring for the rules).

    Args:
        env_id: any id lz_tune serves (gymnasium, ALE, ``MinAtar/...``, ``openspiel:<game>``).
        policy_type: None: ``muzero`` (discrete actions) or ``sampled_muzero`` (continuous).
        import_modules: ``env.import_modules`` (registration code the env needs).
        observation_layout: ``env.observation_layout``.
        seed: of the run and of the profiling rollout.
        profile: a profile already made (tests); None: :func:`profile_env`.

    Raises:
        ConfigError: the policy type does not fit the env (the message names ``policy_type``).
        ValueError: the env cannot be served (unknown id, ambiguous layout, ...).
    """
    try:
        p = profile or profile_env(
            env_id, import_modules=import_modules, observation_layout=observation_layout, seed=seed
        )
    except ConfigError:
        raise
    except ValueError as e:  # unknown id, a missing package, an ambiguous layout: a config error of the env
        message = str(e)
        raise ConfigError(message if message.startswith("env.") else f"env.env_id: {message}") from e
    s = p.spec
    b = _Builder()
    board = s.num_players > 1
    if policy_type is None:
        if board:
            policy_type, why = (
                "alphazero",
                "two-player game with known rules: search on the game's true states (no learned "
                "dynamics to train; on Connect Four far ahead of MuZero at equal wall-clock: docs/board_games.md)",
            )
        elif s.action_dim:
            policy_type, why = DEFAULT_CONTINUOUS_POLICY_TYPE, "continuous actions: sampled actions"
        else:
            policy_type, why = "muzero", "discrete actions: MuZero"
        b.set("policy_type", policy_type, why)
    else:
        b.set("policy_type", policy_type)
    b.set("exp_name", f"{_slug(env_id)}_{policy_type.split(':')[-1]}")
    b.set("seed", seed)
    b.set("env.env_id", env_id)
    if import_modules:
        b.set("env.import_modules", tuple(import_modules))
    b.set("env.observation_layout", observation_layout)
    rules_search = policy_type == "alphazero"
    image = len(s.observation_shape) == 3
    small = image and max(s.observation_shape[1:]) <= SMALL_IMAGE_SIDE

    # --- network, from the observation
    if image:
        side = max(s.observation_shape[1:])
        layout = f" ({s.observation_layout_reason})" if s.observation_layout_reason else ""
        if small:
            b.set(
                "model.kind",
                "conv_mlp",
                f"small images {list(s.observation_shape)}{layout}: a conv stem at full "
                "resolution, then MLP dynamics and prediction on a vector latent (~6x the env steps/s of a conv "
                "unroll on MinAtar, same search engine as the vector tasks)",
            )
            b.set("model.num_channels", 16, "one 3x3 conv of 16 channels, as MinAtar's DQN baseline")
            b.set("model.num_res_blocks", 0)
            b.set("model.downsample", False)
        else:
            if s.is_atari:
                b.set("env.frame_stack", 4, "Atari: the last 4 frames (motion)")
            b.set("model.kind", "conv", f"image observations {list(s.observation_shape)}{layout}")
            b.set("model.downsample", True, f"{side}-pixel sides: down-sampled x16 (Atari-sized)")
            b.set("model.num_channels", 64)
            b.set("model.num_res_blocks", 1)
            b.set("model.projection_dim", 256)
            b.set("model.projection_hidden_dim", 256)
    else:
        how = (
            s.observation_layout_reason
            if "one-hot" in s.observation_layout_reason
            else f"flattened from {list(s.raw_observation_shape)}"
            if len(s.raw_observation_shape) > 1
            else ""
        )
        why = f"{len(s.observation_shape)}-D observations {list(s.observation_shape)}" + (f" ({how})" if how else "")
        if board and rules_search:
            why += (
                "; on CPUs ~3x the env steps/s of AlphaZero's residual tower over the board planes "
                "(Breakthrough 5x5), which env.openspiel_planes=True model.kind=conv selects"
            )
        b.set("model.kind", "mlp", why)

    if not image or small:  # the MLP network (behind the conv stem for small images): the CartPole config's
        b.set("model.latent_dim", 128)
        b.set("model.hidden_sizes", (128,))
        b.set("model.layer_norm", True, "vector latent: layer-normalised MLP (the CartPole config's)")
        b.set("model.projection_dim", 128)
        b.set("model.projection_hidden_dim", 64)

    # --- episode cap, where the env has no time limit (a policy that stalls must not stall the run)
    if not board and not p.time_limit and not s.is_atari:
        b.set(
            "env.max_episode_steps",
            NO_TIME_LIMIT_CAP,
            f"no registered time limit: episodes end after "
            f"{NO_TIME_LIMIT_CAP:,} steps (truncated, values bootstrapped), so a policy that only waits "
            "(MinAtar Seaquest at the surface) cannot hold up collection and evaluation",
        )

    # --- horizon, from the episode length
    if board:
        length = max(p.max_game_length, 1)
        b.set("mcts.discount_factor", 1.0, "two-player game: no discount, the outcome is the value")
        if length <= BOARD_MONTE_CARLO_CAP:
            b.set("buffer.td_steps", length, f"Monte-Carlo value targets (games last at most {length} moves)")
            b.set("buffer.game_segment_length", length + 3, "one game per segment")
        else:
            random_len = f"; random play: {p.mean_episode_length:.0f}" if np.isfinite(p.mean_episode_length) else ""
            b.set(
                "buffer.td_steps",
                BOARD_MONTE_CARLO_CAP,
                f"games may last {length:,} moves{random_len}: the outcome when the game ends within "
                f"{BOARD_MONTE_CARLO_CAP} moves, else bootstrapped by the value network",
            )
            b.set(
                "buffer.game_segment_length",
                BOARD_MONTE_CARLO_CAP,
                "segments of at most that many moves (a longer game spans several)",
            )
        b.set("buffer.num_unroll_steps", 0 if rules_search else 3, "no model to unroll" if rules_search else "")
    else:
        gamma = 0.997
        b.set(
            "mcts.discount_factor",
            gamma,
            "horizon ~333 steps" + (f" (time limit {p.time_limit})" if p.time_limit else ""),
        )
        b.set("buffer.td_steps", 5, "")
        b.set("buffer.num_unroll_steps", 5, "")
        segment = 50 if not p.time_limit else max(10, min(50, p.time_limit))
        b.set("buffer.game_segment_length", segment, "")

    # --- supports, from the reward scale
    gamma = b.values["mcts.discount_factor"]
    max_r = max(p.max_abs_reward, 1e-3)
    if board:
        value_bound, why = max_r, "outcomes in [-1, 1]"
    else:
        horizon = 1.0 / (1.0 - gamma)
        value_bound = max_r * (min(horizon, p.time_limit) if p.time_limit else horizon)
        why = f"|value| <= {max_r:g} x " + (
            f"min(1/(1-gamma), time limit) = {value_bound:.0f}" if p.time_limit else f"1/(1-gamma) = {value_bound:.0f}"
        )
        if p.reward_threshold is not None and np.isfinite(p.random_return_mean):
            # shaped rewards (LunarLander: +-100 at the end, small ones on the way): a bound from
            # the returns the task can reach is much tighter than max |r| per step times the horizon
            seen = 2.0 * max(abs(p.reward_threshold), abs(p.random_return_mean) + 3 * p.random_return_std)
            if seen < value_bound:
                value_bound, why = seen, f"|value| <= 2 x max(|solved return|, |random returns|) = {seen:.0f}"
    b.set("model.value_support_size", support_size_for(value_bound), f"h({value_bound:.0f}) fits; " + why)
    b.set("model.reward_support_size", support_size_for(max_r), f"h(max |reward| = {max_r:g}) fits")

    # --- search and exploration
    if board:
        branching = p.mean_legal_actions if np.isfinite(p.mean_legal_actions) else float(s.action_space_size)
        sims = int(np.clip(round(4 * branching), 25, 100))
        b.set(
            "mcts.num_simulations",
            sims,
            f"~4 per legal move ({branching:.1f} legal moves on average in random play), within [25, 100]",
        )
        alpha = float(np.clip(round(10.0 / max(branching, 1.0), 2), 0.03, 1.0))
        b.set(
            "mcts.root_dirichlet_alpha",
            alpha,
            "AlphaZero's scaling, ~10 / legal moves (chess 0.3, Go 0.03), within [0.03, 1]",
        )
    else:
        b.set("mcts.num_simulations", 16, "")
    k = 8 if s.action_dim else min(s.action_space_size, 8)
    b.set("sampled.num_samples", k, "sampled actions per node (types that sample)" if s.action_dim else "")
    sparse = p.step_cost and not board
    if sparse:
        b.set(
            "env.action_repeat",
            3,
            "a cost per step until a goal that random play rarely reaches: each decision "
            "holds its action for 3 env steps, so exploration and each planned action reach 3x further",
        )
        b.set(
            "collector.eps_greedy_start",
            1.0,
            "a constant cost per step: explore with random actions held "
            "for up to 20 steps, epsilon 1 -> 0.05 over 20k env steps",
        )
        b.set("collector.eps_greedy_end", 0.05)
        b.set("collector.eps_greedy_decay_env_steps", 20_000)
        b.set("collector.eps_greedy_max_duration", 20)
    if board and rules_search:
        b.set(
            "collector.temperature",
            1.0,
            "self-play samples every move from the root's visit counts (with the root's Dirichlet "
            "noise: AlphaZero's exploration, no epsilon-greedy schedule)",
        )
    elif board:
        b.set("collector.temperature", 1.0, "self-play explores; 0.25 after 60k updates")
        b.set("collector.manual_temperature_decay", True)
        b.set("collector.threshold_training_steps_for_final_temperature", 60_000)
        b.set("collector.eps_greedy_start", 0.25, "random legal moves 0.25 -> 0 over 80k env steps")
        b.set("collector.eps_greedy_decay_env_steps", 80_000)
    elif image:
        why = "visit-count temperature 1 -> 0.5 -> 0.25 at 50% / 75% of the budget"
        if policy_type == "gumbel_muzero":
            why = "unused by gumbel_muzero: Gumbel sampling at the root chooses the action"
        b.set("collector.temperature", 1.0, why)
        b.set("collector.manual_temperature_decay", True)
    else:
        b.set("collector.temperature", 1.0 if s.action_dim else 0.25, "")

    # --- learner
    b.set("learner.optim_type", "adam", "")
    b.set("learner.learning_rate", 3e-3, "")
    b.set(
        "learner.piecewise_decay_lr_scheduler",
        True,
        "step size x0.1 after half the budget's updates, x0.01 "
        "at its end: at the full step size evaluations swing (Acrobot, LunarLander)",
    )
    if image:
        b.set(
            "learner.weight_decay",
            0.0,
            "no L2 term with Adam on images: Adam scales it like a gradient, so "
            "every weight whose loss gradient is small shrinks at the full step size; on MinAtar it zeroed "
            "most channels of the conv stem (BatchNorm scale -> 0) and left one action for every state",
        )
    else:
        b.set("learner.weight_decay", 1e-4, "")
    b.set("learner.batch_size", 128 if board else 64, "")
    b.set("learner.replay_ratio", 0.25, "updates per env step")
    b.set("learner.target_update_freq", 100 if image and not small else 20, "")
    ssl = 0.0 if (sparse or board) else (2.0 if image and not small else 0.5)
    b.set(
        "learner.ssl_loss_weight",
        ssl,
        "constant rewards: the consistency loss alone would collapse the latent" if sparse else "",
    )
    if board:
        b.set("learner.grad_clip_value", 0.5, "")
        b.set("buffer.use_priority", False, "")
    if s.action_dim:
        b.set("learner.policy_entropy_weight", 5e-3, "keeps the Gaussian policy from collapsing")
    b.set(
        "learner.num_threads",
        1 if small else 2,
        "small images: one learner thread is faster (MinAtar Breakout 180 against 162 env steps/s with two)"
        if small
        else "",
    )
    size = 1_000_000 if image else 200_000
    target_bytes = 4 * (s.action_space_size if not s.action_dim else b.values["sampled.num_samples"])
    if not image and size * target_bytes > POLICY_TARGET_BUDGET_BYTES:
        size = max(10_000, int(POLICY_TARGET_BUDGET_BYTES // target_bytes) // 1000 * 1000)
        b.set(
            "buffer.replay_buffer_size",
            size,
            f"{s.action_space_size:,} actions: the stored policy targets ({target_bytes:,} bytes a step) "
            f"kept to ~{POLICY_TARGET_BUDGET_BYTES / 2**30:.0f} GiB",
        )
    else:
        b.set("buffer.replay_buffer_size", size, "")

    # --- collection, evaluation, budget
    b.set("env.collector_env_num", 8)
    b.set("env.evaluator_env_num", 8)
    if board:
        b.set("evaluator.opponent", "mcts", "evaluated against OpenSpiel's MCTS bot (random rollouts)")
        b.set(
            "evaluator.opponent_mcts_simulations",
            100,
            "a cheap yardstick in every game (python -m lz_tune evaluate ... "
            "evaluator.opponent_mcts_simulations=1000 for a stronger one)",
        )
        b.set("evaluator.n_evaluator_episode", 20, "half as first player")
        b.set("evaluator.eval_freq", 1000)
    else:
        b.set("evaluator.n_evaluator_episode", 8)
        b.set("evaluator.eval_freq", 500, "every ~2,000 env steps")
        if p.reward_threshold is not None:
            b.set("evaluator.stop_value", float(p.reward_threshold), "the env's registered reward threshold")
            b.set(
                "evaluator.stop_confirm_episodes",
                24,
                "an evaluation that reaches it is confirmed on 24 more episodes: the stop rests on the mean of 32",
            )
    budget = 500_000 if board else (250_000 if image else 200_000)
    b.set("max_env_step", budget, "env-step budget (--max-env-step changes it)")
    cfg = fit_schedule_to_budget(Config().with_updates(b.values))
    check_policy_type_fits(cfg, s)
    return GeneratedConfig(config=cfg, profile=p, choices=tuple(b.choices))


def fit_schedule_to_budget(cfg: Config) -> Config:
    """``cfg`` with ``learner.threshold_training_steps_for_final_lr`` set to the updates its env-step
    budget buys (``max_env_step x replay_ratio``, or ``update_per_collect`` per collect of
    ``collector_env_num x game_segment_length`` steps), so the piecewise step size drops to 1/10
    half way through the budget and to 1/100 at its end, whatever budget the user gives; a collection
    temperature schedule (images) likewise (1 -> 0.5 at half the budget -> 0.25 at three quarters)."""
    lc = cfg.learner
    if lc.update_per_collect is not None:
        per_step = lc.update_per_collect / (cfg.env.collector_env_num * cfg.buffer.game_segment_length)
    else:
        per_step = lc.replay_ratio
    updates = max(1, int(round(cfg.max_env_step * per_step)))
    changes: dict[str, Any] = {"learner.threshold_training_steps_for_final_lr": updates}
    if cfg.collector.manual_temperature_decay and not cfg.env.env_id.startswith("openspiel:"):
        changes["collector.threshold_training_steps_for_final_temperature"] = updates
    return cfg.with_updates(changes)
