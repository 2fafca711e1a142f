"""SnapshotPublisher: decides when the learner's weights are published to the workers.

Rule (as in LightZero's async entry): at every collect launch, publish a new snapshot if there is none yet, or
if the learner advanced by at least ``weight_sync_interval`` updates since the last one, or
if the lag since the last one exceeds ``max_policy_lag`` (negative: no bound). The same
version is never published twice: the caller gets the same snapshot object back (and the Ray
back-end the same ObjectRef).

Evaluations take a snapshot of exactly the current train_iter (:meth:`SnapshotPublisher.current`)
without moving the collectors' reference point, as LightZero puts the evaluated weights
beside the published ones: an evaluation never delays or advances a collector's next publish.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Optional

import torch

from lz_tune.workers.common import WeightSnapshot

#: versions of different restore generations never collide
GENERATION_STRIDE = 1_000_000_000_000


class SnapshotPublisher:
    def __init__(
        self, *, weight_sync_interval: int, max_policy_lag: int, get_weights: Callable[[], Mapping[str, torch.Tensor]]
    ) -> None:
        self.weight_sync_interval = weight_sync_interval
        self.max_policy_lag = max_policy_lag
        self._get_weights = get_weights
        self.generation = 0
        self.latest: Optional[WeightSnapshot] = None  # the collectors' reference point
        self._evaluated: Optional[WeightSnapshot] = None  # the newest snapshot taken for an evaluation
        self.num_published = 0  # snapshots published to collectors

    def version_of(self, train_iter: int) -> int:
        return self.generation * GENERATION_STRIDE + train_iter

    @staticmethod
    def generation_of(version: int) -> int:
        """The restore generation a snapshot version belongs to."""
        return version // GENERATION_STRIDE

    def bump_generation(self) -> None:
        """After a checkpoint restore: every later version differs from every earlier one."""
        self.generation += 1
        self.latest = self._evaluated = None

    def _snapshot(self, train_iter: int) -> WeightSnapshot:
        """The snapshot of ``train_iter`` in this generation: one taken already, or a new one."""
        version = self.version_of(train_iter)
        for known in (self.latest, self._evaluated):
            if known is not None and known.version == version:
                return known
        return WeightSnapshot(version=version, train_iter=train_iter, weights=self._get_weights())

    def _publish(self, train_iter: int) -> WeightSnapshot:
        self.latest = self._snapshot(train_iter)
        self.num_published += 1
        return self.latest

    def for_collect(self, train_iter: int) -> WeightSnapshot:
        """The snapshot a collect launched now must use."""
        if self.latest is None:
            return self._publish(train_iter)
        gap = train_iter - self.latest.train_iter
        if gap == 0:
            return self.latest
        if gap >= self.weight_sync_interval or (self.max_policy_lag >= 0 and gap > self.max_policy_lag):
            return self._publish(train_iter)
        return self.latest

    def current(self, train_iter: int) -> WeightSnapshot:
        """A snapshot of exactly ``train_iter`` for an evaluation (evaluations always use the newest
        weights); the collectors' reference point stays where it is."""
        self._evaluated = self._snapshot(train_iter)
        return self._evaluated
