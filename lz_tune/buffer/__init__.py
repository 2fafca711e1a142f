"""Replay buffer of the MuZero family: game segments, n-step targets, prioritized sampling.

Modules:
  segment      GameSegment (frozen, frames stored once) and SegmentBuilder (one per env)
  targets      pure n-step value target functions
  priority     prioritized-replay math (P(i), Gumbel-top-k, IS weights)
  storage      FIFO column tables with stable logical row indices
  batch        SampledIndex and TrainBatch
  game_buffer  GameBuffer: push / evict / sample / update_priorities / make_batch / reanalyze
"""

from .batch import SampledIndex, TrainBatch
from .game_buffer import BufferReanalyzeFn, GameBuffer, ReanalyzeFn, ValueFn
from .segment import GameSegment, SegmentBuilder, stack_frames
from .targets import n_step_value_targets, plan_value_targets, segment_value_targets

__all__ = [
    "BufferReanalyzeFn",
    "GameBuffer",
    "GameSegment",
    "ReanalyzeFn",
    "SampledIndex",
    "SegmentBuilder",
    "TrainBatch",
    "ValueFn",
    "n_step_value_targets",
    "plan_value_targets",
    "segment_value_targets",
    "stack_frames",
]
