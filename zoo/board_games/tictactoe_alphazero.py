"""AlphaZero on tic-tac-toe (OpenSpiel ``tic_tac_toe``): pUCT over the game's true states (no
learned dynamics), a policy + value MLP, self-play; evaluated every 300 updates against the
perfect minimax bot (100 games, half as first player). Solved when no evaluation game is lost (a
perfect player draws every game); a loss-free evaluation is confirmed on 1,000 more games
(``evaluator.stop_confirm_episodes``, ~5 s) before the run stops: without it, one seed of five
stopped on a lucky 100 games and then lost 1% of 1,000.

Self-play explores with the root's Dirichlet noise (alpha 0.3) at weight 0.5 and moves sampled
from the visit counts at temperature 1; no epsilon-greedy schedule. The weight is what made every
seed reach perfect play: at AlphaZero's 0.25 the runs that stalled kept losing as second player
to minimax's edge openings, answered by a reply that self-play rarely saw punished
(docs/board_games.md, "Which exploration mattered").

    python -m lz_tune train zoo/board_games/tictactoe_alphazero.py --seed 0

The value target of every position is the game's outcome for the player to move there
(td_steps = 9, the longest game, with no discount); num_unroll_steps = 0: each sampled position
is one training sample (there is no model to unroll). See docs/board_games.md ("True-rules
search: alphazero") for the measured run.
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "alphazero",
            "exp_name": "tictactoe_alphazero",
            "seed": 0,
            "max_env_step": 100_000,
            "env": {"env_id": "openspiel:tic_tac_toe", "collector_env_num": 8, "evaluator_env_num": 10},
            "model": {
                "kind": "mlp",
                "latent_dim": 64,
                "hidden_sizes": [128],
                "layer_norm": True,
                "value_support_size": 10,
            },
            "mcts": {
                "num_simulations": 25,
                "discount_factor": 1.0,
                "root_dirichlet_alpha": 0.3,
                "root_noise_weight": 0.5,
            },
            "buffer": {
                "replay_buffer_size": 50_000,
                "game_segment_length": 12,
                "num_unroll_steps": 0,
                "td_steps": 9,
                "use_priority": False,
            },
            "learner": {
                "batch_size": 128,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "weight_decay": 1e-4,
                "grad_clip_value": 0.5,
                "update_per_collect": 30,
                "ssl_loss_weight": 0.0,
                "target_update_freq": 100,
                "num_threads": 1,
            },
            # self-play samples its moves from the visit counts at temperature 1 (AlphaZero's
            # exploration, with the root's Dirichlet noise)
            "collector": {"temperature": 1.0},
            "evaluator": {
                "eval_freq": 300,
                "n_evaluator_episode": 100,
                "opponent": "minimax",
                "stop_loss_rate": 0.0,
                # a loss-free evaluation is confirmed on 1,000 more games before the run stops
                "stop_confirm_episodes": 1000,
            },
        }
    )
