"""Trials on a multi-node Ray cluster, simulated on one machine (``ray.cluster_utils.Cluster``: a
head node without CPUs, for the test process alone, and worker nodes with distinct custom
resources ``node_a`` / ``node_b``):

- with ``async_pipeline.placement_strategy=SPREAD`` a trial's collector runs on another node
  than its driver (the actors' own Ray node ids, from the trial's ``lz_tune/placement.json``);
- a search of two trials through the CLI (``tune --address``), each needing a whole node, runs
  one trial per node;
- the node a trial runs on is removed mid-trial: Tune restores the trial from its last
  checkpoint on the other node, the trial finishes, its env-step counter continues from the
  checkpoint's (what the lost node collected after the checkpoint is not counted), and Tune's
  ``timesteps_total`` agrees with the counter.

Each cluster takes ~20 s to start on the 2-core box and each trial process ~8 s to import, so
the module is slow-marked (``python -m pytest -m slow tests/test_multinode.py``, ~3 min).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from lz_tune.metrics import EVAL_RETURN  # noqa: E402
from lz_tune.tune import MuZeroTrainable  # noqa: E402
from lz_tune.tune.trainable import PLACEMENT_FILE  # noqa: E402
from tests.conftest import REPO_ROOT, TINY_OVERRIDES  # noqa: E402
from tests.test_tune import BASE  # noqa: E402

pytestmark = pytest.mark.slow

ASYNC = {
    "async_pipeline.enabled": True,
    "async_pipeline.num_collector_actors": 1,
    "driver_num_cpus": 0.5,
    "async_pipeline.collector_num_cpus": 0.5,
    "async_pipeline.evaluator_num_cpus": 0.5,
}


def _start_cluster(*nodes: dict) -> tuple[Cluster, dict[str, str]]:
    """A head without CPUs plus ``nodes`` (ray.cluster_utils.Cluster.add_node kwargs); returns the
    cluster and {custom resource name: node id}."""
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for node in nodes:
        cluster.add_node(**node)
    ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster, _node_names()


def _node_names() -> dict[str, str]:
    """{custom resource name (node_a, ...): Ray node id} of the alive nodes."""
    names = {}
    for node in ray.nodes():
        if node.get("Alive"):
            for r in node["Resources"]:
                if r.startswith("node_") and not r.startswith("node:"):
                    names[r] = node["NodeID"]
    return names


def _stop(cluster: Cluster) -> None:
    ray.shutdown()
    cluster.shutdown()


def _placement(trial_path: str) -> dict:
    with open(os.path.join(trial_path, "lz_tune", PLACEMENT_FILE)) as f:
        return json.load(f)


def _rows(trial_path: str) -> list[dict]:
    path = os.path.join(trial_path, "result.json")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _watch_trial(experiment_dir: str, ready, act) -> threading.Thread:
    """A thread that polls the (single) trial folder under ``experiment_dir`` until
    ``ready(trial_path)`` holds, then calls ``act(trial_path)`` once (both in the thread)."""

    def watch():
        deadline = time.time() + 240
        while time.time() < deadline:
            paths = glob.glob(os.path.join(experiment_dir, "MuZeroTrainable_*"))
            if paths and os.path.isfile(os.path.join(paths[0], "lz_tune", PLACEMENT_FILE)) and ready(paths[0]):
                act(paths[0])
                return
            time.sleep(0.5)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _tune(space: dict, storage: str, name: str, *, stop: dict, num_samples: int = 1, max_failures: int = 0):
    tuner = tune.Tuner(
        MuZeroTrainable,
        param_space=space,
        tune_config=tune.TuneConfig(metric=EVAL_RETURN, mode="max", num_samples=num_samples),
        run_config=tune.RunConfig(
            storage_path=storage,
            name=name,
            stop=stop,
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    )
    return tuner.fit()


@pytest.fixture(scope="module")
def two_nodes():
    cluster, names = _start_cluster(
        {"num_cpus": 2, "resources": {"node_a": 1}}, {"num_cpus": 2, "resources": {"node_b": 1}}
    )
    yield names
    _stop(cluster)


def test_spread_puts_the_collector_on_another_node_than_the_driver(two_nodes, tmp_path):
    results = _tune(
        {**BASE, **ASYNC, "async_pipeline.placement_strategy": "SPREAD"},
        str(tmp_path),
        "spread",
        stop={"training_iteration": 2},
    )
    assert not results.errors, results.errors
    placement = _placement(results[0].path)
    assert placement["placement_strategy"] == "SPREAD"
    nodes = set(two_nodes.values())
    assert placement["driver_node_id"] in nodes and placement["collector_node_ids"][0] in nodes
    assert placement["collector_node_ids"][0] != placement["driver_node_id"], placement
    assert results[0].metrics["num_env_steps_sampled_lifetime"] > 0


def test_a_search_spreads_its_trials_over_the_nodes(two_nodes, tmp_path):
    """Through the CLI, unchanged but for ``--address``: each trial's driver asks for 2 CPUs, a
    whole node, so two trials at once need both nodes."""
    address = ray.get_runtime_context().gcs_address
    overrides = [o for o in TINY_OVERRIDES if not o.startswith("learner.update_per_collect")]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lz_tune",
            "tune",
            "search_spaces/cartpole_muzero.py",
            "--address",
            address,
            "--num-samples",
            "2",
            "--stop-iters",
            "2",
            "--scheduler",
            "fifo",
            "--storage-path",
            str(tmp_path),
            "--name",
            "search",
            "driver_num_cpus=2",
            "step_seconds=1.5",
            "learner.update_per_collect=4",
            "evaluator.eval_freq=8",
            *overrides,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "trials: 2, errors: 0" in proc.stdout
    trials = glob.glob(os.path.join(str(tmp_path), "search", "MuZeroTrainable_*"))
    assert len(trials) == 2
    assert {_placement(t)["driver_node_id"] for t in trials} == set(two_nodes.values())


def test_a_trial_survives_the_loss_of_its_node(tmp_path):
    cluster, names = _start_cluster(
        {"num_cpus": 2, "resources": {"node_a": 1}}, {"num_cpus": 2, "resources": {"node_b": 1}}
    )
    try:
        storage, events = str(tmp_path), {}

        def has_a_checkpoint(path):
            return len(_rows(path)) >= 4 and bool(glob.glob(os.path.join(path, "checkpoint_*", "lz_tune_state.pt")))

        def remove_the_drivers_node(path):
            events["lost"] = _placement(path)["driver_node_id"]
            cluster.remove_node(next(n for n in cluster.worker_nodes if n.node_id == events["lost"]))

        watcher = _watch_trial(os.path.join(storage, "lost_node"), has_a_checkpoint, remove_the_drivers_node)
        space = {**BASE, **ASYNC, "evaluator.eval_freq": 4, "buffer.save_in_checkpoint": True}
        results = _tune(space, storage, "lost_node", stop={"training_iteration": 12}, max_failures=2)
        watcher.join(timeout=5)
        assert events.get("lost"), "the node was never removed"
        assert not results.errors, results.errors
        result = results[0]
        rows = _rows(result.path)
        assert rows[-1]["training_iteration"] == 12
        # the restore: the first row with iterations_since_restore == 1 after the start
        restored = [i for i, r in enumerate(rows) if r["iterations_since_restore"] == 1 and i > 0]
        assert len(restored) == 1, [(r["training_iteration"], r["iterations_since_restore"]) for r in rows]
        first = rows[restored[0]]
        ckpt_iter = first["training_iteration"] - 1
        before = {r["training_iteration"]: r for r in rows[: restored[0]]}
        # the counter continues from the checkpoint's value, not from the lost node's last result
        steps_at_ckpt = before[ckpt_iter]["num_env_steps_sampled_lifetime"]
        assert first["num_env_steps_sampled_lifetime"] - first["timesteps_this_iter"] == steps_at_ckpt
        assert first["train_iter"] >= before[ckpt_iter]["train_iter"]
        after = rows[restored[0] :]
        steps = [r["num_env_steps_sampled_lifetime"] for r in after]
        assert steps == sorted(steps)
        assert rows[-1]["timesteps_total"] == rows[-1]["num_env_steps_sampled_lifetime"]
        # the restored trial ran on the surviving node
        survivor = set(names.values()) - {events["lost"]}
        assert set(_node_names().values()) == survivor
        assert {_placement(result.path)["driver_node_id"]} == survivor
    finally:
        _stop(cluster)


def test_a_trial_survives_the_loss_of_its_collectors_node(tmp_path):
    """SPREAD puts the collector on the other node; that node is removed. The driver keeps
    running: Ray re-places the collector's bundle on the surviving node, the driver restarts the
    actor there (``pipeline/actor_restarts``), no Tune restore, and the collect that died with
    the node is not counted (the counter only ever grows by consumed collects)."""
    cluster, names = _start_cluster(
        {"num_cpus": 2, "resources": {"node_a": 1}}, {"num_cpus": 2, "resources": {"node_b": 1}}
    )
    try:
        storage, events = str(tmp_path), {}

        def remove_the_collectors_node(path):
            p = _placement(path)
            if p["collector_node_ids"][0] == p["driver_node_id"]:
                events["same_node"] = True
                return
            events["lost"], events["rows_before"] = p["collector_node_ids"][0], len(_rows(path))
            cluster.remove_node(next(n for n in cluster.worker_nodes if n.node_id == events["lost"]))

        watcher = _watch_trial(
            os.path.join(storage, "lost_collector"), lambda path: len(_rows(path)) >= 3, remove_the_collectors_node
        )
        space = {**BASE, **ASYNC, "async_pipeline.placement_strategy": "SPREAD", "evaluator.eval_freq": 4}
        results = _tune(space, storage, "lost_collector", stop={"training_iteration": 10}, max_failures=0)
        watcher.join(timeout=5)
        assert not events.get("same_node"), "SPREAD put the collector beside the driver"
        assert events.get("lost"), "the node was never removed"
        assert not results.errors, results.errors
        rows = _rows(results[0].path)
        assert [r["iterations_since_restore"] for r in rows] == list(range(1, 11))  # no Tune restore
        assert rows[-1]["pipeline/actor_restarts"] >= 1
        steps = [r["num_env_steps_sampled_lifetime"] for r in rows]
        assert steps == sorted(steps) and steps[-1] > steps[events["rows_before"] - 1]
        assert sum(r["timesteps_this_iter"] for r in rows) == steps[-1] == rows[-1]["timesteps_total"]
        # the new collector runs on the node that is left, beside the driver
        placement = _placement(results[0].path)
        assert placement["collector_node_ids"][0] == placement["driver_node_id"] != events["lost"]
    finally:
        _stop(cluster)
