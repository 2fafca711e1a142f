"""Async pipeline on Ray: overlap, lag bound, one ObjectRef per version, budget-locked replay,
cold start, backpressure, no lost env step, exact evaluated checkpoints, missing Ray."""

import os
import sys

import pytest
import torch

from lz_tune.checkpoint import load_checkpoint
from lz_tune.config import load_config_module
from lz_tune.pipeline import Driver

ray = pytest.importorskip("ray")

TINY = [
    "env.collector_env_num=2", "env.evaluator_env_num=2", "evaluator.n_evaluator_episode=2",
    "env.max_episode_steps=40", "mcts.num_simulations=4", "learner.batch_size=16",
    "buffer.game_segment_length=10", "buffer.num_unroll_steps=3", "buffer.td_steps=3",
    "model.latent_dim=16", "model.hidden_sizes=(16,)", "model.value_support_size=10",
    "model.reward_support_size=5", "model.projection_dim=16", "learner.num_threads=1",
    "async_pipeline.enabled=True", "async_pipeline.collector_num_cpus=0.5",
    "async_pipeline.evaluator_num_cpus=0.5",
]


class Recorder:
    """Wraps a driver to record what happened, without changing behaviour."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.collects = []
        self.launch_versions = []
        self.eval_weights = {}
        self.overlapped_updates = 0
        self.max_queue_when_trainable = 0
        self.updates_before_cold_start_end = 0
        backend = driver.backend
        orig_launch, orig_eval = backend.launch_collect, backend.launch_eval
        orig_on_collect, orig_train_one = driver._on_collect, driver._train_one

        self.max_collects_in_flight = 0

        def launch_collect(worker_id, snapshot, temperature, **kwargs):
            self.launch_versions.append(snapshot.version)
            out = orig_launch(worker_id, snapshot, temperature, **kwargs)
            self.max_collects_in_flight = max(self.max_collects_in_flight, backend.collects_in_flight)
            return out

        def launch_eval(snapshot):
            self.eval_weights[snapshot.version] = {k: v.clone() for k, v in snapshot.weights.items()}
            return orig_eval(snapshot)

        def on_collect(result):
            self.collects.append(result)
            orig_on_collect(result)
            if driver.trainable:
                self.max_queue_when_trainable = max(self.max_queue_when_trainable, len(driver.budgets))

        def train_one(**kwargs):
            if backend.collects_in_flight > 0:
                self.overlapped_updates += 1
            if driver.counters.env_steps < driver.cfg.learner.train_start_after_envsteps:
                self.updates_before_cold_start_end += 1
            orig_train_one(**kwargs)

        backend.launch_collect, backend.launch_eval = launch_collect, launch_eval
        driver._on_collect, driver._train_one = on_collect, train_one


def run_async(tmp_path, extra):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(TINY + extra)
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    rec = Recorder(driver)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    return driver, rec, metrics


def test_async_pipeline_invariants(ray_cluster, tmp_path):
    driver, rec, m = run_async(tmp_path, [
        "async_pipeline.num_collector_actors=2", "async_pipeline.max_policy_lag=3",
        "async_pipeline.weight_sync_interval=2", "learner.update_per_collect=6",
        "learner.train_start_after_envsteps=60", "evaluator.eval_freq=15", "max_env_step=600",
    ])
    # actors ran and overlapped with learning
    assert m["env_steps"] >= 600 and m["train_iter"] > 0
    assert rec.overlapped_updates > 0
    # lag at launch never above max_policy_lag
    assert max(driver._launch_lags) <= 3 and driver.max_launch_lag <= 3
    assert m["policy_lag_launch_max"] == driver.max_launch_lag
    # one ObjectRef per published version
    assert driver.backend.snapshot_puts == len(set(rec.launch_versions) | set(rec.eval_weights))
    # budget-locked replay ratio: updates == sum of budgets consumed; budgets only once trainable
    assert driver.train_iter == driver.budgets.total_consumed
    assert driver.budgets.total_enqueued == 6 * driver.counters.budgets_enqueued
    assert driver.budgets.total_enqueued - driver.budgets.remaining == driver.train_iter
    # cold start
    assert rec.updates_before_cold_start_end == 0
    assert driver.counters.cold_start_collects > 0
    # backpressure caps the budget queue (2 * num_collector_actors) once trainable
    assert rec.max_queue_when_trainable <= 4
    # every env step of every collector: in the buffer exactly once or still in progress
    steps = sum(r.env_steps for r in rec.collects)
    pushed = sum(r.num_transitions for r in rec.collects)
    last_in_progress = {}
    for r in rec.collects:
        last_in_progress[r.worker_id] = r.steps_in_progress
    assert steps == pushed + sum(last_in_progress.values())
    assert driver.buffer.num_transitions == pushed  # capacity not reached: nothing evicted
    driver.buffer.check_invariants()


def test_second_collect_queued_on_one_actor(ray_cluster, tmp_path):
    """max_collect_inflight=2 with one actor: the second collect waits in the actor's mailbox and
    runs right after the first, in launch order; every invariant of the one-in-flight case holds."""
    driver, rec, m = run_async(tmp_path, [
        "async_pipeline.num_collector_actors=1", "async_pipeline.max_collect_inflight=2",
        "async_pipeline.max_train_budget_queue_size=4", "learner.update_per_collect=4",
        "learner.train_start_after_envsteps=60", "evaluator.eval_freq=1000", "max_env_step=500",
    ])
    assert driver.backend.collect_queue_depth == 2
    assert rec.max_collects_in_flight == 2  # the queue was used, never more
    assert m["env_steps"] >= 500 and m["train_iter"] > 0 and rec.overlapped_updates > 0
    # one actor runs its calls in order: results come back in launch order
    assert [r.policy_train_iter for r in rec.collects] == rec.launch_versions[:len(rec.collects)]
    assert driver.max_launch_lag <= 0
    assert driver.train_iter == driver.budgets.total_consumed
    assert driver.budgets.total_enqueued - driver.budgets.remaining == driver.train_iter
    assert rec.max_queue_when_trainable <= 4
    steps = sum(r.env_steps for r in rec.collects)
    pushed = sum(r.num_transitions for r in rec.collects)
    assert steps == pushed + rec.collects[-1].steps_in_progress
    assert driver.buffer.num_transitions == pushed
    driver.buffer.check_invariants()


def test_evaluated_checkpoint_holds_the_evaluated_weights(ray_cluster, tmp_path):
    driver, rec, m = run_async(tmp_path, [
        "learner.update_per_collect=4", "evaluator.eval_freq=8", "max_env_step=400",
    ])
    assert m["evaluations"] >= 1
    ckpt = load_checkpoint(os.path.join(tmp_path, "ckpt", "ckpt_latest.pt"), policy_type="muzero")
    version = ckpt["eval"]["version"]
    assert version in rec.eval_weights
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]
    for k, v in rec.eval_weights[version].items():
        assert torch.equal(ckpt["learner"]["network"][k], v), k
    assert driver.last_eval is not None


def test_missing_ray_gives_a_clear_error(monkeypatch):
    from lz_tune.pipeline import ray_backend

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match="needs Ray"):
        ray_backend.import_ray()


def test_ray_local_mode_runs_the_actor_code_in_process(tmp_path):
    """ray_local_mode: the Ray actor classes themselves, in-process and sequential, snapshots through
    the pickling stand-in of the object store (tests/test_local_mode.py: in detail, and without Ray)."""
    from lz_tune.pipeline.ray_backend import CollectorWorker, EvaluatorWorker, LocalActorBackend

    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(TINY + [
        "async_pipeline.ray_local_mode=True", "async_pipeline.num_collector_actors=2",
        "learner.update_per_collect=3", "evaluator.eval_freq=6", "max_env_step=150"])
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    backend = driver.backend
    try:
        assert isinstance(backend, LocalActorBackend) and not backend.concurrent
        assert len(backend.collectors) == 2 and all(type(c) is CollectorWorker for c in backend.collectors)
        assert [type(e) for e in backend.evaluators] == [EvaluatorWorker]
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 150 and m["train_iter"] > 0 and m["evaluations"] >= 1
    # both collectors were used, with distinct seeds
    collectors = [c.collector for c in backend.collectors]
    assert all(c.total_env_steps > 0 for c in collectors)
    assert collectors[0].seed != collectors[1].seed
    # weights went through the store, one put per published version, and newer ones reached the collectors
    assert backend.snapshot_puts >= 2 and all(c.policy_version > 0 for c in collectors)


def test_snapshot_travels_as_numpy_and_comes_back_exact(ray_cluster):
    from lz_tune.pipeline.ray_backend import _snapshot_from_store, _snapshot_to_store
    from lz_tune.workers import WeightSnapshot

    weights = {"a": torch.randn(3, 4), "b": torch.arange(5), "c": torch.randn(2).to(torch.bfloat16)}
    stored = ray.get(ray.put(_snapshot_to_store(WeightSnapshot(version=7, train_iter=3, weights=weights))))
    assert not isinstance(stored.weights["a"], torch.Tensor)  # numpy on the wire
    back = _snapshot_from_store(stored)
    assert (back.version, back.train_iter) == (7, 3)
    for k, v in weights.items():
        assert back.weights[k].dtype == v.dtype and torch.equal(back.weights[k], v), k
    net = torch.nn.Linear(4, 3)
    net.load_state_dict({"weight": back.weights["a"], "bias": torch.zeros(3)})  # read-only buffers are only read
    assert torch.equal(net.weight.detach(), weights["a"])
