"""Tune search space for MuZero on Connect Four (OpenSpiel), self-play, scored against OpenSpiel's
MCTS bot with 100 simulations (20 games per evaluation, half as first player).

    python -m lz_tune tune search_spaces/connect_four_muzero.py --num-samples 8 --scheduler asha

The search metric is the evaluation return against the bot (win rate minus loss rate, in [-1, 1]).
Keys are dotted config keys plus the Tune-only keys of :mod:`lz_tune.tune.trainable`.
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.board_games.connect_four_muzero",
    "step_seconds": 60.0,
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    # updates per collect of 8 games (~170 moves)
    "learner.update_per_collect": tune.choice([20, 40, 80]),
    # search budget per move
    "mcts.num_simulations": tune.choice([16, 25, 50]),
    # Monte Carlo outcomes (42) or bootstrapped targets from the target network
    "buffer.td_steps": tune.choice([10, 42]),
    # how long self-play explores with temperature 1 / 0.5 before 0.25
    "collector.threshold_training_steps_for_final_temperature": tune.choice([10_000, 20_000, 40_000]),
    # network width
    "model.hidden_sizes": tune.choice([(256, 256), (512, 512)]),
}

#: stop a trial after 500k env steps
stop = {"num_env_steps_sampled_lifetime": 500_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    """ASHA on the evaluation return, per Tune iteration (step_seconds of training each)."""
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=120, grace_period=10, reduction_factor=3)


__all__ = ["space", "stop", "scheduler"]
