"""UniZero on CartPole-v1: a 2-layer transformer world model (E = 64, 2 heads) over a context of
the last 4 env steps (8 tokens), searched with 25 pUCT simulations. Solved when the mean eval
return reaches 195.

    python -m lz_tune train zoo/classic_control/cartpole_unizero.py
    python -m lz_tune train zoo/classic_control/cartpole_unizero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.cartpole_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "unizero",
            "exp_name": "cartpole_unizero",
            "unizero": {
                "embed_dim": 64,
                "num_layers": 2,
                "num_heads": 2,
                "infer_context_length": 4,
                "kv_cache_clear_interval": 2000,
                "target_momentum": 0.05,
            },
            # loss weights as UniZero's discrete setting: latent 10, reward 1, value 0.5, policy 1
            "learner": {
                "optim_type": "adamw",
                "learning_rate": 1e-3,
                "weight_decay": 1e-2,
                "grad_clip_value": 5.0,
                "value_loss_weight": 0.5,
                "reward_loss_weight": 1.0,
                "policy_loss_weight": 1.0,
                "ssl_loss_weight": 10.0,
                "policy_entropy_weight": 5e-3,
            },
        }
    )
