"""Tune search space for Gumbel MuZero on CartPole-v1: MuZero's CartPole space with small
simulation budgets (the point of Gumbel MuZero) plus the Gumbel keys.

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from search_spaces.cartpole_gumbel_muzero import space, stop, scheduler
    tune.run(MuZeroTrainable, config=space, num_samples=8, stop=stop, scheduler=scheduler(),
             metric="evaluation/env_runners/episode_return_mean", mode="max")
"""

from ray import tune

from search_spaces.cartpole_muzero import scheduler, space as muzero_space, stop

space = {
    **muzero_space,
    "config": "zoo.classic_control.cartpole_gumbel_muzero",
    "mcts.num_simulations": tune.choice([4, 8, 16]),
    # sigma(q) = (c_visit + max N) * c_scale * q: how strongly the completed Q moves the policy
    "gumbel.c_scale": tune.loguniform(0.03, 0.3),
}

__all__ = ["space", "stop", "scheduler"]
