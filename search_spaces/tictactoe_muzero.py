"""Tune search space for MuZero on tic-tac-toe (OpenSpiel), self-play, scored against OpenSpiel's
MCTS bot with 1,000 simulations (the zoo config's evaluation: 100 games, half as first player).

    python -m lz_tune tune search_spaces/tictactoe_muzero.py --num-samples 8 --scheduler asha

The search metric is the evaluation return against the bot (win rate minus loss rate; 0 for a
player that draws every game against a perfect one); trials stop once an evaluation loses no game.
Keys are dotted config keys plus the Tune-only keys of :mod:`lz_tune.tune.trainable`.
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.board_games.tictactoe_muzero",
    "step_seconds": 30.0,
    # Adam step size
    "learner.learning_rate": tune.loguniform(1e-3, 1e-2),
    # updates per collect of 8 games (~60 moves): the replay ratio
    "learner.update_per_collect": tune.choice([15, 30, 60]),
    # temperature 1 / 0.5 / 0.25 at 0-50-75 % of this many updates: how long self-play explores
    # (the zoo's 60k; 6k got every seed stuck on one trap)
    "collector.threshold_training_steps_for_final_temperature": tune.choice([30_000, 60_000, 100_000]),
    # root exploration noise of self-play
    "mcts.root_noise_weight": tune.choice([0.25, 0.4]),
    # Monte Carlo outcomes (9) or bootstrapped targets from the target network
    "buffer.td_steps": tune.choice([3, 9]),
}

#: a trial ends by itself at its first evaluation without a lost game (the zoo config's
#: evaluator.stop_loss_rate = 0, reported as ``done``), or after 200k env steps
stop = {"num_env_steps_sampled_lifetime": 200_000}


def scheduler() -> tune.schedulers.TrialScheduler:
    """ASHA on the evaluation return, per Tune iteration (step_seconds of training each)."""
    return tune.schedulers.ASHAScheduler(time_attr="training_iteration", max_t=120, grace_period=10, reduction_factor=3)


__all__ = ["space", "stop", "scheduler"]
