"""Tune search space for sampled_unizero on Pendulum-v1 (sync trials).

from ray import tune
from lz_tune.tune import MuZeroTrainable
from lz_tune.search_spaces.pendulum_sampled_unizero import space, stop, scheduler
tune.Tuner(MuZeroTrainable, param_space=space,
           tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                       num_samples=8, scheduler=scheduler()),
           run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

from lz_tune.search_spaces.pendulum_sampled_muzero import scheduler, stop

space = {
    "config": "lz_tune.zoo.classic_control.pendulum_sampled_unizero",
    "step_seconds": 20.0,
    "learner.learning_rate": tune.loguniform(3e-4, 3e-3),
    # K: actions sampled per expansion
    "sampled.num_samples": tune.choice([5, 10, 20]),
    "unizero.infer_context_length": tune.choice([2, 4]),
    # entropy bonus of the Gaussian policy: keeps the K samples spread out
    "learner.policy_entropy_weight": tune.loguniform(1e-4, 2e-2),
}

__all__ = ["space", "stop", "scheduler"]
