"""Build a vector env from an id, or report its shapes without keeping one open."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import numpy as np

from lz_tune.envs.atari_vector import AtariVectorEnv, atari_action_space_size
from lz_tune.envs.base import VectorEnv
from lz_tune.envs.env_ids import resolve_env_id
from lz_tune.envs.frame_stack import stacked_shape
from lz_tune.envs.game_2048 import CHANCE_SPACE_SIZE, NUM_ACTIONS, OBSERVATION_SIZE, Game2048VectorEnv
from lz_tune.envs.gym_vector import GymVectorEnv, check_gym_spaces, observation_dtype_of
from lz_tune.envs.observation_format import observation_format
from lz_tune.envs.openspiel_bots import OpponentOptions
from lz_tune.envs.openspiel_env import OpenSpielVectorEnv, probe_openspiel
from lz_tune.envs.openspiel_game import is_openspiel_id
from lz_tune.envs.options import AtariOptions, Mode, check_mode
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["make_vector_env", "probe_env_spec", "atari_options_for"]


def atari_options_for(
    atari: AtariOptions | None,
    *,
    frame_stack: int | None = None,
    max_episode_steps: int | None = None,
) -> AtariOptions:
    """Merge the generic settings into the Atari options.

    ``frame_stack`` (when given) replaces ``atari.frame_stack``. ``max_episode_steps``
    counts agent steps, so it caps the game at ``max_episode_steps * frame_skip``
    emulator frames; when ``atari.max_episode_steps`` (frames) is also set, the tighter
    cap wins.
    """
    options = atari if atari is not None else AtariOptions()
    changes: dict[str, Any] = {}
    if frame_stack is not None:
        changes["frame_stack"] = frame_stack
    if max_episode_steps is not None:
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps}")
        frames = max_episode_steps * options.frame_skip
        if options.max_episode_steps is not None:
            frames = min(frames, options.max_episode_steps)
        changes["max_episode_steps"] = frames
    return dataclasses.replace(options, **changes) if changes else options


def make_vector_env(
    *,
    env_id: str,
    num_envs: int,
    seed: int,
    mode: Mode,
    frame_stack: int | None = None,
    atari: AtariOptions | None = None,
    max_episode_steps: int | None = None,
    action_repeat: int = 1,
    openspiel_planes: bool = False,
    opponent: OpponentOptions | None = None,
    observation_layout: str = "auto",
    flatten: bool | None = None,
) -> VectorEnv:
    """Create N envs of ``env_id`` stepped together.

    ALE ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4``) get an :class:`AtariVectorEnv`,
    ``Game2048-v0`` (or ``lz_tune/Game2048-v0``) a
    :class:`~lz_tune.envs.game_2048.Game2048VectorEnv`, every other gymnasium id a
    :class:`GymVectorEnv`. The id is checked before anything
    is created. Call ``reset()`` on the result: the first unseeded reset seeds env ``i``
    with ``seed + i``.

    Args:
        env_id: a gymnasium id.
        num_envs: N.
        seed: seed of env 0 (env ``i`` gets ``seed + i``).
        mode: ``"collect"`` (training data: Atari episodic life and reward clipping as
            ``atari`` says) or ``"eval"`` (raw games). Same behaviour for non-Atari ids.
        frame_stack: frames per observation; None: ``atari.frame_stack`` for Atari
            (default 4), 1 otherwise.
        atari: Atari options (None: :class:`AtariOptions` defaults); ignored for
            non-Atari ids.
        max_episode_steps: cap on steps per episode (``truncated``): agent steps for Atari,
            env steps for gymnasium ids (with ``action_repeat`` R, R per agent step); None: the
            id's own limit.
        action_repeat: env steps per agent step for gymnasium ids (rewards summed); Atari
            and 2048 refuse values > 1 (Atari: ``atari.frame_skip``).
        openspiel_planes, opponent: ``openspiel:<game>`` ids (an
            :class:`~lz_tune.envs.openspiel_env.OpenSpielVectorEnv`): observations as planes;
            the bot the agent plays in ``eval`` mode (``collect`` mode is self-play).
        observation_layout, flatten: gymnasium ids: the layout of image observations
            (``"auto"`` / ``"chw"`` / ``"hwc"``; served channels-first) and whether to flatten
            them to vectors (True / False / None: every observation neither a vector nor a 3-D
            image); see :mod:`lz_tune.envs.observation_format`.

    Raises:
        ValueError: unknown id (the message names it and suggests close matches),
            non-Discrete action space, non-Box observations, bad mode or sizes, an ambiguous
            image layout.
    """
    check_mode(mode)
    if is_openspiel_id(env_id):
        _check_openspiel_action_repeat(env_id, action_repeat)
        return OpenSpielVectorEnv(
            env_id=env_id,
            num_envs=num_envs,
            seed=seed,
            mode=mode,
            planes=openspiel_planes,
            opponent=opponent,
            frame_stack=1 if frame_stack is None else frame_stack,
            max_episode_steps=max_episode_steps,
        )
    resolved = resolve_env_id(env_id)
    _check_action_repeat(resolved, action_repeat)
    if resolved.is_atari:
        options = atari_options_for(atari, frame_stack=frame_stack, max_episode_steps=max_episode_steps)
        return AtariVectorEnv(env_id=resolved.env_id, num_envs=num_envs, mode=mode, options=options, seed=seed)
    if resolved.is_game_2048:
        return Game2048VectorEnv(
            num_envs=num_envs,
            seed=seed,
            frame_stack=1 if frame_stack is None else frame_stack,
            max_episode_steps=max_episode_steps,
        )
    return GymVectorEnv(
        env_id=resolved.env_id,
        num_envs=num_envs,
        seed=seed,
        frame_stack=1 if frame_stack is None else frame_stack,
        max_episode_steps=max_episode_steps,
        action_repeat=action_repeat,
        observation_layout=observation_layout,
        flatten=flatten,
    )


def _check_action_repeat(resolved, action_repeat: int) -> None:
    if action_repeat < 1:
        raise ValueError(f"env.action_repeat must be >= 1, got {action_repeat}")
    if action_repeat > 1 and (resolved.is_atari or resolved.is_game_2048):
        what = "Atari envs repeat actions by env.frame_skip" if resolved.is_atari else "2048 has no use for it"
        raise ValueError(f"env.action_repeat={action_repeat} is for gymnasium envs; env {resolved.env_id!r}: {what}")


def _check_openspiel_action_repeat(env_id: str, action_repeat: int) -> None:
    if action_repeat != 1:
        raise ValueError(
            f"env.action_repeat={action_repeat} is for gymnasium envs; env {env_id!r} is a board game "
            "(one move per step)"
        )


def probe_env_spec(
    env_id: str,
    *,
    frame_stack: int | None = None,
    atari: AtariOptions | None = None,
    action_repeat: int = 1,
    openspiel_planes: bool = False,
    observation_layout: str = "auto",
    flatten: bool | None = None,
) -> EnvSpecInfo:
    """Shapes, action count and dtype of ``env_id`` as :func:`make_vector_env` would serve it.

    Nothing stays open: Atari ids only load the ROM to count actions (~0.2 s), 2048 creates
    nothing, other ids create one env, read its spaces and close it.

    Raises:
        ValueError: as :func:`make_vector_env`.
    """
    if is_openspiel_id(env_id):
        _check_openspiel_action_repeat(env_id, action_repeat)
        return probe_openspiel(env_id, frame_stack=1 if frame_stack is None else frame_stack, planes=openspiel_planes)
    resolved = resolve_env_id(env_id)
    _check_action_repeat(resolved, action_repeat)
    if resolved.is_atari:
        options = atari_options_for(atari, frame_stack=frame_stack)
        try:
            action_space_size = atari_action_space_size(
                resolved.atari_game, full_action_space=resolved.atari_full_action_space
            )
        except Exception as e:  # a ROM that is missing or does not load, a broken ale-py
            raise ValueError(
                f"{env_id}: the Atari ROM {resolved.atari_game!r} does not load here "
                f"({type(e).__name__}: {e}); reinstall ale-py (pip install --force-reinstall "
                f"'ale-py>=0.11'), which ships the ROMs"
            ) from e
        return EnvSpecInfo(
            observation_shape=options.observation_shape,
            frame_shape=options.frame_shape,
            frame_stack=options.frame_stack,
            action_space_size=action_space_size,
            is_atari=True,
            observation_dtype=np.dtype(np.uint8),
        )
    stack = 1 if frame_stack is None else frame_stack
    if resolved.is_game_2048:
        return EnvSpecInfo(
            observation_shape=stacked_shape((OBSERVATION_SIZE,), stack),
            frame_shape=(OBSERVATION_SIZE,),
            frame_stack=stack,
            action_space_size=NUM_ACTIONS,
            is_atari=False,
            observation_dtype=np.dtype(np.float32),
            chance_space_size=CHANCE_SPACE_SIZE,
        )
    try:
        env = gymnasium.make(resolved.env_id)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:  # e.g. Box2D envs without box2d
        raise ValueError(f"{env_id}: needs a package that is not installed: {e}") from e
    try:
        action_space, observation_space = check_gym_spaces(resolved.env_id, env)
        metadata = dict(env.unwrapped.metadata or {})
    finally:
        env.close()
    fmt = observation_format(
        resolved.env_id,
        tuple(observation_space.shape or ()),
        layout=observation_layout,
        flatten=flatten,
        entry_point=resolved.spec.entry_point,
        metadata=metadata,
        space=observation_space,
    )
    frame_shape = fmt.frame_shape
    dtype = observation_dtype_of(observation_space)
    continuous: dict[str, Any]
    if isinstance(action_space, gymnasium.spaces.Box):
        continuous = dict(
            action_space_size=1,
            action_dim=int(action_space.shape[0]),
            action_low=tuple(float(x) for x in action_space.low),
            action_high=tuple(float(x) for x in action_space.high),
        )
    else:
        continuous = dict(action_space_size=int(action_space.n))
    return EnvSpecInfo(
        observation_shape=stacked_shape(frame_shape, stack),
        frame_shape=frame_shape,
        frame_stack=stack,
        is_atari=False,
        observation_dtype=dtype,
        raw_observation_shape=fmt.raw_shape,
        observation_layout=fmt.layout or "",
        observation_layout_reason=fmt.reason,
        **continuous,
    )
