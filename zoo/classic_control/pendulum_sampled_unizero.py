"""sampled_unizero on Pendulum-v1 (continuous torque in [-2, 2], normalised to [-1, 1]): UniZero's
transformer world model (E = 64, 2 layers, a context of 4 env steps) with K = 8 sampled actions
per node (the search settings of pendulum_sampled_muzero.py). Solved here when the mean eval return reaches -200
(random play: about -1200).

    python -m lz_tune train zoo/classic_control/pendulum_sampled_unizero.py
    python -m lz_tune train zoo/classic_control/pendulum_sampled_unizero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.classic_control.pendulum_sampled_muzero import make_config as sampled_muzero_config


def make_config() -> Config:
    return sampled_muzero_config().with_updates(
        {
            "policy_type": "sampled_unizero",
            "exp_name": "pendulum_sampled_unizero",
            "unizero": {
                "embed_dim": 64,
                "num_layers": 2,
                "num_heads": 2,
                "infer_context_length": 4,
                "kv_cache_clear_interval": 2000,
                "target_momentum": 0.05,
            },
            # loss weights as UniZero's continuous setting: latent 10, reward / value / policy 0.1 each
            "learner": {
                "optim_type": "adamw",
                "learning_rate": 1e-3,
                "weight_decay": 1e-2,
                "grad_clip_value": 5.0,
                "value_loss_weight": 0.1,
                "reward_loss_weight": 0.1,
                "policy_loss_weight": 0.1,
                "ssl_loss_weight": 10.0,
                "policy_entropy_weight": 5e-3,
            },
        }
    )
