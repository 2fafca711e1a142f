"""In-process vector of gymnasium envs with Discrete or Box actions and Box observations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from lz_tune.envs.base import VectorEnv
from lz_tune.envs.episode_tracker import EpisodeTracker
from lz_tune.envs.frame_stack import FrameStack
from lz_tune.envs.observation_format import ObservationFormat, discrete_components, observation_format
from lz_tune.envs.types import EnvBatch, StepResult

__all__ = ["GymVectorEnv", "check_gym_spaces"]


def check_gym_spaces(env_id: str, env: gymnasium.Env) -> tuple[spaces.Discrete | spaces.Box, spaces.Space]:
    """Return the env's (Discrete or 1-D finite Box action, Box or discrete observation) spaces or
    raise ``ValueError`` naming the env."""
    action_space, observation_space = env.action_space, env.observation_space
    if isinstance(action_space, spaces.Box):
        if len(action_space.shape) != 1 or action_space.shape[0] < 1:
            raise ValueError(f"env {env_id!r} has action space {action_space}; Box action spaces must be 1-D")
        if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
            raise ValueError(
                f"env {env_id!r} has infinite action bounds {action_space}; continuous actions are "
                "normalised to [-1, 1] and scaled to the bounds, which must be finite"
            )
        if not np.all(action_space.high > action_space.low):
            raise ValueError(f"env {env_id!r} has empty action bounds {action_space}")
    elif not isinstance(action_space, spaces.Discrete):
        raise ValueError(
            f"env {env_id!r} has action space {action_space}; only Discrete and Box action spaces are supported"
        )
    discrete = discrete_components(observation_space) is not None
    if not discrete and (not isinstance(observation_space, spaces.Box) or len(observation_space.shape) < 1):
        raise ValueError(
            f"env {env_id!r} has observation space {observation_space}; supported are Box spaces with at "
            "least one axis and discrete ones (Discrete, MultiDiscrete, a Tuple of Discrete: served one-hot)"
        )
    return action_space, observation_space


def observation_dtype_of(observation_space: spaces.Space) -> np.dtype:
    """uint8 images stay uint8; every other Box (and a discrete space, one-hot) is served as float32."""
    if isinstance(observation_space, spaces.Box) and observation_space.dtype == np.uint8:
        return np.dtype(np.uint8)
    return np.dtype(np.float32)


class GymVectorEnv(VectorEnv):
    """A plain list of ``gymnasium.make(env_id)`` envs stepped one after another in-process.

    Cheap for small vector envs (CartPole, LunarLander, board games): no subprocesses.
    Observations are float32 (uint8 for uint8 Box spaces), images channels-first ``[C, H, W]``
    (a channels-last env's ``[H, W, C]`` is transposed; ``observation_layout``), or flattened to
    ``[D]`` (``flatten``); with ``frame_stack > 1`` the
    observation of each env is its last ``frame_stack`` observations concatenated on
    axis 0, oldest first, so a ``[D]`` observation becomes ``[frame_stack * D]``.
    ``action_mask`` is all-True unless the env puts ``info["action_mask"]`` (``[A]``) in
    its reset/step info; ``to_play`` is -1 unless the info has ``"to_play"``.
    Rewards are never clipped, so ``reward`` sums to ``episode_return``.

    Args:
        env_id: a gymnasium id with a Discrete action space and a Box observation space.
        num_envs: N.
        seed: seed of the first ``reset()`` called without one (env ``i`` gets
            ``seed + i``); None: unseeded.
        frame_stack: observations stacked per model input.
        max_episode_steps: time limit per episode in env steps (None: the id's registered limit).
        action_repeat: env steps per :meth:`step`, the same action each, rewards summed; an
            episode end inside ends the repeat (episode lengths count :meth:`step` calls).
        make_kwargs: extra keyword arguments for ``gymnasium.make``.
        observation_layout: ``"auto"`` / ``"chw"`` / ``"hwc"``: the layout of a 3-D observation
            (:func:`~lz_tune.envs.observation_format.resolve_observation_layout`).
        flatten: flatten observations to ``[D]``: True always, False never, None every observation
            that is neither a vector nor a 3-D image.
    """

    def __init__(
        self,
        *,
        env_id: str,
        num_envs: int,
        seed: int | None = None,
        frame_stack: int = 1,
        max_episode_steps: int | None = None,
        action_repeat: int = 1,
        make_kwargs: Mapping[str, Any] | None = None,
        observation_layout: str = "auto",
        flatten: bool | None = None,
    ) -> None:
        self.check_sizes(num_envs, frame_stack, max_episode_steps)
        if action_repeat < 1:
            raise ValueError(f"action_repeat must be >= 1, got {action_repeat}")
        self.action_repeat = int(action_repeat)
        kwargs = dict(make_kwargs or {})
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        self.env_id = env_id
        self._closed = False
        self.init_seed(seed)
        self.gym_envs: list[gymnasium.Env] = []
        try:
            first = gymnasium.make(env_id, **kwargs)
            self.gym_envs.append(first)
            action_space, observation_space = check_gym_spaces(env_id, first)
            self.gym_envs.extend(gymnasium.make(env_id, **kwargs) for _ in range(num_envs - 1))
        except BaseException:
            self.close()
            raise
        self.num_envs = num_envs
        if isinstance(action_space, spaces.Box):  # continuous: normalised [-1, 1] inside, bounds at step
            self.action_space_size = 1
            self.action_dim = int(action_space.shape[0])
            self._action_low = action_space.low.astype(np.float64)
            self._action_scale = (action_space.high.astype(np.float64) - self._action_low) / 2.0
            self._action_start = 0
        else:
            self.action_space_size = int(action_space.n)
            self.action_dim = 0
            self._action_start = int(action_space.start)
        self.frame_stack = frame_stack
        self.observation_dtype = observation_dtype_of(observation_space)
        try:
            self.observation_format: ObservationFormat = observation_format(
                env_id,
                tuple(observation_space.shape or ()),
                layout=observation_layout,
                flatten=flatten,
                entry_point=first.spec.entry_point if first.spec is not None else None,
                metadata=first.unwrapped.metadata,
                space=observation_space,
            )
        except BaseException:
            self.close()
            raise
        self.frame_shape = self.observation_format.frame_shape
        self.frame_stacker = FrameStack(
            num_envs=num_envs,
            frame_shape=self.frame_shape,
            stack=frame_stack,
            dtype=self.observation_dtype,
        )
        self.observation_shape = self.frame_stacker.observation_shape
        self.episode_tracker = EpisodeTracker(num_envs=num_envs)
        self.timesteps = np.zeros(num_envs, dtype=np.int64)
        self._action_mask = np.ones((num_envs, self.action_space_size), dtype=bool)
        self._to_play = np.full(num_envs, -1, dtype=np.int64)
        self.needs_reset = True

    def reset(self, seed: int | None = None) -> EnvBatch:
        """Reset every env, env ``i`` with seed ``seed + i``; returns ``[N, ...]`` batches."""
        self.check_open()
        seed = self.take_seed(seed)
        frames = np.empty(
            (self.num_envs, *self.observation_format.raw_shape),
            dtype=self.observation_format.raw_dtype or self.observation_dtype,
        )
        for i, env in enumerate(self.gym_envs):
            obs, info = env.reset(seed=None if seed is None else seed + i)
            frames[i] = obs
            self._read_info(i, info)
        return self.begin_episodes(self.observation_format(frames))

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every env with ``actions`` ``[N]`` int (``[N, D]`` float in [-1, 1] for Box
        actions, scaled to the bounds here) and autoreset the finished ones."""
        self.check_ready()
        actions = self.check_actions(actions)
        if self.action_dim:
            scaled = np.clip(
                self._action_low + (actions.astype(np.float64) + 1.0) * self._action_scale,
                self._action_low,
                self._action_low + 2.0 * self._action_scale,
            ).astype(np.float32)
        n = self.num_envs
        frames = np.empty(
            (n, *self.observation_format.raw_shape), dtype=self.observation_format.raw_dtype or self.observation_dtype
        )
        final = np.empty_like(frames)
        reward = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        for i, env in enumerate(self.gym_envs):
            action = scaled[i] if self.action_dim else int(actions[i]) + self._action_start
            for _ in range(self.action_repeat):
                obs, r, term, trunc, info = env.step(action)
                reward[i] += float(r)
                if term or trunc:
                    break
            terminated[i], truncated[i] = bool(term), bool(trunc)
            final[i] = obs
            if term or trunc:
                obs, info = env.reset()
            frames[i] = obs
            self._read_info(i, info)
        frames, final = self.observation_format(frames), self.observation_format(final)
        done = terminated | truncated
        episode_return, episode_length = self.episode_tracker.update(reward, done)
        self.frame_stacker.push(frames)
        self.frame_stacker.reset(frames, mask=done)
        self.timesteps += 1
        self.timesteps[done] = 0
        return StepResult(
            batch=self.current_batch(frames),
            reward=reward.astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            episode_return=episode_return,
            episode_length=episode_length,
            real_episode_end=done.copy(),
            final_frame=final,
        )

    def close(self) -> None:
        """Close every env. Safe to call more than once."""
        envs, self.gym_envs = self.gym_envs, []
        for env in envs:
            env.close()
        self._closed = True

    def check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"GymVectorEnv({self.env_id!r}) is closed")

    def _read_info(self, i: int, info: Mapping[str, Any]) -> None:
        """Take env ``i``'s legal actions and player to move from its info, if it gives them."""
        if "action_mask" in info:
            mask = np.asarray(info["action_mask"]).astype(bool).reshape(-1)
            if mask.shape != (self.action_space_size,):
                raise ValueError(
                    f"env {self.env_id!r} gave info['action_mask'] of shape {mask.shape}, "
                    f"expected ({self.action_space_size},)"
                )
            self._action_mask[i] = mask
        else:
            self._action_mask[i] = True
        self._to_play[i] = int(info["to_play"]) if "to_play" in info else -1

    def current_batch(self, frames: np.ndarray) -> EnvBatch:
        return EnvBatch(
            observation=self.frame_stacker.observation(),
            frame=frames,
            action_mask=self._action_mask.copy(),
            to_play=self._to_play.copy(),
            timestep=self.timesteps.copy(),
        )
