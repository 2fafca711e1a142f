"""lz-tune: MuZero-family agents trained with an async segment pipeline, as a Ray Tune Trainable."""

import os as _os

# Large CPU tensors on transparent huge pages: torch's CPU allocator madvises its allocations of
# 2 MB and more when THP_MEM_ALLOC_ENABLE is set before its first allocation, which cuts the page
# faults of conv activations (the Pong learner's speed-up is measured in benchmarks/README.md,
# "Learner speed"). Set here, before
# anything imports torch, so the CLI, Ray actors and Tune trials get it; a value the user set
# (e.g. 0) is kept. A process that imported torch before lz_tune may already have read it.
_os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from lz_tune.config import Config, ConfigError

__all__ = ["Config", "ConfigError", "Driver", "EvalResult", "RunResult", "evaluate", "load_config", "train"]
__version__ = "0.1.0"

#: the Python API (lz_tune.api) and the Driver, imported on first use: ``import lz_tune`` stays light
#: (no torch) for the CLI's --help, the analysis helpers and Ray workers that only need the config
_LAZY = {
    "train": "lz_tune.api",
    "evaluate": "lz_tune.api",
    "load_config": "lz_tune.api",
    "RunResult": "lz_tune.api",
    "EvalResult": "lz_tune.api",
    "Driver": "lz_tune.pipeline.driver",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lz_tune' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
