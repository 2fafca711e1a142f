"""MuZero on Connect Four (OpenSpiel ``connect_four``, 6 x 7) by self-play; evaluated against
OpenSpiel's MCTS bot with 100 simulations (random rollouts), half the games as first player.

    python -m lz_tune train zoo/board_games/connect_four_muzero.py --seed 0
    python -m lz_tune evaluate runs/connect_four_muzero_seed0_<time> --episodes 100

The board is served as a flat vector (3 x 6 x 7 planes + the player to move) to an MLP network,
the cheapest on a small CPU box; ``env.openspiel_planes=True model.kind=conv`` serves the planes
to the residual conv network instead. td_steps = 42 (the longest game): value targets are game
outcomes from the view of the player to move.
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "muzero",
            "exp_name": "connect_four_muzero",
            "seed": 0,
            "max_env_step": 1_000_000,
            "env": {"env_id": "openspiel:connect_four", "collector_env_num": 8, "evaluator_env_num": 10},
            "model": {
                "kind": "mlp",
                "latent_dim": 128,
                "hidden_sizes": [256, 256],
                "layer_norm": True,
                "value_support_size": 10,
                "reward_support_size": 10,
                "projection_dim": 128,
                "projection_hidden_dim": 128,
            },
            "mcts": {
                "num_simulations": 25,
                "discount_factor": 1.0,
                "root_dirichlet_alpha": 0.3,
                "root_noise_weight": 0.25,
            },
            "buffer": {
                "replay_buffer_size": 200_000,
                "game_segment_length": 48,
                "num_unroll_steps": 5,
                "td_steps": 42,
                "use_priority": False,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "piecewise_decay_lr_scheduler": False,
                "weight_decay": 1e-4,
                "update_per_collect": 40,
                "ssl_loss_weight": 0.0,
                "target_update_freq": 100,
                "num_threads": 1,
            },
            "collector": {
                "temperature": 1.0,
                "manual_temperature_decay": True,
                "threshold_training_steps_for_final_temperature": 20_000,
            },
            "evaluator": {
                "eval_freq": 1000,
                "n_evaluator_episode": 20,
                "opponent": "mcts",
                "opponent_mcts_simulations": 100,
            },
        }
    )
