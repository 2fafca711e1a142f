"""Vector envs serving typed numpy batches to the search and the replay buffer.

``make_vector_env`` picks :class:`AtariVectorEnv` (ALE ids, C++ threads),
:class:`Game2048VectorEnv` (``Game2048-v0``, numpy),
:class:`~lz_tune.envs.openspiel_env.OpenSpielVectorEnv` (``openspiel:<game>``, two-player board
games: self-play, or against an OpenSpiel bot) or :class:`GymVectorEnv` (any other
gymnasium id with Discrete or Box actions and Box observations); ``probe_env_spec`` reports
the shapes without keeping envs open. Importing this package registers
``lz_tune/Game2048-v0`` with gymnasium.
"""

from lz_tune.envs.atari_vector import AtariVectorEnv
from lz_tune.envs.base import VectorEnv
from lz_tune.envs.env_ids import ResolvedEnvId, resolve_env_id
from lz_tune.envs.factory import atari_options_for, make_vector_env, probe_env_spec
from lz_tune.envs.game_2048 import Game2048Env, Game2048VectorEnv, register_gymnasium_env
from lz_tune.envs.gym_vector import GymVectorEnv
from lz_tune.envs.options import AtariOptions, Mode
from lz_tune.envs.types import EnvBatch, EnvSpecInfo, StepResult

__all__ = [
    "AtariOptions",
    "AtariVectorEnv",
    "EnvBatch",
    "EnvSpecInfo",
    "Game2048Env",
    "Game2048VectorEnv",
    "GymVectorEnv",
    "Mode",
    "ResolvedEnvId",
    "StepResult",
    "VectorEnv",
    "atari_options_for",
    "make_vector_env",
    "probe_env_spec",
    "resolve_env_id",
]

register_gymnasium_env()
