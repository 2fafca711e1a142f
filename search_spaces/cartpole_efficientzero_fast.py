"""Tune search space: the CartPole EfficientZero config with the shortest wall-clock to solve.

The knobs of :mod:`search_spaces.cartpole_muzero_fast` (which found MuZero's zoo config), run from
EfficientZero's zoo config, plus the width of the value-prefix LSTM (the one knob of its own that
sets the cost of an update). Every sampled config runs on the 10 seeds of the ``seed`` grid: three
seeds rank CartPole configs no better than the seed-to-seed spread (benchmarks/README.md, "Ten
seeds"). The first config is the zoo config itself, the baseline of the ranking.

    python -m lz_tune tune search_spaces/cartpole_efficientzero_fast.py --num-samples 6 --num-cpus 2

Trials rank by ``time_to_stop_value_s`` (lowest first) and end when solved or after 120 s.
Run on 2026-12-05 (6 configs, 60 trials, ~17 min): the zoo config was within 6% of the best, so
it stays.
"""

from ray import tune

from lz_tune.search_spaces.cartpole_muzero_fast import metric, mode, scheduler
from lz_tune.search_spaces.cartpole_muzero_fast import space as muzero_space
from lz_tune.zoo.classic_control.cartpole_efficientzero import make_config

space = {
    **muzero_space,
    "config": "lz_tune.zoo.classic_control.cartpole_efficientzero",
    "seed": tune.grid_search(list(range(100, 110))),
    "efficientzero.lstm_hidden_size": tune.choice([16, 32, 64]),
}

#: a trial ends when solved or after 120 s of training (MuZero's slowest of these seeds: ~100 s)
stop = {"time_total_s": 120.0}

#: the zoo config's values of the searched keys (the first config sampled)
ZOO_POINT = {
    key: value
    for key, value in make_config().flat_dict().items()
    if isinstance(space.get(key), tune.search.sample.Domain)
}


def search_alg() -> tune.search.BasicVariantGenerator:
    """Random search from the zoo config; each sampled config runs on every seed of the grid."""
    return tune.search.BasicVariantGenerator(constant_grid_search=True, points_to_evaluate=[ZOO_POINT])


__all__ = ["space", "metric", "mode", "stop", "scheduler", "search_alg", "ZOO_POINT"]
