"""Tune search space for UniZero on Atari Pong, async trials (driver + collector actors per trial)."""

from ray import tune

from lz_tune.search_spaces.pong_muzero import scheduler, stop

space = {
    "config": "lz_tune.zoo.atari.pong_unizero",
    "step_seconds": 60.0,
    "driver_num_cpus": 1.0,
    "async_pipeline.enabled": True,
    "async_pipeline.num_collector_actors": tune.choice([1, 2]),
    "learner.learning_rate": tune.loguniform(3e-5, 3e-4),
    "unizero.embed_dim": tune.choice([128, 256]),
    "unizero.infer_context_length": tune.choice([4, 8]),
    "mcts.num_simulations": tune.choice([25, 50]),
}

__all__ = ["space", "stop", "scheduler"]
