"""Sampled EfficientZero on HalfCheetah-v5 (gymnasium's MuJoCo env: 17-D state, 6-D torque in
[-1, 1], 1000-step episodes). Needs the optional MuJoCo extra:

    pip install -c constraints.txt -e ".[dev,mujoco]"
    python -m lz_tune train zoo/mujoco/halfcheetah_sampled_efficientzero.py --async-pipeline

The setup follows LightZero's MuJoCo Sampled EfficientZero (K = 20 of the policy, 50
simulations); a learning budget for HalfCheetah is millions of env steps, far beyond a laptop.
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "sampled_efficientzero",
            "exp_name": "halfcheetah_sampled_efficientzero",
            "seed": 0,
            "max_env_step": 1_000_000,
            "env": {"env_id": "HalfCheetah-v5", "collector_env_num": 8, "evaluator_env_num": 4},
            # rewards are ~[-1, 10] per step; returns up to ~1e3 at gamma 0.99: h(1000) ~ 31
            "model": {
                "kind": "mlp",
                "latent_dim": 256,
                "hidden_sizes": [256, 256],
                "layer_norm": True,
                "value_support_size": 50,
                "reward_support_size": 25,
            },
            "mcts": {"num_simulations": 50, "discount_factor": 0.99},
            "sampled": {"num_samples": 20},
            "efficientzero": {"lstm_horizon_len": 5, "lstm_hidden_size": 128},
            "buffer": {
                "replay_buffer_size": 1_000_000,
                "game_segment_length": 100,
                "num_unroll_steps": 5,
                "td_steps": 5,
                "use_priority": True,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "piecewise_decay_lr_scheduler": False,
                "weight_decay": 1e-4,
                "update_per_collect": 200,
                "ssl_loss_weight": 2.0,
                "target_update_freq": 100,
                "policy_entropy_weight": 5e-3,
                "num_threads": 2,
            },
            "collector": {"temperature": 1.0},
            "evaluator": {"eval_freq": 2000, "n_evaluator_episode": 4},
            "async_pipeline": {"num_collector_actors": 2},
        }
    )
