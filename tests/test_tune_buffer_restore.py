"""Tune checkpoints keep the replay buffer: a restored sync or async trial has exactly the buffer
of the save and trains before collecting; num_to_keep=1 with incremental chunk files still
restores; a PBT exploit carries the donor's buffer and learner with the exploiting trial's
perturbed hyperparameters and its own counters."""

from __future__ import annotations

import json
import os
import sys

import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402

from lz_tune.buffer.snapshot import SnapshotWriter, read_manifest, state_digest  # noqa: E402
from lz_tune.metrics import EVAL_RETURN  # noqa: E402
from lz_tune.tune import MuZeroTrainable  # noqa: E402
from lz_tune.tune.trial_storage import MANIFEST_FILE  # noqa: E402
from tests.buffer_states import assert_buffer_states_equal  # noqa: E402
from tests.test_tune import BASE  # noqa: E402

ASYNC = {
    "async_pipeline.enabled": True,
    "async_pipeline.collector_num_cpus": 0.25,
    "async_pipeline.evaluator_num_cpus": 0.25,
    "driver_num_cpus": 0.5,
}


def _digest(buffer, chunk_bytes: int) -> str:
    return state_digest(SnapshotWriter(None, chunk_bytes=chunk_bytes).write(buffer.state_dict())[0])


