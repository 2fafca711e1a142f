"""MuZeroTrainable: the driver loop as a Ray Tune class Trainable.

Tune config (a flat dict, what search spaces sample):

- ``"config"``: zoo config module path or dotted name (default: the CartPole zoo config);
- any dotted config key, e.g. ``"learner.learning_rate": tune.loguniform(1e-4, 1e-2)``;
- ``"step_seconds"``: wall-clock slice of the driver loop per Tune iteration (default 10);
- ``"driver_num_cpus"`` / ``"driver_num_gpus"``: resources of bundle 0 (the learner; default 1 / 0).

Resources: bundle 0 for the driver, then one bundle per collector actor and one per evaluator
actor when the async pipeline is enabled (``async_pipeline.*_num_cpus``/``_num_gpus``); the
Ray back-end pins actor i to bundle i + 1 of the trial's placement group.

Every result carries ``evaluation/env_runners/episode_return_mean`` (:data:`lz_tune.metrics.EVAL_RETURN`) of a real
evaluation (the latest one, carried forward; the first result waits for the trial's first
evaluation), so ``metric=EVAL_RETURN`` passes
Tune's strict metric check and schedulers never see a NaN; ``should_checkpoint=True`` right after
an evaluation.

Checkpoints: every Tune checkpoint folder holds

- ``lz_tune_state.pt`` (:data:`STATE_FILE`): the learner as it is at the save (weights, optimizer,
  ``train_iter``, counters, RNG, queued train budgets, the id of the trial that wrote it).
  Tune restores from it (trial restore after a crash, scheduler pause/resume, PBT exploit), so
  a restore loses no update;
- ``lz_tune_buffer.json`` (:data:`~lz_tune.tune.trial_storage.MANIFEST_FILE`): the replay buffer of
  the same moment, as a manifest of chunks in the trial's ``lz_tune/buffer_store/``
  (incremental, see :mod:`lz_tune.tune.trial_storage`; absent when ``buffer.save_in_checkpoint``
  is off or the buffer is above ``buffer.checkpoint_max_gb``);
- ``lz_tune_checkpoint.pt`` (:data:`CHECKPOINT_FILE`): the latest EVALUATED snapshot, exactly the
  weights that earned the result's :data:`lz_tune.metrics.EVAL_RETURN` (absent before the first evaluation).
  This is what "best checkpoint" means (:mod:`lz_tune.analysis`, ``evaluate_checkpoint``).

``checkpoint_kind`` in the state file (and :func:`checkpoint_kind` of a folder) tells the two
kinds of save apart: ``"evaluated"`` for the save right after a new evaluation, ``"current"``
for a save Tune asked for otherwise (pause, PBT, ``checkpoint_at_end``, ``checkpoint_frequency``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Optional

from ray import tune

from lz_tune.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from lz_tune.metrics import EVAL_FIELDS, public_metrics
from lz_tune.tune.resources import check_cluster_resources, trial_bundles
from lz_tune.tune.trial_storage import MANIFEST_FILE, TrialStorage
from lz_tune.tune.tune_config import config_from_tune

if TYPE_CHECKING:
    from lz_tune.pipeline import Driver

#: the latest evaluated snapshot inside a Tune checkpoint folder (the weights the metric belongs to)
CHECKPOINT_FILE = "lz_tune_checkpoint.pt"
#: the learner's state at the save inside a Tune checkpoint folder (what a restore loads)
STATE_FILE = "lz_tune_state.pt"
#: where a trial's workers run, in its lz_tune/ folder (JSON: placement strategy, placement group
#: ids, Ray node ids of the driver and of each actor)
PLACEMENT_FILE = "placement.json"
#: result key: trial seconds (setup and earlier restored runs included) at the evaluation that
#: reached ``evaluator.stop_value``; NaN before. A time-to-solve search minimises it.
TIME_TO_STOP_VALUE = "time_to_stop_value_s"
logger = logging.getLogger(__name__)


def placement_group_factory(tune_config: dict[str, Any]) -> tune.PlacementGroupFactory:
    """Bundle 0: driver/learner; then one bundle per collector actor and per evaluator actor, laid
    out by ``async_pipeline.placement_strategy``."""
    cfg = config_from_tune(tune_config)
    return tune.PlacementGroupFactory(trial_bundles(cfg, tune_config), strategy=cfg.async_pipeline.placement_strategy)


#: config keys a running driver can take without rebuilding networks, buffer or workers
_NOT_LIVE = {
    "learner.optim_type",
    "learner.device",
    "learner.num_threads",
    "learner.momentum",
    "learner.weight_decay",
    "learner.num_workers",
    "learner.worker_num_cpus",
    "learner.worker_num_gpus",
    "learner.sync_batchnorm",
}


def _live(key: str) -> bool:
    return (key.startswith("learner.") and key not in _NOT_LIVE) or key == "evaluator.eval_freq"


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


class MuZeroTrainable(tune.Trainable):
    """One trial = one Driver (learner + buffer) with its own collector / evaluator actors."""

    driver: Optional[Driver]  # None only while one is built (setup, reset_config) or after a refused lease

    def __init__(self, config: dict[str, Any] | None = None, storage: Any = None) -> None:
        # Tune hands the trial's storage to the constructor (its public signature); kept to put the
        # learner's TensorBoard files beside progress.csv (see _output_dir)
        self._lz_storage = storage
        super().__init__(config, storage=storage)  # type: ignore[arg-type]  # Ray's config=None is Optional

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> tune.PlacementGroupFactory:
        check_cluster_resources(config)  # fail fast instead of PENDING forever
        return placement_group_factory(config)

    def setup(self, config: dict[str, Any]) -> None:
        start = time.perf_counter()
        self._reset_trial_clock(start)
        self.driver = None
        self._build(config, backend_from=None)
        self._setup_s = time.perf_counter() - start  # driver_setup_s: envs, networks, buffer, actors

    def _reset_trial_clock(self, start: float) -> None:
        """A new trial in this process: its seconds count from ``start``, unsolved."""
        self._trial_start = start
        self._trial_seconds_before = 0.0  # trial seconds of earlier processes (from a restored state)
        self._time_to_stop_value = math.nan

    def _trial_seconds(self) -> float:
        """Seconds this trial has run, setup included, summed over restores (saved in the state file)."""
        return self._trial_seconds_before + time.perf_counter() - self._trial_start

    def _build(self, config: dict[str, Any], *, backend_from) -> None:
        """A fresh Driver for ``config``; ``backend_from``: a driver whose workers it takes over."""
        from lz_tune.pipeline import Driver

        self.cfg = config_from_tune(config)  # validates step_seconds and the driver resources too
        self.step_seconds = float(config.get("step_seconds", 10.0))
        # Tune's checkpoints replace the driver's own ckpt/ files; TensorBoard goes to storage
        self.driver = Driver(
            self.cfg,
            exp_dir=os.path.join(self._output_dir(), "lz_tune"),
            print_fn=None,
            write_checkpoints=False,
            backend=backend_from.backend if backend_from is not None else None,
        )
        if backend_from is not None:  # versions never collide with what the workers hold
            self.driver.continue_weight_versions(backend_from)
        # the buffer's chunks go to the trial's folder in Tune's storage (cloud storage included)
        assert self.driver.exp_dir is not None  # built with the trial's folder
        self._trial_storage = TrialStorage(self._current_storage(), fallback_dir=self.driver.exp_dir)
        self.driver.buffer_checkpoints = self._trial_storage.checkpointer(self.cfg, log=logger.warning)
        self._take_lease()
        self._evaluations_reported = self.driver.counters.evaluations
        self._env_steps_reported = self.driver.counters.env_steps
        self._setup_trial_id = self.trial_id
        self._bundles = trial_bundles(self.cfg, config)

    def _take_lease(self) -> None:
        """One writer per trial (:mod:`lz_tune.tune.trial_lease`): the lease of this trial's folder in
        storage, kept when this process holds it already (a new driver for the same trial)."""
        assert self.driver is not None, "_build() takes the lease for its new driver"
        folder = self._trial_storage.lease_folder
        lease = getattr(self, "_lease", None)
        if lease is not None and lease.folder == (folder or "").rstrip("/"):
            return
        if lease is not None:  # a reused actor now runs another trial
            lease.release()
            self._lease = None
        if folder:
            from lz_tune.tune.trial_lease import TrialLease

            self._lease = TrialLease(self._trial_storage.filesystem, folder)
            try:
                self._lease.acquire()
            except BaseException:
                self.driver.close()  # refused before this process wrote anything of the trial
                self.driver = None
                raise

    def _output_dir(self) -> str:
        """The trial's folder in Tune's storage when that is a local (or mounted) file system, so
        the TensorBoard files land beside progress.csv; else the trial's working dir (synced to
        cloud storage only with ``SyncConfig(sync_artifacts=True)``)."""
        storage = self._current_storage()
        try:
            import pyarrow.fs

            if storage is not None and isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem):
                return str(storage.trial_fs_path)
        except (ImportError, AttributeError):
            pass
        return self.logdir

    def _current_storage(self) -> Any:
        """This trial's StorageContext: Tune replaces it when it hands this process to another
        trial (``reset``), the constructor's stays for a trainable built by hand."""
        return getattr(self, "_storage", None) or self._lz_storage

    def step(self) -> dict[str, Any]:
        """About ``step_seconds`` of the driver loop; the FIRST result waits for the trial's first
        evaluation, so every result carries a real :data:`lz_tune.metrics.EVAL_RETURN` (a scheduler never sees a
        NaN; ASHA's cut-offs ignore NaN, so unevaluated trials would pass every rung).
        ``async_pipeline.eval_at_start=True`` makes that first result come sooner. Keys: the
        metric table of docs/metrics.md (:mod:`lz_tune.metrics`; the same names as the TensorBoard tags)."""
        assert self.driver is not None, "setup() builds the driver"
        start = time.perf_counter()
        metrics = self.driver.step(max_seconds=self.step_seconds)
        while self.driver.last_eval is None and not self.driver.done:
            metrics = self.driver.step(max_seconds=self.step_seconds)
        result: dict[str, Any] = public_metrics(
            metrics, policy_type=self.cfg.policy_type, learner_logs=self.driver.last_learner_logs
        )
        # the same keys in every result (progress.csv keeps the header of the first row it wrote)
        result.setdefault("env_runners/episode_return_mean", math.nan)
        last = self.driver.last_eval
        if last is not None:
            result.update({name: getattr(last, field) for field, name in EVAL_FIELDS.items()})
            result.update(last.match)  # two-player games: win / draw / loss rates against the bot
            result["evaluation/num_env_steps_sampled_lifetime"] = self.driver.last_eval_env_steps
        env_steps = metrics["env_steps"]
        # env steps since the previous result: Tune sums them into timesteps_total
        result["timesteps_this_iter"] = env_steps - self._env_steps_reported
        self._env_steps_reported = env_steps
        result["perf/driver_step_s"] = time.perf_counter() - start  # inside the driver loop (Tune overhead = rest)
        result["perf/driver_setup_s"] = getattr(self, "_setup_s", 0.0)
        if self.driver.stop.reached_stop_value and math.isnan(self._time_to_stop_value):
            self._time_to_stop_value = self._trial_seconds()  # the solving evaluation ends this step
        result[TIME_TO_STOP_VALUE] = self._time_to_stop_value
        # the save Tune makes for a result with a new evaluation is the "evaluated" kind
        self._evaluated_save_due = self.driver.counters.evaluations > self._evaluations_reported
        if self._evaluated_save_due:
            self._evaluations_reported = self.driver.counters.evaluations
            result["should_checkpoint"] = True
        result["done"] = self.driver.done
        self._write_placement()
        return result

    def _write_placement(self) -> None:
        """Where this trial's workers live: ``lz_tune/placement.json`` in the trial folder (the
        placement strategy, the trial's placement group and each actor's, the Ray node of the
        driver and of each actor), written again after an actor restart."""
        assert self.driver is not None, "setup() builds the driver"
        key = (id(self.driver), self.driver.actor_restarts)  # a restarted actor may move
        if getattr(self, "_placement_written", None) == key:
            return
        import ray

        pg = ray.util.get_current_placement_group()
        try:  # an actor not up yet (restarted, waiting for room on a node): try again next result
            workers = self.driver.worker_placement(timeout=5.0)
            learners = self.driver.learner_placement(timeout=5.0)
        except ray.exceptions.GetTimeoutError:
            return
        info = {
            "placement_group_id": pg.id.hex() if pg is not None else None,
            "actor_placement_group_ids": workers["actor_placement_group_ids"],
            "placement_strategy": self.cfg.async_pipeline.placement_strategy,
            "driver_node_id": ray.get_runtime_context().get_node_id(),
            "collector_node_ids": workers["collector_node_ids"],
            "evaluator_node_ids": workers["evaluator_node_ids"],
            "learner_placement_group_ids": learners["placement_group_ids"],
            "learner_node_ids": learners["node_ids"],
            "learner_pids": learners["pids"],
        }
        assert self.driver.exp_dir is not None  # built with the trial's folder
        path = os.path.join(self.driver.exp_dir, PLACEMENT_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump(info, f)
        os.replace(path + ".tmp", path)
        self._placement_written = key

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Take ``new_config`` in this process (Tune's ``reuse_actors=True``; always True).

        * Same trial, only keys the driver applies live changed (learner.* except optimizer
          type/device/threads/momentum/weight decay, evaluator.eval_freq): a PBT exploit or a
          pause/resume. Driver, replay buffer and actors stay; Tune loads a checkpoint next.
        * Another trial (Tune hands cached actors to any trial with the same resources; PBT
          swaps them), same worker config: a new Driver (fresh learner, buffer, counters) takes
          over the running collector / evaluator actors; a checkpoint, if the trial has one,
          is loaded next.
        * Anything else (network, search, buffer, envs, resources): everything is rebuilt, the
          actors too.
        """
        assert self.driver is not None, "setup() builds the driver"
        new_cfg = config_from_tune(new_config)
        old, new = _flat(self.cfg.to_dict()), _flat(new_cfg.to_dict())
        changed = sorted(k for k in new if new[k] != old.get(k))
        live = all(_live(k) for k in changed) and trial_bundles(new_cfg, new_config) == self._bundles
        same_trial = self.trial_id == self._setup_trial_id
        if live and same_trial:
            self.cfg = new_cfg
            self.driver.reconfigure(new_cfg)
            self.step_seconds = float(new_config.get("step_seconds", self.step_seconds))
            return True
        logger.info(
            "MuZeroTrainable.reset_config: new driver for trial %s (%s)",
            self.trial_id,
            "actors kept" if live else f"actors rebuilt: {[k for k in changed if not _live(k)]}",
        )
        old_driver = self.driver
        # this trial's counters, in case a checkpoint of another trial (PBT) is loaded next
        self._carried_progress = (self.trial_id, self._progress()) if same_trial else None
        old_driver.close(keep_backend=live)
        self.driver = None
        self._reset_trial_clock(time.perf_counter())
        self._build(new_config, backend_from=old_driver if live else None)
        return True

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """The current learner state (:data:`STATE_FILE`), the replay buffer of the same moment
        (:data:`MANIFEST_FILE` + new chunks in the trial's store, unless the buffer rule leaves it
        out) and the latest evaluated snapshot (:data:`CHECKPOINT_FILE`). The state file comes
        last: a folder with it is complete. Then the chunks no kept checkpoint uses are deleted."""
        assert self.driver is not None, "setup() builds the driver"
        lease = getattr(self, "_lease", None)
        if lease is not None:
            lease.check()  # another process took this trial over: write nothing of it
        state = self.driver.current_state_payload()
        state["checkpoint_kind"] = "evaluated" if getattr(self, "_evaluated_save_due", False) else "current"
        state["trial_seconds"] = self._trial_seconds()
        state["time_to_stop_value_s"] = self._time_to_stop_value
        state["trial_id"] = self.trial_id
        self._evaluated_save_due = False
        evaluated = self.driver.evaluated_payload
        if evaluated is not None:
            save_checkpoint(os.path.join(checkpoint_dir, CHECKPOINT_FILE), evaluated)
        manifest = os.path.join(checkpoint_dir, MANIFEST_FILE)
        saved = self.driver.buffer_checkpoints.save(self.driver.buffer, manifest, extra={"trial_id": self.trial_id})
        state["buffer_manifest"] = MANIFEST_FILE if saved else None
        save_checkpoint(os.path.join(checkpoint_dir, STATE_FILE), state)  # last: a folder with it is complete
        self._collect_buffer_garbage(manifest if saved else None)

    def _collect_buffer_garbage(self, new_manifest: Optional[str]) -> None:
        """Delete the trial's chunks that neither the new manifest nor a checkpoint folder Tune
        still keeps refers to (outside Tune nothing is deleted)."""
        assert self.driver is not None, "setup() builds the driver"
        try:
            live = self._trial_storage.live_manifests()
        except (OSError, ValueError) as e:  # a kept manifest unreadable: keep every chunk
            logger.warning("replay buffer chunks kept: a checkpoint's manifest is unreadable (%s)", e)
            return
        if live is not None:
            self.driver.buffer_checkpoints.collect_garbage(live + ([new_manifest] if new_manifest else []))

    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]  # Tune passes the folder
        """The state the checkpoint was saved in: weights, optimizer, train_iter, RNG, its replay
        buffer and queued budgets; its evaluated snapshot becomes the latest evaluation. Counters
        and the trial clock are the checkpoint's for this trial's own checkpoint, and stay this
        trial's for another trial's (a PBT exploit: the donor's learner and buffer, the config's
        perturbed hyperparameters, this trial's env steps). A folder whose state file is missing
        (damaged) restores the weights of its evaluated snapshot."""
        assert self.driver is not None, "setup() builds the driver"
        state_path = os.path.join(checkpoint_dir, STATE_FILE)
        eval_path = os.path.join(checkpoint_dir, CHECKPOINT_FILE)
        evaluated = load_checkpoint(eval_path, policy_type=self.cfg.policy_type) if os.path.isfile(eval_path) else None
        if os.path.isfile(state_path):
            state = load_checkpoint(state_path, policy_type=self.cfg.policy_type)
            donor = state.get("trial_id")
            own = self._own_progress() if donor not in (None, self.trial_id) else None
            self.driver.restore_from(
                state,
                state_path,
                evaluated=evaluated,
                filesystem=self._trial_storage.filesystem,
                weights_only_fallback=True,  # a trial restored without its buffer beats a trial that fails
            )
            self._trial_seconds_before = float(state.get("trial_seconds", 0.0))
            self._trial_start = time.perf_counter()
            self._time_to_stop_value = float(state.get("time_to_stop_value_s", math.nan))
            if own is not None and donor is not None:  # (own is None without a donor)
                self._keep_own_progress(own, donor)
        else:
            self.driver.restore_from(load_checkpoint(eval_path, policy_type=self.cfg.policy_type), eval_path)
        self._evaluations_reported = self.driver.counters.evaluations  # no checkpoint without a new eval
        self._env_steps_reported = self.driver.counters.env_steps  # Tune restores timesteps_total itself
        self._evaluated_save_due = False

    def _progress(self) -> dict[str, Any]:
        """This trial's counters and clock as they are now."""
        assert self.driver is not None, "setup() builds the driver"
        return {
            "counters": asdict(self.driver.counters),
            "trial_seconds": self._trial_seconds(),
            "time_to_stop_value_s": self._time_to_stop_value,
        }

    def _own_progress(self) -> dict[str, Any]:
        """This trial's counters and clock before taking another trial's checkpoint: of the
        running driver, of the driver it had before ``reset_config`` rebuilt it, or of its newest
        checkpoint in storage (a process that never ran it), whichever went furthest."""
        candidates = [self._progress()]
        carried = getattr(self, "_carried_progress", None)
        if carried is not None and carried[0] == self.trial_id:
            candidates.append(carried[1])
        saved = self._own_latest_state()
        if saved is not None:
            candidates.append(
                {
                    "counters": {k: int(v) for k, v in saved["counters"].items() if k in candidates[0]["counters"]},
                    "trial_seconds": float(saved.get("trial_seconds", 0.0)),
                    "time_to_stop_value_s": float(saved.get("time_to_stop_value_s", math.nan)),
                }
            )
        return max(candidates, key=lambda p: p["counters"].get("env_steps", 0))

    def _own_latest_state(self) -> Optional[dict[str, Any]]:
        """The state file of this trial's newest checkpoint in storage (None if none)."""
        try:
            data = self._trial_storage.newest_file(STATE_FILE)
        except OSError:
            return None
        if data is None:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, STATE_FILE)
            with open(path, "wb") as f:
                f.write(data)
            try:
                return load_checkpoint(path, policy_type=self.cfg.policy_type)
            except CheckpointError:
                return None

    def _keep_own_progress(self, own: dict[str, Any], donor: str) -> None:
        """After another trial's checkpoint (PBT exploit): this trial's counters and clock go on."""
        assert self.driver is not None, "setup() builds the driver"
        for key, value in own["counters"].items():
            setattr(self.driver.counters, key, value)
        self._trial_seconds_before = own["trial_seconds"]
        self._trial_start = time.perf_counter()
        self._time_to_stop_value = own["time_to_stop_value_s"]
        report = self.driver.restore_report  # env steps before the first update count from this trial's
        report.restored(buffer_transitions=report.buffer_transitions, env_steps=self.driver.counters.env_steps)
        logger.info(
            "trial %s took trial %s's learner and replay buffer (%d transitions); its own counters go on "
            "(env steps %d)",
            self.trial_id,
            donor,
            self.driver.buffer.num_transitions,
            self.driver.counters.env_steps,
        )

    def cleanup(self) -> None:
        if self.driver is not None:
            self.driver.close()
        lease = getattr(self, "_lease", None)
        if lease is not None:
            lease.release()
            self._lease = None
