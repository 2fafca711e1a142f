"""OpenSpiel's own bots as evaluation opponents: uniform random, and its MCTS bot.

- ``random``: a uniformly random legal move, drawn from the env's seeded generator.
- ``mcts``: ``pyspiel.MCTSBot`` (C++): UCT with ``mcts_uct_c``, ``mcts_simulations`` simulations
  per move, each leaf valued by ``mcts_rollouts`` uniformly random rollouts
  (``pyspiel.RandomRolloutEvaluator``), with MCTS-Solver (``solve=True``: proven wins and losses
  are backed up exactly, as OpenSpiel's examples run it), seeded per game for reproducible play.
  With 1,000 simulations it plays tic-tac-toe perfectly or close to it (~1 ms per move on one core).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

__all__ = ["OpponentOptions", "Opponent", "RandomOpponent", "MCTSOpponent", "make_opponent", "OPPONENT_KINDS"]

OPPONENT_KINDS = ("random", "mcts")

_MCTS_MEMORY_MB = 1000


@dataclass(frozen=True, kw_only=True)
class OpponentOptions:
    """Which OpenSpiel bot the agent plays against in evaluation (``evaluator.opponent*`` keys).

    Attributes:
        kind: ``random`` or ``mcts``.
        mcts_simulations: simulations per move of the MCTS bot.
        mcts_uct_c: its UCT exploration constant.
        mcts_rollouts: random rollouts per leaf evaluation.
    """

    kind: Literal["random", "mcts"] = "random"
    mcts_simulations: int = 1000
    mcts_uct_c: float = 2.0
    mcts_rollouts: int = 1

    def __post_init__(self) -> None:
        if self.kind not in OPPONENT_KINDS:
            raise ValueError(f"opponent kind must be one of {OPPONENT_KINDS}, got {self.kind!r}")
        if self.mcts_simulations < 1 or self.mcts_rollouts < 1 or self.mcts_uct_c < 0:
            raise ValueError(f"opponent MCTS needs simulations >= 1, rollouts >= 1 and uct_c >= 0, got {self}")

    def describe(self) -> str:
        """``random`` or ``mcts(1000 simulations)``."""
        return self.kind if self.kind == "random" else f"mcts({self.mcts_simulations} simulations)"


class Opponent(Protocol):
    """A bot that picks one player's moves."""

    def new_game(self, seed: int) -> None:
        """Start a game; ``seed`` seeds whatever randomness the bot has."""

    def choose(self, state: Any) -> int:
        """A legal action in ``state`` (a ``pyspiel.State`` where the bot is to move)."""


class RandomOpponent:
    """A uniformly random legal move."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def new_game(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, state: Any) -> int:
        legal = state.legal_actions()
        return int(legal[int(self._rng.integers(len(legal)))])


class MCTSOpponent:
    """OpenSpiel's C++ MCTS bot (see the module docstring)."""

    def __init__(self, game: Any, options: OpponentOptions) -> None:
        self._game = game
        self._options = options
        self._bot: Any = None
        self.new_game(0)

    def new_game(self, seed: int) -> None:
        import pyspiel

        o = self._options
        seed = int(seed) % (2**31 - 1)
        evaluator = pyspiel.RandomRolloutEvaluator(o.mcts_rollouts, seed)
        self._bot = pyspiel.MCTSBot(
            self._game, evaluator, float(o.mcts_uct_c), int(o.mcts_simulations), _MCTS_MEMORY_MB, True, seed + 1, False
        )

    def choose(self, state: Any) -> int:
        return int(self._bot.step(state))


def make_opponent(game: Any, options: OpponentOptions) -> Opponent:
    """The bot ``options`` names for ``game`` (a ``pyspiel.Game``)."""
    if options.kind == "random":
        return RandomOpponent()
    return MCTSOpponent(game, options)
