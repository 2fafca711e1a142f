"""Gumbel MuZero on CartPole-v1: MuZero's CartPole setup with the Gumbel search (both actions
considered) and the improved-policy KL loss. Solved when the mean eval return reaches 195.

    python -m lz_tune train zoo/classic_control/cartpole_gumbel_muzero.py
    python -m lz_tune train zoo/classic_control/cartpole_gumbel_muzero.py mcts.num_simulations=4
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "gumbel_muzero",
            "exp_name": "cartpole_gumbel_muzero",
            "gumbel.max_num_considered_actions": 2,
        }
    )
