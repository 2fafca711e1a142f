"""EfficientZero on CartPole-v1: MuZero's CartPole setup with the value-prefix LSTM (reset every
5 model steps) in place of the reward head. Solved when the mean eval return reaches 195.

    python -m lz_tune train zoo/classic_control/cartpole_efficientzero.py
    python -m lz_tune train zoo/classic_control/cartpole_efficientzero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "efficientzero",
            "exp_name": "cartpole_efficientzero",
            # CartPole's reward is 1 per step: a prefix over 5 steps stays <= 5, h(5) ~ 1.5
            "model.reward_support_size": 5,
            "efficientzero.lstm_horizon_len": 5,
            "efficientzero.lstm_hidden_size": 64,
        }
    )
