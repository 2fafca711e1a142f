"""A trial's resource request (placement-group bundles) and the up-front check that it fits.

Bundle layout of one trial::

    bundle 0            driver / learner      {"CPU": driver_num_cpus, "GPU": driver_num_gpus}
    bundles 1..C        collector actors      {"CPU": async_pipeline.collector_num_cpus, ...}
    bundles C+1..C+E    evaluator actors      {"CPU": async_pipeline.evaluator_num_cpus, ...}

(actor bundles only when ``async_pipeline.enabled`` and not ``ray_local_mode``). A request the
cluster cannot hold leaves Tune trials PENDING forever with a warning a minute (RAY_NOTES), so
:func:`check_cluster_resources` fails fast instead, naming the config keys that size the request.
Set ``LZ_TUNE_SKIP_RESOURCE_CHECK=1`` on an autoscaling cluster whose nodes do not exist yet.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from lz_tune.config import Config, ConfigError

SKIP_ENV = "LZ_TUNE_SKIP_RESOURCE_CHECK"
_EPS = 1e-9


def trial_bundles(cfg: Config, tune_config: Mapping[str, Any]) -> list[dict[str, float]]:
    """Placement-group bundles of one trial (see the module docstring)."""
    driver = {"CPU": float(tune_config.get("driver_num_cpus", 1.0))}
    gpus = float(tune_config.get("driver_num_gpus", 0.0))
    if driver["CPU"] < 0 or gpus < 0:
        raise ConfigError("driver_num_cpus / driver_num_gpus: must be >= 0")
    if gpus > 0:
        driver["GPU"] = gpus
    bundles = [driver]
    ap = cfg.async_pipeline
    if ap.enabled and not ap.ray_local_mode:
        for count, cpus, gpus in ((ap.num_collector_actors, ap.collector_num_cpus, ap.collector_num_gpus),
                                  (ap.num_evaluator_actors, ap.evaluator_num_cpus, ap.evaluator_num_gpus)):
            bundle = {"CPU": float(cpus)} | ({"GPU": float(gpus)} if gpus > 0 else {})
            bundles.extend(dict(bundle) for _ in range(count))
    return bundles


def _keys_for(index: int, cfg: Config) -> str:
    ap = cfg.async_pipeline
    if index == 0:
        return "driver_num_cpus / driver_num_gpus"
    if index <= ap.num_collector_actors:
        return "async_pipeline.collector_num_cpus / collector_num_gpus"
    return "async_pipeline.evaluator_num_cpus / evaluator_num_gpus"


def check_bundles_fit(cfg: Config, bundles: Sequence[Mapping[str, float]],
                      nodes: Sequence[Mapping[str, float]]) -> None:
    """Raise ConfigError unless every bundle fits on some node and the sum fits the cluster.

    Args:
      bundles: the trial's bundles, ``[{"CPU": c, "GPU": g}, ...]``.
      nodes: total resources of each alive node, ``[{"CPU": 2.0, "GPU": 0.0, ...}, ...]``.
    """
    totals: dict[str, float] = {}
    for node in nodes:
        for r, v in node.items():
            totals[r] = totals.get(r, 0.0) + float(v)
    have = ", ".join(f"{r}={totals.get(r, 0.0):g}" for r in ("CPU", "GPU"))
    for i, bundle in enumerate(bundles):
        if not any(all(float(node.get(r, 0.0)) + _EPS >= v for r, v in bundle.items()) for node in nodes):
            raise ConfigError(f"{_keys_for(i, cfg)}: bundle {i} of the trial asks for {dict(bundle)}, which no "
                              f"node of this Ray cluster can hold (cluster: {have}); lower it, or start Ray "
                              f"with more resources")
    for r in sorted({r for b in bundles for r in b}):
        need = sum(float(b.get(r, 0.0)) for b in bundles)
        if need > totals.get(r, 0.0) + _EPS:
            ap = cfg.async_pipeline
            parts = f"driver {bundles[0].get(r, 0.0):g}"
            if len(bundles) > 1:
                parts += (f" + {ap.num_collector_actors} collector(s) x {bundles[1].get(r, 0.0):g}"
                          f" + {ap.num_evaluator_actors} evaluator(s) x {bundles[-1].get(r, 0.0):g}")
            raise ConfigError(
                f"driver_num_{r.lower()}s / async_pipeline.num_collector_actors / async_pipeline.collector_num_"
                f"{r.lower()}s / async_pipeline.evaluator_num_{r.lower()}s: one trial needs {need:g} {r} "
                f"({parts}) but the Ray cluster has {totals.get(r, 0.0):g}; the trial would stay PENDING "
                "forever. Use fractional actor resources (e.g. async_pipeline.collector_num_cpus=0.25) or "
                "fewer actors")


def cluster_nodes() -> list[dict[str, float]]:
    """Total resources of each alive node of the connected Ray cluster."""
    import ray

    return [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")]


def check_cluster_resources(tune_config: Mapping[str, Any],
                            available: Optional[Mapping[str, float] | Sequence[Mapping[str, float]]] = None,
                            ) -> None:
    """Fail fast (ConfigError naming the keys) when one trial of ``tune_config`` cannot be placed.

    Args:
      tune_config: a Tune config dict (dotted keys, ``driver_num_cpus``...; plain values, or a search
        space: categorical / grid values of resource keys are checked at their largest).
      available: the cluster's resources, as one dict of totals (one node) or a list of per-node
        dicts; ``None`` asks the running Ray cluster (no check when Ray is not initialised).
    """
    from lz_tune.tune.trainable import config_from_tune

    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    if available is None:
        import ray

        if not ray.is_initialized():
            return
        nodes = cluster_nodes()
    elif isinstance(available, Mapping):
        nodes = [dict(available)]
    else:
        nodes = [dict(n) for n in available]
    worst = {k: _largest(v) for k, v in tune_config.items()}
    cfg = config_from_tune(worst)
    check_bundles_fit(cfg, trial_bundles(cfg, worst), nodes)


def _largest(value: Any) -> Any:
    """The most demanding value of a search-space entry (categorical / grid of numbers or bools);
    anything else (a continuous domain, a plain value) is sampled or returned as is."""
    options = None
    if isinstance(value, dict) and set(value) == {"grid_search"}:
        options = list(value["grid_search"])
    elif hasattr(value, "categories"):
        options = list(value.categories)
    if options is not None:
        if all(isinstance(o, (int, float, bool)) for o in options):
            return max(options)
        return options[0]
    if hasattr(value, "sample") and callable(value.sample):
        return value.sample()
    return value
