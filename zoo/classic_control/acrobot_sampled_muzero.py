"""Sampled MuZero on Acrobot-v1 with K = 2 of its 3 discrete actions: every expansion plans over
2 distinct actions drawn without replacement (Gumbel-top-k) from the policy. Solved here when
the mean eval return reaches -100 (random play: -500, the time limit).

The reward is -1 at every step until the goal, which sets these things apart from the other
classic-control configs (benchmarks/README.md, Acrobot):
- no SSL consistency loss: with a constant reward and value target nothing else shapes the
  latent, and the consistency loss alone collapses it (the value and policy heads then output
  one constant for every observation);
- temporally extended epsilon-greedy collection (random actions held for zeta(2)-distributed
  durations up to 20 steps, epsilon 1 -> 0.05 over the first 20k env steps): the search acts
  like a fixed policy while its values are all alike, and uniform random play reaches the goal
  within 500 steps in only ~8% of episodes;
- action repeat 3: each decision moves the pendulum three env steps (0.6 s), so the values of
  the two searched children differ by more than the value net's error. Returns are in the
  env's units (-1 per env step); env-step counters count decisions;
- pUCT constant c1 = 0.5 instead of MuZero's 1.25 (``mcts.pb_c_init``): with two children per
  node the prior term kept the visits, and so the policy targets, near 50/50 while the value
  differences between the two children are small; at 0.5 the search follows the values more,
  the policy sharpens (logged entropy per unroll step 0.47-0.62 nats at the end against
  0.57-0.71 on the same seeds);
- 50 simulations (sharper visit targets over the two children) and the step size cut to 1/10
  after 22,500 updates and to 1/100 after 45,000, over 150,000 decisions: the training
  evaluations swing by +-50 at the full step size.

On 64 held-out episodes of the last weights seeds 0 / 1 / 2 score -90.5 / -96.0 / -77.6
(benchmarks/README.md, Acrobot; with c1 = 1.25: -99.4 / -104.9 / -84.8).

    python -m lz_tune train zoo/classic_control/acrobot_sampled_muzero.py
"""

from lz_tune.config import Config


def make_config() -> Config:
    return Config.from_dict(
        {
            "policy_type": "sampled_muzero",
            "exp_name": "acrobot_sampled_muzero",
            "seed": 0,
            "max_env_step": 150_000,
            "env": {"env_id": "Acrobot-v1", "collector_env_num": 8, "evaluator_env_num": 8, "action_repeat": 3},
            # reward -1 per step until the goal; returns >= -100 at gamma 0.99: h(-100) ~ -9
            "model": {
                "kind": "mlp",
                "latent_dim": 128,
                "hidden_sizes": [128],
                "layer_norm": True,
                "value_support_size": 15,
                "reward_support_size": 5,
            },
            "mcts": {"num_simulations": 50, "discount_factor": 0.99, "pb_c_init": 0.5},
            "sampled": {"num_samples": 2},
            "buffer": {
                "replay_buffer_size": 100_000,
                "game_segment_length": 50,
                "num_unroll_steps": 5,
                "td_steps": 5,
                "use_priority": True,
            },
            "learner": {
                "batch_size": 256,
                "optim_type": "adam",
                "learning_rate": 3e-3,
                "piecewise_decay_lr_scheduler": True,
                "threshold_training_steps_for_final_lr": 45_000,
                "weight_decay": 1e-4,
                "update_per_collect": 100,
                "ssl_loss_weight": 0.0,
                "target_update_freq": 20,
                "num_threads": 2,
            },
            "collector": {
                "temperature": 0.5,
                "eps_greedy_start": 1.0,
                "eps_greedy_end": 0.05,
                "eps_greedy_decay_env_steps": 20_000,
                "eps_greedy_max_duration": 20,
            },
            "evaluator": {"eval_freq": 500, "n_evaluator_episode": 8, "stop_value": -100.0},
        }
    )
