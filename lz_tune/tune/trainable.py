"""MuZeroTrainable: the driver loop as a Ray Tune class Trainable.

Tune config (a flat dict, what search spaces sample):

- ``"config"``: zoo config module path or dotted name (default: the CartPole zoo config);
- any dotted config key, e.g. ``"learner.learning_rate": tune.loguniform(1e-4, 1e-2)``;
- ``"step_seconds"``: wall-clock slice of the driver loop per Tune iteration (default 10);
- ``"driver_num_cpus"`` / ``"driver_num_gpus"``: resources of bundle 0 (the learner; default 1 / 0).

Resources: bundle 0 for the driver, then one bundle per collector actor and one per evaluator
actor when the async pipeline is enabled (``async_pipeline.*_num_cpus``/``_num_gpus``); the
Ray back-end pins actor i to bundle i + 1 of the trial's placement group.

Every result carries ``eval/reward_mean`` (the latest evaluation, carried forward; NaN before the
first one) so ``metric="eval/reward_mean"`` passes Tune's strict metric check, and
``should_checkpoint=True`` right after an evaluation, so Tune's checkpoint holds exactly the
evaluated weights with the learner state behind them.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ray import tune

from lz_tune.checkpoint import load_checkpoint, save_checkpoint
from lz_tune.config import Config, ConfigError, load_config_module

DEFAULT_CONFIG = "zoo.classic_control.cartpole_muzero"
TUNE_ONLY_KEYS = ("config", "step_seconds", "driver_num_cpus", "driver_num_gpus")
CHECKPOINT_FILE = "lz_tune_checkpoint.pt"


def config_from_tune(tune_config: dict[str, Any]) -> Config:
    """Build the experiment Config from a Tune config dict (raises ConfigError naming a bad key)."""
    base = load_config_module(str(tune_config.get("config", DEFAULT_CONFIG)))
    updates = {k: v for k, v in tune_config.items() if k not in TUNE_ONLY_KEYS}
    return base.with_updates(updates) if updates else base


def placement_group_factory(tune_config: dict[str, Any]) -> tune.PlacementGroupFactory:
    """Bundle 0: driver/learner; then one bundle per collector actor and per evaluator actor."""
    cfg = config_from_tune(tune_config)
    driver = {"CPU": float(tune_config.get("driver_num_cpus", 1.0))}
    gpus = float(tune_config.get("driver_num_gpus", 0.0))
    if gpus > 0:
        driver["GPU"] = gpus
    bundles = [driver]
    ap = cfg.async_pipeline
    if ap.enabled and not ap.ray_local_mode:
        for kind, count, cpus, gpus in (("collector", ap.num_collector_actors, ap.collector_num_cpus,
                                         ap.collector_num_gpus),
                                        ("evaluator", ap.num_evaluator_actors, ap.evaluator_num_cpus,
                                         ap.evaluator_num_gpus)):
            bundle = {"CPU": cpus} | ({"GPU": gpus} if gpus > 0 else {})
            bundles.extend(dict(bundle) for _ in range(count))
    return tune.PlacementGroupFactory(bundles)


#: config keys a running driver can take without rebuilding networks, buffer or workers
_NOT_LIVE = {"learner.optim_type", "learner.device", "learner.num_threads", "learner.momentum",
             "learner.weight_decay"}


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

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> tune.PlacementGroupFactory:
        return placement_group_factory(config)

    def setup(self, config: dict[str, Any]) -> None:
        from lz_tune.pipeline import Driver

        self.cfg = config_from_tune(config)
        self.step_seconds = float(config.get("step_seconds", 10.0))
        if self.step_seconds <= 0:
            raise ConfigError(f"step_seconds: must be > 0 (got {self.step_seconds})")
        self.driver = Driver(self.cfg, exp_dir=os.path.join(self.logdir, "lz_tune"), print_fn=None)
        self._evaluations_reported = self.driver.counters.evaluations

    def step(self) -> dict[str, Any]:
        metrics = self.driver.step(max_seconds=self.step_seconds)
        result: dict[str, Any] = {k: v for k, v in metrics.items()
                                  if isinstance(v, (int, float, bool)) and not isinstance(v, str)}
        last = self.driver.last_eval
        result["eval/reward_mean"] = last.reward_mean if last is not None else math.nan
        result["eval/train_iter"] = last.train_iter if last is not None else -1
        if self.driver.counters.evaluations > self._evaluations_reported:
            self._evaluations_reported = self.driver.counters.evaluations
            result["should_checkpoint"] = True
        result["done"] = self.driver.done
        if self.iteration == 0:  # where this trial's workers live (bundle pinning is checked by tests)
            import ray

            pg = ray.util.get_current_placement_group()
            result["placement_group_id"] = pg.id.hex() if pg is not None else ""
            groups = getattr(self.driver.backend, "actor_placement_groups", lambda: [])()
            result["actor_placement_group_ids"] = ",".join(g or "" for g in groups)
        return result

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Reuse this trial (and its actors) for ``new_config`` when only keys the driver can apply
        live changed (PBT perturbations of learner.* and evaluator.eval_freq); anything else
        (network, search, buffer, envs, resources, optimizer type) returns False so Tune restarts
        the trial. Tune then loads the donor checkpoint; the replay buffer and the collectors'
        in-progress segments are kept (they hold experience, not weights)."""
        new_cfg = config_from_tune(new_config)
        old, new = _flat(self.cfg.to_dict()), _flat(new_cfg.to_dict())
        changed = {k for k in new if new[k] != old.get(k)}
        if any(not _live(k) for k in changed):
            return False
        if float(new_config.get("driver_num_cpus", 1.0)) != float(self.config.get("driver_num_cpus", 1.0)):
            return False
        self.cfg = new_cfg
        self.driver.reconfigure(new_cfg)
        self.step_seconds = float(new_config.get("step_seconds", self.step_seconds))
        return True

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        save_checkpoint(os.path.join(checkpoint_dir, CHECKPOINT_FILE), self.driver.last_checkpoint_payload())

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        path = os.path.join(checkpoint_dir, CHECKPOINT_FILE)
        self.driver.restore_from(load_checkpoint(path, policy_type=self.cfg.policy_type), path)

    def cleanup(self) -> None:
        self.driver.close()
