"""Tune search space for Stochastic MuZero on 2048 (sync trials: one bundle of 1 CPU each).

from ray import tune
from lz_tune.tune import MuZeroTrainable
from lz_tune.search_spaces.game_2048_stochastic_muzero import space, stop, scheduler
tune.Tuner(MuZeroTrainable, param_space=space,
           tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                       num_samples=8, scheduler=scheduler()),
           run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.board_games.game_2048_stochastic_muzero",
    "step_seconds": 60.0,
    # learned chance codes or the env's true (cell, tile) outcome
    "stochastic.use_true_chance_label": tune.choice([False, True]),
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    "learner.update_per_collect": tune.choice([25, 50, 100]),
    "mcts.num_simulations": tune.choice([25, 50]),
    "buffer.td_steps": tune.choice([5, 10]),
    "stochastic.commitment_loss_weight": tune.loguniform(0.1, 2.0),
}

#: stop a trial after 300k env steps (2048 has no "solved" score)
stop = {"num_env_steps_sampled_lifetime": 300_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    """ASHA on the eval score, per Tune iteration (step_seconds of training each)."""
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=60, grace_period=10, reduction_factor=3)


__all__ = ["space", "stop", "scheduler"]
