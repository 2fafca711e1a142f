"""Ray Tune integration: :class:`MuZeroTrainable` (the driver loop as a class Trainable)."""

from lz_tune.tune.trainable import MuZeroTrainable, config_from_tune, placement_group_factory

__all__ = ["MuZeroTrainable", "config_from_tune", "placement_group_factory"]
