"""2048 as a numpy vector env for Stochastic MuZero: merge rules, legal moves, tile spawns (the
chance outcomes), the VectorEnv contract, the factory wiring and the greedy / random baselines."""

from __future__ import annotations

import time

import gymnasium
import numpy as np
import pytest

from lz_tune.envs import (
    EnvSpecInfo,
    Game2048Env,
    Game2048VectorEnv,
    StepResult,
    make_vector_env,
    probe_env_spec,
    resolve_env_id,
)
from lz_tune.envs import game_2048 as g
from lz_tune.envs.types import EnvBatch

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3


def board(*rows) -> np.ndarray:
    """``[1, 4, 4]`` exponents from rows of tile values (0 = empty)."""
    values = np.array(rows, dtype=np.int64).reshape(1, 4, 4)
    return np.where(values > 0, np.log2(np.maximum(values, 1)), 0).astype(np.int8)


def values(boards: np.ndarray) -> np.ndarray:
    """Tile values of exponent boards."""
    boards = np.asarray(boards).astype(np.int64)
    return np.where(boards > 0, 2**boards, 0)


def move_row_left_reference(row: list[int]) -> tuple[list[int], int]:
    """Plain-Python LEFT move of one row of exponents: (new row, reward)."""
    tiles = [t for t in row if t]
    out, reward, i = [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1] and tiles[i] < g.MAX_EXPONENT:
            out.append(tiles[i] + 1)
            reward += 2 ** (tiles[i] + 1)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (4 - len(out)), reward


def move_reference(b: np.ndarray, action: int) -> tuple[np.ndarray, int]:
    """Plain-Python move of one ``[4, 4]`` board by rotating it so the move is LEFT."""
    turns = {LEFT: 0, UP: 1, RIGHT: 2, DOWN: 3}[action]  # np.rot90 counter-clockwise turns
    rotated = np.rot90(b, turns)
    moved, total = [], 0
    for row in rotated.tolist():
        new, r = move_row_left_reference(row)
        moved.append(new)
        total += r
    return np.rot90(np.array(moved, dtype=np.int8), -turns), total


# ---------------------------------------------------------------------------------------------
# merge rules


@pytest.mark.parametrize(
    "row, expected, reward",
    [
        ([2, 2, 2, 2], [4, 4, 0, 0], 8),
        ([2, 2, 4, 0], [4, 4, 0, 0], 4),  # no chain merge: the new 4 does not merge again
        ([4, 0, 4, 4], [8, 4, 0, 0], 8),
        ([2, 2, 2, 0], [4, 2, 0, 0], 4),
        ([0, 0, 0, 2], [2, 0, 0, 0], 0),
        ([8, 8, 0, 16], [16, 16, 0, 0], 16),
        ([2**14, 2**14, 0, 0], [2**15, 0, 0, 0], 2**15),
    ],
)
def test_row_table_moves_rows_left(row, expected, reward):
    table = g.row_table()
    code = int(board(row, [0] * 4, [0] * 4, [0] * 4)[0, 0].astype(np.int64) @ g._ROW_WEIGHTS)
    np.testing.assert_array_equal(values(table.left[code]), expected)
    assert table.reward[code] == reward and table.changed[code]


def test_unmovable_rows_and_the_largest_tile():
    table = g.row_table()
    assert table.left.shape == (16**4, 4) and table.left.dtype == np.int8
    assert table.reward.dtype == np.float32 and table.changed.dtype == np.bool_
    assert g.row_table() is table  # built once
    for row in ([2, 4, 8, 16], [0, 0, 0, 0], [2**15, 2**15, 0, 0]):  # two 2**15 tiles do not merge
        code = int(board(row, [0] * 4, [0] * 4, [0] * 4)[0, 0].astype(np.int64) @ g._ROW_WEIGHTS)
        assert not table.changed[code] and table.reward[code] == 0


HAND_BOARD = board(
    [2, 2, 4, 0],
    [0, 4, 4, 4],
    [2, 0, 2, 2],
    [8, 8, 8, 8],
)


