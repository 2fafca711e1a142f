"""ALE games on ``ale_py.vector_env.AtariVectorEnv`` (C++ threads), with the lz_tune contract.

How the ALE vector env is used, and why:

* ``autoreset_mode="SameStep"``: a finished game is reset inside the same ``step``, so the
  returned observation is already the first one of the next game (the contract's
  same-step autoreset; the last frame of the old game goes to ``info["final_obs"]``,
  which is dropped).
* ``stack_num=1``: ALE returns one preprocessed frame per env (frame skip, max-pool of
  the last two frames, grayscale or RGB, resize); the frame stack is kept here in numpy
  so ``frame`` is one ``[C, H, W]`` frame and a new game starts with a stack of copies
  of its first frame.
* ``episodic_life=False``: ALE's own episodic life RESETS THE WHOLE GAME on every lost
  life (lives go back to full, the real game never ends), which breaks the contract.
  Life losses are instead detected here from ``info["lives"]`` dropping: in collect
  mode they are reported as ``terminated`` while the emulator and the frame stack go on
  untouched; only ``timestep`` restarts at 0.
* ``reward_clipping=False``: raw scores are needed for ``episode_return``; clipping to
  ``sign(reward)`` is done here, in collect mode only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lz_tune.envs.base import VectorEnv
from lz_tune.envs.env_ids import resolve_env_id
from lz_tune.envs.episode_tracker import EpisodeTracker
from lz_tune.envs.frame_stack import FrameStack
from lz_tune.envs.options import AtariOptions, Mode, check_mode
from lz_tune.envs.types import EnvBatch, StepResult

__all__ = ["AtariVectorEnv", "ALE_DEFAULT_MAX_FRAMES", "atari_action_space_size", "make_ale_vector_env"]

ALE_DEFAULT_MAX_FRAMES = 108_000
"""ALE's default cap on emulator frames per game (30 minutes at 60 Hz)."""


def atari_action_space_size(game: str, *, full_action_space: bool) -> int:
    """A for an ALE ROM name, without starting a vector env (~0.2 s: loads the ROM once)."""
    import ale_py
    from ale_py import roms

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    rom = roms.get_rom_path(game)
    assert rom is not None, f"ale-py has no ROM {game!r}"
    ale.loadROM(rom)
    actions = ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet()
    return len(actions)


def make_ale_vector_env(
    env_id: str, num_envs: int, options: AtariOptions, *, num_threads: int | None = None, screen: bool = False
):
    """The ``ale_py`` vector env behind :class:`AtariVectorEnv` (module docstring: same-step
    autoreset, one frame per step, no episodic life, no reward clipping): the game, action set,
    sticky actions, no-op starts, fire reset, frame skip and frame cap of ``env_id`` and
    ``options``. ``screen``: observations are the full RGB screen (210x160x3 for most games)
    without max-pool, what ``render_mode="rgb_array"`` shows, instead of the preprocessed frame
    (the game is the same: ALE is deterministic given the seed and the actions).
    ``num_threads`` defaults to ``options.num_threads``."""
    import ale_py
    from ale_py import roms
    from ale_py.vector_env import AtariVectorEnv as AleVectorEnv

    resolved = resolve_env_id(env_id)
    if screen:
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # static: before the banner
        ale = ale_py.ALEInterface()
        rom = roms.get_rom_path(resolved.atari_game)
        assert rom is not None, f"ale-py has no ROM {resolved.atari_game!r}"
        ale.loadROM(rom)
        height, width = ale.getScreenDims()
        image: dict[str, Any] = dict(img_height=int(height), img_width=int(width), grayscale=False, maxpool=False)
    else:
        image = dict(
            img_height=options.image_size, img_width=options.image_size, grayscale=options.grayscale, maxpool=True
        )
    return AleVectorEnv(
        resolved.atari_game,
        num_envs,
        num_threads=options.num_threads if num_threads is None else num_threads,
        max_num_frames_per_episode=options.max_episode_steps or ALE_DEFAULT_MAX_FRAMES,
        repeat_action_probability=options.repeat_action_probability,
        full_action_space=resolved.atari_full_action_space,
        autoreset_mode="SameStep",
        stack_num=1,
        frameskip=options.frame_skip,
        noop_max=options.noop_max,
        episodic_life=False,
        life_loss_info=False,
        reward_clipping=False,
        use_fire_reset=options.use_fire_reset,
        **image,
    )


