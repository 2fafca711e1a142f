"""Stochastic MuZero on CartPole-v1: MuZero's CartPole setup with afterstates and 4 learned
chance codes. CartPole is deterministic, so the chance distribution should collapse onto one
code; this config is a smoke run of the type (2048 is its real task:
``zoo/board_games/game_2048_stochastic_muzero.py``).

    python -m lz_tune train zoo/classic_control/cartpole_stochastic_muzero.py
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "stochastic_muzero",
            "exp_name": "cartpole_stochastic_muzero",
            "stochastic.chance_space_size": 4,
        }
    )