@pytest.mark.parametrize(
    "action, expected, reward",
    [
        (LEFT, [[4, 4, 0, 0], [8, 4, 0, 0], [4, 2, 0, 0], [16, 16, 0, 0]], 4 + 8 + 4 + 32),
        (RIGHT, [[0, 0, 4, 4], [0, 0, 4, 8], [0, 0, 2, 4], [0, 0, 16, 16]], 4 + 8 + 4 + 32),
        (UP, [[4, 2, 8, 4], [8, 4, 2, 2], [0, 8, 8, 8], [0, 0, 0, 0]], 4 + 8),
        (DOWN, [[0, 0, 0, 0], [0, 2, 8, 4], [4, 4, 2, 2], [8, 8, 8, 8]], 4 + 8),
    ],
)
def test_moves_in_all_four_directions(action, expected, reward):
    after, rewards, changed = g.apply_moves(HAND_BOARD, np.array([action]))
    assert after.shape == (1, 4, 4) and after.dtype == np.int8
    assert rewards.shape == (1,) and rewards.dtype == np.float32 and changed.dtype == np.bool_
    np.testing.assert_array_equal(values(after[0]), expected)
    assert rewards[0] == reward and changed[0]
    np.testing.assert_array_equal(g.move_rewards(HAND_BOARD)[0, action], reward)


def test_moves_match_a_plain_python_reference_on_random_boards():
    rng = np.random.default_rng(0)
    boards = np.where(rng.random((400, 4, 4)) < 0.3, 0, rng.integers(1, 6, (400, 4, 4))).astype(np.int8)
    actions = rng.integers(0, 4, 400)
    after, rewards, changed = g.apply_moves(boards, actions)
    legal = g.legal_moves(boards)
    for i in range(400):
        expected, r = move_reference(boards[i], int(actions[i]))
        np.testing.assert_array_equal(after[i], expected)
        assert rewards[i] == r and changed[i] == (not np.array_equal(expected, boards[i]))
        for a in range(4):
            assert legal[i, a] == (not np.array_equal(move_reference(boards[i], a)[0], boards[i]))


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="shape"):
        g.apply_moves(np.zeros((2, 3, 4), np.int8), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="exponents"):
        g.legal_moves(np.full((1, 4, 4), 16, np.int8))
    with pytest.raises(ValueError, match="actions"):
        g.apply_moves(HAND_BOARD, np.array([4]))


# ---------------------------------------------------------------------------------------------
# legal moves and baselines


def test_legal_move_masks():
    no_merges = board([2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2])
    corner = board([2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0])
    row_merge = board([2, 2, 4, 8], [4, 8, 16, 32], [8, 16, 32, 64], [16, 32, 64, 128])
    column_merge = board([2, 4, 8, 16], [2, 8, 16, 32], [4, 16, 32, 64], [8, 32, 64, 128])
    masks = g.legal_moves(np.concatenate([no_merges, corner, row_merge, column_merge]))
    assert masks.shape == (4, 4) and masks.dtype == np.bool_
    np.testing.assert_array_equal(
        masks,
        [
            [False, False, False, False],  # full, no merges: game over
            [False, True, True, False],  # a lone tile in the top-left corner: right or down
            [False, True, False, True],  # one horizontal pair
            [True, False, True, False],  # one vertical pair
        ],
    )
    assert (g.greedy_actions(no_merges) == 0).all() and (
        g.random_actions(no_merges, np.random.default_rng(0)) == 0
    ).all()


def test_greedy_takes_the_largest_merge_ties_to_the_lowest_action():
    # LEFT and RIGHT merge 8 + 8 (reward 16), UP and DOWN merge 2 + 2 (reward 4)
    b = board([8, 8, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0])
    np.testing.assert_array_equal(g.move_rewards(b), [[4, 16, 4, 16]])
    assert g.greedy_actions(b).tolist() == [RIGHT]
    # nothing merges: the lowest legal action (here RIGHT; UP is illegal)
    b = board([2, 4, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0])
    assert g.greedy_actions(b).tolist() == [RIGHT]


def test_random_actions_are_uniform_over_legal_moves():
    b = np.repeat(board([2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]), 4000, axis=0)
    actions = g.random_actions(b, np.random.default_rng(0))
    assert actions.dtype == np.int64 and set(actions.tolist()) == {RIGHT, DOWN}
    assert abs((actions == RIGHT).mean() - 0.5) < 0.03


# ---------------------------------------------------------------------------------------------
# chance: spawns


