"""Replay buffer of the MuZero family: game segments, n-step targets, prioritized sampling.

Modules:
  segment      GameSegment (frozen, frames stored once) and SegmentBuilder (one per env)
  columns      StepColumn (a policy type's extra per-step data) and Reanalysis
  targets      pure n-step value target functions
  priority     prioritized-replay math (P(i), Gumbel-top-k, IS weights)
  storage      FIFO column tables with stable logical row indices
  tables       BufferLayout and ReplayTables: a buffer's four tables, clock, RNG, addressing
  batch        SampledIndex and TrainBatch
  window       batch primitives: the unroll window of sampled positions, n-step values
  reanalysis   re-searching stored segments with a newer network
  buffer_state the buffer file (state_dict / load_state_dict of the tables)
  game_buffer  GameBuffer: push / evict / sample / update_priorities / reanalyze / state
"""

from .batch import SampledIndex, TrainBatch
from .columns import Reanalysis, StepColumn
from .game_buffer import GameBuffer
from .reanalysis import ReanalyzeFn
from .segment import GameSegment, SegmentBuilder, stack_frames
from .targets import n_step_value_targets, plan_value_targets, segment_value_targets
from .window import BootstrapFn, History, UnrollWindow, ValueFn

__all__ = [
    "BootstrapFn",
    "GameBuffer",
    "GameSegment",
    "History",
    "ReanalyzeFn",
    "Reanalysis",
    "SampledIndex",
    "SegmentBuilder",
    "StepColumn",
    "TrainBatch",
    "UnrollWindow",
    "ValueFn",
    "n_step_value_targets",
    "plan_value_targets",
    "segment_value_targets",
    "stack_frames",
]
