"""lz-tune: MuZero-family agents trained with an async segment pipeline, as a Ray Tune Trainable."""

from lz_tune.config import Config, ConfigError

__all__ = ["Config", "ConfigError"]
__version__ = "0.1.0"
