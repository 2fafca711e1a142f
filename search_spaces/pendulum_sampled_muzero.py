"""Tune search space for Sampled MuZero on Pendulum-v1 (sync trials: one bundle of 1 CPU each).

from ray import tune
from lz_tune.tune import MuZeroTrainable
from lz_tune.search_spaces.pendulum_sampled_muzero import space, stop, scheduler
tune.Tuner(MuZeroTrainable, param_space=space,
           tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                       num_samples=8, scheduler=scheduler()),
           run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.classic_control.pendulum_sampled_muzero",
    "step_seconds": 20.0,
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    "learner.update_per_collect": tune.choice([50, 100, 200]),
    # K: actions sampled per expansion; more covers the torque range better, costs search time
    "sampled.num_samples": tune.choice([5, 10, 20]),
    "mcts.num_simulations": tune.choice([25, 50]),
    # entropy bonus of the Gaussian policy: keeps the K samples spread out
    "learner.policy_entropy_weight": tune.loguniform(1e-4, 2e-2),
}

#: stop a trial once solved or after 100k env steps
stop = {"evaluation/env_runners/episode_return_mean": -200.0, "num_env_steps_sampled_lifetime": 100_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    """ASHA on eval return, per Tune iteration (step_seconds of training each)."""
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=60, grace_period=6, reduction_factor=3)


__all__ = ["space", "stop", "scheduler"]
