"""Pieces shared by collectors, evaluators and the driver: env construction from a config,
and the immutable weight snapshot that travels from the learner to the workers."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from lz_tune.config import Config, EnvConfig
from lz_tune.envs import AtariOptions, EnvSpecInfo, VectorEnv, make_vector_env, probe_env_spec
from lz_tune.envs.openspiel_bots import OpponentOptions
from lz_tune.envs.registration import run_env_imports


@dataclass(frozen=True)
class WeightSnapshot:
    """Immutable CPU copy of the learner's network weights.

    ``version`` is what workers compare to decide whether to reload. It is the learner's
    train_iter, offset by ``generation`` (bumped on every checkpoint restore) so that a
    restore that moves train_iter backwards still looks new to the workers.
    """

    version: int
    train_iter: int
    weights: Mapping[str, torch.Tensor]
    """A dict of CPU tensors, or :class:`StoredWeights` (a data-parallel learner's rank 0 put
    them into Ray's object store: only the reference travels, and a worker fetches them when it
    loads them)."""


class StoredWeights(Mapping[str, torch.Tensor]):
    """Network weights in Ray's object store, by reference: a read-only mapping of CPU tensors
    fetched on first access (``ray.get``; tensors view the store's buffers: ``load_state_dict``
    copies them). Pickled, it is the reference only, so a snapshot that holds it travels in a
    few bytes from the driver to collectors and evaluators, which fetch the weights themselves.

    ``ref``: an ObjectRef of ``{name: numpy array}`` (bfloat16 tensors as tensors: numpy has none)."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref
        self._weights: Optional[dict[str, torch.Tensor]] = None

    def _fetched(self) -> dict[str, torch.Tensor]:
        if self._weights is None:
            import ray

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                self._weights = {
                    k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in ray.get(self.ref).items()
                }
        return self._weights

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._fetched()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fetched())

    def __len__(self) -> int:
        return len(self._fetched())

    def __reduce__(self):
        return (StoredWeights, (self.ref,))


def atari_options(env: EnvConfig) -> AtariOptions:
    return AtariOptions(
        frame_skip=env.frame_skip,
        image_size=env.image_size,
        grayscale=env.grayscale,
        frame_stack=env.frame_stack,
        noop_max=env.noop_max,
        episodic_life=env.episodic_life,
        clip_rewards=env.clip_rewards,
        repeat_action_probability=env.repeat_action_probability,
    )


def opponent_options(cfg: Config) -> OpponentOptions:
    """The evaluation opponent of two-player games (``evaluator.opponent*``)."""
    ev = cfg.evaluator
    return OpponentOptions(
        kind=ev.opponent,
        mcts_simulations=ev.opponent_mcts_simulations,
        mcts_uct_c=ev.opponent_mcts_uct_c,
        mcts_rollouts=ev.opponent_mcts_rollouts,
        minimax_depth=ev.opponent_minimax_depth,
    )


def make_env(cfg: Config, *, num_envs: int, seed: int, mode: str) -> VectorEnv:
    """The vector env a config describes (``mode``: "collect" or "eval")."""
    e = cfg.env
    run_env_imports(e.import_modules)
    return make_vector_env(
        env_id=e.env_id,
        num_envs=num_envs,
        seed=seed,
        mode=mode,  # type: ignore[arg-type]
        frame_stack=e.frame_stack,
        atari=atari_options(e),
        max_episode_steps=e.max_episode_steps,
        action_repeat=e.action_repeat,
        openspiel_planes=e.openspiel_planes,
        opponent=opponent_options(cfg),
        observation_layout=e.observation_layout,
        flatten=flatten_observations(cfg),
    )


def flatten_observations(cfg: Config) -> bool | None:
    """Whether gymnasium observations are flattened to vectors, from ``model.kind``: ``mlp``
    always (a vector network reads any observation), ``conv`` never, ``auto`` all but vectors
    and 3-D images."""
    return {"mlp": True, "conv": False, "conv_mlp": False}.get(cfg.model.kind)


@functools.lru_cache(maxsize=32)
def _probe(env: EnvConfig, flatten: bool | None) -> EnvSpecInfo:
    run_env_imports(env.import_modules)
    return probe_env_spec(
        env.env_id,
        frame_stack=env.frame_stack,
        atari=atari_options(env),
        action_repeat=env.action_repeat,
        openspiel_planes=env.openspiel_planes,
        observation_layout=env.observation_layout,
        flatten=flatten,
    )


def env_spec_for(cfg: Config) -> EnvSpecInfo:
    """Observation / frame shapes and action count of the config's env as :func:`make_env` serves
    it (cached; raises ValueError naming the env id if it does not exist, or the key at fault)."""
    return _probe(cfg.env, flatten_observations(cfg))


def no_previous_action(num_envs: int, action_dim: int) -> np.ndarray:
    """ "No previous action" for ``num_envs`` envs: ``[N] int64`` -1 (discrete), ``[N, D]``
    float32 NaN (continuous): what ``Policy.act`` receives right after a reset."""
    if action_dim:
        return np.full((num_envs, action_dim), np.nan, np.float32)
    return np.full(num_envs, -1, np.int64)


def carry_previous_action(action: np.ndarray, done: np.ndarray) -> np.ndarray:
    """The previous actions for the next step: ``action`` ([N] or [N, D]), with the "none"
    value of :func:`no_previous_action` where ``done [N]``."""
    action = np.asarray(action)
    if action.ndim == 2:
        return np.where(np.asarray(done)[:, None], np.float32(np.nan), action).astype(np.float32)
    return np.where(done, -1, action).astype(np.int64)