def chi_squared(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def test_spawn_frequencies_and_cells():
    # 10 empty cells, 6 occupied
    after = board([2, 0, 0, 4], [0, 8, 0, 0], [0, 0, 2, 0], [16, 0, 0, 32])
    n = 20000
    boards, outcome = g.spawn_tiles(np.repeat(after, n, axis=0), np.random.default_rng(0))
    assert boards.shape == (n, 4, 4) and boards.dtype == np.int8 and outcome.dtype == np.int64
    cell, is_four = np.divmod(outcome, 2)
    empty = np.flatnonzero(after.reshape(16) == 0)
    assert set(cell.tolist()) <= set(empty.tolist())
    assert abs(is_four.mean() - 0.1) < 0.01
    # loose chi-squared (9 degrees of freedom: p(chi2 > 30) ~ 0.0004) against uniform cells
    assert chi_squared(np.bincount(cell, minlength=16)[empty]) < 30.0
    # the board got exactly the named tile on the named cell
    placed = boards.reshape(n, 16) - after.reshape(1, 16)
    np.testing.assert_array_equal(placed[np.arange(n), cell], 1 + is_four)
    assert (np.count_nonzero(placed, axis=1) == 1).all()
    np.testing.assert_array_equal(g.apply_chance(np.repeat(after, n, axis=0), outcome), boards)


def test_new_boards_have_two_tiles_on_uniform_cells():
    boards = g.new_boards(8000, np.random.default_rng(1))
    flat = boards.reshape(-1, 16)
    assert (np.count_nonzero(flat, axis=1) == 2).all() and set(np.unique(flat).tolist()) == {0, 1, 2}
    assert abs((flat == 2).sum() / (flat > 0).sum() - 0.1) < 0.01
    assert chi_squared((flat > 0).sum(axis=0)) < 40.0  # 15 degrees of freedom, loose


def test_apply_chance_rejects_occupied_cells():
    after = board([2, 0, 0, 0], [0] * 4, [0] * 4, [0] * 4)
    with pytest.raises(ValueError, match="occupied"):
        g.apply_chance(after, np.array([0]))  # cell 0 holds a 2
    with pytest.raises(ValueError, match="chance_outcome"):
        g.apply_chance(after, np.array([32]))
    np.testing.assert_array_equal(values(g.apply_chance(after, np.array([2 * 15 + 1]))[0])[3], [0, 0, 0, 4])
    with pytest.raises(ValueError, match="no empty cell"):
        g.spawn_tiles(board([2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]), np.random.default_rng(0))


def test_observation_is_a_one_hot_of_exponents():
    obs = g.observation(HAND_BOARD)
    assert obs.shape == (1, 256) and obs.dtype == np.float32
    planes = obs.reshape(16, 4, 4)
    np.testing.assert_array_equal(planes.sum(axis=0), 1.0)
    np.testing.assert_array_equal(planes[0], HAND_BOARD[0] == 0)  # channel 0: empty
    np.testing.assert_array_equal(planes[3], HAND_BOARD[0] == 3)  # the 8s
    np.testing.assert_array_equal(g.boards_from_observation(obs), HAND_BOARD)


# ---------------------------------------------------------------------------------------------
# the vector env


def _greedy_run(env: Game2048VectorEnv, steps: int, seed: int) -> list[np.ndarray]:
    """Boards, rewards and chance outcomes of ``steps`` greedy steps (actions depend only on boards)."""
    out = [env.reset(seed=seed).observation]
    for _ in range(steps):
        res = env.step(g.greedy_actions(env.boards))
        out.append(
            np.concatenate(
                [
                    res.batch.observation,
                    res.reward[:, None],
                    res.info_columns["chance_outcome"][:, None],
                    res.done[:, None],
                ],
                axis=1,
            )
        )
    return out


def test_vector_env_batches_and_seeding():
    with Game2048VectorEnv(num_envs=3, seed=5) as env:
        assert (env.num_envs, env.action_space_size, env.action_dim, env.frame_stack) == (3, 4, 0, 1)
        assert env.observation_shape == env.frame_shape == (256,) and env.observation_dtype == np.float32
        batch = env.reset()
        assert isinstance(batch, EnvBatch)
        assert batch.observation.shape == (3, 256) and batch.observation.dtype == np.float32
        np.testing.assert_array_equal(batch.frame, batch.observation)
        np.testing.assert_array_equal(batch.action_mask, g.legal_moves(env.boards))
        assert (batch.to_play == -1).all() and (batch.timestep == 0).all() and batch.timestep.dtype == np.int64
        assert (np.count_nonzero(env.boards.reshape(3, 16), axis=1) == 2).all()
        res = env.step(g.greedy_actions(env.boards))
        assert isinstance(res, StepResult) and res.reward.dtype == np.float32
        assert res.info_columns["chance_outcome"].shape == (3,) and res.info_columns["chance_outcome"].dtype == np.int64
        assert (res.batch.timestep == 1).all()
        first = _greedy_run(env, 50, seed=11)
    with Game2048VectorEnv(num_envs=3) as env:
        again = _greedy_run(env, 50, seed=11)
        other = _greedy_run(env, 5, seed=12)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], other[0])
    with Game2048VectorEnv(num_envs=3, seed=11) as env:  # the construction seed serves the first reset()
        np.testing.assert_array_equal(env.reset().observation, first[0])


