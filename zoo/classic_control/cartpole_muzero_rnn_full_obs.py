"""muzero_rnn_full_obs on CartPole-v1: MuZero's CartPole setup with a GRU history of the real
(latent, action) sequence conditioning prediction, reset every 4 steps of each env; training
feeds the true encoded observation of every unroll step. Solved when the mean eval return
reaches 195.

    python -m lz_tune train zoo/classic_control/cartpole_muzero_rnn_full_obs.py
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "muzero_rnn_full_obs",
            "exp_name": "cartpole_muzero_rnn_full_obs",
            "context.context_length_init": 4,
            "context.rnn_hidden_size": 64,
        }
    )
