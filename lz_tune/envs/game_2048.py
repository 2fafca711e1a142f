"""The game 2048, vectorised with numpy, for Stochastic MuZero.

A step is a deterministic move (slide and merge the tiles) giving an *afterstate*,
followed by a chance event: a new tile (a 2 with p = 0.9, a 4 with p = 0.1) spawns on a
uniformly chosen empty cell. The spawn is the env's chance outcome.

Conventions:

* Boards are ``[N, 4, 4]`` int8 tile *exponents*: 0 = empty, ``k`` = the tile ``2**k``.
  The largest exponent is :data:`MAX_EXPONENT` = 15: two ``2**15`` (32768) tiles do not
  merge, so exponents always fit the 16 one-hot channels of :func:`observation`. (A
  ``2**16`` tile is possible in theory, but unreachable in practice.)
* Actions: 0 = up, 1 = right, 2 = down, 3 = left (:data:`ACTION_NAMES`).
* Chance outcomes: ``cell * 2 + (1 if the tile is a 4 else 0)`` with
  ``cell = row * 4 + col``: :data:`CHANCE_SPACE_SIZE` = 32 outcomes.
* The reward of a move is the sum of the values of the tiles it creates by merging
  (``[2, 2, 2, 2]`` -> ``[4, 4, 0, 0]``: 8); a tile merges at most once per move
  (``[2, 2, 4, 0]`` -> ``[4, 4, 0, 0]``: 4). The score of a game is the sum of its rewards.
* A new game starts with two spawned tiles; it is over when the board after a spawn has
  no legal move (a move is legal iff it changes the board).

Every move is read from one table over all ``16**4`` rows (:func:`row_table`), giving a
row moved LEFT; the other directions permute the cells so that they become LEFT moves
(reverse the rows for right, transpose for up, both for down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from lz_tune.envs.base import VectorEnv
from lz_tune.envs.episode_tracker import EpisodeTracker
from lz_tune.envs.frame_stack import FrameStack
from lz_tune.envs.types import EnvBatch, StepResult

__all__ = [
    "ACTION_NAMES",
    "CHANCE_SPACE_SIZE",
    "ENV_ID",
    "SHORT_ENV_ID",
    "MAX_EXPONENT",
    "NUM_ACTIONS",
    "OBSERVATION_SIZE",
    "FOUR_PROBABILITY",
    "RowTable",
    "row_table",
    "apply_moves",
    "legal_moves",
    "move_rewards",
    "spawn_tiles",
    "apply_chance",
    "new_boards",
    "observation",
    "boards_from_observation",
    "greedy_actions",
    "random_actions",
    "Game2048VectorEnv",
    "Game2048Env",
    "register_gymnasium_env",
]

ENV_ID = "lz_tune/Game2048-v0"
"""The gymnasium id of :class:`Game2048Env` (registered on import of ``lz_tune.envs``)."""
SHORT_ENV_ID = "Game2048-v0"
"""The id ``make_vector_env`` / ``probe_env_spec`` also accept for 2048."""

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
ACTION_NAMES = ("up", "right", "down", "left")
NUM_ACTIONS = 4
SIZE = 4
NUM_CELLS = SIZE * SIZE
MAX_EXPONENT = 15
NUM_CHANNELS = MAX_EXPONENT + 1
OBSERVATION_SIZE = NUM_CHANNELS * NUM_CELLS  # 256
CHANCE_SPACE_SIZE = 2 * NUM_CELLS  # 32
FOUR_PROBABILITY = 0.1
_NUM_ROWS = NUM_CHANNELS**SIZE  # 65536
_ROW_WEIGHTS = np.array([NUM_CHANNELS**3, NUM_CHANNELS**2, NUM_CHANNELS, 1], dtype=np.int64)
"""A row ``[a0, a1, a2, a3]`` (a0: the cell a LEFT move slides towards) has code ``row @ _ROW_WEIGHTS``."""

# ---------------------------------------------------------------------------------------------
# the row table


@dataclass(frozen=True)
class RowTable:
    """A LEFT move of every row, indexed by the row code ``a0 * 4096 + a1 * 256 + a2 * 16 + a3``.

    Attributes:
        left: ``[65536, 4]`` int8, the row after the move.
        reward: ``[65536]`` float32, the sum of the values of the merged tiles.
        changed: ``[65536]`` bool, the move changed the row.
    """

    left: np.ndarray
    reward: np.ndarray
    changed: np.ndarray


_row_table: RowTable | None = None


def _slide_left(rows: np.ndarray) -> np.ndarray:
    """``[R, 4]`` rows with their non-empty cells moved to the left, in order."""
    order = np.argsort(rows == 0, axis=1, kind="stable")
    return np.take_along_axis(rows, order, axis=1)


def _build_row_table() -> RowTable:
    """Move all ``16**4`` rows LEFT at once: slide, merge equal neighbours from the left, slide."""
    codes = np.arange(_NUM_ROWS, dtype=np.int64)
    rows = (codes[:, None] // _ROW_WEIGHTS) % NUM_CHANNELS  # [R, 4]
    slid = _slide_left(rows)
    merged = slid.copy()
    reward = np.zeros(_NUM_ROWS, dtype=np.float64)
    merged_before = np.zeros(_NUM_ROWS, dtype=bool)
    for i in range(SIZE - 1):  # pair (i, i + 1); a tile merged with its left neighbour cannot merge again
        a, b = slid[:, i], slid[:, i + 1]
        merge = (a != 0) & (a == b) & (a < MAX_EXPONENT) & ~merged_before
        merged[merge, i] = a[merge] + 1
        merged[merge, i + 1] = 0
        reward += np.where(merge, 2.0 ** (a + 1), 0.0)
        merged_before = merge
    left = _slide_left(merged)
    return RowTable(
        left=left.astype(np.int8),
        reward=reward.astype(np.float32),
        changed=(left != rows).any(axis=1),
    )


def row_table() -> RowTable:
    """The LEFT-move table of all rows, built on first use (~40 ms) and cached at module level."""
    global _row_table
    if _row_table is None:
        _row_table = _build_row_table()
    return _row_table


# ---------------------------------------------------------------------------------------------
# moves

_ORIENT = np.empty((NUM_ACTIONS, NUM_CELLS), dtype=np.int64)
"""``[4, 16]``: for action ``a``, cell ``k`` of the canonical board (where the move is LEFT) is
cell ``_ORIENT[a, k]`` of the board (flat indices ``row * 4 + col``)."""
_r, _c = np.divmod(np.arange(NUM_CELLS), SIZE)  # canonical row i, column j
_ORIENT[LEFT] = _r * SIZE + _c  # canon[i, j] = board[i, j]
_ORIENT[RIGHT] = _r * SIZE + (SIZE - 1 - _c)  # canon[i, j] = board[i, 3 - j]
_ORIENT[UP] = _c * SIZE + _r  # canon[i, j] = board[j, i]
_ORIENT[DOWN] = (SIZE - 1 - _c) * SIZE + _r  # canon[i, j] = board[3 - j, i]
del _r, _c


def _check_boards(boards: np.ndarray, what: str = "boards") -> np.ndarray:
    """``boards`` as int8 ``[N, 4, 4]`` with exponents in ``[0, MAX_EXPONENT]``, or ValueError."""
    boards = np.asarray(boards)
    if boards.ndim != 3 or boards.shape[1:] != (SIZE, SIZE):
        raise ValueError(f"{what} must have shape [N, 4, 4], got {boards.shape}")
    if not np.issubdtype(boards.dtype, np.integer):
        raise ValueError(f"{what} must hold integer tile exponents, got dtype {boards.dtype}")
    if boards.size and (boards.min() < 0 or boards.max() > MAX_EXPONENT):
        raise ValueError(f"{what} must hold exponents in [0, {MAX_EXPONENT}], got [{boards.min()}, {boards.max()}]")
    return boards.astype(np.int8, copy=False)


def _check_indices(values: np.ndarray, n: int, high: int, what: str) -> np.ndarray:
    """``values`` as int64 ``[n]`` in ``[0, high)``, or ValueError."""
    values = np.asarray(values)
    if values.shape != (n,) or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{what} must be integers of shape ({n},), got {values.dtype} {values.shape}")
    if n and (values.min() < 0 or values.max() >= high):
        raise ValueError(f"{what} must lie in [0, {high}), got {values.tolist()}")
    return values.astype(np.int64, copy=False)


def _all_row_codes(boards: np.ndarray) -> np.ndarray:
    """``[N, 4 actions, 4 rows]`` int64 codes of the canonical rows of every direction."""
    canon = boards.reshape(-1, NUM_CELLS)[:, _ORIENT]  # [N, 4, 16]
    return canon.reshape(-1, NUM_ACTIONS, SIZE, SIZE).astype(np.int64) @ _ROW_WEIGHTS


def _apply_moves(boards: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`apply_moves` without input checks (int8 boards, int64 actions)."""
    n = boards.shape[0]
    table = row_table()
    orient = _ORIENT[actions]  # [N, 16]
    rows = np.arange(n)[:, None]
    canon = boards.reshape(n, NUM_CELLS)[rows, orient]  # each move becomes a LEFT move
    codes = canon.reshape(n, SIZE, SIZE).astype(np.int64) @ _ROW_WEIGHTS  # [N, 4]
    afterstates = np.empty((n, NUM_CELLS), dtype=np.int8)
    afterstates[rows, orient] = table.left[codes].reshape(n, NUM_CELLS)  # back to the board's cells
    rewards = table.reward[codes].sum(axis=1, dtype=np.float32)
    changed = table.changed[codes].any(axis=1)
    return afterstates.reshape(n, SIZE, SIZE), rewards, changed


