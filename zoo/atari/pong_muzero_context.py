"""muzero_context on Pong: MuZero's Pong setup with the search root carried across env steps and
re-encoded from the real frames every 4 steps of each env (the original's Atari setting).

    python -m lz_tune train zoo/atari/pong_muzero_context.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.atari.pong_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "muzero_context",
            "exp_name": "pong_muzero_context",
            "context.context_length_init": 4,
        }
    )