class AtariVectorEnv(VectorEnv):
    """N ALE games stepped together by ALE's C++ vector env.

    Observations are uint8 ``[N, stack * C, H, W]`` (the last ``frame_stack`` frames,
    oldest first), frames uint8 ``[N, C, H, W]`` with ``C`` 1 (grayscale) or 3 (RGB).
    ``action_mask`` is all-True (the minimal action set of the game), ``to_play`` -1.

    Mode ``"collect"`` applies ``options.episodic_life`` (a lost life is ``terminated``,
    the game goes on) and ``options.clip_rewards``; mode ``"eval"`` never does: episodes
    are whole games and rewards raw. ``episode_return`` is always the unclipped game
    score and ``episode_length`` the agent steps of the whole game.

    A game that hits ``options.max_episode_steps`` frames is ``truncated``; a life lost on
    that very step is not reported separately (the game restarts anyway).

    Args:
        env_id: an ALE id (``ALE/Pong-v5``, ``PongNoFrameskip-v4``); it picks the game and
            the action set, ``options`` everything else.
        num_envs: N.
        mode: ``"collect"`` or ``"eval"``.
        options: preprocessing and game options.
        seed: seed of the first ``reset()`` called without one (env ``i`` gets
            ``seed + i``); None: unseeded.
    """

    def __init__(
        self,
        *,
        env_id: str,
        num_envs: int,
        mode: Mode = "collect",
        options: AtariOptions = AtariOptions(),
        seed: int | None = None,
    ) -> None:
        check_mode(mode)
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        resolved = resolve_env_id(env_id)
        if not resolved.is_atari:
            raise ValueError(f"env id {env_id!r} is not an ALE id; use GymVectorEnv")
        self.env_id = resolved.env_id
        self.mode = mode
        self.options = options
        self._closed = False
        self.init_seed(seed)
        self._episodic_life = mode == "collect" and options.episodic_life
        self._clip_rewards = mode == "collect" and options.clip_rewards
        self._ale = make_ale_vector_env(env_id, num_envs, options)
        self.num_envs = num_envs
        self.action_space_size = int(self._ale.single_action_space.n)
        self.frame_stack = options.frame_stack
        self.frame_shape = options.frame_shape
        self.observation_shape = options.observation_shape
        self.observation_dtype = np.dtype(np.uint8)
        self.frame_stacker = FrameStack(
            num_envs=num_envs, frame_shape=self.frame_shape, stack=self.frame_stack, dtype=np.uint8
        )
        self.episode_tracker = EpisodeTracker(num_envs=num_envs)
        self.timesteps = np.zeros(num_envs, dtype=np.int64)
        self._lives = np.zeros(num_envs, dtype=np.int64)
        self._action_mask = np.ones((num_envs, self.action_space_size), dtype=bool)
        self._to_play = np.full(num_envs, -1, dtype=np.int64)
        self.needs_reset = True

    def reset(self, seed: int | None = None) -> EnvBatch:
        """Start a new game in every env, env ``i`` seeded with ``seed + i``."""
        self.check_open()
        seed = self.take_seed(seed)
        obs, info = self._ale.reset(seed=seed)
        order = self._order(info)
        frames = self._frames(obs[order])
        self._lives[:] = info["lives"][order]
        return self.begin_episodes(frames)

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every game with ``actions`` ``[N]`` int and restart the finished ones."""
        self.check_ready()
        actions = self.check_actions(actions)
        obs, raw_reward, game_over, truncated, info = self._ale.step(actions)
        order = self._order(info)
        frames = self._frames(obs[order])
        raw_reward = raw_reward[order].astype(np.float64)
        truncated = np.array(truncated[order], dtype=bool)  # copies: ALE may reuse its buffers
        game_over = np.array(game_over[order], dtype=bool)
        lives = info["lives"][order].astype(np.int64)

        real_end = game_over | truncated
        life_lost = (lives < self._lives) & ~real_end
        self._lives[:] = lives
        terminated = game_over | (life_lost if self._episodic_life else False)
        reward = np.sign(raw_reward) if self._clip_rewards else raw_reward
        episode_return, episode_length = self.episode_tracker.update(raw_reward, real_end)

        self.frame_stacker.push(frames)
        self.frame_stacker.reset(frames, mask=real_end)
        self.timesteps += 1
        self.timesteps[terminated | truncated] = 0
        return StepResult(
            batch=self.current_batch(frames),
            reward=reward.astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            episode_return=episode_return,
            episode_length=episode_length,
            real_episode_end=real_end,
        )

    def close(self) -> None:
        """Stop ALE's threads and free the emulators. Safe to call more than once."""
        if not self._closed:
            self._closed = True
            self._ale.close()
            self._ale = None

    def check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"AtariVectorEnv({self.env_id!r}) is closed")

    def _order(self, info: dict) -> np.ndarray | slice:
        """Indices that sort ALE's results by env id (they come in env order when synchronous)."""
        env_id = np.asarray(info["env_id"])
        if np.array_equal(env_id, np.arange(self.num_envs)):
            return slice(None)
        return np.argsort(env_id)

    def _frames(self, obs: np.ndarray) -> np.ndarray:
        """ALE's ``[N, 1, H, W]`` (gray) or ``[N, 1, H, W, 3]`` (RGB) to fresh uint8 ``[N, C, H, W]``."""
        if self.options.grayscale:
            return np.array(obs, dtype=np.uint8, copy=True)
        return np.ascontiguousarray(obs[:, 0].transpose(0, 3, 1, 2))

    def current_batch(self, frames: np.ndarray) -> EnvBatch:
        return EnvBatch(
            observation=self.frame_stacker.observation(),
            frame=frames,
            action_mask=self._action_mask.copy(),
            to_play=self._to_play.copy(),
            timestep=self.timesteps.copy(),
        )
