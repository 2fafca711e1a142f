"""Typed batches exchanged between a vector env, the search and the replay buffer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EnvBatch", "StepResult", "EnvSpecInfo"]


@dataclass(frozen=True)
class EnvBatch:
    """What the agent sees of N envs stepped together.

    Attributes:
        observation: ``[N, *observation_shape]`` model input: the last ``frame_stack``
            frames of each env concatenated on axis 0 of the single observation, oldest
            first (Atari: uint8 ``[N, stack * C, H, W]``; vector envs with stack 1:
            float32 ``[N, D]``).
        frame: ``[N, *frame_shape]`` the newest single frame only (what the replay
            buffer stores, each frame once). Equals the last ``C`` planes of
            ``observation``; for stack 1 it equals ``observation``.
        action_mask: ``[N, A]`` bool, legal actions (continuous action spaces: ``A = 1``,
            one always-True column).
        to_play: ``[N]`` int64, the player to move; -1 for single-player envs.
        timestep: ``[N]`` int64, steps since the start of the current episode (0 right
            after a reset, and right after a life loss counted as an episode end).
        game_states: the true game state of each env, for policies that search on the
            game's rules (``policy_type=alphazero``): ``openspiel:<game>`` envs give a clone
            of each game's ``pyspiel.State`` as the batch shows it (the player to move is
            ``to_play``; against a bot, after the bot's replies), owned by the batch (a policy
            clones it again before applying moves to it); None for every other env.
    """

    observation: np.ndarray
    frame: np.ndarray
    action_mask: np.ndarray
    to_play: np.ndarray
    timestep: np.ndarray
    game_states: tuple[Any, ...] | None = None

    @property
    def num_envs(self) -> int:
        """N, the number of envs in the batch."""
        return int(self.timestep.shape[0])


@dataclass(frozen=True)
class StepResult:
    """Outcome of stepping N envs once.

    Attributes:
        batch: the next observations. Where an episode ended (``terminated | truncated``)
            this is ALREADY the first observation of the next episode (same-step
            autoreset), with ``timestep`` 0.
        reward: ``[N]`` float32 reward used for training (clipped to {-1, 0, 1} in Atari
            collect mode when ``clip_rewards``).
        terminated: ``[N]`` bool, the episode ended in a terminal state (Atari collect
            mode with ``episodic_life``: a lost life counts as terminated).
        truncated: ``[N]`` bool, the episode hit a time limit.
        episode_return: ``[N]`` float64, for envs whose REAL game episode just ended its
            unclipped total score; NaN elsewhere.
        episode_length: ``[N]`` int64, the number of steps of the real episode that just
            ended (summed over all lives); 0 elsewhere.
        real_episode_end: ``[N]`` bool, the real game ended. Differs from
            ``terminated | truncated`` only with episodic life, where a lost life
            terminates a training episode but not the game.
        final_frame: ``[N, *frame_shape]`` the newest frame of the observation each env
            reached with this step, before an autoreset replaced it (equal to ``batch.frame``
            where no episode ended); None when the env cannot report it. The collector uses
            it to bootstrap the value targets of a truncated episode from its last state.
        info_columns: per-env values the env reports with each step, ``{name: [N, ...]}``;
            empty for envs that report none. 2048: ``{'chance_outcome': [N] int64}``, the
            tile spawned after the move (for an env that ended, the outcome of its final
            spawn, before the autoreset).
    """

    batch: EnvBatch
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_return: np.ndarray
    episode_length: np.ndarray
    real_episode_end: np.ndarray
    final_frame: np.ndarray | None = None
    info_columns: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def done(self) -> np.ndarray:
        """``[N]`` bool, ``terminated | truncated`` (a training episode ended)."""
        return self.terminated | self.truncated


@dataclass(frozen=True)
class EnvSpecInfo:
    """Shapes of an env id, as :func:`lz_tune.envs.probe_env_spec` reports them.

    Attributes:
        observation_shape: shape of one model input, e.g. ``(4, 64, 64)`` or ``(4,)``.
        frame_shape: shape of one stored frame, e.g. ``(1, 64, 64)`` or ``(4,)``.
        frame_stack: frames per observation.
        action_space_size: A, the number of discrete actions (the width of the action
            mask); 1 for a continuous (Box) action space.
        is_atari: True when the id is served by :class:`lz_tune.envs.AtariVectorEnv`.
        observation_dtype: dtype of observations and frames (uint8 for Atari, float32
            for vector envs).
        action_dim: 0 for a Discrete action space (actions are int64 indices in [0, A));
            D >= 1 for a Box action space of shape ``(D,)``: actions are float32 ``[D]``
            normalised to [-1, 1], scaled to ``[action_low, action_high]`` by the env.
        action_low, action_high: the Box bounds (``[D]`` each), empty for Discrete.
        chance_space_size: number of true chance outcomes the env reports in
            ``StepResult.info_columns['chance_outcome']`` (2048: 32, a cell times a 2 or
            a 4); 0: the env reports none.
        num_players: 1, or 2 for two-player zero-sum board games (``openspiel:<game>``):
            ``to_play`` is 0 or 1, rewards are the mover's, values the player-to-move's.
        raw_observation_shape: one observation as a gymnasium env gives it, before the layout
            transpose and flattening (:mod:`lz_tune.envs.observation_format`); () for envs
            lz_tune serves itself (Atari, 2048, OpenSpiel), whose frames are already channels-first.
        observation_layout: ``"hwc"`` / ``"chw"``: the layout a gymnasium env's images came in
            (served channels-first either way); "" for non-images and lz_tune's own envs.
        observation_layout_reason: why that layout (the user's key, the env's declaration, the shape).
    """

    observation_shape: tuple[int, ...]
    frame_shape: tuple[int, ...]
    frame_stack: int
    action_space_size: int
    is_atari: bool
    observation_dtype: np.dtype = np.dtype(np.float32)
    action_dim: int = 0
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    chance_space_size: int = 0
    num_players: int = 1
    raw_observation_shape: tuple[int, ...] = ()
    observation_layout: str = ""
    observation_layout_reason: str = ""

    @property
    def is_continuous(self) -> bool:
        """True for a Box action space (``action_dim >= 1``)."""
        return self.action_dim > 0

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one action: ``()`` (an index) or ``(D,)`` (a normalised vector)."""
        return (self.action_dim,) if self.action_dim else ()
