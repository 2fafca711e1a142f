"""Stochastic MuZero on 2048 (``Game2048-v0``, lz_tune's numpy env): the spawned tile is the
env's chance outcome, 32 of them (16 cells x a 2 or a 4). Learned chance codes by default;
``stochastic.use_true_chance_label=true`` trains with the env's true outcome instead.
Baselines on this env (100 games): uniform random ~1,200, greedy one-step merge ~3,400.

    python -m lz_tune train zoo/board_games/game_2048_stochastic_muzero.py
    python -m lz_tune train zoo/board_games/game_2048_stochastic_muzero.py stochastic.use_true_chance_label=true
    python benchmarks/stochastic_2048.py        # both modes against random and greedy play
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "stochastic_muzero",
            "exp_name": "game_2048_stochastic_muzero",
            "seed": 0,
            "max_env_step": 1_000_000,
            "env": {"env_id": "Game2048-v0", "collector_env_num": 8, "evaluator_env_num": 8},
            # rewards are merged-tile sums (h(1500) ~ 39.2 on the reward support); at gamma 0.99 returns
            # stay below ~8,000 (about 100 steps of merges): h(8e3) ~ 96.4 on the value support
            "model": {
                "kind": "mlp",
                "latent_dim": 128,
                "hidden_sizes": [256],
                "layer_norm": True,
                "value_support_size": 100,
                "reward_support_size": 40,
            },
            "mcts": {"num_simulations": 25, "discount_factor": 0.99},
            # the code-usage term keeps the learned codes from collapsing to one (the paper's loss alone:
            # 1 of 32 codes in use after 500 updates; benchmarks/README.md, 2048)
            "stochastic": {"chance_space_size": 32, "code_usage_loss_weight": 1.0},
            "buffer": {
                "replay_buffer_size": 200_000,
                "game_segment_length": 100,
                "num_unroll_steps": 5,
                "td_steps": 10,
                "use_priority": True,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "piecewise_decay_lr_scheduler": False,
                "weight_decay": 1e-4,
                "update_per_collect": 50,
                "ssl_loss_weight": 2.0,
                "target_update_freq": 100,
                "num_threads": 2,
            },
            "collector": {"temperature": 0.5},
            "evaluator": {"eval_freq": 1000, "n_evaluator_episode": 8},
        }
    )
