"""Fault injection on the async pipeline: collector actors killed repeatedly and the evaluator
once; the run finishes, counters stay monotone, buffer invariants hold, and every env step of
every collect that completed is in the buffer exactly once (failed collects leave nothing)."""


import pytest

from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver

ray = pytest.importorskip("ray")

from test_train_muzero_segment_async import TINY  # noqa: E402  (same tiny config)


@pytest.mark.parametrize("actors", [
    pytest.param(["async_pipeline.num_collector_actors=2"], marks=pytest.mark.slow),  # ~40 s
    # one actor holding two collects: both fail with it, and it is restarted once, not twice
    ["async_pipeline.num_collector_actors=1", "async_pipeline.max_collect_inflight=2",
     "async_pipeline.max_train_budget_queue_size=4"],
], ids=["two-actors", "one-actor-two-queued"])
def test_killed_actors_are_restarted_and_nothing_half_written(ray_cluster, actors):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(TINY + actors + [
        "learner.update_per_collect=4", "evaluator.eval_freq=8",
        "max_env_step=700", "async_pipeline.max_actor_restarts=20"])
    messages = []
    driver = Driver(cfg, exp_dir=None, print_fn=messages.append)
    backend = driver.backend
    completed = []
    state = {"launches": 0, "killed_collectors": 0, "killed_evaluator": False}
    orig_launch, orig_eval, orig_on_collect = backend.launch_collect, backend.launch_eval, driver._on_collect

    def launch_collect(worker_id, snapshot, temperature, **kwargs):
        orig_launch(worker_id, snapshot, temperature, **kwargs)
        state["launches"] += 1
        if state["launches"] % 4 == 0 and state["killed_collectors"] < 4:
            ray.kill(backend.collectors[worker_id], no_restart=True)  # dies with its collect in flight
            state["killed_collectors"] += 1

    def launch_eval(snapshot):
        ok = orig_eval(snapshot)
        if ok and not state["killed_evaluator"]:
            ray.kill(backend.evaluators[0], no_restart=True)
            state["killed_evaluator"] = True
        return ok

    def on_collect(result):
        completed.append(result)
        orig_on_collect(result)

    backend.launch_collect, backend.launch_eval, driver._on_collect = launch_collect, launch_eval, on_collect
    last = (0, 0)
    try:
        while not driver.done:
            driver._iteration()
            now = (driver.counters.env_steps, driver.train_iter)
            assert now[0] >= last[0] and now[1] >= last[1], "counters went backwards"
            last = now
        metrics = driver.metrics()
    finally:
        driver.close()
    assert state["killed_collectors"] == 4 and state["killed_evaluator"]
    assert metrics["actor_restarts"] == 5  # one restart per killed actor
    assert metrics["env_steps"] >= 700
    assert any("failed" in m for m in messages)
    # only completed collects count, and each of their steps is in the buffer exactly once
    assert driver.counters.env_steps == sum(r.env_steps for r in completed)
    assert driver.buffer.num_transitions == sum(r.num_transitions for r in completed)
    driver.buffer.check_invariants()
    assert driver.counters.evaluations >= 1  # evaluations went on with the restarted evaluator


def test_crash_loop_becomes_a_clear_error(ray_cluster):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(TINY + [
        "learner.update_per_collect=2", "max_env_step=100000", "async_pipeline.max_actor_restarts=2"])
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    backend = driver.backend
    orig_launch = backend.launch_collect

    def launch_collect(worker_id, snapshot, temperature, **kwargs):
        orig_launch(worker_id, snapshot, temperature, **kwargs)
        ray.kill(backend.collectors[worker_id], no_restart=True)

    backend.launch_collect = launch_collect
    try:
        with pytest.raises(RuntimeError, match="max_actor_restarts=2"):
            for _ in range(10_000):
                driver._iteration()
    finally:
        driver.close()
