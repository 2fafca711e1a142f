"""Fault injection. On the async pipeline: collector actors killed repeatedly and the evaluator
once; the run finishes, counters stay monotone, buffer invariants hold, and every env step of
every collect that completed is in the buffer exactly once (failed collects leave nothing). In the
learner: non-finite losses skipped, counted, and a run that only makes them stopped."""

import pytest
import torch

from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver

ray = pytest.importorskip("ray")

from conftest import TINY_OVERRIDES  # noqa: E402
from test_train_muzero_segment_async import TINY  # noqa: E402  (same tiny config)

TINY_SYNC = list(TINY_OVERRIDES)


@pytest.mark.parametrize(
    "actors",
    [
        pytest.param(["async_pipeline.num_collector_actors=2"], marks=pytest.mark.slow),  # ~40 s
        # one actor holding two collects: both fail with it, and it is restarted once, not twice
        [
            "async_pipeline.num_collector_actors=1",
            "async_pipeline.max_collect_inflight=2",
            "async_pipeline.max_train_budget_queue_size=4",
        ],
    ],
    ids=["two-actors", "one-actor-two-queued"],
)
def test_killed_actors_are_restarted_and_nothing_half_written(ray_cluster, actors):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        TINY
        + actors
        + [
            "learner.update_per_collect=4",
            "evaluator.eval_freq=8",
            "max_env_step=700",
            "async_pipeline.max_actor_restarts=20",
        ]
    )
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
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        TINY + ["learner.update_per_collect=2", "max_env_step=100000", "async_pipeline.max_actor_restarts=2"]
    )
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


@pytest.mark.slow  # ~50 s each: a timeout, an actor restart, the run to its end
@pytest.mark.parametrize("kind", ["evaluator", "collector"])
def test_a_hung_actor_is_killed_after_its_timeout_and_the_run_finishes(ray_cluster, kind):
    """async_pipeline.eval_timeout_s / collect_timeout_s: an evaluation (a collect) that never
    comes back is given up after the timeout, its actor killed and restarted (counted); the run
    goes on and finishes with the restarted actor."""
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        TINY
        + [
            "learner.update_per_collect=4",
            "evaluator.eval_freq=8",
            "max_env_step=400",
            "async_pipeline.eval_timeout_s=20",
            "async_pipeline.collect_timeout_s=20",
        ]
    )

    class Hangs:  # (defined here: Ray ships it by value, the workers need not import this module)
        """An evaluator and collector that never answer (a hung env, a deadlock)."""

        def evaluate(self, box):
            import time

            time.sleep(10**6)

        def collect(self, *args):
            import time

            time.sleep(10**6)

        def close(self):
            return None

    messages = []
    driver = Driver(cfg, exp_dir=None, print_fn=messages.append)
    backend = driver.backend
    hung = ray.remote(Hangs).options(num_cpus=0).remote()
    if kind == "evaluator":
        ray.kill(backend.evaluators[0], no_restart=True)
        backend.evaluators[0] = hung
    else:
        ray.kill(backend.collectors[0], no_restart=True)
        backend.collectors[0] = hung
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["actor_restarts"] == 1 and metrics["env_steps"] >= 400
    assert any(("EvalTimeout" if kind == "evaluator" else "CollectTimeout") in m for m in messages), messages
    assert driver.counters.evaluations >= 1


# ---------------------------------------------------------------------------------------------
# Non-finite losses: skipped, counted, and a run that only makes them stops


def _poison_value_loss(learner, when):
    """Make the value loss NaN in the updates ``when(call_number)`` says (1-based)."""
    original = learner.unroll_losses
    calls = {"n": 0}

    def unroll_losses(*args, **kwargs):
        calls["n"] += 1
        terms = original(*args, **kwargs)
        if when(calls["n"]):
            terms = (terms[0], terms[1] * float("nan"), *terms[2:])
        return terms

    learner.unroll_losses = unroll_losses


def test_a_nonfinite_update_is_skipped_counted_and_training_goes_on(tiny_cfg):
    from lz_tune.pipeline import Driver

    driver = Driver(tiny_cfg("max_env_step=300", "buffer.use_priority=True"), print_fn=None)
    learner = driver.learner
    _poison_value_loss(learner, lambda n: n == 3)
    learn, seen = learner.learn, []

    def recording_learn(batch, **kwargs):
        before = {k: v.clone() for k, v in learner.policy.network.state_dict().items()}
        logs, priorities = learn(batch, **kwargs)
        after = learner.policy.network.state_dict()
        seen.append((logs["learner/nonfinite_update"], all(torch.equal(before[k], after[k]) for k in before)))
        return logs, priorities

    learner.learn = recording_learn
    try:
        m = driver.run()
    finally:
        driver.close()
    assert [flag for flag, _ in seen].count(1.0) == 1 and seen[2][0] == 1.0
    assert seen[2][1], "the skipped update changed the weights"
    assert all(not unchanged for flag, unchanged in seen if flag == 0.0)  # the others did step
    assert len(seen) > 3 and m["nonfinite_updates"] == 1 and driver.counters.nonfinite_updates == 1
    assert all(torch.isfinite(v).all() for v in learner.policy.network.state_dict().values() if v.is_floating_point())


