"""ray_local_mode (LocalActorBackend): the Ray actor classes themselves, run in-process, with
snapshots, arguments and results crossing a pickling stand-in for Ray's object store; InProcessBackend's
seeds and worker ids; the learner's torch threads untouched; no Ray needed."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from lz_tune.pipeline import Driver, ray_backend
from lz_tune.pipeline.backends import InProcessBackend
from lz_tune.pipeline.ray_backend import CollectorWorker, EvaluatorWorker, LocalActorBackend

LOCAL = (
    "async_pipeline.enabled=True",
    "async_pipeline.ray_local_mode=True",
    "async_pipeline.num_collector_actors=2",
    "async_pipeline.collector_num_cpus=0.5",
    "async_pipeline.evaluator_num_cpus=0.5",
)


def test_local_mode_runs_the_actor_classes_with_the_in_process_seeds(tiny_cfg):
    cfg = tiny_cfg(*LOCAL)
    local, plain = LocalActorBackend(cfg), InProcessBackend(cfg, num_collectors=2, num_evaluators=1)
    try:
        assert not local.concurrent  # work at launch: the driver loop of the sync pipeline
        assert len(local.collectors) == 2 and all(type(c) is CollectorWorker for c in local.collectors)
        assert len(local.evaluators) == 1 and type(local.evaluators[0]) is EvaluatorWorker
        assert [(c.collector.seed, c.collector.worker_id) for c in local.collectors] == [
            (c.seed, c.worker_id) for c in plain.collectors
        ]
        assert [e.evaluator.seed for e in local.evaluators] == [e.seed for e in plain.evaluators]
        assert local.collectors[0].placement_group_id() is None
    finally:
        local.close()
        plain.close()


def test_snapshot_crosses_the_pickled_store(tiny_cfg, monkeypatch):
    """The collector gets the learner's weights by value through _snapshot_to_store, a pickle round
    trip and _snapshot_from_store: equal, never the learner's tensors or memory; fetched once per
    version; the stored copy is read-only numpy (as ray.get gives) and later learner writes do not
    reach it; collect results come back through the store too."""
    cfg = tiny_cfg(*LOCAL)
    driver = Driver(cfg, print_fn=None, backend=LocalActorBackend(cfg))
    backend = driver.backend
    try:
        worker = backend.collectors[0]
        loaded, returned = [], []
        load, collect = worker.collector.load_snapshot, worker.collector.collect
        monkeypatch.setattr(worker.collector, "load_snapshot", lambda s: (loaded.append(s), load(s))[1])
        monkeypatch.setattr(worker.collector, "collect", lambda **kw: (returned.append(collect(**kw)), returned[-1])[1])

        snapshot = driver.publisher.for_collect(driver.train_iter)
        gets = backend.store.gets
        backend.launch_collect(0, snapshot, 1.0)
        backend.launch_collect(0, snapshot, 1.0)  # same version: the collector keeps what it has
        assert len(loaded) == 1 and backend.snapshot_puts == 1

        seen = loaded[0].weights
        assert (loaded[0].version, loaded[0].train_iter) == (snapshot.version, snapshot.train_iter)
        assert seen.keys() == snapshot.weights.keys()
        learner_weights = driver.learner.policy.weights()
        for k, v in snapshot.weights.items():
            assert isinstance(seen[k], torch.Tensor) and seen[k].dtype == v.dtype and torch.equal(seen[k], v), k
            assert seen[k] is not v and (v.numel() == 0 or seen[k].data_ptr() != v.data_ptr()), k
            assert torch.equal(worker.collector.policy.weights()[k], learner_weights[k]), k

        stored = backend.store.get(backend._snapshot_refs[snapshot.version])
        arrays = [w for w in stored.weights.values() if isinstance(w, np.ndarray)]
        assert len(arrays) == len(stored.weights) and not any(a.flags.writeable for a in arrays)
        with torch.no_grad():
            for v in snapshot.weights.values():
                if v.is_floating_point():
                    v.add_(1.0)  # the published snapshot changes after the put ...
        again = backend.store.get(backend._snapshot_refs[snapshot.version])
        for k, v in seen.items():
            assert torch.equal(torch.from_numpy(np.array(again.weights[k])), v), k  # ... the stored copy does not

        polled = backend.poll(0.0)
        assert len(polled.collects) == len(returned) == 2
        for got, sent in zip(polled.collects, returned):
            assert got is not sent and got.env_steps == sent.env_steps and got.worker_id == sent.worker_id == 0
        assert backend.store.gets > gets
    finally:
        driver.close()


def test_local_mode_leaves_the_learner_threads_and_priority_alone(tiny_cfg, monkeypatch):
    cfg = tiny_cfg(*LOCAL, "async_pipeline.collector_num_cpus=1", "async_pipeline.evaluator_num_cpus=1")
    reniced = []
    monkeypatch.setattr(ray_backend, "take_normal_priority", lambda: reniced.append(True))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)  # the learner's
        LocalActorBackend(cfg).close()
        assert torch.get_num_threads() == 3 and reniced == []
        # what a Ray actor does in its own process (the check above can see a change)
        CollectorWorker(cfg.to_dict(), 0, 0, 1).close()
        assert torch.get_num_threads() == 1 and reniced == [True]
    finally:
        torch.set_num_threads(before)


def test_local_mode_trains_without_ray_installed(tiny_cfg, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ImportError):
        import ray  # noqa: F401
    cfg = tiny_cfg(*LOCAL, "learner.update_per_collect=3", "evaluator.eval_freq=6", "max_env_step=120")
    driver = Driver(cfg, print_fn=None, backend=LocalActorBackend(cfg))
    try:
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 120 and m["train_iter"] > 0 and m["evaluations"] >= 1
    assert all(c.collector.total_env_steps > 0 for c in driver.backend.collectors)
    assert driver.backend.snapshot_puts >= 2  # newer weights were shipped during training
    workers = [*driver.backend.collectors, *driver.backend.evaluators]
    assert [w.placement_group_id() for w in workers] == [None] * len(workers)  # no Ray, no placement group


def test_local_object_store_round_trips_by_value_and_frees_dropped_refs():
    store = ray_backend.LocalObjectStore()
    a = np.arange(6.0)
    ref = store.put({"a": a, "n": 3})
    a[0] = 99.0  # a write after the put does not show (ray.put copies too)
    out = store.get(ref)
    assert out["n"] == 3 and out["a"][0] == 0.0 and not out["a"].flags.writeable
    assert len(store) == 1
    del ref
    assert len(store) == 0  # as Ray frees an object once no ref to it is left
