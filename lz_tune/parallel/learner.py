"""The driver's side of a data-parallel learner (``learner.num_workers >= 2``).

:class:`DataParallelLearner` implements the :class:`~lz_tune.algos.base.Learner` interface, so
the driver loop does not change: it samples one global batch, builds the type's targets with
``make_batch`` and calls ``learn``; here ``learn`` splits the batch into N shards
(:mod:`lz_tune.parallel.shards`), runs the update on the N workers (:mod:`lz_tune.parallel.group`)
and returns the merged logs and every shard's priorities, in batch order, for the driver to
write back under the make_time rule.

Where the targets are built (``learner.targets_on_workers``, on by default): each rank builds
its own shard's targets (bootstrap values with its copy of the target network, which every rank
holds identical, reanalysed rows) on its own device, from a read-only replica of the buffer
(:mod:`lz_tune.buffer.journal`). ``make_batch`` then returns a :class:`RankTargetsBatch`: the
sampled index, with the random padding actions drawn from the driver's buffer as one process
would draw them, and a reference to the buffer changes the replicas have not seen yet (put into
Ray's object store once: a segment's frames travel once, whatever the number of updates that
read them). A rank builds its batch at the start of the update, with the target network of that
update, so the batch is the one a single process would build (float rounding aside: a shard's
rows go through the target network in smaller chunks); the bootstrap values no longer wait for
the driver to pull the target weights, and a batch can be prepared ahead across a target refresh.
Reanalysed rows are exact where the search draws no random numbers (a rank's search draws from
its own stream).

With ``targets_on_workers=False`` the driver builds every batch on its local copy of the type's
learner (its "mirror") and sends each rank its shard's observations.

The mirror also provides the weights of snapshots and runs the periodic buffer reanalyze. Its
weights are pulled from rank 0 only when they are needed: the online network when a snapshot or
the checkpoint asks for it, the target network after an update that changed it
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
from lz_tune.buffer.journal import BufferJournal
from lz_tune.config import Config, ConfigError
from lz_tune.parallel.shards import index_rows, merge_logs, shard_bounds, shard_loss_scales, split_batch
from lz_tune.parallel.sync_batchnorm import has_batchnorm

if TYPE_CHECKING:  # (imports Ray)
    from lz_tune.parallel.group import LearnerGroup

__all__ = ["DataParallelLearner", "PendingUpdate", "RankTargetsBatch", "ShardWork"]


@dataclasses.dataclass(frozen=True)
class RankTargetsBatch:
    """A global batch whose targets the ranks build (``learner.targets_on_workers``).

    Attributes:
      index: the sampled positions, ``pad_actions`` drawn (`GameBuffer.with_padding`).
      sequence: the number of the buffer-change drain made with it (0, 1, ...): a rank applies
        every drain once, in order.
      reanalyze_ratio: ``buffer.reanalyze_ratio`` when it was sampled.
    """

    index: SampledIndex
    sequence: int
    reanalyze_ratio: float

    def __len__(self) -> int:
        return len(self.index)


@dataclasses.dataclass(frozen=True)
class ShardWork:
    """What one rank gets for one update when it builds its own targets: a few numbers per row.

    Attributes:
      index: the rank's rows of the global `SampledIndex` (``reanalyze_rows``: its share of the
        batch's reanalysed leading rows).
      changes: ``[(sequence, ObjectRef of a list of buffer changes)]`` not yet applied to the
        rank's replica, oldest first.
      seed: of the generator the rank's ``make_batch`` draws from (a reanalysing search).
    """

    index: SampledIndex
    changes: tuple
    seed: tuple[int, ...]


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
        self.targets_at_update = bool(cfg.learner.targets_on_workers)
        """Whether the ranks build the batches' targets at the update (``learner.targets_on_workers``)."""
        self.local: Learner = make_local(mirror_config(cfg), spec)
        if cfg.learner.sync_batchnorm and not has_batchnorm(self.local.policy.network):
            raise ConfigError(
                f"learner.sync_batchnorm: the {cfg.policy_type} network for {cfg.env.env_id} has no "
                "BatchNorm layer to synchronise; set learner.sync_batchnorm=False"
            )
        self.group: Optional[LearnerGroup] = None
        self._stale: set[str] = set()  # mirror policies ("policy", "target_policy") behind rank 0
        # targets on the ranks: the journal of the buffer the replicas follow, and the drains not
        # yet sent (a prepared batch may be dropped: its drain goes with the next batch)
        self._journal: Optional[tuple[GameBuffer, BufferJournal]] = None
        self._drains = 0
        self._unsent: list[tuple[int, Any]] = []
        self.bytes_sent_last_update = 0
        """Bytes of the numpy arrays sent to the ranks with the last update (the object-store
        references to buffer changes not counted: their contents are put once, see
        :attr:`bytes_put_for_replicas`)."""
        self.bytes_put_for_replicas = 0
        """Bytes of numpy arrays put into the object store for the ranks' replicas so far."""

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
            self._forget_replicas()  # new ranks: their replicas start from the whole buffer

    def _forget_replicas(self) -> None:
        if self._journal is not None:
            buffer, journal = self._journal
            buffer.close_journal(journal)
        self._journal = None
        self._unsent = []

    def close(self) -> None:
        """End the workers (at once when one of them failed); a second call does nothing."""
        if self.group is not None:
            self.group.close()
            self.group = None
        self._forget_replicas()

    # ------------------------------------------------------------------ mirror state

    @property
    def cfg(self) -> Config:
        return self._cfg

    @cfg.setter
    def cfg(self, cfg: Config) -> None:  # live learner.* changes (Tune reset_config / PBT)
        self._cfg = cfg
        self.targets_at_update = bool(cfg.learner.targets_on_workers)
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

    def snapshot_weights(self):
        """Rank 0's current weights for a snapshot: put into Ray's object store by rank 0, so only
        the reference passes through the driver (the mirror's weights before the workers start)."""
        if self.group is None:
            return self.local.policy.weights()
        from lz_tune.workers.common import StoredWeights

        return StoredWeights(self.group.put_policy_weights())

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

    def make_batch(  # type: ignore[override]  # what this learner's learn takes (see Learner.make_batch)
        self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator
    ) -> TrainBatch | RankTargetsBatch:
        """The batch of ``index``: built here on the mirror, or (``targets_on_workers``) a
        :class:`RankTargetsBatch` whose targets the ranks build at the update."""
        if not self.targets_at_update:
            self.target_policy  # noqa: B018  (pulls the target weights if an update changed them)
            return self.local.make_batch(buffer, index, rng=rng)
        import ray

        if self._journal is None or self._journal[0] is not buffer:
            self._forget_replicas()
            self._journal = (buffer, buffer.open_journal())
        changes = self._journal[1].drain(buffer)
        sequence = self._drains
        self._drains += 1
        if changes:
            self.bytes_put_for_replicas += _numpy_bytes(changes)
            self._unsent.append((sequence, ray.put(changes)))  # serialised now: FullState holds views
        return RankTargetsBatch(
            index=buffer.with_padding(index), sequence=sequence, reanalyze_ratio=self._cfg.buffer.reanalyze_ratio
        )

    def reanalyze_segments(self, buffer: GameBuffer, segment_ids: np.ndarray, *, rng: np.random.Generator) -> None:
        self.target_policy  # noqa: B018  (pulls the target weights if an update changed them)
        self.local.reanalyze_segments(buffer, segment_ids, rng=rng)

    def start_update(self, batch: TrainBatch | RankTargetsBatch, *, train_iter: Optional[int] = None) -> PendingUpdate:
        """Send one global batch to the workers; :meth:`finish_update` waits for the result."""
        if self.group is None:
            raise RuntimeError("DataParallelLearner.start() was not called: no learner workers")
        t = self.train_iter if train_iter is None else int(train_iter)
        if isinstance(batch, RankTargetsBatch):
            work = self._shard_work(batch, t)
            sizes = [len(w.index) for w in work]
            shards: list = work
        else:
            shards = split_batch(batch, self.num_workers)
            sizes = [len(s) for s in shards]
        self.bytes_sent_last_update = _numpy_bytes(shards)
        return PendingUpdate(
            refs=self.group.learn_async(shards, t, shard_loss_scales(sizes)),
            sizes=sizes,
            train_iter=t,
            changes_target=self.local.target_changes_at(t),
        )

    def _shard_work(self, batch: RankTargetsBatch, train_iter: int) -> list[ShardWork]:
        """Each rank's rows of ``batch`` and the buffer changes up to its drain."""
        changes = tuple((seq, ref) for seq, ref in self._unsent if seq <= batch.sequence)
        self._unsent = [(seq, ref) for seq, ref in self._unsent if seq > batch.sequence]
        index, total = batch.index, len(batch.index)
        reanalysed = index.num_reanalyzed(batch.reanalyze_ratio)
        work = []
        for rank, (start, stop) in enumerate(shard_bounds(total, self.num_workers)):
            shard = index_rows(index, start, stop, reanalyze_rows=int(min(max(reanalysed - start, 0), stop - start)))
            work.append(ShardWork(index=shard, changes=changes, seed=(self._cfg.seed, rank, train_iter)))
        return work

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

    def learn(
        self, batch: TrainBatch | RankTargetsBatch, *, train_iter: Optional[int] = None
    ) -> tuple[dict[str, float], np.ndarray]:
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


def _numpy_bytes(obj) -> int:
    """Bytes of the numpy arrays in ``obj`` (dataclasses, dicts, lists and tuples walked)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(_numpy_bytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return sum(_numpy_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_numpy_bytes(v) for v in obj)
    return 0
