"""Gumbel MuZero on tic-tac-toe (OpenSpiel ``tic_tac_toe``): MuZero's tic-tac-toe setup with the
Gumbel search (up to 9 root actions considered, sequential halving over 16 simulations) and the
improved-policy loss. Solved when no evaluation game against OpenSpiel's MCTS bot with 1,000
simulations is lost (100 games, half as first player).

    python -m lz_tune train zoo/board_games/tictactoe_gumbel_muzero.py --seed 0
"""

from lz_tune.config import Config
from zoo.board_games.tictactoe_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates({
        "policy_type": "gumbel_muzero",
        "exp_name": "tictactoe_gumbel_muzero",
        "gumbel.max_num_considered_actions": 9,
    })
