"""The minimax evaluation opponent (issue 48, item 1): perfect tic-tac-toe play with random
tie-breaking seeded per game, a depth limit that matches a brute-force search, the config keys,
and an evaluation through the normal Evaluator that reports win / draw / loss rates."""

from __future__ import annotations

import os

import numpy as np
import pyspiel
import pytest

from lz_tune.config import Config, ConfigError
from lz_tune.envs.openspiel_bots import (
    MINIMAX_PLY_DISCOUNT,
    MinimaxOpponent,
    OpponentOptions,
    RandomOpponent,
    make_opponent,
)
from lz_tune.metrics import MATCH_RATES
from lz_tune.workers.common import make_env, opponent_options
from tests.conftest import REPO_ROOT

TTT = "openspiel:tic_tac_toe"


def play(game, bots, seed):
    """One game between ``bots`` (player 0's first); returns (moves, returns)."""
    for k, bot in enumerate(bots):
        bot.new_game(seed * 2 + k)
    state, moves = game.new_initial_state(), []
    while not state.is_terminal():
        action = bots[state.current_player()].choose(state)
        assert action in state.legal_actions()
        moves.append(action)
        state.apply_action(action)
    return tuple(moves), state.returns()


def test_minimax_against_itself_always_draws_tic_tac_toe_along_varied_lines():
    game = pyspiel.load_game("tic_tac_toe")
    bots = [MinimaxOpponent(game), MinimaxOpponent(game)]
    games = [play(game, bots, seed) for seed in range(60)]
    assert all(returns == [0.0, 0.0] for _, returns in games)
    assert len({moves for moves, _ in games}) > 20  # random tie-breaking: not one fixed line
    assert play(game, bots, 7) == play(game, bots, 7)  # seeded per game: reproducible


def test_minimax_never_loses_to_random_from_either_seat():
    game = pyspiel.load_game("tic_tac_toe")
    minimax, rand = MinimaxOpponent(game), RandomOpponent()
    first = [play(game, [minimax, rand], seed)[1][0] for seed in range(100)]
    second = [play(game, [rand, minimax], seed)[1][1] for seed in range(100)]
    assert min(first) >= 0.0 and min(second) >= 0.0
    assert sum(first) > 80 and sum(second) > 50  # and it wins most of them


def test_minimax_values_agree_with_openspiel_alpha_beta():
    from open_spiel.python.algorithms.minimax import alpha_beta_search

    game = pyspiel.load_game("tic_tac_toe")
    bot, rng = MinimaxOpponent(game), np.random.default_rng(0)
    for _ in range(40):
        state = game.new_initial_state()
        for _ in range(int(rng.integers(0, 7))):
            state.apply_action(int(rng.choice(state.legal_actions())))
        if state.is_terminal():
            continue
        value, action = alpha_beta_search(game, state=state.clone(), maximizing_player_id=state.current_player())
        values = bot.move_values(state)
        assert np.sign(round(max(values.values()), 6)) == np.sign(value)
        assert np.sign(round(values[action], 6)) == np.sign(value)  # OpenSpiel's move is among the best
        assert set(bot.best_moves(state)) == {a for a, v in values.items() if v == max(values.values())}


def test_minimax_takes_the_win_and_blocks():
    game = pyspiel.load_game("tic_tac_toe")
    state = game.new_initial_state()
    for action in (0, 3, 1, 4):  # x: 0 1, o: 3 4; x to move wins at 2
        state.apply_action(action)
    bot = MinimaxOpponent(game)
    assert bot.best_moves(state) == (2,) and bot.move_values(state)[2] == pytest.approx(MINIMAX_PLY_DISCOUNT**0)
    state = game.new_initial_state()
    for action in (0, 4, 8):  # x: 0 8, o: 4; o must take an edge (a corner loses to a fork)
        state.apply_action(action)
    assert set(bot.best_moves(state)) == {1, 3, 5, 7}


