"""A trial's resource request (placement-group bundles) and the up-front check that it fits.

Bundle layout of one trial::

    bundle 0            driver / learner      {"CPU": driver_num_cpus, "GPU": driver_num_gpus}
    bundles 1..C        collector actors      {"CPU": async_pipeline.collector_num_cpus, ...}
    bundles C+1..C+E    evaluator actors      {"CPU": async_pipeline.evaluator_num_cpus, ...}
    next N bundles      learner workers       {"CPU": learner.worker_num_cpus, "GPU": learner.worker_num_gpus}

(actor bundles only when ``async_pipeline.enabled`` and not ``ray_local_mode``; learner-worker bundles
only when ``learner.num_workers`` N >= 2: lz_tune.parallel.resources), laid out over the
nodes by ``async_pipeline.placement_strategy`` (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD). A request the
cluster cannot hold leaves Tune trials PENDING forever with a warning a minute (Ray's autoscaler reports it as
infeasible), so :func:`check_cluster_resources` fails fast instead, naming the config keys that size the request.
Set ``LZ_TUNE_SKIP_RESOURCE_CHECK=1`` on an autoscaling cluster whose nodes do not exist yet.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from lz_tune.config import Config, ConfigError
from lz_tune.parallel.resources import learner_bundle_index, learner_bundles
from lz_tune.tune.tune_config import config_from_tune

SKIP_ENV = "LZ_TUNE_SKIP_RESOURCE_CHECK"
_EPS = 1e-9


def trial_bundles(cfg: Config, tune_config: Mapping[str, Any]) -> list[dict[str, float]]:
    """Placement-group bundles of one trial (see the module docstring). Raises ConfigError when
    ``learner.device`` and ``driver_num_gpus`` disagree (a GPU learner without a reserved GPU, or
    a reserved GPU the learner leaves idle)."""
    driver = {"CPU": float(tune_config.get("driver_num_cpus", 1.0))}
    gpus = float(tune_config.get("driver_num_gpus", 0.0))
    if driver["CPU"] < 0 or gpus < 0:
        raise ConfigError("driver_num_cpus / driver_num_gpus: must be >= 0")
    on_gpu = cfg.learner.device.startswith("cuda")
    # learner.num_workers >= 2: the workers hold the learner's GPUs (learner.worker_num_gpus, checked with
    # learner.device by the config); the driver's copy then builds batches on its CPU unless it has one
    if on_gpu and gpus == 0 and cfg.learner.num_workers < 2:
        raise ConfigError(
            f"learner.device / driver_num_gpus: learner.device={cfg.learner.device} runs the learner on "
            "a GPU, but driver_num_gpus=0 reserves none for the trial's driver; set driver_num_gpus=1 "
            "(or a fraction, e.g. 0.5, to share one GPU between two trials)"
        )
    if gpus > 0 and not on_gpu and cfg.learner.num_workers < 2:
        raise ConfigError(
            f"driver_num_gpus / learner.device: driver_num_gpus={gpus:g} reserves a GPU for the trial's "
            f"driver, but learner.device={cfg.learner.device} leaves it idle; set learner.device=cuda"
        )
    if gpus > 0:
        driver["GPU"] = gpus
    bundles = [driver]
    ap = cfg.async_pipeline
    if ap.enabled and not ap.ray_local_mode:
        for count, cpus, gpus in (
            (ap.num_collector_actors, ap.collector_num_cpus, ap.collector_num_gpus),
            (ap.num_evaluator_actors, ap.evaluator_num_cpus, ap.evaluator_num_gpus),
        ):
            bundle = {"CPU": float(cpus)} | ({"GPU": float(gpus)} if gpus > 0 else {})
            bundles.extend(dict(bundle) for _ in range(count))
    bundles.extend(learner_bundles(cfg))
    return bundles


def _keys_for(index: int, cfg: Config) -> str:
    ap = cfg.async_pipeline
    if index == 0:
        return "driver_num_cpus / driver_num_gpus"
    if index >= learner_bundle_index(cfg, 0) and cfg.learner.num_workers > 1:
        return "learner.worker_num_cpus / learner.worker_num_gpus"
    if index <= ap.num_collector_actors:
        return "async_pipeline.collector_num_cpus / collector_num_gpus"
    return "async_pipeline.evaluator_num_cpus / evaluator_num_gpus"


def check_bundles_fit(
    cfg: Config, bundles: Sequence[Mapping[str, float]], nodes: Sequence[Mapping[str, float]]
) -> None:
    """Raise ConfigError unless the trial can be placed: every bundle fits on some node, the sum
    fits the cluster, and the bundles can be laid out over the nodes as
    ``async_pipeline.placement_strategy`` asks (PACK / SPREAD: some split over the nodes;
    STRICT_PACK: all on one node; STRICT_SPREAD: each on its own node).

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
        if not any(_fits(bundle, node) for node in nodes):
            raise ConfigError(
                f"{_keys_for(i, cfg)}: bundle {i} of the trial asks for {dict(bundle)}, which no "
                f"node of this Ray cluster can hold (cluster: {have}); lower it, or start Ray "
                f"with more resources"
            )
    for r in sorted({r for b in bundles for r in b}):
        need = sum(float(b.get(r, 0.0)) for b in bundles)
        if need > totals.get(r, 0.0) + _EPS:
            ap, lc = cfg.async_pipeline, cfg.learner
            parts = f"driver {bundles[0].get(r, 0.0):g}"
            first_learner = learner_bundle_index(cfg, 0)
            if first_learner > 1:
                parts += (
                    f" + {ap.num_collector_actors} collector(s) x {bundles[1].get(r, 0.0):g}"
                    f" + {ap.num_evaluator_actors} evaluator(s) x {bundles[first_learner - 1].get(r, 0.0):g}"
                )
            learner_keys = ""
            if lc.num_workers > 1:
                parts += f" + {lc.num_workers} learner worker(s) x {bundles[first_learner].get(r, 0.0):g}"
                learner_keys = f" / learner.num_workers / learner.worker_num_{r.lower()}s"
            raise ConfigError(
                f"driver_num_{r.lower()}s / async_pipeline.num_collector_actors / async_pipeline.collector_num_"
                f"{r.lower()}s / async_pipeline.evaluator_num_{r.lower()}s{learner_keys}: one trial needs {need:g} {r} "
                f"({parts}) but the Ray cluster has {totals.get(r, 0.0):g}; the trial would stay PENDING "
                "forever. Use fractional actor resources (e.g. async_pipeline.collector_num_cpus=0.25) or "
                "fewer actors"
            )
    strategy = cfg.async_pipeline.placement_strategy
    if strategy == "STRICT_PACK" and len(bundles) > 1:
        whole = {r: sum(float(b.get(r, 0.0)) for b in bundles) for r in {r for b in bundles for r in b}}
        if not any(_fits(whole, node) for node in nodes):
            raise ConfigError(
                f"async_pipeline.placement_strategy: STRICT_PACK puts the whole trial on one node, "
                f"but no node of this Ray cluster holds {_fmt(whole)} (cluster: {have}); use PACK, or "
                f"fewer / smaller actors"
            )
    if strategy == "STRICT_SPREAD" and len(bundles) > 1 and _distinct_nodes(bundles, nodes) is None:
        raise ConfigError(
            f"async_pipeline.placement_strategy: STRICT_SPREAD puts each of the trial's {len(bundles)} "
            f"bundles (driver + actors) on its own node, but this Ray cluster has {len(nodes)} node(s) "
            f"that cannot hold them that way; use SPREAD (as spread as the nodes allow) or fewer actors"
        )
    if strategy in ("PACK", "SPREAD") and len(bundles) > 1 and not _packs(bundles, nodes):
        learner_keys = " / learner.worker_num_cpus" if cfg.learner.num_workers > 1 else ""
        raise ConfigError(
            f"driver_num_cpus / async_pipeline.collector_num_cpus / async_pipeline.evaluator_num_cpus"
            f"{learner_keys}: "
            f"the trial's {len(bundles)} bundles {[_fmt(b) for b in bundles]} fit the cluster's total "
            f"but cannot be split over its nodes "
            f"{[_fmt({r: float(n.get(r, 0.0)) for b in bundles for r in b}) for n in nodes]}; the trial would stay "
            "PENDING forever. Use smaller (fractional) actor resources or fewer actors"
        )


