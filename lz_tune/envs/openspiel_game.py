"""OpenSpiel games by name: id parsing, the check that a game can be served, and the observation
encoding shared by the env, the probe and the tests.

An env id ``openspiel:<game>`` names any OpenSpiel game string, parameters included
(``openspiel:tic_tac_toe``, ``openspiel:connect_four``, ``openspiel:connect_four(rows=5,columns=6)``).
Served are two-player, zero-sum games with sequential moves, perfect information, no chance
nodes and an observation tensor; every other game is refused with an error naming it and the
property that rules it out (the search's sign flip on backup is exact for two-player zero-sum
games only, and no policy type here plans over an opponent's chance outcomes).

Observation of the player ``p`` to move: ``observation_tensor(p)`` (OpenSpiel's view of that
player; in most perfect-information games it is the same for both) plus a one-hot of ``p``, so
that the value and policy the network learns are those of the player to move:

- ``planes=False`` (default, for MLP networks): ``[D + 2]`` float32, the flattened tensor, then
  ``[p == 0, p == 1]``;
- ``planes=True`` (for conv networks): ``[C + 2, H, W]``, the tensor's planes (a 2-D ``[H, W]``
  tensor is one plane), then one constant plane per player, all ones for the player to move.

``pyspiel`` (the ``open_spiel`` wheel: ``pip install -e ".[games]"``) is imported on first use.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "OPENSPIEL_PREFIX",
    "OpenSpielGameInfo",
    "is_openspiel_id",
    "load_openspiel_game",
    "encode_observation",
    "observation_shape",
    "NUM_PLAYERS",
]

OPENSPIEL_PREFIX = "openspiel:"
"""Env ids that start with this name an OpenSpiel game (``openspiel:tic_tac_toe``)."""

NUM_PLAYERS = 2
"""Served games have exactly two players (ids 0 and 1; player 0 moves first)."""

_GAME_NAME = re.compile(r"^([A-Za-z0-9_]+)(\(.*\))?$")


def is_openspiel_id(env_id: Any) -> bool:
    """True for ``openspiel:<game>`` ids."""
    return isinstance(env_id, str) and env_id.startswith(OPENSPIEL_PREFIX)


def import_pyspiel() -> Any:
    """``pyspiel``, or ValueError saying how to install it."""
    try:
        import pyspiel
    except ImportError as e:
        raise ValueError(
            "openspiel:* env ids need OpenSpiel, which is not installed: "
            f'pip install -e ".[games]" (the open_spiel wheel) ({e})'
        ) from None
    return pyspiel


@dataclass(frozen=True)
class OpenSpielGameInfo:
    """A game that passed :func:`load_openspiel_game`.

    Attributes:
        env_id: ``openspiel:<game string>`` as given.
        game_string: the OpenSpiel game string (``tic_tac_toe``, ``connect_four(rows=5)``).
        game: the loaded ``pyspiel.Game``.
        tensor_shape: OpenSpiel's observation tensor shape (``(3, 3, 3)`` for tic-tac-toe).
        num_actions: A, ``game.num_distinct_actions()``.
        max_game_length: the longest game in moves.
    """

    env_id: str
    game_string: str
    game: Any
    tensor_shape: tuple[int, ...]
    num_actions: int
    max_game_length: int

    def observation_shape(self, planes: bool) -> tuple[int, ...]:
        """Shape of one served observation (see the module docstring)."""
        return observation_shape(self.tensor_shape, planes)


def observation_shape(tensor_shape: tuple[int, ...], planes: bool) -> tuple[int, ...]:
    """``(prod(tensor_shape) + 2,)``, or ``(C + 2, H, W)`` with ``planes`` (a 2-D tensor: ``(3, H, W)``).
    Raises ValueError for ``planes`` with a 1-D tensor."""
    if not planes:
        return (int(np.prod(tensor_shape)) + NUM_PLAYERS,)
    if len(tensor_shape) == 2:
        return (1 + NUM_PLAYERS, *tensor_shape)
    if len(tensor_shape) == 3:
        return (tensor_shape[0] + NUM_PLAYERS, *tensor_shape[1:])
    raise ValueError(
        f"env.openspiel_planes: the game's observation tensor has shape {tuple(tensor_shape)}, "
        "not [H, W] or [C, H, W] planes; use env.openspiel_planes=False"
    )


def encode_observation(state: Any, player: int, tensor_shape: tuple[int, ...], planes: bool) -> np.ndarray:
    """float32 observation of ``state`` for ``player`` (the player to move), shaped
    :func:`observation_shape` ``(tensor_shape, planes)``."""
    tensor = np.asarray(state.observation_tensor(player), dtype=np.float32)
    if not planes:
        out = np.zeros(tensor.size + NUM_PLAYERS, np.float32)
        out[: tensor.size] = tensor
        out[tensor.size + player] = 1.0
        return out
    board: np.ndarray = tensor.reshape((1, *tensor_shape) if len(tensor_shape) == 2 else tensor_shape)
    out = np.zeros((board.shape[0] + NUM_PLAYERS, *board.shape[1:]), np.float32)
    out[: board.shape[0]] = board
    out[board.shape[0] + player] = 1.0
    return out


def _refuse(env_id: str, why: str) -> ValueError:
    return ValueError(
        f"env id {env_id!r}: {why}; lz_tune serves two-player zero-sum OpenSpiel games with "
        "sequential moves, perfect information, no chance nodes and an observation tensor "
        "(e.g. openspiel:tic_tac_toe, openspiel:connect_four)"
    )


def load_openspiel_game(env_id: str) -> OpenSpielGameInfo:
    """Load and check the game of an ``openspiel:<game>`` id.

    Raises:
        ValueError: OpenSpiel is not installed; the name is unknown (close names suggested); its
            parameters do not parse; or the game is one that cannot be served (named, with why).
    """
    if not is_openspiel_id(env_id):
        raise ValueError(f"env id {env_id!r} does not start with {OPENSPIEL_PREFIX!r}")
    game_string = env_id[len(OPENSPIEL_PREFIX) :].strip()
    match = _GAME_NAME.match(game_string)
    if not match:
        raise ValueError(f"env id {env_id!r}: expected openspiel:<game> or openspiel:<game>(param=value,...)")
    pyspiel = import_pyspiel()
    name = match.group(1)
    names = list(pyspiel.registered_names())
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = (
            "did you mean " + ", ".join(f"'openspiel:{c}'" for c in close) + "?"
            if close
            else "pyspiel.registered_names() lists the games"
        )
        raise ValueError(f"env id {env_id!r}: unknown OpenSpiel game {name!r}; {hint}")
    try:
        game = pyspiel.load_game(game_string)
    except pyspiel.SpielError as e:
        raise ValueError(
            f"env id {env_id!r}: OpenSpiel cannot load {game_string!r}: {str(e).splitlines()[0]}"
        ) from None
    kind = game.get_type()
    GameType = pyspiel.GameType
    if game.num_players() != NUM_PLAYERS:
        raise _refuse(env_id, f"{name} has {game.num_players()} players")
    if kind.dynamics != GameType.Dynamics.SEQUENTIAL:
        raise _refuse(env_id, f"{name} has simultaneous moves ({kind.dynamics.name})")
    if kind.information != GameType.Information.PERFECT_INFORMATION:
        raise _refuse(env_id, f"{name} has imperfect information ({kind.information.name})")
    if kind.chance_mode != GameType.ChanceMode.DETERMINISTIC:
        raise _refuse(
            env_id,
            f"{name} has chance nodes ({kind.chance_mode.name}); no policy type here plans over "
            "chance outcomes in a two-player game",
        )
    if kind.utility != GameType.Utility.ZERO_SUM:
        raise _refuse(env_id, f"{name} is not zero-sum ({kind.utility.name}); the search's sign flip needs it")
    if not kind.provides_observation_tensor:
        raise _refuse(env_id, f"{name} provides no observation tensor")
    return OpenSpielGameInfo(
        env_id=env_id,
        game_string=game_string,
        game=game,
        tensor_shape=tuple(int(d) for d in game.observation_tensor_shape()),
        num_actions=int(game.num_distinct_actions()),
        max_game_length=int(game.max_game_length()),
    )