def test_nonfinite_updates_in_a_row_stop_the_run_naming_the_term(tiny_cfg):
    from lz_tune.pipeline import Driver
    from lz_tune.pipeline.driver import TrainingDivergedError

    driver = Driver(tiny_cfg("max_env_step=2000", "learner.max_nonfinite_updates_in_a_row=3"), print_fn=None)
    _poison_value_loss(driver.learner, lambda n: n >= 2)
    try:
        with pytest.raises(TrainingDivergedError, match="3 updates in a row.*'value' loss term"):
            driver.run()
        assert driver.train_iter == 4 and driver.counters.nonfinite_updates == 3
    finally:
        driver.close()


# ---------------------------------------------------------------------------------------------
# Disk full at a checkpoint save


def _disk_full_after(monkeypatch, driver_module, bad_evaluations):
    """save_checkpoint raises ENOSPC while the driver records evaluation number n (1-based) in
    ``bad_evaluations``; returns the list of evaluations whose checkpoint was written."""
    import errno

    real = driver_module.save_checkpoint
    state = {"evaluation": 0, "written": []}

    def save_checkpoint(path, payload):
        if state["evaluation"] in bad_evaluations:
            raise OSError(errno.ENOSPC, "No space left on device")
        state["written"].append(payload["eval"]["train_iter"])
        return real(path, payload)

    monkeypatch.setattr(driver_module, "save_checkpoint", save_checkpoint)
    return state


def test_a_full_disk_skips_checkpoints_and_training_goes_on(tiny_cfg, tmp_path, monkeypatch):
    """Evaluations 2 and 3 find the disk full: their checkpoints are skipped with a warning (the
    first stays the latest, and loads), the run goes on, evaluation 4's checkpoint is written and
    the run's manifests are those its checkpoints refer to."""
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.pipeline import driver as driver_module

    state = _disk_full_after(monkeypatch, driver_module, {2, 3})
    messages = []
    driver = Driver(
        tiny_cfg("max_env_step=600", "evaluator.eval_freq=10"), exp_dir=str(tmp_path / "run"), print_fn=messages.append
    )
    on_eval = driver._on_eval

    def counting_on_eval(result):
        state["evaluation"] += 1
        if state["evaluation"] == 3:  # mid-outage: the latest checkpoint is still the first one
            assert load_checkpoint(tmp_path / "run/ckpt/ckpt_latest.pt")["eval"]["train_iter"] == state["written"][0]
        on_eval(result)

    driver._on_eval = counting_on_eval
    try:
        m = driver.run()
    finally:
        driver.close()
    assert state["evaluation"] >= 4 and m["failed_saves"] == 2
    assert sum("not saved (No space left on device)" in msg for msg in messages) == 2
    ckpt = load_checkpoint(tmp_path / "run/ckpt/ckpt_latest.pt")
    assert ckpt["eval"]["train_iter"] == state["written"][-1] > state["written"][0]
    names = {load_checkpoint(tmp_path / "run/ckpt" / f)["buffer_manifest"] for f in ("ckpt_latest.pt", "ckpt_best.pt")}
    assert {p.name for p in (tmp_path / "run/ckpt").glob("replay_buffer.v*.json")} == names


def test_a_disk_that_stays_full_stops_the_run_cleanly(tiny_cfg, tmp_path, monkeypatch, capsys):
    """From the second evaluation on the disk is full: after evaluator.max_failed_saves_in_a_row
    failed saves the CLI stops with exit code 1 and says why; the first checkpoint still resumes."""
    from lz_tune.cli.main import main
    from lz_tune.pipeline import Driver
    from lz_tune.pipeline import driver as driver_module

    state = _disk_full_after(monkeypatch, driver_module, set(range(2, 1000)))
    real_on_eval = Driver._on_eval

    def counting_on_eval(self, result):
        state["evaluation"] += 1
        real_on_eval(self, result)

    monkeypatch.setattr(Driver, "_on_eval", counting_on_eval)
    run = tmp_path / "run"
    code = main(
        [
            "train",
            "zoo/classic_control/cartpole_muzero.py",
            *TINY_SYNC,
            "max_env_step=5000",
            "evaluator.eval_freq=8",
            "evaluator.max_failed_saves_in_a_row=2",
            "--exp-dir",
            str(run),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "disk full: 2 checkpoint saves in a row failed" in err
    assert state["evaluation"] == 3 and len(set(state["written"])) == 1  # (latest and best of the first)
    monkeypatch.undo()
    driver = Driver(tiny_cfg(), exp_dir=str(run), resume_from=str(run / "ckpt" / "ckpt_latest.pt"), print_fn=None)
    try:
        assert driver.train_iter == state["written"][0] and driver.buffer.num_transitions > 0
    finally:
        driver.close()
