"""lz-tune: MuZero-family agents trained with an async segment pipeline, as a Ray Tune Trainable."""

import os as _os

# Large CPU tensors on transparent huge pages: torch's CPU allocator madvises its allocations of
# 2 MB and more when THP_MEM_ALLOC_ENABLE is set before its first allocation, which cuts the page
# faults of conv activations (Pong learner, 2026-12-03: 0.19 -> 0.26 updates/s on the default
# path, 0.13 -> 0.19 on the eager one; benchmarks/README.md, "Learner speed"). Set here, before
# anything imports torch, so the CLI, Ray actors and Tune trials get it; a value the user set
# (e.g. 0) is kept. A process that imported torch before lz_tune may already have read it.
_os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from lz_tune.config import Config, ConfigError

__all__ = ["Config", "ConfigError"]
__version__ = "0.1.0"
