"""Gumbel MuZero on tic-tac-toe (OpenSpiel ``tic_tac_toe``): MuZero's tic-tac-toe setup with the
Gumbel search (up to 9 root actions considered, sequential halving over 16 simulations) and the
improved-policy loss, plus epsilon-greedy exploration in self-play. Solved when no evaluation
game against OpenSpiel's MCTS bot with 1,000 simulations is lost (100 games, half as first player).

    python -m lz_tune train zoo/board_games/tictactoe_gumbel_muzero.py --seed 0
"""

from lz_tune.config import Config
from lz_tune.zoo.board_games.tictactoe_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "gumbel_muzero",
            "exp_name": "tictactoe_gumbel_muzero",
            "gumbel.max_num_considered_actions": 9,
            # Gumbel acts by its own sampling (collector.temperature is unused) and its improved policy
            # sharpens fast: the epsilon-greedy self-play of MuZero's config (a random legal move with
            # probability 0.25) is what keeps it exploring, here falling to 0 over 160k env steps (over
            # 80k, seed 2 kept losing 3 games in 100 as second player; without it every seed-0 run
            # fell into one line the MCTS bot punishes)
            "collector.eps_greedy_decay_env_steps": 160_000,
        }
    )
