"""Where the learner workers sit in a Tune trial's placement group.

A trial's bundles are: 0 the driver, then one per collector actor and one per evaluator actor
(async pipeline on Ray), then one per learner worker when ``learner.num_workers >= 2``
(:func:`lz_tune.tune.resources.trial_bundles`).
"""

from __future__ import annotations

from lz_tune.config import Config

__all__ = ["learner_bundle_index", "learner_bundles"]


def learner_bundles(cfg: Config) -> list[dict[str, float]]:
    """One bundle per learner worker (none when the learner runs in the driver)."""
    lc = cfg.learner
    if lc.num_workers < 2:
        return []
    bundle = {"CPU": float(lc.worker_num_cpus)} | ({"GPU": float(lc.worker_num_gpus)} if lc.worker_num_gpus > 0 else {})
    return [dict(bundle) for _ in range(lc.num_workers)]


def learner_bundle_index(cfg: Config, rank: int) -> int:
    """Bundle of learner worker ``rank`` in its trial's placement group."""
    ap = cfg.async_pipeline
    actors = ap.num_collector_actors + ap.num_evaluator_actors if ap.enabled and not ap.ray_local_mode else 0
    return 1 + actors + rank
