"""Tune search space for Sampled EfficientZero on Pendulum-v1: the Sampled MuZero space plus
the value-prefix keys.

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.search_spaces.pendulum_sampled_efficientzero import space, stop, scheduler
    tune.Tuner(MuZeroTrainable, param_space=space,
               tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                           num_samples=8, scheduler=scheduler()),
               run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

from lz_tune.search_spaces.pendulum_sampled_muzero import scheduler, stop
from lz_tune.search_spaces.pendulum_sampled_muzero import space as sampled_space

space = {
    **sampled_space,
    "config": "lz_tune.zoo.classic_control.pendulum_sampled_efficientzero",
    "efficientzero.lstm_horizon_len": tune.choice([3, 5]),
    "efficientzero.lstm_hidden_size": tune.choice([32, 64]),
}

__all__ = ["space", "stop", "scheduler"]
