"""muzero_context on CartPole-v1: MuZero's CartPole setup; the search root is carried across
env steps (``dynamics(previous root latent, real action)``) and re-encoded from the real
observation every 4 steps of each env. Solved when the mean eval return reaches 195.

    python -m lz_tune train zoo/classic_control/cartpole_muzero_context.py
    python -m lz_tune train zoo/classic_control/cartpole_muzero_context.py context.context_length_init=2
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "muzero_context",
            "exp_name": "cartpole_muzero_context",
            "context.context_length_init": 4,
        }
    )
