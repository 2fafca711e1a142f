"""Tune search space for Gumbel MuZero on CartPole-v1: MuZero's CartPole space with small
simulation budgets (the point of Gumbel MuZero) plus the Gumbel keys.

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.search_spaces.cartpole_gumbel_muzero import space, stop, scheduler
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
    "config": "lz_tune.zoo.classic_control.cartpole_gumbel_muzero",
    "mcts.num_simulations": tune.choice([4, 8, 16]),
    # sigma(q) = (c_visit + max N) * c_scale * q: how strongly the completed Q moves the policy
    "gumbel.c_scale": tune.loguniform(0.03, 0.3),
}

__all__ = ["space", "stop", "scheduler"]
