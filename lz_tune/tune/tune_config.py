"""A Tune config dict (a search space's sample) to :class:`~lz_tune.config.Config`: Ray-free, read
by the Trainable and by the resource checks before any trial starts.

Keys: ``config`` (a zoo module: a short name such as ``cartpole_muzero``, a dotted module name or a
.py file; or a LightZero config file; default CartPole MuZero),
the trial's own ``step_seconds``, ``driver_num_cpus``, ``driver_num_gpus``, and any dotted config
key (``learner.learning_rate``).
"""

from __future__ import annotations

import math
import os
from typing import Any

from lz_tune.config import Config, ConfigError
from lz_tune.config_loader import load_config_module

__all__ = ["DEFAULT_CONFIG", "TUNE_ONLY_KEYS", "config_from_tune"]

DEFAULT_CONFIG = "lz_tune.zoo.classic_control.cartpole_muzero"
"""The zoo config of a Tune config without a ``config`` key."""
TUNE_ONLY_KEYS = ("config", "step_seconds", "driver_num_cpus", "driver_num_gpus")
"""Keys of a Tune config that are the trial's, not the Config's."""


def config_from_tune(tune_config: dict[str, Any]) -> Config:
    """Build the experiment Config from a Tune config dict (raises ConfigError naming a bad key)."""
    for key, minimum, strict in (
        ("step_seconds", 0.0, True),
        ("driver_num_cpus", 0.0, False),
        ("driver_num_gpus", 0.0, False),
    ):
        value = tune_config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ConfigError(f"{key}: must be a number (got {value!r})")
        if value < minimum or (strict and value == minimum):
            raise ConfigError(f"{key}: must be {'>' if strict else '>='} {minimum:g} (got {value!r})")
    base = load_config_module(_resolve_config_path(str(tune_config.get("config", DEFAULT_CONFIG))))
    updates = {k: v for k, v in tune_config.items() if k not in TUNE_ONLY_KEYS}
    return base.with_updates(updates) if updates else base


def _resolve_config_path(path: str) -> str:
    """A relative config FILE path is relative to the directory ``tune.run`` was called from: Tune
    changes into the trial's folder before ``setup`` and gives the original one in the documented
    ``TUNE_ORIG_WORKING_DIR`` variable. Dotted module names and absolute paths pass unchanged."""
    if not (path.endswith(".py") or os.sep in path) or os.path.isabs(path):
        return path
    origin = os.environ.get("TUNE_ORIG_WORKING_DIR")
    if origin and not os.path.isfile(path) and os.path.isfile(os.path.join(origin, path)):
        return os.path.join(origin, path)
    return path
