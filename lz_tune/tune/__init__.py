"""Ray Tune integration: :class:`MuZeroTrainable` (the driver loop as a class Trainable), the
Tune config to :class:`~lz_tune.config.Config` (:func:`config_from_tune`) and the up-front check
that a trial's placement group fits the cluster."""

from lz_tune.metrics import EVAL_RETURN
from lz_tune.tune.resources import check_cluster_resources, trial_bundles
from lz_tune.tune.trainable import TIME_TO_STOP_VALUE, MuZeroTrainable, placement_group_factory
from lz_tune.tune.tune_config import config_from_tune

__all__ = [
    "EVAL_RETURN",
    "TIME_TO_STOP_VALUE",
    "MuZeroTrainable",
    "check_cluster_resources",
    "config_from_tune",
    "placement_group_factory",
    "trial_bundles",
]
