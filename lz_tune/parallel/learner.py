"""The driver's side of a data-parallel learner (``learner.num_workers >= 2``).

:class:`DataParallelLearner` implements the :class:`~lz_tune.algos.base.Learner` interface, so
the driver loop does not change: it samples one global batch, builds the type's targets with
``make_batch`` and calls ``learn``; here ``learn`` splits the batch into N shards
(:mod:`lz_tune.parallel.shards`), runs the update on the N workers (:mod:`lz_tune.parallel.group`)
and returns the merged logs and every shard's priorities, in batch order, for the driver to
write back under the make_time rule.

The driver keeps a local copy of the type's learner (its "mirror"): it builds the training
batches (target network values, reanalyze) and provides the weights of snapshots. Its weights
are pulled from rank 0 only when they are needed: the online network when a snapshot or the
checkpoint asks for it, the target network after an update that changed it
(``Learner.target_changes_at``: every ``learner.target_update_freq`` updates for MuZero, every
update for UniZero's momentum target). train_iter, the learning-rate schedule and everything in
train_iter count global updates.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from lz_tune.algos.base import Learner, Policy
from lz_tune.buffer import GameBuffer, SampledIndex, TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.parallel.shards import merge_logs, shard_loss_scales, split_batch
from lz_tune.parallel.sync_batchnorm import has_batchnorm

if TYPE_CHECKING:  # (imports Ray)
    from lz_tune.parallel.group import LearnerGroup

__all__ = ["DataParallelLearner", "PendingUpdate"]


@dataclasses.dataclass
class PendingUpdate:
    """An update in flight on the workers."""

    refs: list
    sizes: list[int]
    train_iter: int
    changes_target: bool


def mirror_config(cfg: Config) -> Config:
    """The config of the driver's mirror learner: the run's, on the CPU unless this process sees
    a GPU (its work is inference only: target values, reanalyze, snapshots)."""
    import torch

    lc = cfg.learner
    if lc.device.startswith("cuda") and not torch.cuda.is_available():
        return dataclasses.replace(cfg, learner=dataclasses.replace(lc, device="cpu", worker_num_gpus=0.0))
    return cfg


class DataParallelLearner(Learner):
    """A policy type's learner whose updates run on ``learner.num_workers`` Ray actors."""

    runs_on_workers = True

    def __init__(self, cfg: Config, spec, make_local) -> None:
        """``make_local(cfg, spec)``: the type's own learner (the mirror)."""
        self._cfg = cfg
        self._spec = spec
        self.local: Learner = make_local(mirror_config(cfg), spec)
        if cfg.learner.sync_batchnorm and not has_batchnorm(self.local.policy.network):
            raise ConfigError(
                f"learner.sync_batchnorm: the {cfg.policy_type} network for {cfg.env.env_id} has no "
                "BatchNorm layer to synchronise; set learner.sync_batchnorm=False"
            )
        self.group: Optional[LearnerGroup] = None
        self._stale: set[str] = set()  # mirror policies ("policy", "target_policy") behind rank 0

    def check_resources(self) -> None:
        """ConfigError naming the key when the workers cannot be placed on the connected Ray cluster
        (outside a Tune trial, whose bundles Tune checked): call before any actor starts."""
        import ray

        from lz_tune.parallel.group import check_cluster_fits

        if ray.util.get_current_placement_group() is None:
            check_cluster_fits(self._cfg, [n["Resources"] for n in ray.nodes() if n.get("Alive")])

    def start(self) -> None:
        """Start the workers (after everything was validated and the driver made its own actors),
        each with the mirror's state."""
        if self.group is None:
            from lz_tune.parallel.group import LearnerGroup

            self.group = LearnerGroup(self._cfg, self._spec, initial_state=self.local.state_dict())

    def close(self) -> None:
        """End the workers (at once when one of them failed); a second call does nothing."""
        if self.group is not None:
            self.group.close()
            self.group = None

    # ------------------------------------------------------------------ mirror state

    @property
    def cfg(self) -> Config:
        return self._cfg

    @cfg.setter
    def cfg(self, cfg: Config) -> None:  # live learner.* changes (Tune reset_config / PBT)
        self._cfg = cfg
        self.local.cfg = mirror_config(cfg)
        if self.group is not None:
            self.group.set_config(cfg)

    @property
    def policy(self) -> Policy:  # type: ignore[override]  # the mirror's, read only
        """The mirror's policy, with rank 0's current weights."""
        return self._fresh("policy")

    @property
    def target_policy(self) -> Policy:  # type: ignore[override]  # the mirror's, read only
        """The mirror's target policy, with rank 0's current target weights."""
        return self._fresh("target_policy")

    def _fresh(self, which: str) -> Policy:
        """The mirror's ``which`` ("policy" or "target_policy"), its weights pulled from rank 0 first
        when an update changed them since the last pull."""
        if which in self._stale and self.group is not None:
            getattr(self.local, which).load_weights(self.group.weights(which))
            self._stale.discard(which)
        return getattr(self.local, which)

    @property
    def train_iter(self) -> int:  # type: ignore[override]  # the mirror's, read only
        return self.local.train_iter

    @property
    def device(self):
        return self.local.device

    @property
    def learning_rate(self) -> float:
        return self.local.learning_rate

    @property
    def num_workers(self) -> int:
        return self._cfg.learner.num_workers

    def target_changes_at(self, train_iter: int) -> bool:
        return self.local.target_changes_at(train_iter)

    def update_path_notice(self) -> Optional[str]:
        return self.local.update_path_notice()

    # ------------------------------------------------------------------ updates

    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        self.target_policy  # noqa: B018  (pulls the target weights if an update changed them)
        return self.local.make_batch(buffer, index, rng=rng)

    def reanalyze_segments(self, buffer: GameBuffer, segment_ids: np.ndarray, *, rng: np.random.Generator) -> None:
        self.target_policy  # noqa: B018  (pulls the target weights if an update changed them)
        self.local.reanalyze_segments(buffer, segment_ids, rng=rng)

    def start_update(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> PendingUpdate:
        """Send one global batch to the workers; :meth:`finish_update` waits for the result."""
        if self.group is None:
            raise RuntimeError("DataParallelLearner.start() was not called: no learner workers")
        t = self.train_iter if train_iter is None else int(train_iter)
        shards = split_batch(batch, self.num_workers)
        sizes = [len(s) for s in shards]
        return PendingUpdate(
            refs=self.group.learn_async(shards, t, shard_loss_scales(sizes)),
            sizes=sizes,
            train_iter=t,
            changes_target=self.local.target_changes_at(self.train_iter),
        )

    def finish_update(self, pending: PendingUpdate) -> tuple[dict[str, float], np.ndarray]:
        assert self.group is not None  # start_update sent the batch to it
        results = self.group.get(pending.refs, f"update {pending.train_iter}")
        logs = merge_logs([r[0] for r in results], pending.sizes)
        priorities = np.concatenate([r[1] for r in results]).astype(np.float32, copy=False)
        self.local.train_iter = int(results[0][2])
        self._stale.add("policy")
        if pending.changes_target:
            self._stale.add("target_policy")
        return logs, priorities

    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> tuple[dict[str, float], np.ndarray]:
        return self.finish_update(self.start_update(batch, train_iter=train_iter))

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """One copy of the learner state, rank 0's (the same layout as the type's own learner, so a
        checkpoint of N workers restores into M, or into the in-process learner)."""
        if self.group is None:
            return self.local.state_dict()
        return self.group.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.local.load_state_dict(state)
        if self.group is not None:
            self.group.load_state_dict(state)
        self._stale.clear()
