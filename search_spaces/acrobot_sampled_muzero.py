"""Tune search space for Sampled MuZero on Acrobot-v1 with K = 2 of 3 discrete actions.

from ray import tune
from lz_tune.tune import MuZeroTrainable
from lz_tune.search_spaces.acrobot_sampled_muzero import space, stop, scheduler
tune.Tuner(MuZeroTrainable, param_space=space,
           tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                       num_samples=8, scheduler=scheduler()),
           run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

from lz_tune.search_spaces.pendulum_sampled_muzero import scheduler

space = {
    "config": "lz_tune.zoo.classic_control.acrobot_sampled_muzero",
    "step_seconds": 20.0,
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    "learner.update_per_collect": tune.choice([50, 100, 200]),
    "mcts.num_simulations": tune.choice([16, 25, 50]),
    "mcts.pb_c_init": tune.choice([0.25, 0.5, 1.25]),  # 0.5 in the zoo config: sharper targets over 2 children
    "collector.temperature": tune.choice([0.25, 0.5, 1.0]),
}

#: stop a trial once solved or after the zoo config's 150k decisions
stop = {"evaluation/env_runners/episode_return_mean": -100.0, "num_env_steps_sampled_lifetime": 150_000}

__all__ = ["space", "stop", "scheduler"]
