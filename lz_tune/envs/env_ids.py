"""Env id resolution: ALE registration on demand, Atari detection, lz_tune's own envs (2048),
helpful unknown-id errors."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass

import gymnasium
from gymnasium.envs.registration import EnvSpec

from lz_tune.envs import game_2048

__all__ = ["ResolvedEnvId", "resolve_env_id", "ALE_ENTRY_POINT", "LZ_TUNE_ENV_ALIASES", "MINATAR_NAMESPACE"]

ALE_ENTRY_POINT = "ale_py.env:AtariEnv"
"""Entry point of every env that ale_py registers (``ALE/Pong-v5``, ``PongNoFrameskip-v4``)."""

LZ_TUNE_ENV_ALIASES = {game_2048.SHORT_ENV_ID: game_2048.ENV_ID}
"""Short ids of lz_tune's own envs (``Game2048-v0``) and the gymnasium ids they stand for."""

_ale_registered = False


@dataclass(frozen=True)
class ResolvedEnvId:
    """A gymnasium id known to the registry.

    Attributes:
        env_id: the id as registered (a ``module:`` prefix removed).
        spec: its gymnasium registration.
        is_atari: True for ALE games (namespace ``ALE`` or registered by ale_py).
    """

    env_id: str
    spec: EnvSpec
    is_atari: bool

    @property
    def is_game_2048(self) -> bool:
        """True for ``lz_tune/Game2048-v0`` (served by :class:`lz_tune.envs.game_2048.Game2048VectorEnv`)."""
        return self.env_id == game_2048.ENV_ID

    @property
    def atari_game(self) -> str:
        """The ALE ROM name (``pong``); only for Atari ids."""
        if not self.is_atari:
            raise ValueError(f"{self.env_id!r} is not an ALE id")
        game = self.spec.kwargs.get("game")
        if not isinstance(game, str):
            raise ValueError(f"ALE id {self.env_id!r} names no game in its registration")
        return game

    @property
    def atari_full_action_space(self) -> bool:
        """Whether the registration asks for all 18 Atari actions; only for Atari ids."""
        return bool(self.spec.kwargs.get("full_action_space", False))


def _register_ale(*, needed: bool = True) -> None:
    """Register ale_py's ids with gymnasium, once (importing ale_py costs ~0.1 s). ``needed``: the
    id is an ALE one, so an ale_py that does not import is a ValueError that says so (else the
    lookup just goes on without the ALE ids)."""
    global _ale_registered
    if _ale_registered:
        return
    try:
        import ale_py
    except Exception as e:  # missing, or a broken install (an ImportError of its compiled part)
        if needed:
            raise ValueError(
                f"Atari ids need ale-py (the emulator, with its ROMs), which does not import here "
                f"({type(e).__name__}: {e}); pip install 'ale-py>=0.11'"
            ) from e
        return
    gymnasium.register_envs(ale_py)
    _ale_registered = True


MINATAR_NAMESPACE = "MinAtar"
"""Ids ``MinAtar/<Game>-v0`` (all 6 actions) and ``MinAtar/<Game>-v1`` (the game's minimal action set),
for Asterix, Breakout, Freeway, Seaquest and SpaceInvaders; registered on first need when the
``minatar`` package is installed (``pip install -e ".[minatar]"``). MinAtar's own defaults hold:
sticky actions with probability 0.1 and difficulty ramping on; observations ``[10, 10, C]`` bool,
channels last (served as ``[C, 10, 10]`` float32)."""


def _register_minatar(env_id: str) -> None:
    """Register MinAtar's ids with gymnasium, once; a clear error when ``minatar`` is missing."""
    if env_id in gymnasium.registry:
        return
    try:
        import minatar.gym
    except ImportError as e:
        raise ValueError(
            f"env id {env_id!r} needs the MinAtar package, which is not installed here: "
            f'pip install minatar (or the project\'s extra: pip install -e ".[minatar]"); {e}'
        ) from e
    minatar.gym.register_envs()


def _unknown_id_error(env_id: str) -> ValueError:
    ids = list(gymnasium.registry.keys()) + list(LZ_TUNE_ENV_ALIASES)
    by_lower = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(env_id.lower(), list(by_lower), n=5, cutoff=0.6)
    hint = (
        "did you mean " + ", ".join(repr(by_lower[c]) for c in close) + "?"
        if close
        else "gymnasium.pprint_registry() lists the known ids."
    )
    return ValueError(
        f"unknown env id {env_id!r}: {hint} (an env that a function of yours registers: name it in "
        f"env.import_modules, e.g. env.import_modules=('my_package.envs:register',))"
    )


def resolve_env_id(env_id: str) -> ResolvedEnvId:
    """Look ``env_id`` up in the gymnasium registry without creating anything.

    ALE and MinAtar (``MinAtar/Breakout-v1``) ids are registered on first need. A ``module:EnvId`` id imports ``module``
    first (as ``gymnasium.make`` does). ``Game2048-v0`` stands for ``lz_tune/Game2048-v0``.

    Raises:
        ValueError: the id is unknown; the message names it and suggests close matches.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    name = env_id
    if ":" in env_id:
        module, _, name = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"env id {env_id!r}: cannot import module {module!r} ({exc})") from exc
    name = LZ_TUNE_ENV_ALIASES.get(name, name)
    if name in LZ_TUNE_ENV_ALIASES.values():
        game_2048.register_gymnasium_env()
    if name.startswith(MINATAR_NAMESPACE + "/"):
        _register_minatar(name)
    elif name not in gymnasium.registry or name.startswith("ALE/"):
        _register_ale(needed=name.startswith("ALE/"))
    spec = gymnasium.registry.get(name)
    if spec is None:
        raise _unknown_id_error(name)
    is_atari = spec.namespace == "ALE" or spec.entry_point == ALE_ENTRY_POINT
    if is_atari and spec.kwargs.get("obs_type", "rgb") != "rgb":
        raise ValueError(
            f"env id {name!r} has obs_type={spec.kwargs['obs_type']!r}; only image (rgb) Atari envs are supported"
        )
    return ResolvedEnvId(env_id=name, spec=spec, is_atari=is_atari)
