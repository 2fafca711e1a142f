"""OpenSpiel's own bots as evaluation opponents: uniform random, and its MCTS bot.

- ``random``: a uniformly random legal move, drawn from the env's seeded generator.
- ``mcts``: ``pyspiel.MCTSBot`` (C++): UCT with ``mcts_uct_c``, ``mcts_simulations`` simulations
  per move, each leaf valued by ``mcts_rollouts`` uniformly random rollouts
  (``pyspiel.RandomRolloutEvaluator``), with MCTS-Solver (``solve=True``: proven wins and losses
  are backed up exactly, as OpenSpiel's examples run it), seeded per game for reproducible play.
  With 1,000 simulations it plays tic-tac-toe perfectly or close to it (~1 ms per move on one core).
- ``minimax``: exhaustive negamax with alpha-beta pruning (:class:`MinimaxOpponent`), a perfect
  player at full depth (``minimax_depth=None``): every legal move is valued exactly and the bot
  draws uniformly, from a generator seeded per game, among the moves of the best value, so that
  it does not play one fixed line. Values are the game's returns discounted by
  :data:`MINIMAX_PLY_DISCOUNT` per ply (the quickest win, the slowest loss; never a sign change).
  With a depth limit, a position ``minimax_depth`` plies below the move to choose that is not
  over is scored 0 (a draw: no heuristic), so the bot sees every forced win and loss within its
  horizon and plays uniformly among the moves that keep the best of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional, Protocol

import numpy as np

__all__ = [
    "OpponentOptions",
    "Opponent",
    "RandomOpponent",
    "MCTSOpponent",
    "MinimaxOpponent",
    "make_opponent",
    "OPPONENT_KINDS",
    "MINIMAX_PLY_DISCOUNT",
]

OPPONENT_KINDS = ("random", "mcts", "minimax")

MINIMAX_PLY_DISCOUNT = 0.999
"""Per-ply discount of the minimax bot's values: a win in fewer moves is worth more, a loss in
more moves less (draws stay 0), so it finishes won games and resists lost ones."""

_TIE = 1e-9
"""Values closer than this are equally good moves for the minimax bot."""

_MCTS_MEMORY_MB = 1000


@dataclass(frozen=True, kw_only=True)
class OpponentOptions:
    """Which OpenSpiel bot the agent plays against in evaluation (``evaluator.opponent*`` keys).

    Attributes:
        kind: ``random``, ``mcts`` or ``minimax``.
        mcts_simulations: simulations per move of the MCTS bot.
        mcts_uct_c: its UCT exploration constant.
        mcts_rollouts: random rollouts per leaf evaluation.
        minimax_depth: plies the minimax bot looks ahead (None: to the end of the game).
    """

    kind: Literal["random", "mcts", "minimax"] = "random"
    mcts_simulations: int = 1000
    mcts_uct_c: float = 2.0
    mcts_rollouts: int = 1
    minimax_depth: Optional[int] = None

    def __post_init__(self) -> None:
        if self.kind not in OPPONENT_KINDS:
            raise ValueError(f"opponent kind must be one of {OPPONENT_KINDS}, got {self.kind!r}")
        if self.mcts_simulations < 1 or self.mcts_rollouts < 1 or self.mcts_uct_c < 0:
            raise ValueError(f"opponent MCTS needs simulations >= 1, rollouts >= 1 and uct_c >= 0, got {self}")
        if self.minimax_depth is not None and self.minimax_depth < 1:
            raise ValueError(f"opponent minimax depth must be >= 1 or None, got {self.minimax_depth}")

    def describe(self) -> str:
        """``random``, ``mcts(1000 simulations)``, ``minimax`` or ``minimax(depth 4)``."""
        if self.kind == "mcts":
            return f"mcts({self.mcts_simulations} simulations)"
        if self.kind == "minimax" and self.minimax_depth is not None:
            return f"minimax(depth {self.minimax_depth})"
        return self.kind


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


class MinimaxOpponent:
    """A perfect player by exhaustive negamax with alpha-beta pruning (see the module docstring).

    Values are from the view of the player to move, terminal ones ``state.returns()[player]``,
    discounted by :data:`MINIMAX_PLY_DISCOUNT` per ply. The best moves of every position it was
    asked about are cached by the position's string (``str(state)`` and the player to move), and
    at full depth the exact value of every position it searched (tic-tac-toe: ~5,500 positions,
    solved once in well under a second, then one dict look-up per move); the caches are shared by
    the bots of one game and depth in this process (they are pure functions of the position).
    Only the choice among equally good moves is random: a generator seeded by :meth:`new_game`.

    Full depth is for small games (tic-tac-toe); connect four needs ``depth`` (a few plies: each
    move then searches ``~7^depth`` positions, fewer with pruning).
    """

    _best_moves: dict[tuple[str, Optional[int]], dict[str, tuple[int, ...]]] = {}
    _values: dict[str, dict[str, float]] = {}

    def __init__(self, game: Any, depth: Optional[int] = None) -> None:
        if depth is not None and depth < 1:
            raise ValueError(f"minimax depth must be >= 1 or None, got {depth}")
        self.depth = depth
        key = str(game)
        self._moves_cache = MinimaxOpponent._best_moves.setdefault((key, depth), {})
        self._value_cache = MinimaxOpponent._values.setdefault(key, {}) if depth is None else {}
        self._rng = np.random.default_rng(0)

    def new_game(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, state: Any) -> int:
        moves = self.best_moves(state)
        return int(moves[int(self._rng.integers(len(moves)))]) if len(moves) > 1 else int(moves[0])

    def best_moves(self, state: Any) -> tuple[int, ...]:
        """Every legal move of the best value for the player to move in ``state``, ascending."""
        key = _position_key(state)
        moves = self._moves_cache.get(key)
        if moves is None:
            values = self.move_values(state)
            best = max(values.values())
            moves = tuple(a for a, v in sorted(values.items()) if v >= best - _TIE)
            self._moves_cache[key] = moves
        return moves

    def move_values(self, state: Any) -> dict[int, float]:
        """``{legal move: its value for the player to move}`` (exact within the depth limit)."""
        if state.is_terminal():
            raise ValueError("minimax: the game is over, there is no move to choose")
        player = state.current_player()
        remaining = None if self.depth is None else self.depth - 1
        values = {}
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            values[int(action)] = self._edge_value(child, player, remaining, -np.inf, np.inf) + 0.0  # no -0.0
        return values

    def value(self, state: Any) -> float:
        """The value of ``state`` for its player to move (the best of :meth:`move_values`)."""
        return max(self.move_values(state).values())

    def _edge_value(self, child: Any, player: int, remaining: Optional[int], alpha: float, beta: float) -> float:
        """Value for ``player`` (who just moved) of reaching ``child``, searched in (alpha, beta)."""
        if child.is_terminal():
            return float(child.returns()[player])
        if remaining == 0:
            return 0.0
        sign = 1.0 if child.current_player() == player else -1.0
        lo, hi = (alpha, beta) if sign > 0 else (-beta, -alpha)
        below = None if remaining is None else remaining - 1
        return (
            sign
            * MINIMAX_PLY_DISCOUNT
            * self._negamax(child, below, lo / MINIMAX_PLY_DISCOUNT, hi / MINIMAX_PLY_DISCOUNT)
        )

    def _negamax(self, state: Any, remaining: Optional[int], alpha: float, beta: float) -> float:
        """Value of ``state`` for its player to move; exact when it lies in (alpha, beta), else a
        bound on the side it fell (fail-hard alpha-beta). At full depth positions are solved
        exactly once (a full window) and cached."""
        if remaining is None:
            key = _position_key(state)
            cached = self._value_cache.get(key)
            if cached is None:
                cached = self._solve(state)
                self._value_cache[key] = cached
            return cached
        player = state.current_player()
        best = -np.inf
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            value = self._edge_value(child, player, remaining, max(alpha, best), beta)
            if value > best:
                best = value
                if best >= beta:
                    break
        return best

    def _solve(self, state: Any) -> float:
        """Exact value of ``state`` for its player to move (full depth, every move)."""
        player = state.current_player()
        best = -np.inf
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            best = max(best, self._edge_value(child, player, None, -np.inf, np.inf))
        return best


def _position_key(state: Any) -> str:
    """What identifies a position for the minimax caches: the board text and the player to move."""
    return f"{state.current_player()}\n{state}"


def make_opponent(game: Any, options: OpponentOptions) -> Opponent:
    """The bot ``options`` names for ``game`` (a ``pyspiel.Game``)."""
    if options.kind == "random":
        return RandomOpponent()
    if options.kind == "minimax":
        return MinimaxOpponent(game, options.minimax_depth)
    return MCTSOpponent(game, options)
