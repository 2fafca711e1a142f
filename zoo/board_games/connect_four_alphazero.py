"""AlphaZero on Connect Four (OpenSpiel ``connect_four``, 6 x 7): pUCT over the game's true
states with a policy + value MLP, self-play; evaluated against OpenSpiel's MCTS bot with 100
simulations (random rollouts), half the games as first player.

    python -m lz_tune train zoo/board_games/connect_four_alphazero.py --seed 0

The board is served as a flat vector (3 x 6 x 7 planes + the player to move). Value targets are
game outcomes from the view of the player to move (td_steps = 42, the longest game, no
discount); num_unroll_steps = 0: there is no model to unroll. Exploration is AlphaZero's: root
Dirichlet noise (alpha 1.0 for ~7 legal moves, as alpha ~ 10 / moves) and moves sampled from the
visit counts at temperature 1. docs/board_games.md has the measured ladder against the MCTS bot.
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "alphazero",
            "exp_name": "connect_four_alphazero",
            "seed": 0,
            "max_env_step": 2_000_000,
            "env": {"env_id": "openspiel:connect_four", "collector_env_num": 16, "evaluator_env_num": 10},
            "model": {
                "kind": "mlp",
                "latent_dim": 128,
                "hidden_sizes": [256, 256],
                "layer_norm": True,
                "value_support_size": 10,
            },
            "mcts": {
                "num_simulations": 50,
                "discount_factor": 1.0,
                "root_dirichlet_alpha": 1.0,
                "root_noise_weight": 0.25,
            },
            "buffer": {
                "replay_buffer_size": 300_000,
                "game_segment_length": 45,
                "num_unroll_steps": 0,
                "td_steps": 42,
                "use_priority": False,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "piecewise_decay_lr_scheduler": False,
                "weight_decay": 1e-4,
                "grad_clip_value": 0.5,
                "update_per_collect": 60,
                "ssl_loss_weight": 0.0,
                "target_update_freq": 100,
                "num_threads": 1,
            },
            "collector": {"temperature": 1.0},
            "evaluator": {
                "eval_freq": 1000,
                "n_evaluator_episode": 20,
                "opponent": "mcts",
                "opponent_mcts_simulations": 100,
            },
        }
    )
