"""MuZero on Atari Pong (ale-py; ROMs ship with it). The reference setup of the spec.

    python -m lz_tune train zoo/atari/pong_muzero.py                    # sync
    python -m lz_tune train zoo/atari/pong_muzero.py --async-pipeline   # Ray actors

Observations: 4 stacked 64x64 grayscale frames; episodic life and reward clipping apply to
collection only, evaluation reports raw game scores (max 21).
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "muzero",
            "exp_name": "pong_muzero",
            "seed": 0,
            "max_env_step": 500_000,
            "env": {
                "env_id": "ALE/Pong-v5",
                "collector_env_num": 8,
                "evaluator_env_num": 3,
                "frame_stack": 4,
                "frame_skip": 4,
                "image_size": 64,
                "grayscale": True,
                "episodic_life": True,
                "clip_rewards": True,
            },
            "model": {
                "kind": "conv",
                "num_channels": 64,
                "num_res_blocks": 1,
                "downsample": True,
                "value_support_size": 300,
                "reward_support_size": 300,
            },
            "mcts": {"num_simulations": 50, "discount_factor": 0.997},
            "buffer": {
                "replay_buffer_size": 1_000_000,
                "game_segment_length": 20,
                "num_unroll_steps": 5,
                "td_steps": 5,
                "use_priority": False,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "sgd",
                "learning_rate": 0.2,
                "momentum": 0.9,
                "weight_decay": 1e-4,
                "piecewise_decay_lr_scheduler": True,
                "threshold_training_steps_for_final_lr": 50_000,
                "replay_ratio": 0.25,
                "train_start_after_envsteps": 2000,
                "ssl_loss_weight": 2.0,
            },
            "collector": {"temperature": 0.25},
            "evaluator": {"eval_freq": 5000, "n_evaluator_episode": 3, "stop_value": 20.0},
        }
    )
