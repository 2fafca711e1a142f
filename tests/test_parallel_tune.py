"""The data-parallel learner (``learner.num_workers=2``) under Ray Tune, through the CLI and for
every policy type.

Default run: a Tune trial with two learner workers reserves their bundles in its own placement
group (asserted from placement.json), saves, and its checkpoint restores into one worker and into
two with the same next update. Slow (``-m slow``): every registered type runs updates with two
workers; a learner worker killed mid-trial fails the trial with a message naming it and
FailureConfig restores it; CartPole solves through the CLI with two workers, sync and async;
on a three-node ``ray.cluster_utils`` cluster the two learner workers run on different nodes.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402

from lz_tune.metrics import EVAL_RETURN  # noqa: E402
from lz_tune.policy_registry import POLICY_TYPES  # noqa: E402
from lz_tune.tune import MuZeroTrainable, placement_group_factory  # noqa: E402
from lz_tune.tune.trainable import PLACEMENT_FILE, STATE_FILE  # noqa: E402
from tests.conftest import CARTPOLE_ZOO, run_cli  # noqa: E402
from tests.test_tune import BASE  # noqa: E402

PARALLEL = {
    **BASE,
    "learner.num_workers": 2,
    "learner.worker_num_cpus": 0.25,
    "driver_num_cpus": 0.5,
    "step_seconds": 1.0,
}


def _placement(trial_path: str) -> dict:
    with open(os.path.join(trial_path, "lz_tune", PLACEMENT_FILE)) as f:
        return json.load(f)


def test_bundles_include_one_per_learner_worker():
    pgf = placement_group_factory({**PARALLEL, "learner.worker_num_cpus": 0.5})
    assert pgf.bundles == [{"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 0.5}]
    pgf = placement_group_factory(
        {
            **PARALLEL,
            "async_pipeline.enabled": True,
            "async_pipeline.collector_num_cpus": 0.25,
            "async_pipeline.evaluator_num_cpus": 0.25,
        }
    )
    assert pgf.bundles == [{"CPU": 0.5}, {"CPU": 0.25}, {"CPU": 0.25}, {"CPU": 0.25}, {"CPU": 0.25}]


def _same_next_update(state_path: str, trial_config: dict) -> None:
    """The trial's saved state restored into 1 and into 2 learner workers: same train_iter, and the
    same next update (priorities and loss) on one batch."""
    from lz_tune.pipeline.driver import Driver
    from lz_tune.tune import config_from_tune

    cfg = config_from_tune(trial_config)
    one = Driver(cfg.with_overrides(["learner.num_workers=1"]), resume_from=state_path, print_fn=None)
    # synchronised BatchNorm: the SSL projector's statistics over the whole batch, as in one process
    two = Driver(cfg.with_overrides(["learner.sync_batchnorm=True"]), resume_from=state_path, print_fn=None)
    try:
        assert one.train_iter == two.train_iter > 0
        # fresh data from one collect, the same batch for both
        collect = one.backend
        collect.launch_collect(0, one.publisher.for_collect(one.train_iter), 1.0, epsilon=0.0)
        for r in collect.poll(1.0).collects:
            one.buffer.push(r.segments, r.priorities)
        index = one.buffer.sample(cfg.learner.batch_size)
        batch = one.learner.make_batch(one.buffer, index, rng=np.random.default_rng(0))
        logs_1, prio_1 = one.learner.learn(batch, train_iter=one.train_iter)
        logs_2, prio_2 = two.learner.learn(batch, train_iter=two.train_iter)
        np.testing.assert_allclose(prio_2, prio_1, rtol=1e-4, atol=1e-5)
        assert logs_2["loss/total"] == pytest.approx(logs_1["loss/total"], rel=1e-4)
        assert one.train_iter == two.train_iter
    finally:
        one.close()
        two.close()


def test_trial_with_two_learner_workers_reserves_their_bundles_and_restores_into_one_and_two(ray_cluster, tmp_path):
    results = tune.Tuner(
        MuZeroTrainable,
        param_space=PARALLEL,
        tune_config=tune.TuneConfig(metric=EVAL_RETURN, mode="max"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="parallel",
            verbose=0,
            stop={"training_iteration": 2},
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    ).fit()
    assert not results.errors, results.errors
    result = results[0]
    placement = _placement(result.path)
    pg = placement["placement_group_id"]
    assert pg and placement["learner_placement_group_ids"] == [pg, pg]  # both in the trial's own group
    assert len(set(placement["learner_pids"])) == 2 and os.getpid() not in placement["learner_pids"]
    assert result.metrics["train_iter"] > 0
    assert result.metrics["learners/muzero/timing_worker_update_s"] > 0  # the update ran on the workers
    _same_next_update(os.path.join(result.checkpoint.path, STATE_FILE), result.config)


# ------------------------------------------------------------------------------------------ slow

TYPE_OVERRIDES = ("efficientzero.lstm_hidden_size=8", "efficientzero.lstm_horizon_len=2", "sampled.num_samples=2")


@pytest.mark.slow
@pytest.mark.parametrize("policy_type", sorted(POLICY_TYPES))
def test_every_type_trains_with_two_learner_workers(ray_cluster, tiny_cfg, policy_type):
    from lz_tune.pipeline.driver import Driver

    cfg = tiny_cfg(
        f"policy_type={policy_type}",
        *TYPE_OVERRIDES,
        *(("env.env_id=openspiel:tic_tac_toe",) if policy_type == "alphazero" else ()),  # true rules: board games
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
        "max_train_iter=6",
        "learner.target_update_freq=2",
    )
    driver = Driver(cfg, print_fn=None)
    try:
        driver.run()
        assert driver.train_iter >= 6
        logs = driver.last_learner_logs
        assert logs["timing/worker_update_s"] > 0 and np.isfinite(logs["loss/total"])
        # rank 0's weights are what collectors get, and they moved
        state = driver.learner.state_dict()
        assert state["train_iter"] == driver.train_iter
    finally:
        driver.close()


@pytest.mark.slow
def test_killed_learner_worker_fails_the_trial_naming_it_and_failureconfig_restores_it(ray_cluster, tmp_path):
    killed = tmp_path / "killed"

    def watch():
        deadline = time.time() + 200
        while time.time() < deadline and not killed.exists():
            for path in glob.glob(str(tmp_path / "kill" / "MuZeroTrainable_*")):
                place = os.path.join(path, "lz_tune", PLACEMENT_FILE)
                if os.path.isfile(place) and glob.glob(os.path.join(path, "checkpoint_*")):
                    with open(place) as f:
                        pid = json.load(f)["learner_pids"][1]
                    killed.write_text(str(pid))
                    os.kill(pid, signal.SIGKILL)
                    return
            time.sleep(0.3)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    results = tune.Tuner(
        MuZeroTrainable,
        param_space=PARALLEL,
        tune_config=tune.TuneConfig(metric=EVAL_RETURN, mode="max"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="kill",
            verbose=0,
            stop={"training_iteration": 8},
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()
    thread.join(timeout=1)
    assert killed.exists(), "no learner worker was killed"
    assert not results.errors, results.errors
    result = results[0]
    assert result.metrics["training_iteration"] == 8
    with open(os.path.join(result.path, "error.txt")) as f:
        error = f.read()
    assert "learner worker 1" in error and killed.read_text() in error
    placement = _placement(result.path)
    assert int(killed.read_text()) not in placement["learner_pids"]  # new workers after the restore


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["sync", "async"])
def test_cartpole_solves_with_two_learner_workers_through_the_cli(capsys, tmp_path, pipeline):
    # as a user runs it: the CLI starts a Ray sized for the run (the async run's actors ask for
    # 2.5 CPUs, more than the 2-CPU cluster the other tests share; the ray_cluster fixture starts
    # that again for the tests after this one)
    if ray.is_initialized():
        ray.shutdown()
    extra = ["--async-pipeline", "async_pipeline.collector_num_cpus=0.5"] if pipeline == "async" else []
    code, out, err = run_cli(
        capsys,
        "train",
        CARTPOLE_ZOO,
        "--exp-dir",
        str(tmp_path / "run"),
        *extra,
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
        "evaluator.stop_value=195",
    )
    assert code == 0, out + err
    rows = [json.loads(line) for line in open(tmp_path / "run" / "result.json")]
    assert max(r[EVAL_RETURN] for r in rows) >= 195, rows[-1]


@pytest.mark.slow
def test_learner_workers_on_different_nodes(tmp_path):
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(3):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
    cluster.wait_for_nodes()
    try:
        results = tune.Tuner(
            MuZeroTrainable,
            param_space={
                **PARALLEL,
                "learner.worker_num_cpus": 1,
                "driver_num_cpus": 1,
                "async_pipeline.placement_strategy": "STRICT_SPREAD",
            },
            tune_config=tune.TuneConfig(metric=EVAL_RETURN, mode="max"),
            run_config=tune.RunConfig(
                storage_path=str(tmp_path), name="nodes", verbose=0, stop={"training_iteration": 2}
            ),
        ).fit()
        assert not results.errors, results.errors
        placement = _placement(results[0].path)
        nodes = placement["learner_node_ids"]
        assert len(set(nodes)) == 2 and placement["driver_node_id"] not in nodes
        assert results[0].metrics["train_iter"] > 0
    finally:
        ray.shutdown()
        cluster.shutdown()
