"""The storage of a `GameBuffer`: its fixed layout and the four FIFO tables that hold its data.

`BufferLayout` is what every reader of the tables needs to know about the data (unroll and TD
lengths, frame stack, action and policy-target widths, declared extra columns); `ReplayTables`
holds the rows, the push / sample / evict clock and the buffer's RNG, and answers the two
addressing questions every reader asks: which physical row a global segment id is, and what the
stacked observation starting at a frame row is. The buffer (`game_buffer`), the batch primitives
(`window`), reanalysis (`reanalysis`) and the buffer file (`buffer_state`) all work on a
`ReplayTables`; none of them reaches into another's private state.

Notation: S = frame_stack. Tables (each a `storage.ColumnStore`, rows in push order):

* ``steps``: one row per stored step of every segment (owned and padding): ``action``,
  ``reward``, ``root_value``, ``pred_value``, ``policy_target``, ``action_mask``, ``to_play``,
  ``timestep`` and ``extra:<name>`` for each declared `columns.StepColumn`;
* ``frames``: ``frame``, S - 1 + n_obs rows per segment (the stacking context, then one per
  observation);
* ``positions``: one row per *owned* position, the only rows sampling sees: ``segment_id``,
  ``position`` (segment-local), ``priority``, ``sample_weight`` (priority ** alpha);
* ``segments``: one row per segment, logical row = global segment id (monotone, never reused):
  ``step_start``, ``frame_start``, ``position_start`` (logical rows of the other tables),
  ``num_steps``, ``num_obs``, ``num_owned``, ``terminal``, ``truncated``, ``reanalyze_count``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .columns import StepColumn
from .segment import stack_frames
from .storage import ColumnStore

__all__ = ["BufferLayout", "ReplayTables", "EXTRA_PREFIX"]

EXTRA_PREFIX = "extra:"
"""Prefix of the step-table columns holding declared extra columns (``extra:<name>``)."""


@dataclasses.dataclass(frozen=True)
class BufferLayout:
    """The fixed shape of a buffer's data; checked at construction (`ValueError` names the field).

    Attributes:
      num_unroll_steps: U, steps unrolled after each sampled position (>= 0).
      td_steps: T, steps of the n-step value target (>= 1).
      discount: per-step discount of the value targets, in [0, 1].
      frame_stack: S, frames stacked into one observation (>= 1).
      action_space_size: A, width of the action mask (>= 1).
      policy_target_size: width of the policy target (A, or K sampled actions; >= 1).
      action_dim: D of continuous actions (0: discrete actions).
      mini_infer_size: most rows handed to a value or search function at once (>= 1).
      step_columns: the extra per-step columns a policy type declares.
    """

    num_unroll_steps: int
    td_steps: int
    discount: float
    frame_stack: int
    action_space_size: int
    policy_target_size: int
    action_dim: int = 0
    mini_infer_size: int = 2048
    step_columns: tuple[StepColumn, ...] = ()

    def __post_init__(self) -> None:
        if self.num_unroll_steps < 0 or self.td_steps < 1 or self.frame_stack < 1 or self.action_space_size < 1:
            raise ValueError("need num_unroll_steps >= 0, td_steps >= 1, frame_stack >= 1, action_space_size >= 1")
        if not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {self.discount}")
        if self.mini_infer_size < 1:
            raise ValueError(f"mini_infer_size must be >= 1, got {self.mini_infer_size}")
        if self.policy_target_size < 1 or self.action_dim < 0:
            raise ValueError("need policy_target_size >= 1 and action_dim >= 0")
        object.__setattr__(self, "step_columns", tuple(self.step_columns))

    def describe(self) -> dict:
        """The layout as plain Python values (what a buffer file records and checks on load)."""
        return {
            "num_unroll_steps": self.num_unroll_steps,
            "td_steps": self.td_steps,
            "frame_stack": self.frame_stack,
            "action_space_size": self.action_space_size,
            "policy_target_size": self.policy_target_size,
            "action_dim": self.action_dim,
            "step_columns": [c.describe() for c in self.step_columns],
        }


class ReplayTables:
    """The four tables of a buffer (module docstring), its clock and its RNG.

    Attributes:
      layout: the `BufferLayout` of the data.
      steps, frames, positions, segments: the tables.
      frame_spec: ``(frame_shape, dtype)`` of the stored frames, None before the first push.
      time: increased by every push, sample and evict call of the buffer.
      clear_time: ``time`` of the last call that evicted something (0 if none).
      rng: the buffer's generator (sampling, padding actions, reanalyze choices).
    """

    def __init__(self, layout: BufferLayout, *, seed: int | None = None) -> None:
        self.layout = layout
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        """Empty tables, no frame spec, clock at 0 (the RNG is kept)."""
        self.steps = ColumnStore()
        self.frames = ColumnStore()
        self.positions = ColumnStore()
        self.segments = ColumnStore()
        self.frame_spec: tuple[tuple[int, ...], np.dtype] | None = None
        self.time = 0
        self.clear_time = 0

    @property
    def stores(self) -> dict[str, ColumnStore]:
        """The tables by name, in a fixed order (steps, frames, positions, segments)."""
        return {"steps": self.steps, "frames": self.frames, "positions": self.positions, "segments": self.segments}

    @property
    def nbytes(self) -> int:
        """Bytes allocated by all tables, frames included (live rows plus spare room)."""
        return sum(s.nbytes for s in self.stores.values())

    def segment_row(self, segment_ids: np.ndarray) -> np.ndarray:
        """Physical rows of the segment table for live global segment ids `[...] int64`.

        Raises KeyError when an id is no longer (or not yet) in the buffer."""
        segment_ids = np.asarray(segment_ids, dtype=np.int64)
        if segment_ids.size and (segment_ids.min() < self.segments.first or segment_ids.max() >= self.segments.end):
            raise KeyError("index refers to segments that are no longer in the buffer (sample again)")
        return segment_ids - self.segments.base

    def gather_obs(self, frame_rows: np.ndarray) -> np.ndarray:
        """Stacked obs whose oldest frame is at physical frame row `frame_rows [...]`: `[..., *obs_shape]`."""
        frames = self.frames.array("frame")
        stacked = frames[frame_rows[..., None] + np.arange(self.layout.frame_stack)]
        return stack_frames(stacked, frame_ndim=frames.ndim - 1)

    def drop_oldest(self, count: int) -> int:
        """Removes the `count` oldest segments and exactly their rows in every table, records
        ``clear_time = time``; returns the owned positions removed."""
        if count <= 0:
            return 0
        seg = {name: self.segments.live(name)[:count] for name in ("num_steps", "num_obs", "num_owned")}
        removed = int(seg["num_owned"].sum())
        self.steps.drop_front(int(seg["num_steps"].sum()))
        self.frames.drop_front(int((seg["num_obs"] + self.layout.frame_stack - 1).sum()))
        self.positions.drop_front(removed)
        self.segments.drop_front(count)
        self.clear_time = self.time
        return removed
