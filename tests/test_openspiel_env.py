"""OpenSpiel games as envs: ids and refusals, observations from the mover's view, masks, to_play,
per-player returns, self-play and bot batching, seats, rendering (issue 38)."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from lz_tune.config import Config
from lz_tune.envs import make_vector_env, probe_env_spec
from lz_tune.envs.openspiel_bots import MCTSOpponent, OpponentOptions, RandomOpponent
from lz_tune.envs.openspiel_env import SEAT_COLUMN, OpenSpielEnv, OpenSpielVectorEnv
from lz_tune.envs.openspiel_game import encode_observation, load_openspiel_game
from lz_tune.workers.common import env_spec_for, make_env

TTT = "openspiel:tic_tac_toe"


@pytest.mark.parametrize(
    "env_id,expected",
    [
        ("openspiel:tic_tac_to", r"unknown OpenSpiel game 'tic_tac_to'; did you mean 'openspiel:tic_tac_toe'"),
        ("openspiel:kuhn_poker", r"kuhn_poker has imperfect information"),
        ("openspiel:goofspiel", r"goofspiel has simultaneous moves"),
        ("openspiel:backgammon", r"backgammon has chance nodes"),
        ("openspiel:2048", r"2048 has 1 players"),
        ("openspiel:matching_pennies_3p", r"matching_pennies_3p has 3 players"),
        ("openspiel:connect_four(rows=x)", r"OpenSpiel cannot load 'connect_four\(rows=x\)'"),
        ("openspiel:", r"expected openspiel:<game>"),
    ],
)
def test_games_that_cannot_be_served_are_refused_by_name(env_id, expected):
    for call in (
        lambda: probe_env_spec(env_id),
        lambda: make_vector_env(env_id=env_id, num_envs=1, seed=0, mode="collect"),
    ):
        with pytest.raises(ValueError, match=expected) as info:
            call()
        assert repr(env_id) in str(info.value)


def test_shapes_and_spec():
    spec = probe_env_spec(TTT)
    assert (spec.observation_shape, spec.action_space_size, spec.num_players) == ((29,), 9, 2)
    planes = probe_env_spec("openspiel:connect_four", openspiel_planes=True)
    assert (planes.observation_shape, planes.action_space_size) == ((5, 6, 7), 7)
    assert probe_env_spec("openspiel:connect_four(rows=5,columns=6)").observation_shape == (3 * 5 * 6 + 2,)
    assert probe_env_spec("CartPole-v1").num_players == 1
    cfg = Config.from_dict({"env": {"env_id": TTT, "openspiel_planes": True}})
    assert env_spec_for(cfg).observation_shape == (5, 3, 3)
    with pytest.raises(ValueError, match="env.action_repeat=2 is for gymnasium envs"):
        probe_env_spec(TTT, action_repeat=2)


def test_observation_is_the_movers_tensor_and_a_to_play_one_hot():
    info = load_openspiel_game("openspiel:othello")  # a game whose tensor differs by player
    state = info.game.new_initial_state()
    state.apply_action(state.legal_actions()[0])
    for player in (0, 1):
        flat = encode_observation(state, player, info.tensor_shape, planes=False)
        np.testing.assert_array_equal(flat[:-2], state.observation_tensor(player))
        np.testing.assert_array_equal(flat[-2:], np.eye(2)[player])
        planes = encode_observation(state, player, info.tensor_shape, planes=True)
        np.testing.assert_array_equal(planes[:3].ravel(), state.observation_tensor(player))
        assert planes[3 + player].min() == 1.0 and planes[4 - player].max() == 0.0


def test_self_play_batches_both_players_moves():
    """Collect mode: every step is one move of the player to move; to_play alternates, the mask is
    the legal moves, the reward is the mover's, episode_return the first player's return."""
    env = make_vector_env(env_id=TTT, num_envs=2, seed=0, mode="collect")
    batch = env.reset()
    assert isinstance(env, OpenSpielVectorEnv) and batch.observation.shape == (2, 29)
    # env 0: x wins on the top row at move 5; env 1: o wins on the middle row at move 6
    script = [(0, 0), (3, 3), (1, 1), (4, 4), (2, 8), (None, 5)]
    game = pyspiel.load_game("tic_tac_toe")
    replay = [game.new_initial_state() for _ in range(2)]
    for move, (a0, a1) in enumerate(script):
        for i in range(2):
            mover = replay[i].current_player()
            assert batch.to_play[i] == mover == (move % 2 if move < 5 or i == 1 else 0)
            np.testing.assert_array_equal(np.flatnonzero(batch.action_mask[i]), replay[i].legal_actions())
            np.testing.assert_array_equal(batch.observation[i, :27], replay[i].observation_tensor(mover))
            assert batch.observation[i, 27 + mover] == 1.0
        actions = np.array([0 if a0 is None else a0, a1])
        res = env.step(actions)
        for i, a in enumerate(actions):
            if not replay[i].is_terminal():
                replay[i].apply_action(int(a))
        if move == 4:  # x completes 0-1-2: x's reward +1, game over, first player's return +1
            assert res.reward[0] == 1.0 and res.terminated[0] and res.episode_return[0] == 1.0
            assert res.episode_length[0] == 5 and res.batch.timestep[0] == 0 and res.batch.to_play[0] == 0
            assert res.reward[1] == 0.0 and not res.done[1]
            replay[0] = game.new_initial_state()
        if move == 5:  # o completes 3-4-5: o's (the mover's) reward +1, the first player's return -1
            assert res.reward[1] == 1.0 and res.terminated[1] and res.episode_return[1] == -1.0
        assert res.info_columns == {}
        batch = res.batch


def test_against_a_bot_seats_alternate_and_the_agent_moves_only_in_its_seat():
    env = make_vector_env(env_id=TTT, num_envs=3, seed=4, mode="eval", opponent=OpponentOptions(kind="random"))
    batch = env.reset()
    seats = [(4 + i) % 2 for i in range(3)]
    np.testing.assert_array_equal(batch.to_play, seats)  # the agent's seat
    pieces = (batch.observation[:, 9:27] > 0).sum(axis=1)
    np.testing.assert_array_equal(pieces, seats)  # the bot opened where the agent is second
    rng = np.random.default_rng(0)
    games: dict[int, list[tuple[int, float]]] = {0: [], 1: [], 2: []}
    while min(len(g) for g in games.values()) < 4:
        seat_now = batch.to_play.copy()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in batch.action_mask])
        res = env.step(actions)
        np.testing.assert_array_equal(res.info_columns[SEAT_COLUMN], seat_now)
        for i in np.flatnonzero(res.real_episode_end):
            assert res.episode_return[i] in (-1.0, 0.0, 1.0) and res.episode_return[i] == res.reward[i]
            games[int(i)].append((int(res.info_columns[SEAT_COLUMN][i]), float(res.episode_return[i])))
        batch = res.batch
    for i, played in games.items():
        assert [seat for seat, _ in played[:4]] == [(seats[i] + k) % 2 for k in range(4)]


def test_bots_play_legal_moves_and_mcts_is_reproducible_and_beats_random():
    game = pyspiel.load_game("tic_tac_toe")

    def play(bots, seed):
        for b in bots:
            b.new_game(seed)
        state, moves = game.new_initial_state(), []
        while not state.is_terminal():
            action = bots[state.current_player()].choose(state)
            assert action in state.legal_actions()
            moves.append(action)
            state.apply_action(action)
        return moves, state.returns()

    mcts = MCTSOpponent(game, OpponentOptions(kind="mcts", mcts_simulations=300))
    assert play([mcts, RandomOpponent()], 3) == play([mcts, RandomOpponent()], 3)
    outcomes = [play([mcts, RandomOpponent()], s)[1][0] for s in range(6)]
    outcomes += [play([RandomOpponent(), mcts], s)[1][1] for s in range(6)]
    assert min(outcomes) >= 0.0 and sum(outcomes) >= 6  # never loses to random, wins most


def test_illegal_moves_raise_naming_the_game():
    env = make_vector_env(env_id=TTT, num_envs=1, seed=0, mode="collect")
    env.reset()
    env.step(np.array([4]))
    with pytest.raises(ValueError, match=r"openspiel:tic_tac_toe: action 4 is illegal for player 1"):
        env.step(np.array([4]))


def test_rgb_frames_keep_one_size_through_a_game():
    env = OpenSpielEnv("connect_four", opponent={"kind": "random"}, render_mode="rgb_array")
    _, info = env.reset(seed=1)
    frames, done = [env.render()], False
    while not done:
        _, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        frames.append(env.render())
    assert len({f.shape for f in frames}) == 1 and frames[0].dtype == np.uint8 and frames[0].shape[2] == 3
    assert not np.array_equal(frames[0], frames[-1])
    text = OpenSpielEnv("tic_tac_toe", render_mode="ansi")
    text.reset(seed=0)
    assert text.render() == "...\n...\n..."


def test_config_env_uses_the_evaluator_opponent():
    cfg = Config.from_dict({"env": {"env_id": TTT}, "evaluator": {"opponent": "mcts", "opponent_mcts_simulations": 7}})
    env = make_env(cfg, num_envs=1, seed=0, mode="eval")
    game = env._games()[0]
    assert game.opponent_options == OpponentOptions(kind="mcts", mcts_simulations=7)
    assert make_env(cfg, num_envs=1, seed=0, mode="collect")._games()[0].opponent_options is None
