"""Tune search space for MuZero on Atari Pong, async trials (driver + collector actors per trial).

Each trial asks for a placement group: driver_num_cpus for the learner, then
async_pipeline.collector_num_cpus per collector actor and evaluator_num_cpus per evaluator.
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.atari.pong_muzero",
    "step_seconds": 60.0,
    "driver_num_cpus": 1.0,
    "async_pipeline.enabled": True,
    "async_pipeline.num_collector_actors": tune.choice([1, 2]),
    "async_pipeline.max_policy_lag": tune.choice([0, 10, 50]),
    "learner.learning_rate": tune.loguniform(0.05, 0.3),
    "learner.replay_ratio": tune.choice([0.1, 0.25, 0.5]),
    "buffer.td_steps": tune.choice([5, 10]),
    "mcts.num_simulations": tune.choice([25, 50]),
}

stop = {"evaluation/env_runners/episode_return_mean": 20.0, "num_env_steps_sampled_lifetime": 500_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=360, grace_period=30, reduction_factor=3)
