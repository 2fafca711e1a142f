"""Sampled EfficientZero on Pendulum-v1: the Sampled MuZero setup with the value-prefix LSTM
(reset every 5 model steps) in place of the reward head. Solved here at a mean eval return of -200.

    python -m lz_tune train zoo/classic_control/pendulum_sampled_efficientzero.py
    python -m lz_tune train zoo/classic_control/pendulum_sampled_efficientzero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.pendulum_sampled_muzero import make_config as sampled_muzero_config


def make_config() -> Config:
    return sampled_muzero_config().with_updates(
        {
            "policy_type": "sampled_efficientzero",
            "exp_name": "pendulum_sampled_efficientzero",
            # a prefix over 5 steps stays above -82: h(-82) ~ -8.2 (support +-10)
            "model.reward_support_size": 10,
            "efficientzero.lstm_horizon_len": 5,
            "efficientzero.lstm_hidden_size": 64,
        }
    )
