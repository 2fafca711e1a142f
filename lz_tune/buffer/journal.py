"""The change journal of a `GameBuffer`: what a read-only replica needs to follow it.

A data-parallel learner rank builds its shard's targets itself (`lz_tune.parallel`), from a
replica of the driver's buffer; the driver stays the single owner (it alone pushes, samples,
evicts, reanalyses and writes priorities back). The replica follows the owner through this
journal: every change that a batch can read is recorded, in order, and `drain` hands the records
over since the last drain. Applying them to a replica built with the same arguments
(`apply_changes`) gives the same tables, row for row, as the owner's at the drain (priorities
and the sampling clock aside: a replica never samples).

Records:
  `PushChange`      segments pushed, oldest first (the replica evicts as the owner did: the
                    eviction after a push depends only on the capacity and the owned counts);
  `EvictChange`     an explicit `evict_oldest`;
  `StepWriteChange` stored step columns rewritten by a buffer reanalyze (policy targets, root
                    values, declared extras), every step of the given segments;
  `FullState`       the whole buffer: first drain, after `load_state_dict`, or when the records
                    since the last drain would hold more positions than the buffer does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from .segment import GameSegment

__all__ = [
    "BufferChange",
    "BufferJournal",
    "EvictChange",
    "FullState",
    "PushChange",
    "StepWriteChange",
    "apply_changes",
]


@dataclasses.dataclass(frozen=True)
class PushChange:
    """Segments pushed (oldest first)."""

    segments: tuple[GameSegment, ...]


@dataclasses.dataclass(frozen=True)
class EvictChange:
    """``evict_oldest(count)``."""

    count: int


@dataclasses.dataclass(frozen=True)
class StepWriteChange:
    """New values of stored step columns for every step of ``segment_ids`` (`[K]` global ids), in
    `GameBuffer.segment_steps` order: ``columns[name]`` is `[sum of their m, ...]`."""

    segment_ids: np.ndarray
    columns: dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class FullState:
    """The whole buffer (`GameBuffer.state_dict`)."""

    state: dict


BufferChange = Union[PushChange, EvictChange, StepWriteChange, FullState]


class BufferJournal:
    """The changes of one buffer since the last `drain` (open one with `GameBuffer.open_journal`).

    Holds the pushed segments until the next drain (a replica follows once per training batch);
    when they would hold more positions than the buffer's capacity, it keeps none and the next
    drain hands over the whole buffer instead."""

    def __init__(self, capacity_transitions: int) -> None:
        self._capacity = int(capacity_transitions)
        self._changes: list[BufferChange] = []
        self._pending_positions = 0
        self._needs_full_state = True  # a new replica starts from the whole buffer

    def record(self, change: BufferChange) -> None:
        """Adds a change (called by the buffer)."""
        if self._needs_full_state:
            return  # the full state at the next drain holds it
        if isinstance(change, PushChange):
            self._pending_positions += sum(s.num_owned for s in change.segments)
            if self._pending_positions > self._capacity:
                self.restart()
                return
        self._changes.append(change)

    def restart(self) -> None:
        """Forget the records: the next drain hands over the whole buffer (after a load)."""
        self._changes.clear()
        self._pending_positions = 0
        self._needs_full_state = True

    def drain(self, buffer: Any) -> list[BufferChange]:
        """The changes of ``buffer`` (the `GameBuffer` that records into this journal) since the last
        drain, oldest first; ``[FullState]`` (views of the tables,
        valid until ``buffer`` next changes: serialise them at once) when the replica must start
        over."""
        if self._needs_full_state:
            changes: list[BufferChange] = [FullState(buffer.state_dict(copy=False))]
        else:
            changes = self._changes
        self._changes = []
        self._pending_positions = 0
        self._needs_full_state = False
        return changes


def apply_changes(replica: Any, changes: Sequence[BufferChange]) -> None:
    """Replays drained changes on ``replica`` (a `GameBuffer` built with the owner's constructor
    arguments)."""
    for change in changes:
        if isinstance(change, FullState):
            replica.load_state_dict(change.state)
        elif isinstance(change, PushChange):
            replica.push(list(change.segments))
        elif isinstance(change, EvictChange):
            replica.evict_oldest(change.count)
        elif isinstance(change, StepWriteChange):
            replica.write_step_columns(change.segment_ids, change.columns)
        else:
            raise TypeError(f"not a buffer change: {type(change).__name__}")
