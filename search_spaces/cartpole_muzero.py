"""Tune search space for MuZero on CartPole-v1 (sync trials: one bundle of 1 CPU each).

    from ray import tune
    from lz_tune.tune import MuZeroTrainable
    from lz_tune.search_spaces.cartpole_muzero import space, stop, scheduler
    tune.Tuner(MuZeroTrainable, param_space=space,
               tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max",
                                           num_samples=8, scheduler=scheduler()),
               run_config=tune.RunConfig(storage_path="~/lz_results", name="cartpole", stop=stop)).fit()

Keys are dotted config keys (validated when a trial starts: a wrong key fails the trial with an
error naming it) plus the Tune-only keys of :mod:`lz_tune.tune.trainable`.
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.classic_control.cartpole_muzero",
    "step_seconds": 10.0,
    # Adam step size: the main knob for how fast the value horizon is learned
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    # updates per collect (budget-locked replay ratio); more = more sample-efficient, slower wall-clock
    "learner.update_per_collect": tune.choice([50, 100, 200]),
    # n of the n-step value target (num_unroll_steps + td_steps must stay <= 50, the segment length)
    "buffer.td_steps": tune.choice([5, 10]),
    # target-network copy interval: shorter grows the bootstrap horizon faster
    "learner.target_update_freq": tune.choice([20, 50, 100]),
    # search budget per move
    "mcts.num_simulations": tune.choice([16, 25, 50]),
}

#: stop a trial once solved or after 100k env steps
stop = {"evaluation/env_runners/episode_return_mean": 195.0, "num_env_steps_sampled_lifetime": 100_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    """ASHA on eval return, per Tune iteration (step_seconds of training each)."""
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=60, grace_period=6, reduction_factor=3)