def brute_force(state, player, remaining):
    """Value for ``player`` (who just moved) of reaching ``state``, no pruning, leaves at 0."""
    if state.is_terminal():
        return state.returns()[player]
    if remaining == 0:
        return 0.0
    mover = state.current_player()
    best = -np.inf
    for action in state.legal_actions():
        child = state.clone()
        child.apply_action(action)
        best = max(best, brute_force(child, mover, remaining - 1))
    return MINIMAX_PLY_DISCOUNT * (best if mover == player else -best)


def test_depth_limited_alpha_beta_matches_brute_force_on_connect_four():
    game = pyspiel.load_game("connect_four")
    bot, rng, checked = MinimaxOpponent(game, depth=3), np.random.default_rng(1), 0
    while checked < 12:
        state = game.new_initial_state()
        for _ in range(int(rng.integers(6, 30))):
            if state.is_terminal():
                break
            state.apply_action(int(rng.choice(state.legal_actions())))
        if state.is_terminal():
            continue
        player = state.current_player()
        for action, value in bot.move_values(state).items():
            child = state.clone()
            child.apply_action(action)
            assert value == pytest.approx(brute_force(child, player, 2), abs=1e-9)
        checked += 1
    with pytest.raises(ValueError, match="depth must be >= 1"):
        MinimaxOpponent(game, depth=0)


def test_config_keys_and_wrong_values_name_the_key():
    cfg = Config.from_dict({"env": {"env_id": TTT}, "evaluator": {"opponent": "minimax"}})
    assert opponent_options(cfg) == OpponentOptions(kind="minimax")
    assert OpponentOptions(kind="minimax", minimax_depth=4).describe() == "minimax(depth 4)"
    assert OpponentOptions(kind="minimax").describe() == "minimax"
    limited = cfg.with_overrides(["evaluator.opponent_minimax_depth=2"])
    assert isinstance(make_opponent(pyspiel.load_game("tic_tac_toe"), opponent_options(limited)), MinimaxOpponent)
    assert make_env(limited, num_envs=1, seed=0, mode="eval")._games()[0].opponent_options.minimax_depth == 2
    with pytest.raises(ConfigError, match=r"^evaluator\.opponent\b.*minmax"):
        cfg.with_overrides(["evaluator.opponent=minmax"])
    with pytest.raises(ConfigError, match=r"^evaluator\.opponent\b"):
        Config.from_dict({"evaluator": {"opponent": "alphabeta"}})
    with pytest.raises(ConfigError, match=r"^evaluator\.opponent_minimax_depth: must be > 0"):
        cfg.with_overrides(["evaluator.opponent_minimax_depth=0"])
    with pytest.raises(ConfigError, match=r"^evaluator\.opponent_minimax_depth\b"):
        cfg.with_overrides(["evaluator.opponent_minimax_depth=deep"])


def test_evaluator_against_minimax_reports_win_draw_loss_rates(tiny_overrides):
    import torch

    from lz_tune.config_loader import load_config_module
    from lz_tune.workers.common import WeightSnapshot
    from lz_tune.workers.evaluator import Evaluator

    torch.set_num_threads(1)
    cfg = load_config_module(os.path.join(REPO_ROOT, "zoo", "board_games", "tictactoe_muzero.py")).with_overrides(
        [
            *tiny_overrides,
            "env.max_episode_steps=None",
            "evaluator.opponent=minimax",
            "evaluator.n_evaluator_episode=8",
        ]
    )
    evaluator = Evaluator(cfg, seed=3)
    try:
        result = evaluator.evaluate(WeightSnapshot(version=0, train_iter=0, weights=evaluator.policy.weights()))
    finally:
        evaluator.close()
    assert set(result.match) == set(MATCH_RATES) and result.num_episodes == 8
    rates = result.match
    win, draw, loss = (rates[f"evaluation/env_runners/{k}_rate"] for k in ("win", "draw", "loss"))
    assert win == 0.0 and draw + loss == pytest.approx(1.0)  # a perfect player is never beaten
    assert result.reward_mean == pytest.approx(-loss)
