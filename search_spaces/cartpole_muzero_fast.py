"""Tune search space: the CartPole MuZero config with the shortest wall-clock to solve.

    python -m lz_tune tune search_spaces/cartpole_muzero_fast.py --num-samples 8 --num-cpus 2

Trials rank by :data:`lz_tune.tune.TIME_TO_STOP_VALUE` (``time_to_stop_value_s``: trial seconds,
setup included, at the evaluation that first reached eval return >= 195; NaN while unsolved), lowest
first; a trial ends when it solves or after ``stop["time_total_s"]`` seconds. The knobs are those
that set the cost of an update (batch, projector width, weight of the consistency loss), the number
of updates needed (step size, target-network interval, replay ratio) and the cost of collection
(simulations). Every sampled config runs on the 3 seeds of the ``seed`` grid (``search_alg()``
keeps the sampled values constant over the grid), so ``--num-samples 8`` is 24 trials; rank
configs by their slowest or median seed (``lz_tune.analysis``), then check the best on 5 other
seeds with ``benchmarks/cartpole_solve.py``.
"""

from ray import tune

space = {
    "config": "lz_tune.zoo.classic_control.cartpole_muzero",
    "step_seconds": 5.0,
    "seed": tune.grid_search([100, 101, 102]),
    # one torch thread per trial: two trials share the 2 cores of the reference box
    "learner.num_threads": 1,
    "learner.batch_size": tune.choice([64, 128]),
    "learner.learning_rate": tune.loguniform(3e-3, 1e-2),
    "learner.update_per_collect": tune.choice([50, 100]),
    "learner.target_update_freq": tune.choice([10, 20]),
    "learner.ssl_loss_weight": tune.choice([0.5, 2.0]),
    "model.projection_dim": tune.choice([64, 128]),
    "model.projection_hidden_dim": tune.choice([64, 128]),
    "mcts.num_simulations": tune.choice([8, 16]),
}

#: rank by time to solve (lower is better)
metric = "time_to_stop_value_s"
mode = "min"

#: a trial ends when solved (the driver stops at stop_value) or after 150 s of training
stop = {"time_total_s": 150.0}


def search_alg() -> tune.search.BasicVariantGenerator:
    """Random search; each sampled config is run on every seed of the grid."""
    return tune.search.BasicVariantGenerator(constant_grid_search=True)


def scheduler() -> tune.schedulers.TrialScheduler:
    """FIFO: every trial runs until it solves or hits the time limit (an early cut-off would rank
    by eval return at a fixed time, not by time to solve)."""
    return tune.schedulers.FIFOScheduler()
