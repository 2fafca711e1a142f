"""muzero_rnn_full_obs on Pong: MuZero's Pong setup with a GRU history (width 512) of the real
(latent, action) sequence conditioning prediction, reset every 4 steps of each env.

    python -m lz_tune train zoo/atari/pong_muzero_rnn_full_obs.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.atari.pong_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "muzero_rnn_full_obs",
            "exp_name": "pong_muzero_rnn_full_obs",
            "context.context_length_init": 4,
            "context.rnn_hidden_size": 512,
        }
    )
