"""Tune search space for EfficientZero on CartPole-v1: MuZero's CartPole space plus the
value-prefix keys.

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.search_spaces.cartpole_efficientzero import space, stop, scheduler
    tune.Tuner(MuZeroTrainable, param_space=space,
               tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                           num_samples=8, scheduler=scheduler()),
               run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

from lz_tune.search_spaces.cartpole_muzero import scheduler, stop
from lz_tune.search_spaces.cartpole_muzero import space as muzero_space

space = {
    **muzero_space,
    "config": "lz_tune.zoo.classic_control.cartpole_efficientzero",
    # reset period of the value prefix and the LSTM state (model steps)
    "efficientzero.lstm_horizon_len": tune.choice([3, 5]),
    "efficientzero.lstm_hidden_size": tune.choice([32, 64, 128]),
}

__all__ = ["space", "stop", "scheduler"]