def _rows(trial_dir: str) -> list[dict]:
    with open(os.path.join(trial_dir, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("pipeline", ["sync", pytest.param("async", marks=pytest.mark.slow)])  # async: ~20-35 s
def test_trial_restore_brings_back_the_exact_buffer_and_trains_at_once(ray_cluster, tmp_path, monkeypatch, pipeline):
    """save_checkpoint then load_checkpoint in a new trial process: every buffer array, clock
    and RNG is the saved one, and the first update after the restore comes before any new env
    step (restore/env_steps_before_first_update == 0)."""
    monkeypatch.setattr(sys.modules[tune.Trainable.__module__], "DEFAULT_STORAGE_PATH", str(tmp_path / "logs"))
    config = {**BASE, "step_seconds": 0.5, "max_env_step": 100_000, **(ASYNC if pipeline == "async" else {})}
    t = MuZeroTrainable(config=config)
    try:
        while t.driver.counters.evaluations < 1 or not t.driver.trainable:
            t.train()
        checkpoint = tmp_path / "ckpt"
        checkpoint.mkdir()
        t.save_checkpoint(str(checkpoint))
        expected = t.driver.buffer.state_dict()
        saved_env_steps = t.driver.counters.env_steps
    finally:
        t.stop()
    assert (checkpoint / MANIFEST_FILE).is_file()
    t2 = MuZeroTrainable(config=config)
    try:
        t2.load_checkpoint(str(checkpoint))
        assert_buffer_states_equal(t2.driver.buffer.state_dict(), expected)
        assert t2.driver.counters.env_steps == saved_env_steps
        result = t2.train()
        assert result["restore/buffer_transitions"] == len(expected["tables"]["positions"]["columns"]["priority"])
        assert result["restore/env_steps_before_first_update"] == 0
    finally:
        t2.stop()


@pytest.mark.slow  # ~20-40 s: a 5-iteration tune.run
def test_num_to_keep_1_with_incremental_chunks_still_restores(ray_cluster, tmp_path):
    """Tune keeps one checkpoint folder; the chunks it needs were written by earlier saves
    (whose folders Tune deleted) and are still there; chunks of older folders are gone; a new
    trial process restores the exact buffer the manifest recorded."""
    # 2 KiB chunks: the tiny buffer spans many (at the default 1 MiB it is one chunk per column,
    # rewritten by every save)
    analysis = tune.run(
        MuZeroTrainable,
        config={**BASE, "step_seconds": 1.0, "evaluator.eval_freq": 4, "buffer.checkpoint_chunk_mb": 2 / 1024},
        stop={"training_iteration": 5},
        storage_path=str(tmp_path),
        name="keep1",
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1, checkpoint_at_end=True),
        metric=EVAL_RETURN,
        mode="max",
        verbose=0,
        raise_on_failed_trial=True,
    )
    trial_dir = analysis.trials[0].path
    folders = sorted(d for d in os.listdir(trial_dir) if d.startswith("checkpoint_"))
    assert len(folders) == 1 and int(folders[0].split("_")[1]) >= 2  # earlier ones were saved, then deleted
    manifest = read_manifest(os.path.join(trial_dir, folders[0], MANIFEST_FILE))
    assert manifest["stats"]["chunks_reused"] > 0  # incremental: it refers to chunks of earlier saves
    store = {f.split(".")[0] for f in os.listdir(os.path.join(trial_dir, "lz_tune", "buffer_store"))}
    # garbage collected: what the kept folder uses, plus at most what the folder before it used
    # (still in storage at the last save: Tune deletes it after the new one is persisted)
    assert set(manifest["chunks"]) <= store and len(store) < 2 * len(manifest["chunks"])
    t = MuZeroTrainable(config={**BASE, "max_env_step": 100_000, "buffer.checkpoint_chunk_mb": 2 / 1024})
    try:
        t.load_checkpoint(os.path.join(trial_dir, folders[0]))
        assert t.driver.buffer.num_transitions == manifest["transitions"] > 0
        assert _digest(t.driver.buffer, manifest["chunk_bytes"]) == manifest["digest"]
    finally:
        t.stop()


def _probe_class():
    """A MuZeroTrainable that reports, in the first result after each restore, whose checkpoint
    it loaded, whether the loaded buffer is the one that checkpoint's manifest recorded, and the
    weight decay the optimizer uses. Built here so that Ray pickles it by value."""

    class Probe(MuZeroTrainable):
        def load_checkpoint(self, checkpoint_dir):
            from lz_tune.buffer.snapshot import SnapshotWriter, read_manifest, state_digest
            from lz_tune.checkpoint import load_checkpoint
            from lz_tune.tune.trainable import STATE_FILE
            from lz_tune.tune.trial_storage import MANIFEST_FILE

            super().load_checkpoint(checkpoint_dir)
            manifest = read_manifest(os.path.join(checkpoint_dir, MANIFEST_FILE))
            writer = SnapshotWriter(None, chunk_bytes=manifest["chunk_bytes"])
            digest = state_digest(writer.write(self.driver.buffer.state_dict())[0])
            state = load_checkpoint(os.path.join(checkpoint_dir, STATE_FILE))
            self._probe = {
                "probe/restored_from": manifest["trial_id"],
                "probe/buffer_is_donors": digest == manifest["digest"],
                "probe/donor_env_steps": state["counters"]["env_steps"],
                "probe/env_steps_after_restore": self.driver.counters.env_steps,
                "probe/optimizer_weight_decay": self.driver.learner.optimizer.param_groups[0]["weight_decay"],
            }

        def step(self):
            result = super().step()
            result.update(getattr(self, "_probe", {}))
            self._probe = {}
            return result

    return Probe


@pytest.mark.slow  # ~2 min: two trials, synchronous PBT with three perturbation rounds
def test_pbt_exploit_carries_the_donors_buffer_and_the_new_hyperparameters(ray_cluster, tmp_path):
    def explore(config):  # sentinel values, different from every value the trials start with
        config["learner.learning_rate"] = 0.00123
        config["learner.weight_decay"] = 0.0321
        return config

    pbt = tune.schedulers.PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        quantile_fraction=0.5,
        synch=True,
        hyperparam_mutations={"learner.learning_rate": [1e-3, 3e-3], "learner.weight_decay": [0.0, 1e-4]},
        custom_explore_fn=explore,
    )
    analysis = tune.run(
        _probe_class(),
        config={
            **BASE,
            "step_seconds": 1.0,
            "evaluator.eval_freq": 4,
            "learner.learning_rate": tune.grid_search([1e-3, 3e-3]),
        },
        scheduler=pbt,
        metric=EVAL_RETURN,
        mode="max",
        reuse_actors=True,
        stop={"training_iteration": 7},
        storage_path=str(tmp_path),
        name="pbt",
        verbose=0,
        raise_on_failed_trial=True,
    )
    ids = {t.trial_id for t in analysis.trials}
    exploits = []
    for trial in analysis.trials:
        own = _own_env_steps(trial)
        for row in _rows(trial.path):
            donor = row.get("probe/restored_from")
            if donor in ids and donor != trial.trial_id:
                exploits.append((own, row))
    assert exploits, "no PBT exploit happened"
    for own, first in exploits:  # the exploiting trial's first result after the exploit
        assert first["probe/buffer_is_donors"] and first["restore/buffer_transitions"] > 0
        assert first["config"]["learner.learning_rate"] == 0.00123 == first["learners/muzero/learning_rate"]
        assert first["config"]["learner.weight_decay"] == 0.0321 == first["probe/optimizer_weight_decay"]
        # its own counters go on: env steps from one of its own checkpoints or results (where it
        # was when Tune paused it), not the donor's
        assert first["probe/env_steps_after_restore"] in own
        if first["probe/donor_env_steps"] not in own:
            assert first["probe/env_steps_after_restore"] != first["probe/donor_env_steps"]
        assert first["restore/env_steps_before_first_update"] == 0


def _own_env_steps(trial) -> set[int]:
    """Env-step counts this trial had: in its own checkpoints (state files it wrote) and results.
    (Tune rewrites a trial's result.json when it restarts the trial, so results alone miss some.)"""
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.tune.trainable import STATE_FILE

    steps = {r["num_env_steps_sampled_lifetime"] for r in _rows(trial.path)}
    for folder in os.listdir(trial.path):
        path = os.path.join(trial.path, folder, STATE_FILE)
        if folder.startswith("checkpoint_") and os.path.isfile(path):
            state = load_checkpoint(path)
            if state.get("trial_id") == trial.trial_id:
                steps.add(state["counters"]["env_steps"])
    return steps