def test_env_i_does_not_depend_on_n():
    # 300 greedy steps with a time limit of 40: every env goes through several autoresets
    with (
        Game2048VectorEnv(num_envs=5, max_episode_steps=40) as wide,
        Game2048VectorEnv(num_envs=1, max_episode_steps=40) as narrow,
    ):
        a = _greedy_run(wide, 300, seed=10)
        b = _greedy_run(narrow, 300, seed=13)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[3], y[0])


def test_gym_env_plays_the_same_game_as_vector_env_zero():
    with Game2048VectorEnv(num_envs=2, seed=21) as venv:
        batch = venv.reset()
        env = gymnasium.make("lz_tune/Game2048-v0")
        obs, info = env.reset(seed=21)
        np.testing.assert_array_equal(obs, batch.observation[0])
        np.testing.assert_array_equal(info["action_mask"], batch.action_mask[0])
        for _ in range(60):
            actions = g.greedy_actions(venv.boards)
            res = venv.step(actions)
            if res.done[0]:
                break
            obs, reward, terminated, truncated, info = env.step(int(actions[0]))
            np.testing.assert_array_equal(obs, res.batch.observation[0])
            assert reward == res.reward[0] and not terminated and not truncated
            o = int(res.info_columns["chance_outcome"][0])
            assert (info["chance_outcome"], info["spawn_cell"], info["spawn_value"]) == (o, o // 2, 2 + 2 * (o % 2))
            np.testing.assert_array_equal(info["action_mask"], res.batch.action_mask[0])
        env.close()
    single = Game2048Env()
    seed = next(s for s in range(100) if not single.reset(seed=s)[1]["action_mask"].all())
    _, info = single.reset(seed=seed)
    illegal = int(np.flatnonzero(~info["action_mask"])[0])
    with pytest.raises(ValueError, match=rf"action {illegal} \(.*illegal"):
        single.step(illegal)
    assert isinstance(gymnasium.make("lz_tune/Game2048-v0").unwrapped, Game2048Env)
    g.register_gymnasium_env()  # registering again is a no-op


def test_apply_chance_of_the_reported_outcome_gives_the_next_board():
    rng = np.random.default_rng(2)
    ended = 0
    with Game2048VectorEnv(num_envs=16, seed=3) as env:
        env.reset()
        for _ in range(300):
            before = env.boards
            actions = g.random_actions(before, rng)
            res = env.step(actions)
            after, reward, _ = g.apply_moves(before, actions)
            nxt = g.apply_chance(after, res.info_columns["chance_outcome"])
            np.testing.assert_array_equal(res.reward, reward)
            np.testing.assert_array_equal(g.observation(nxt), res.final_frame)
            live = ~res.done
            np.testing.assert_array_equal(nxt[live], env.boards[live])
            assert not g.legal_moves(nxt[res.terminated]).any()
            ended += int(res.done.sum())
    assert ended > 0  # random games last ~100 moves: the final spawns were checked too


def test_autoreset_episode_return_and_illegal_actions():
    rng = np.random.default_rng(4)
    with Game2048VectorEnv(num_envs=4, seed=0) as env:
        env.reset()
        totals = np.zeros(4)
        lengths = np.zeros(4, np.int64)
        finished = 0
        while finished < 6:
            res = env.step(g.random_actions(env.boards, rng))
            totals += res.reward
            lengths += 1
            done = res.done
            assert not res.truncated.any()
            np.testing.assert_array_equal(res.real_episode_end, done)
            np.testing.assert_array_equal(np.isnan(res.episode_return), ~done)
            np.testing.assert_array_equal(res.batch.action_mask, g.legal_moves(env.boards))
            for i in np.flatnonzero(done):
                assert res.terminated[i] and res.episode_return[i] == totals[i] > 0
                assert res.episode_length[i] == lengths[i] and res.batch.timestep[i] == 0
                tiles = env.boards[i][env.boards[i] > 0]
                assert tiles.size == 2 and set(tiles.tolist()) <= {1, 2}  # a fresh game: two 2s or 4s
                np.testing.assert_array_equal(res.batch.observation[i], g.observation(env.boards[i : i + 1])[0])
                assert not np.array_equal(res.final_frame[i], res.batch.frame[i])
                totals[i], lengths[i] = 0.0, 0
                finished += 1
        mask = res.batch.action_mask
        illegal = [int(np.flatnonzero(~m)[0]) if (~m).any() else -1 for m in mask]
        i = next(i for i, a in enumerate(illegal) if a >= 0)
        actions = g.greedy_actions(env.boards)
        actions[i] = illegal[i]
        with pytest.raises(ValueError, match=rf"env {i}: action {illegal[i]} \("):
            env.step(actions)
        with pytest.raises(ValueError, match="lie in"):
            env.step(np.full(4, 4))
    with pytest.raises(RuntimeError, match="reset"):
        Game2048VectorEnv(num_envs=1).step(np.zeros(1, np.int64))


def test_frame_stack_and_time_limit():
    with Game2048VectorEnv(num_envs=2, seed=0, frame_stack=3, max_episode_steps=5) as env:
        batch = env.reset()
        assert env.observation_shape == (768,) and batch.observation.shape == (2, 768)
        np.testing.assert_array_equal(batch.observation[:, :256], batch.observation[:, 512:])
        for t in range(1, 6):  # noqa: B007 (t is read after the loop)
            res = env.step(g.greedy_actions(env.boards))
            np.testing.assert_array_equal(res.batch.observation[:, 512:], res.batch.frame)
        assert t == 5 and res.truncated.all() and not res.terminated.any()
        assert (res.episode_length == 5).all() and (res.batch.timestep == 0).all()
        np.testing.assert_array_equal(res.batch.observation[:, :256], res.batch.frame)  # a fresh stack


# ---------------------------------------------------------------------------------------------
# factory wiring


def test_factory_and_probe():
    for env_id in ("Game2048-v0", "lz_tune/Game2048-v0"):
        assert resolve_env_id(env_id).env_id == "lz_tune/Game2048-v0" and not resolve_env_id(env_id).is_atari
        env = make_vector_env(env_id=env_id, num_envs=3, seed=0, mode="collect", max_episode_steps=2)
        assert isinstance(env, Game2048VectorEnv) and env.frame_stack == 1
        env.reset()
        env.step(g.greedy_actions(env.boards))
        assert env.step(g.greedy_actions(env.boards)).truncated.all()
        env.close()
        spec = probe_env_spec(env_id)
        assert isinstance(spec, EnvSpecInfo)
        assert (spec.observation_shape, spec.frame_shape, spec.frame_stack) == ((256,), (256,), 1)
        assert (spec.action_space_size, spec.chance_space_size, spec.is_atari) == (4, 32, False)
        assert spec.observation_dtype == np.float32 and not spec.is_continuous
    assert probe_env_spec("Game2048-v0", frame_stack=4).observation_shape == (1024,)
    assert probe_env_spec("CartPole-v1").chance_space_size == 0
    with pytest.raises(ValueError, match="Game2048-v0"):
        make_vector_env(env_id="Game2084-v0", num_envs=1, seed=0, mode="eval")


# ---------------------------------------------------------------------------------------------
# baselines and speed


def play_games(policy: str, num_games: int, seed: int) -> np.ndarray:
    """Scores of the first game of each of ``num_games`` envs (env i seeded ``seed + i``)."""
    rng = np.random.default_rng(seed)
    scores = np.full(num_games, np.nan)
    with Game2048VectorEnv(num_envs=num_games, seed=seed) as env:
        env.reset()
        while np.isnan(scores).any():
            boards = env.boards
            actions = g.greedy_actions(boards) if policy == "greedy" else g.random_actions(boards, rng)
            res = env.step(actions)
            first = res.done & np.isnan(scores)
            scores[first] = res.episode_return[first]
    return scores


def test_greedy_scores_higher_than_random():
    random_scores = play_games("random", 50, seed=100)
    greedy_scores = play_games("greedy", 50, seed=100)
    print(f"\n2048 mean score over 50 games: random {random_scores.mean():.0f}, greedy {greedy_scores.mean():.0f}")
    assert greedy_scores.mean() > 1.5 * random_scores.mean()


def test_throughput_is_reported():
    n, steps = 64, 500
    rng = np.random.default_rng(0)
    with Game2048VectorEnv(num_envs=n, seed=0) as env:
        batch = env.reset()
        start = time.perf_counter()
        for _ in range(steps):
            keys = rng.random((n, 4))
            batch = env.step(np.where(batch.action_mask, keys, -1.0).argmax(axis=1)).batch
        elapsed = time.perf_counter() - start
    print(f"\n2048 Game2048VectorEnv N={n}: {n * steps / elapsed:,.0f} boards stepped per second")
