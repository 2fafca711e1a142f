"""Typed results of `GameBuffer.sample` and `GameBuffer.make_batch`.

Notation: B = batch size, U = num_unroll_steps, A = action count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

__all__ = ["SampledIndex", "TrainBatch"]


@dataclasses.dataclass(frozen=True)
class SampledIndex:
    """Which positions a batch holds, with their importance weights.

    Attributes:
      segment_ids: `[B] int64` global (monotone, never reused) segment ids.
      positions: `[B] int64` owned position inside each segment (0 <= position < num_owned).
      weights: `[B] float32` IS weights of exactly these positions, max 1.
      make_time: the buffer's time counter when this sample was drawn; a priority write-back
        is ignored if the buffer evicted anything at or after this time.
      pad_actions: `[B, U]` int64 (continuous: `[B, U, D]` float32) the random actions of the
        unroll steps past a segment's end (`GameBuffer.with_padding`), or None: drawn when the
        window is gathered. Drawn once for a whole batch, they let its shards be gathered
        elsewhere (a learner rank's replica) with the numbers one process would use.
      reanalyze_rows: rows 0..k-1 get a fresh search in the batch built from this index; None:
        ``int(B * reanalyze_ratio)`` (a shard of a batch carries its own share).
    """

    segment_ids: np.ndarray
    positions: np.ndarray
    weights: np.ndarray
    make_time: int
    pad_actions: np.ndarray | None = None
    reanalyze_rows: int | None = None

    def __len__(self) -> int:
        return self.segment_ids.shape[0]

    def num_reanalyzed(self, reanalyze_ratio: float) -> int:
        """How many leading rows a batch from this index reanalyses (see ``reanalyze_rows``)."""
        if self.reanalyze_rows is not None:
            return int(self.reanalyze_rows)
        return int(len(self) * reanalyze_ratio)


@dataclasses.dataclass(frozen=True)
class TrainBatch:
    """Unroll inputs and targets for B sampled positions t, unrolled U steps.

    Positions t+k with t+k >= m (past a terminal end) are an absorbing state: zero obs,
    zero value / reward / policy targets, mask 0, a uniformly random action.

    Attributes:
      obs: `[B, U+1, *obs_shape]` frame dtype: stacked observation at t..t+U (zeros where
        no observation exists).
      actions: `[B, U] int64` actions at t..t+U-1 (continuous: `[B, U, D] float32`).
      target_value: `[B, U+1] float32` n-step value targets.
      target_reward: `[B, U] float32` r_{t+k}, the reward after action t+k.
      target_policy: `[B, U+1, P] float32` stored policy targets (visit distributions or the
        type's improved policy; reanalysed for the first `num_reanalyzed` rows).
      mask: `[B, U+1] float32` 1 where a real step exists at t+k.
      weights: `[B] float32` IS weights (= index.weights).
      to_play: `[B, U+1] int64` player to move (-1 past the end).
      action_mask: `[B, U+1, A] bool` legal actions (all True past the end).
      timesteps: `[B, U+1] int64` episode step index (continues counting past the end).
      index: the `SampledIndex` the batch was built from (for priority write-back).
      num_reanalyzed: rows 0..num_reanalyzed-1 carry freshly searched policy targets.
      extras: the type's extra columns over the window (`[B, U+1, *shape]`) and its own extra
        targets (EfficientZero: `target_value_prefix [B, U]`), by name.
    """

    obs: np.ndarray
    actions: np.ndarray
    target_value: np.ndarray
    target_reward: np.ndarray
    target_policy: np.ndarray
    mask: np.ndarray
    weights: np.ndarray
    to_play: np.ndarray
    action_mask: np.ndarray
    timesteps: np.ndarray
    index: SampledIndex
    num_reanalyzed: int = 0
    extras: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return self.actions.shape[0]
