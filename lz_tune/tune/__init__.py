"""Ray Tune integration: :class:`MuZeroTrainable` (the driver loop as a class Trainable) and the
up-front check that a trial's placement group fits the cluster."""

from lz_tune.tune.resources import check_cluster_resources, trial_bundles
from lz_tune.metrics import EVAL_RETURN
from lz_tune.tune.trainable import TIME_TO_STOP_VALUE, MuZeroTrainable, config_from_tune, placement_group_factory

__all__ = ["EVAL_RETURN", "TIME_TO_STOP_VALUE", "MuZeroTrainable", "check_cluster_resources", "config_from_tune", "placement_group_factory",
           "trial_bundles"]
