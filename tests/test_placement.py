"""Where a trial's bundles go, checked without a cluster: ``async_pipeline.placement_strategy``
reaches the trial's placement group and the actors' scheduling, the up-front resource check
knows what each strategy needs of the nodes, and ``learner.device`` / ``driver_num_gpus`` are
checked against each other. (tests/test_multinode.py runs real multi-node clusters.)"""

from __future__ import annotations

import types

import pytest

pytest.importorskip("ray")

from lz_tune.config import Config, ConfigError  # noqa: E402
from lz_tune.pipeline.ray_backend import RayBackend  # noqa: E402
from lz_tune.tune import check_cluster_resources, placement_group_factory  # noqa: E402
from lz_tune.tune.resources import _packs, trial_bundles  # noqa: E402

ASYNC = {
    "async_pipeline.enabled": True,
    "async_pipeline.num_collector_actors": 2,
    "async_pipeline.collector_num_cpus": 1.0,
    "async_pipeline.evaluator_num_cpus": 1.0,
}
TWO_NODES = [{"CPU": 2.0}, {"CPU": 2.0}]


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
def test_the_strategy_reaches_the_trials_placement_group(strategy):
    pgf = placement_group_factory(ASYNC | {"async_pipeline.placement_strategy": strategy})
    assert pgf.strategy == strategy
    assert pgf.bundles == [{"CPU": 1.0}] * 4


def test_pack_is_the_default():
    assert placement_group_factory(dict(ASYNC)).strategy == "PACK"


def test_a_wrong_strategy_names_the_key():
    with pytest.raises(ConfigError, match="async_pipeline.placement_strategy"):
        placement_group_factory(ASYNC | {"async_pipeline.placement_strategy": "spread-out"})


def _options(strategy: str, pg=None) -> dict:
    cfg = Config().with_updates({"async_pipeline.placement_strategy": strategy})
    fake = types.SimpleNamespace(cfg=cfg, _pg=pg)
    return RayBackend._options(fake, 1, 0.5, 0.0)


def test_outside_tune_spread_spreads_the_actors():
    assert _options("SPREAD")["scheduling_strategy"] == "SPREAD"
    assert _options("STRICT_SPREAD")["scheduling_strategy"] == "SPREAD"
    assert "scheduling_strategy" not in _options("PACK")


def test_inside_a_trial_actors_go_to_their_bundle_whatever_the_strategy():
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    opts = _options("SPREAD", pg=object())
    assert isinstance(opts["scheduling_strategy"], PlacementGroupSchedulingStrategy)
    assert opts["scheduling_strategy"].placement_group_bundle_index == 1


def test_strict_spread_needs_a_node_per_bundle():
    space = ASYNC | {"async_pipeline.placement_strategy": "STRICT_SPREAD"}  # 4 bundles of 1 CPU
    with pytest.raises(ConfigError, match="STRICT_SPREAD.*4 bundles.*2 node"):
        check_cluster_resources(space, TWO_NODES)
    check_cluster_resources(space, [{"CPU": 1.0}] * 4)
    check_cluster_resources(space | {"async_pipeline.placement_strategy": "SPREAD"}, TWO_NODES)  # soft: fine


def test_strict_spread_matches_bundles_to_the_nodes_that_can_hold_them():
    space = {
        "async_pipeline.enabled": True,
        "async_pipeline.num_collector_actors": 1,
        "async_pipeline.collector_num_gpus": 1.0,
        "async_pipeline.placement_strategy": "STRICT_SPREAD",
    }
    # driver {CPU 1}, collector {CPU 1, GPU 1}, evaluator {CPU 1}: only node 0 has a GPU
    nodes = [{"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}]
    check_cluster_resources(space, nodes)
    # two GPU collectors, both GPUs on one node: the totals fit, one node each does not
    two = space | {"async_pipeline.num_collector_actors": 2}
    with pytest.raises(ConfigError, match="STRICT_SPREAD"):
        check_cluster_resources(two, [{"CPU": 1.0, "GPU": 2.0}, {"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}])
    check_cluster_resources(two, [{"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}])


def test_strict_pack_needs_one_node_for_the_whole_trial():
    space = ASYNC | {"async_pipeline.placement_strategy": "STRICT_PACK"}
    with pytest.raises(ConfigError, match="STRICT_PACK.*CPU: 4"):
        check_cluster_resources(space, TWO_NODES)
    check_cluster_resources(space, [{"CPU": 4.0}, {"CPU": 1.0}])
    check_cluster_resources(space | {"async_pipeline.placement_strategy": "PACK"}, TWO_NODES)


def test_bundles_that_fit_the_total_but_not_the_nodes_are_refused():
    # 3 bundles of 0.6 CPU: 1.8 <= 2 CPUs in all, but a 1-CPU node holds only one of them
    space = {
        "async_pipeline.enabled": True,
        "async_pipeline.num_collector_actors": 1,
        "driver_num_cpus": 0.6,
        "async_pipeline.collector_num_cpus": 0.6,
        "async_pipeline.evaluator_num_cpus": 0.6,
    }
    with pytest.raises(ConfigError, match="cannot be split over its nodes"):
        check_cluster_resources(space, [{"CPU": 1.0}, {"CPU": 1.0}])
    check_cluster_resources(space, [{"CPU": 1.2}, {"CPU": 1.0}])


def test_packing_search():
    assert _packs([{"CPU": 0.5}] * 4, [{"CPU": 1.0}, {"CPU": 1.0}])
    assert not _packs([{"CPU": 0.6}] * 3, [{"CPU": 1.0}, {"CPU": 1.0}])
    assert _packs([{"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0}], [{"CPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}])
    assert not _packs([{"CPU": 1.0, "GPU": 1.0}] * 2, [{"CPU": 2.0, "GPU": 1.0}, {"CPU": 2.0}])
    # many equal nodes: answered at once (nodes with the same free resources are tried once)
    assert not _packs([{"CPU": 0.7}] * 30, [{"CPU": 1.0}] * 29)


def test_a_gpu_learner_gets_a_gpu_in_the_driver_bundle():
    cfg = Config().with_updates({"learner.device": "cuda"})
    assert trial_bundles(cfg, {"driver_num_gpus": 1})[0] == {"CPU": 1.0, "GPU": 1.0}
    assert trial_bundles(cfg, {"driver_num_gpus": 0.5, "driver_num_cpus": 2})[0] == {"CPU": 2.0, "GPU": 0.5}


def test_learner_device_and_driver_gpus_are_cross_checked():
    with pytest.raises(ConfigError, match="learner.device / driver_num_gpus: learner.device=cuda.*driver_num_gpus=0"):
        placement_group_factory({"learner.device": "cuda"})
    with pytest.raises(ConfigError, match="driver_num_gpus / learner.device.*learner.device=cpu"):
        placement_group_factory({"driver_num_gpus": 1})
    with pytest.raises(ConfigError, match="learner.device"):
        check_cluster_resources({"learner.device": "cuda:0"}, {"CPU": 2.0, "GPU": 1.0})
    check_cluster_resources({"learner.device": "cuda:0", "driver_num_gpus": 1}, {"CPU": 2.0, "GPU": 1.0})
