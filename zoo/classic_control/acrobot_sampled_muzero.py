"""Sampled MuZero on Acrobot-v1 with K = 2 of its 3 discrete actions: every expansion plans over
2 distinct actions drawn without replacement (Gumbel-top-k) from the policy. Solved here when
the mean eval return reaches -100 (random play: -500, the time limit).

    python -m lz_tune train zoo/classic_control/acrobot_sampled_muzero.py
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict({
        "policy_type": "sampled_muzero",
        "exp_name": "acrobot_sampled_muzero",
        "seed": 0,
        "max_env_step": 100_000,
        "env": {"env_id": "Acrobot-v1", "collector_env_num": 8, "evaluator_env_num": 8},
        # reward -1 per step until the goal; returns >= -100 at gamma 0.99: h(-100) ~ -9
        "model": {"kind": "mlp", "latent_dim": 128, "hidden_sizes": [128], "layer_norm": True,
                  "value_support_size": 15, "reward_support_size": 5},
        "mcts": {"num_simulations": 25, "discount_factor": 0.99},
        "sampled": {"num_samples": 2},
        "buffer": {"replay_buffer_size": 100_000, "game_segment_length": 50, "num_unroll_steps": 5,
                   "td_steps": 5, "use_priority": True},
        "learner": {"batch_size": 256, "optim_type": "adam", "learning_rate": 3e-3,
                    "piecewise_decay_lr_scheduler": False, "weight_decay": 1e-4, "update_per_collect": 100,
                    "ssl_loss_weight": 2.0, "target_update_freq": 20, "num_threads": 2},
        "collector": {"temperature": 0.5},
        "evaluator": {"eval_freq": 500, "n_evaluator_episode": 8, "stop_value": -100.0},
    })
