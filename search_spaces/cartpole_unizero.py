"""Tune search space for UniZero on CartPole-v1 (sync trials): the transformer's width and
context, its learning rate and the latent-consistency weight.

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.search_spaces.cartpole_unizero import space, stop, scheduler
    tune.Tuner(MuZeroTrainable, param_space=space,
               tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                           num_samples=8, scheduler=scheduler()),
               run_config=tune.RunConfig(stop=stop)).fit()
"""

from ray import tune

from lz_tune.search_spaces.cartpole_muzero import scheduler, stop

space = {
    "config": "lz_tune.zoo.classic_control.cartpole_unizero",
    "step_seconds": 20.0,
    # AdamW step size of the world model
    "learner.learning_rate": tune.loguniform(3e-4, 3e-3),
    # token width E (2 heads: E / 2 must be even)
    "unizero.embed_dim": tune.choice([32, 64, 128]),
    # env steps of context: the attention window is 2H tokens
    "unizero.infer_context_length": tune.choice([2, 4, 8]),
    # weight of the latent consistency MSE against the target encoder
    "learner.ssl_loss_weight": tune.choice([2.0, 10.0]),
}

__all__ = ["space", "stop", "scheduler"]
