"""UniZero on Pong: MuZero's Pong frames and search, a transformer world model (E = 256, 2 layers,
4 heads) over a context of 4 env steps, trained on 10-step sequences with AdamW (UniZero's Atari
setting, narrower: E = 768 and 8 heads upstream).

    python -m lz_tune train zoo/atari/pong_unizero.py --async-pipeline
"""

from lz_tune.config import Config
from lz_tune.zoo.atari.pong_muzero import make_config as muzero_config


def make_config() -> Config:
    return muzero_config().with_updates(
        {
            "policy_type": "unizero",
            "exp_name": "pong_unizero",
            "unizero": {
                "embed_dim": 256,
                "num_layers": 2,
                "num_heads": 4,
                "infer_context_length": 4,
                "kv_cache_clear_interval": 2000,
                "target_momentum": 0.05,
            },
            "buffer": {"num_unroll_steps": 10},
            "learner": {
                "optim_type": "adamw",
                "learning_rate": 1e-4,
                "weight_decay": 1e-2,
                "grad_clip_value": 5.0,
                "piecewise_decay_lr_scheduler": False,
                "value_loss_weight": 0.5,
                "reward_loss_weight": 1.0,
                "policy_loss_weight": 1.0,
                "ssl_loss_weight": 10.0,
                "policy_entropy_weight": 5e-3,
            },
        }
    )