def _fits(bundle: Mapping[str, float], node: Mapping[str, float]) -> bool:
    return all(float(node.get(r, 0.0)) + _EPS >= v for r, v in bundle.items())


def _fmt(resources: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{r}: {v:g}" for r, v in sorted(resources.items())) + "}"


def _distinct_nodes(
    bundles: Sequence[Mapping[str, float]], nodes: Sequence[Mapping[str, float]]
) -> Optional[list[int]]:
    """A node index per bundle, all distinct, each node holding its bundle (bipartite matching by
    augmenting paths); None when there is none."""
    owner: dict[int, int] = {}  # node -> bundle

    def place(b: int, seen: set[int]) -> bool:
        for n, node in enumerate(nodes):
            if n in seen or not _fits(bundles[b], node):
                continue
            seen.add(n)
            if n not in owner or place(owner[n], seen):
                owner[n] = b
                return True
        return False

    if len(bundles) > len(nodes) or not all(place(b, set()) for b in range(len(bundles))):
        return None
    by_bundle = {b: n for n, b in owner.items()}
    return [by_bundle[b] for b in range(len(bundles))]


def _packs(
    bundles: Sequence[Mapping[str, float]], nodes: Sequence[Mapping[str, float]], max_steps: int = 100_000
) -> bool:
    """Whether the bundles can be split over the nodes, several per node allowed (depth-first
    search, largest bundles first, nodes with the same free resources tried once). A search
    past ``max_steps`` answers True: the check must never refuse a trial that fits."""
    resources = sorted({r for b in bundles for r in b})
    order = sorted(bundles, key=lambda b: [-float(b.get(r, 0.0)) for r in resources])
    free = [[float(n.get(r, 0.0)) for r in resources] for n in nodes]
    steps = 0

    def place(i: int) -> bool:
        nonlocal steps
        if i == len(order):
            return True
        need = [float(order[i].get(r, 0.0)) for r in resources]
        tried = set()
        for node in free:
            key = tuple(round(v, 9) for v in node)
            if key in tried or any(have + _EPS < want for have, want in zip(node, need)):
                continue
            tried.add(key)
            steps += 1
            if steps > max_steps:
                return True
            for j, want in enumerate(need):
                node[j] -= want
            ok = place(i + 1)
            for j, want in enumerate(need):
                node[j] += want
            if ok:
                return True
        return False

    return place(0)


def cluster_nodes() -> list[dict[str, float]]:
    """Total resources of each alive node of the connected Ray cluster."""
    import ray

    return [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")]


def check_cluster_resources(
    tune_config: Mapping[str, Any],
    available: Optional[Mapping[str, float] | Sequence[Mapping[str, float]]] = None,
) -> None:
    """Fail fast (ConfigError naming the keys) when one trial of ``tune_config`` cannot be placed.

    Args:
      tune_config: a Tune config dict (dotted keys, ``driver_num_cpus``...; plain values, or a search
        space: categorical / grid values of resource keys are checked at their largest).
      available: the cluster's resources, as one dict of totals (one node) or a list of per-node
        dicts; ``None`` asks the running Ray cluster (no check when Ray is not initialised).
    """
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
