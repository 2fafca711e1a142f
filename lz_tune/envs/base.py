"""The interface every vector env of lz_tune implements."""

from __future__ import annotations

import abc

import numpy as np

from lz_tune.envs.episode_tracker import EpisodeTracker
from lz_tune.envs.frame_stack import FrameStack
from lz_tune.envs.types import EnvBatch, StepResult

__all__ = ["VectorEnv"]


class VectorEnv(abc.ABC):
    """N envs stepped together, returning typed numpy batches.

    Semantics shared by all implementations:

    * ``reset(seed)`` starts a new episode in every env; env ``i`` is seeded with
      ``seed + i``. ``reset()`` without a seed uses the seed given at construction the
      first time, and afterwards continues each env's random stream.
    * ``step`` autoresets in the same step: where an episode ended, ``result.batch``
      already holds the first observation of the next episode, with ``timestep`` 0 and
      a fresh frame stack (every slot a copy of that first frame).
    * With episodic life (Atari, collect mode) a lost life is reported as
      ``terminated`` but the game goes on: no emulator reset, no new frame stack, only
      ``timestep`` restarts at 0. ``real_episode_end``, ``episode_return`` and
      ``episode_length`` always describe the real game.

    Attributes:
        num_envs: N.
        action_space_size: A, the number of discrete actions (1 for a continuous space).
        action_dim: 0 (Discrete), or D for a Box action space: actions ``[N, D]`` float in
            [-1, 1], scaled to the env's bounds inside ``step``.
        observation_shape: shape of one observation (stack of frames on axis 0).
        frame_shape: shape of one frame.
        frame_stack: frames per observation.
        observation_dtype: dtype of observations and frames.
    """

    num_envs: int
    action_space_size: int
    action_dim: int = 0
    observation_shape: tuple[int, ...]
    frame_shape: tuple[int, ...]
    frame_stack: int
    observation_dtype: np.dtype

    # What an implementation keeps for the helpers below (check_sizes ... check_actions), which
    # every built-in vector env calls from its reset() / step():
    frame_stacker: FrameStack
    """The last ``frame_stack`` frames of every env (:meth:`begin_episodes` resets it)."""
    episode_tracker: EpisodeTracker
    """Running return and length of every env's episode."""
    timesteps: np.ndarray
    """[N] int64 steps since each env's episode began."""
    needs_reset: bool
    """True until the first :meth:`reset` (and after a failed step): :meth:`check_ready` refuses
    to step."""

    def current_batch(self, frames: np.ndarray) -> EnvBatch:
        """The batch the envs are in now, given their latest ``frames`` [N, *frame_shape]. Needed
        only by :meth:`begin_episodes` (the contract itself is reset / step / close)."""
        raise NotImplementedError(f"{type(self).__name__} calls begin_episodes(): implement current_batch()")

    def check_open(self) -> None:
        """Raise RuntimeError once :meth:`close` has run. Needed only by :meth:`check_ready`."""
        raise NotImplementedError(f"{type(self).__name__} calls check_ready(): implement check_open()")

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> EnvBatch:
        """Start a new episode in every env (env ``i`` seeded with ``seed + i``)."""

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> StepResult:
        """Apply ``actions`` (``[N]`` int, each in ``[0, A)``; ``[N, D]`` float in [-1, 1] for a
        continuous space) and autoreset finished envs."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the envs. Safe to call more than once."""

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def check_sizes(num_envs: int, frame_stack: int, max_episode_steps: int | None) -> None:
        """Raise ValueError for sizes no vector env accepts."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if frame_stack < 1:
            raise ValueError(f"frame_stack must be >= 1, got {frame_stack}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps}")

    def init_seed(self, seed: int | None) -> None:
        """Remember the construction seed for the first unseeded ``reset()``."""
        self._initial_seed = seed

    @property
    def pending_seed(self) -> int | None:
        """The construction seed the first unseeded ``reset()`` will apply (None once applied)."""
        return getattr(self, "_initial_seed", None)

    def take_seed(self, seed: int | None) -> int | None:
        """The seed a ``reset(seed)`` call should apply: the construction seed once, if none given."""
        if seed is None:
            seed = self._initial_seed
        self._initial_seed = None
        return seed

    def begin_episodes(self, frames: np.ndarray) -> EnvBatch:
        """After a full reset: fresh frame stacks, episode counters and timesteps for every env.

        Uses the implementation's ``frame_stacker``, ``episode_tracker``, ``timesteps``,
        ``needs_reset`` and :meth:`current_batch`.
        """
        self.frame_stacker.reset(frames)
        self.episode_tracker.reset()
        self.timesteps[:] = 0
        self.needs_reset = False
        return self.current_batch(frames)

    def check_ready(self) -> None:
        """Raise unless the envs are open and have been reset."""
        self.check_open()
        if self.needs_reset:
            raise RuntimeError("call reset() before step()")

    def check_actions(self, actions: np.ndarray) -> np.ndarray:
        """Validate ``actions`` and return them as int64 ``[N]`` (float32 ``[N, D]`` for a
        continuous space, values in [-1, 1])."""
        actions = np.asarray(actions)
        if self.action_dim:
            if actions.shape != (self.num_envs, self.action_dim):
                raise ValueError(f"actions must have shape ({self.num_envs}, {self.action_dim}), got {actions.shape}")
            if not np.issubdtype(actions.dtype, np.floating) or not np.all(np.abs(actions) <= 1.0):
                raise ValueError(f"continuous actions must be floats in [-1, 1], got {actions.tolist()}")
            return actions.astype(np.float32, copy=False)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {actions.shape}")
        if not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(f"actions must be integers, got dtype {actions.dtype}")
        if actions.size and (actions.min() < 0 or actions.max() >= self.action_space_size):
            raise ValueError(f"actions must lie in [0, {self.action_space_size}), got {actions.tolist()}")
        return actions.astype(np.int64, copy=False)