def apply_moves(boards: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Move every board in its direction (no spawn).

    Args:
        boards: ``[N, 4, 4]`` int tile exponents.
        actions: ``[N]`` int, 0 = up, 1 = right, 2 = down, 3 = left.

    Returns:
        ``afterstates`` ``[N, 4, 4]`` int8, ``rewards`` ``[N]`` float32 (sum of the merged
        tiles' values) and ``changed`` ``[N]`` bool (the move was legal).
    """
    boards = _check_boards(boards)
    return _apply_moves(boards, _check_indices(actions, boards.shape[0], NUM_ACTIONS, "actions"))


def _legal_moves(boards: np.ndarray) -> np.ndarray:
    """:func:`legal_moves` without input checks."""
    return row_table().changed[_all_row_codes(boards)].any(axis=2)


def legal_moves(boards: np.ndarray) -> np.ndarray:
    """``[N, 4]`` bool: move ``a`` is legal on board ``n`` iff it changes the board."""
    return _legal_moves(_check_boards(boards))


def move_rewards(boards: np.ndarray) -> np.ndarray:
    """``[N, 4]`` float32, the immediate merge reward of each move (0 for illegal moves)."""
    boards = _check_boards(boards)
    return row_table().reward[_all_row_codes(boards)].sum(axis=2, dtype=np.float32)


def greedy_actions(boards: np.ndarray) -> np.ndarray:
    """``[N]`` int64, the legal move with the largest immediate reward (ties: lowest index).

    A board without legal moves gets action 0.
    """
    boards = _check_boards(boards)
    codes = _all_row_codes(boards)
    table = row_table()
    legal = table.changed[codes].any(axis=2)
    rewards = table.reward[codes].sum(axis=2)
    return np.where(legal, rewards, -1.0).argmax(axis=1).astype(np.int64)


def random_actions(boards: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[N]`` int64, a move drawn uniformly among the legal moves of each board (0 if none)."""
    legal = legal_moves(boards)
    keys = rng.random(legal.shape)
    return np.where(legal, keys, -1.0).argmax(axis=1).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# chance: tile spawns


def _outcomes_from_uniforms(afterstates: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """``[N]`` chance outcomes from ``[N, 2]`` uniforms in [0, 1): column 0 picks the empty cell
    (uniformly), column 1 the tile (a 4 iff below :data:`FOUR_PROBABILITY`)."""
    n = afterstates.shape[0]
    empty = afterstates.reshape(n, NUM_CELLS) == 0
    count = empty.sum(axis=1)
    if n and count.min() == 0:
        full = np.flatnonzero(count == 0).tolist()
        raise ValueError(f"cannot spawn a tile on board(s) {full}: no empty cell")
    k = np.minimum((uniforms[:, 0] * count).astype(np.int64), count - 1)  # the k-th empty cell
    cell = np.argmax(np.cumsum(empty, axis=1) > k[:, None], axis=1)
    is_four = uniforms[:, 1] < FOUR_PROBABILITY
    return cell.astype(np.int64) * 2 + is_four


def _place_tiles(afterstates: np.ndarray, chance_outcome: np.ndarray) -> np.ndarray:
    """:func:`apply_chance` without input checks (the cells must be empty)."""
    n = afterstates.shape[0]
    cell, is_four = np.divmod(chance_outcome, 2)
    boards = afterstates.reshape(n, NUM_CELLS).copy()
    boards[np.arange(n), cell] = 1 + is_four
    return boards.reshape(n, SIZE, SIZE)


def apply_chance(afterstates: np.ndarray, chance_outcome: np.ndarray) -> np.ndarray:
    """The next boards from afterstates and chance outcomes (deterministic).

    Args:
        afterstates: ``[N, 4, 4]`` int tile exponents.
        chance_outcome: ``[N]`` int in ``[0, 32)``: ``cell * 2 + (1 if a 4 else 0)``.

    Returns:
        ``[N, 4, 4]`` int8, a copy with the tile placed.

    Raises:
        ValueError: an outcome names an occupied cell (or bad shapes / values).
    """
    afterstates = _check_boards(afterstates, "afterstates")
    n = afterstates.shape[0]
    chance_outcome = _check_indices(chance_outcome, n, CHANCE_SPACE_SIZE, "chance_outcome")
    cell = chance_outcome // 2
    occupied = afterstates.reshape(n, NUM_CELLS)[np.arange(n), cell] != 0
    if occupied.any():
        bad = np.flatnonzero(occupied).tolist()
        raise ValueError(f"chance outcome(s) on board(s) {bad} name occupied cells {cell[occupied].tolist()}")
    return _place_tiles(afterstates, chance_outcome)


def spawn_tiles(afterstates: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Spawn one tile on every board: a 2 (p = 0.9) or a 4 (p = 0.1) on a uniform empty cell.

    Args:
        afterstates: ``[N, 4, 4]`` int tile exponents, each with an empty cell.
        rng: draws ``[N, 2]`` uniforms.

    Returns:
        ``boards`` ``[N, 4, 4]`` int8 and ``chance_outcome`` ``[N]`` int64 (see :func:`apply_chance`).
    """
    afterstates = _check_boards(afterstates, "afterstates")
    outcome = _outcomes_from_uniforms(afterstates, rng.random((afterstates.shape[0], 2)))
    return _place_tiles(afterstates, outcome), outcome


def _new_boards_from_uniforms(uniforms: np.ndarray) -> np.ndarray:
    """``[M, 4, 4]`` int8 new games (two spawned tiles) from ``[M, 4]`` uniforms."""
    boards = np.zeros((uniforms.shape[0], SIZE, SIZE), dtype=np.int8)
    for first in (0, 2):
        boards = _place_tiles(boards, _outcomes_from_uniforms(boards, uniforms[:, first : first + 2]))
    return boards


def new_boards(n: int, rng: np.random.Generator) -> np.ndarray:
    """``[n, 4, 4]`` int8 new games: two tiles spawned on an empty board."""
    return _new_boards_from_uniforms(rng.random((n, 4)))


# ---------------------------------------------------------------------------------------------
# observations


_CHANNELS = np.arange(NUM_CHANNELS, dtype=np.int8)[:, None]  # [16, 1]


def _observation(boards: np.ndarray) -> np.ndarray:
    """:func:`observation` without input checks."""
    n = boards.shape[0]
    one_hot = boards.reshape(n, 1, NUM_CELLS) == _CHANNELS
    return one_hot.reshape(n, OBSERVATION_SIZE).astype(np.float32)


def observation(boards: np.ndarray) -> np.ndarray:
    """``[N, 256]`` float32 one-hot of each cell's exponent, laid out as ``[16 channels, 4, 4]``
    flattened: ``obs[n, e * 16 + row * 4 + col] = 1`` iff cell (row, col) holds exponent
    ``e`` (channel 0 = empty)."""
    return _observation(_check_boards(boards))


def boards_from_observation(obs: np.ndarray) -> np.ndarray:
    """Inverse of :func:`observation`: ``[N, 256]`` one-hot to ``[N, 4, 4]`` int8 exponents."""
    obs = np.asarray(obs)
    if obs.ndim != 2 or obs.shape[1] != OBSERVATION_SIZE:
        raise ValueError(f"observations must have shape [N, {OBSERVATION_SIZE}], got {obs.shape}")
    exponents = obs.reshape(-1, NUM_CHANNELS, NUM_CELLS).argmax(axis=1)
    return exponents.reshape(-1, SIZE, SIZE).astype(np.int8)


# ---------------------------------------------------------------------------------------------
# the vector env


class _PerEnvUniforms:
    """One numpy Generator per env, read in blocks, so env ``i``'s draws depend only on its seed
    and its own history (not on N), without a Python loop per step."""

    def __init__(self, num_envs: int, block: int = 512) -> None:
        self._block = block
        self._generators: list[np.random.Generator] = []
        self._buffer = np.empty((num_envs, block), dtype=np.float64)
        self._pos = np.full(num_envs, block, dtype=np.int64)  # all read: refill on first take

    @property
    def seeded(self) -> bool:
        return bool(self._generators)

    def seed(self, seed: int | None) -> None:
        """New generators: env ``i`` from ``seed + i`` (None: fresh OS entropy)."""
        n = self._buffer.shape[0]
        self._generators = [np.random.default_rng(None if seed is None else seed + i) for i in range(n)]
        self._pos[:] = self._block

    def take(self, envs: np.ndarray, count: int) -> np.ndarray:
        """``[len(envs), count]`` the next ``count`` uniforms of each env in ``envs``."""
        for i in envs[self._pos[envs] + count > self._block]:  # refill, once per ~block/count steps
            rest = self._buffer[i, self._pos[i] :].copy()
            self._buffer[i, : rest.size] = rest
            self._buffer[i, rest.size :] = self._generators[i].random(self._block - rest.size)
            self._pos[i] = 0
        columns = self._pos[envs, None] + np.arange(count)
        self._pos[envs] += count
        return self._buffer[envs[:, None], columns]


class Game2048VectorEnv(VectorEnv):
    """N games of 2048 stepped together with numpy.

    Observations are float32 ``[N, frame_stack * 256]`` one-hots (:func:`observation`);
    ``action_mask`` is :func:`legal_moves`; ``to_play`` is -1. Each step applies the moves,
    spawns a tile per game and autoresets (same step) the games that ended: terminated
    when the board after the spawn has no legal move, truncated (and not terminated) when
    an episode reaches ``max_episode_steps``. Rewards are the merge rewards, so
    ``episode_return`` is the game score. ``info_columns['chance_outcome']`` ``[N]`` int64
    is the spawn of each step (:func:`apply_chance` of the afterstate and it gives the board
    of ``final_frame``).

    Args:
        num_envs: N.
        seed: seed of the first ``reset()`` called without one (env ``i`` gets ``seed + i``,
            one numpy Generator per env); None: unseeded.
        frame_stack: observations stacked per model input.
        max_episode_steps: time limit per episode; None: no limit.
    """

    env_id = ENV_ID

    def __init__(
        self,
        *,
        num_envs: int,
        seed: int | None = None,
        frame_stack: int = 1,
        max_episode_steps: int | None = None,
    ) -> None:
        self.check_sizes(num_envs, frame_stack, max_episode_steps)
        self._closed = False
        self.init_seed(seed)
        self.num_envs = num_envs
        self.action_space_size = NUM_ACTIONS
        self.action_dim = 0
        self.frame_stack = frame_stack
        self.max_episode_steps = max_episode_steps
        self.observation_dtype = np.dtype(np.float32)
        self.frame_shape = (OBSERVATION_SIZE,)
        self.frame_stacker = FrameStack(
            num_envs=num_envs, frame_shape=self.frame_shape, stack=frame_stack, dtype=self.observation_dtype
        )
        self.observation_shape = self.frame_stacker.observation_shape
        self.episode_tracker = EpisodeTracker(num_envs=num_envs)
        self.timesteps = np.zeros(num_envs, dtype=np.int64)
        self._to_play = np.full(num_envs, -1, dtype=np.int64)
        self._uniforms = _PerEnvUniforms(num_envs)
        self._all_envs = np.arange(num_envs)
        self._boards = np.zeros((num_envs, SIZE, SIZE), dtype=np.int8)
        self._action_mask = np.zeros((num_envs, NUM_ACTIONS), dtype=bool)
        self.needs_reset = True

    @property
    def boards(self) -> np.ndarray:
        """A copy of the current boards ``[N, 4, 4]`` int8 (tile exponents)."""
        return self._boards.copy()

    def reset(self, seed: int | None = None) -> EnvBatch:
        """Start a new game in every env, env ``i`` seeded with ``seed + i``."""
        self.check_open()
        seed = self.take_seed(seed)
        if seed is not None or not self._uniforms.seeded:
            self._uniforms.seed(seed)
        self._boards = _new_boards_from_uniforms(self._uniforms.take(self._all_envs, 4))
        self._action_mask = _legal_moves(self._boards)
        return self.begin_episodes(_observation(self._boards))

    def step(self, actions: np.ndarray) -> StepResult:
        """Move every game with ``actions`` ``[N]`` int (0 up, 1 right, 2 down, 3 left), spawn a
        tile in each and restart the finished games.

        Raises:
            ValueError: an action does not change its board (names the env and the action).
        """
        self.check_ready()
        actions = self.check_actions(actions)
        afterstates, reward, changed = _apply_moves(self._boards, actions)
        if not changed.all():
            i = int(np.flatnonzero(~changed)[0])
            a = int(actions[i])
            legal = [ACTION_NAMES[j] for j in np.flatnonzero(self._action_mask[i])]
            raise ValueError(
                f"Game2048VectorEnv: env {i}: action {a} ({ACTION_NAMES[a]}) is illegal, it does not "
                f"change the board (legal moves: {legal})"
            )
        chance_outcome = _outcomes_from_uniforms(afterstates, self._uniforms.take(self._all_envs, 2))
        boards = _place_tiles(afterstates, chance_outcome)
        mask = _legal_moves(boards)
        terminated = ~np.any(mask, axis=1)
        truncated = np.zeros(self.num_envs, dtype=bool)
        if self.max_episode_steps is not None:
            truncated = (self.timesteps + 1 >= self.max_episode_steps) & ~terminated
        done = terminated | truncated
        final = _observation(boards)
        frames = final
        if done.any():
            ended = np.flatnonzero(done)
            boards[ended] = _new_boards_from_uniforms(self._uniforms.take(ended, 4))
            mask[ended] = _legal_moves(boards[ended])
            frames = final.copy()
            frames[ended] = _observation(boards[ended])
        self._boards, self._action_mask = boards, mask
        episode_return, episode_length = self.episode_tracker.update(reward.astype(np.float64), done)
        self.frame_stacker.push(frames)
        self.frame_stacker.reset(frames, mask=done)
        self.timesteps += 1
        self.timesteps[done] = 0
        return StepResult(
            batch=self.current_batch(frames),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            episode_return=episode_return,
            episode_length=episode_length,
            real_episode_end=done.copy(),
            final_frame=final,
            info_columns={"chance_outcome": chance_outcome},
        )

    def close(self) -> None:
        """Nothing to release; later calls to reset/step raise. Safe to call more than once."""
        self._closed = True

    def check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Game2048VectorEnv is closed")

    def current_batch(self, frames: np.ndarray) -> EnvBatch:
        return EnvBatch(
            observation=self.frame_stacker.observation(),
            frame=frames,
            action_mask=self._action_mask.copy(),
            to_play=self._to_play.copy(),
            timestep=self.timesteps.copy(),
        )


# ---------------------------------------------------------------------------------------------
# the single gymnasium env


class Game2048Env(gymnasium.Env):
    """One game of 2048 as a ``gymnasium.Env`` (id ``lz_tune/Game2048-v0``), on the same core.

    Actions ``Discrete(4)`` (0 up, 1 right, 2 down, 3 left); observations ``Box(0, 1, (256,))``
    float32 (:func:`observation`). ``info``: ``action_mask`` ``[4]`` bool (legal moves),
    ``board`` ``[4, 4]`` int8 exponents, ``score``; after a step also ``chance_outcome`` (int,
    see :func:`apply_chance`), ``spawn_cell`` (``row * 4 + col``) and ``spawn_value`` (2 or 4).
    With the same seed and actions it plays the same game as env 0 of :class:`Game2048VectorEnv`.

    Raises:
        ValueError: from ``step``, for a move that does not change the board.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(OBSERVATION_SIZE,), dtype=np.float32)
        self._board = np.zeros((1, SIZE, SIZE), dtype=np.int8)
        self._mask = np.zeros(NUM_ACTIONS, dtype=bool)
        self._score = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._board = new_boards(1, self.np_random)
        self._mask = legal_moves(self._board)[0]
        self._score = 0.0
        return observation(self._board)[0], self._info()

    def step(self, action):
        a = int(action)
        if not 0 <= a < NUM_ACTIONS:
            raise ValueError(f"action must lie in [0, {NUM_ACTIONS}), got {action!r}")
        if not self._mask[a]:
            raise ValueError(f"Game2048Env: action {a} ({ACTION_NAMES[a]}) is illegal, it does not change the board")
        afterstate, reward, _ = apply_moves(self._board, np.array([a]))
        self._board, outcome = spawn_tiles(afterstate, self.np_random)
        self._mask = legal_moves(self._board)[0]
        self._score += float(reward[0])
        o = int(outcome[0])
        info = self._info()
        info.update(chance_outcome=o, spawn_cell=o // 2, spawn_value=4 if o % 2 else 2)
        return observation(self._board)[0], float(reward[0]), not self._mask.any(), False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        values = np.where(self._board[0] > 0, 2 ** self._board[0].astype(np.int64), 0)
        return "\n".join(" ".join(f"{v:5d}" if v else "    ." for v in row) for row in values) + "\n"

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self._mask.copy(), "board": self._board[0].copy(), "score": self._score}


def register_gymnasium_env() -> None:
    """Register :class:`Game2048Env` as ``lz_tune/Game2048-v0`` with gymnasium (once)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="lz_tune.envs.game_2048:Game2048Env")
