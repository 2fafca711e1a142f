"""Workers: the SegmentCollector and Evaluator (plain classes, used in-process by the sync
pipeline and wrapped as Ray actors by the async one)."""

from lz_tune.workers.collector import CollectResult, SegmentCollector, epsilon_at, temperature_at
from lz_tune.workers.common import WeightSnapshot, env_spec_for, make_env
from lz_tune.workers.evaluator import EvalResult, Evaluator

__all__ = [
    "CollectResult",
    "EvalResult",
    "Evaluator",
    "SegmentCollector",
    "WeightSnapshot",
    "env_spec_for",
    "make_env",
    "epsilon_at",
    "temperature_at",
]
