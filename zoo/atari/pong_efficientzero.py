"""EfficientZero on Atari Pong: MuZero's Pong setup with the value-prefix LSTM (512 hidden, reset
every 5 model steps, as the original).

    python -m lz_tune train zoo/atari/pong_efficientzero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.atari.pong_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "efficientzero",
            "exp_name": "pong_efficientzero",
            "efficientzero.lstm_horizon_len": 5,
            "efficientzero.lstm_hidden_size": 512,
        }
    )
