"""GameBuffer: segment replay with prioritized sampling and reanalyze; the single owner of
experience. It knows no policy type: the per-step columns a type adds are declared to it
(`columns.StepColumn`), and training batches are assembled by the type from the primitives in
`window` (`gather_window`, `n_step_values`), bound here as methods.

Notation: B = batch size, U = num_unroll_steps, T = td_steps, S = frame_stack, A = action
count, N = registered positions, m / n / n_obs = a segment's steps / owned steps / observations.

Storage. Pushed segments are copied into four FIFO tables (`tables.ReplayTables`), in push
order: per-step columns, frames, per-position columns (segment id, local position, priority;
one row per *owned* position, the only rows sampling sees) and a per-segment table whose
logical row index is the global segment id (monotone, never reused). Gathering a batch is a handful
of numpy fancy-indexing calls over these tables, with no Python loop over samples.

Exactness (what the original got wrong):
  * push registers exactly `num_owned` positions per segment and an eviction removes exactly
    the evicted segments' own rows from every table, so no other segment loses a position.
  * sampling only ever chooses registered (owned) positions, so no position is re-drawn after
    sampling, and the IS weight returned is the one of the exact position used.
  * a time counter increases on every push / sample / evict call; samples carry it as
    `make_time`, evictions record it as `clear_time`, and a priority write-back is applied only
    when make_time > clear_time, addressed by global segment id + local position.

The buffer knows nothing about models: value and search work arrive as callables over numpy
arrays and are called in chunks of at most `mini_infer_size` rows.

Reanalysis and the buffer file live in `reanalysis` and `buffer_state` (bound here as methods);
like `window`, they work on the buffer's `tables` (`self.tables`), never on this class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import buffer_state, reanalysis, window
from .batch import SampledIndex
from .columns import Reanalysis, StepColumn, check_extras
from .journal import BufferChange, BufferJournal, EvictChange, PushChange, StepWriteChange
from .priority import importance_weights, sample_proportional, sampling_weights
from .reanalysis import ReanalyzeFn
from .segment import GameSegment
from .tables import EXTRA_PREFIX, BufferLayout, ReplayTables

__all__ = ["GameBuffer"]


class GameBuffer:
    """Replay buffer of `GameSegment`s; capacity counted in owned positions."""

    def __init__(
        self,
        *,
        capacity_transitions: int,
        num_unroll_steps: int,
        td_steps: int,
        discount: float,
        frame_stack: int,
        action_space_size: int,
        use_priority: bool = True,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
        use_max_priority_for_new_data: bool = True,
        mini_infer_size: int = 2048,
        step_columns: Sequence[StepColumn] = (),
        policy_target_size: int | None = None,
        action_dim: int = 0,
        seed: int | None = None,
    ):
        if capacity_transitions < 1:
            raise ValueError(f"capacity_transitions must be >= 1, got {capacity_transitions}")
        if alpha < 0 or beta < 0 or not priority_eps > 0:
            raise ValueError("need alpha >= 0, beta >= 0, priority_eps > 0")
        self.layout = BufferLayout(
            num_unroll_steps=int(num_unroll_steps),
            td_steps=int(td_steps),
            discount=float(discount),
            frame_stack=int(frame_stack),
            action_space_size=int(action_space_size),
            policy_target_size=int(policy_target_size or action_space_size),
            action_dim=int(action_dim),
            mini_infer_size=int(mini_infer_size),
            step_columns=tuple(step_columns),
        )
        self.capacity_transitions = int(capacity_transitions)
        self.use_priority = bool(use_priority)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.priority_eps = float(priority_eps)
        self.use_max_priority_for_new_data = bool(use_max_priority_for_new_data)
        self.tables = ReplayTables(self.layout, seed=seed)
        self._journals: list[BufferJournal] = []

    # -- the layout (`tables.BufferLayout`) ---------------------------------------------------------
    num_unroll_steps = property(lambda self: self.layout.num_unroll_steps, doc="U (`BufferLayout`).")
    td_steps = property(lambda self: self.layout.td_steps, doc="T (`BufferLayout`).")
    discount = property(lambda self: self.layout.discount, doc="Discount of the value targets.")
    frame_stack = property(lambda self: self.layout.frame_stack, doc="S (`BufferLayout`).")
    action_space_size = property(lambda self: self.layout.action_space_size, doc="A (`BufferLayout`).")
    policy_target_size = property(lambda self: self.layout.policy_target_size, doc="Policy target width.")
    action_dim = property(lambda self: self.layout.action_dim, doc="D of continuous actions (0: discrete).")
    mini_infer_size = property(lambda self: self.layout.mini_infer_size, doc="Most rows per inference call.")
    step_columns = property(lambda self: self.layout.step_columns, doc="Declared extra step columns.")

    # -- sizes and counters -------------------------------------------------------------------
    @property
    def num_transitions(self) -> int:
        """N: registered (owned, sampleable) positions."""
        return len(self.tables.positions)

    def __len__(self) -> int:
        return self.num_transitions

    @property
    def num_segments(self) -> int:
        return len(self.tables.segments)

    @property
    def segment_ids(self) -> np.ndarray:
        """`[num_segments] int64` global ids of the live segments, oldest first."""
        return np.arange(self.tables.segments.first, self.tables.segments.end, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes allocated by all tables, frames included (live rows plus spare room)."""
        return self.tables.nbytes

    @property
    def max_priority(self) -> float:
        """Largest priority of the positions in the buffer (1.0 when empty).

        This is LightZero's rule; a running max over all time would let one early outlier
        set the priority of all later data.
        """
        if not len(self.tables.positions):
            return 1.0
        return float(self.tables.positions.live("priority").max())

    @property
    def time(self) -> int:
        """Counter increased by every push, sample and evict call."""
        return self.tables.time

    @property
    def clear_time(self) -> int:
        """`time` of the last call that evicted something (0 if none)."""
        return self.tables.clear_time

    @property
    def obs_shape(self) -> tuple[int, ...] | None:
        """`(S * frame_shape[0], *frame_shape[1:])`, known after the first push."""
        if self.tables.frame_spec is None:
            return None
        shape = self.tables.frame_spec[0]
        return (self.frame_stack * shape[0],) + shape[1:]

    def priorities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the aligned per-position arrays, oldest first.

        Returns:
          `(segment_ids [N] int64, positions [N] int64, priorities [N] float64)`.
        """
        p = self.tables.positions
        if not len(p):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
        return p.live("segment_id").copy(), p.live("position").copy(), p.live("priority").copy()

    def get_segment(self, segment_id: int) -> GameSegment:
        """A copy of a live segment (as pushed, or as last reanalysed)."""
        t = self.tables
        row = t.segment_row(np.array([segment_id]))[0]
        seg = {name: t.segments.array(name)[row] for name in t.segments.names}
        step0 = seg["step_start"] - t.steps.base
        steps = slice(step0, step0 + seg["num_steps"])
        frame0 = seg["frame_start"] - t.frames.base
        frames = slice(frame0, frame0 + self.frame_stack - 1 + seg["num_obs"])

        def col(name: str) -> np.ndarray:
            return t.steps.array(name)[steps].copy()

        return GameSegment(
            frames=t.frames.array("frame")[frames].copy(),
            actions=col("action"),
            rewards=col("reward"),
            root_values=col("root_value"),
            pred_values=col("pred_value"),
            policy_targets=col("policy_target"),
            action_mask=col("action_mask"),
            to_play=col("to_play"),
            timesteps=col("timestep"),
            num_owned=int(seg["num_owned"]),
            terminal=bool(seg["terminal"]),
            truncated=bool(seg["truncated"]),
            extras={c.name: col(EXTRA_PREFIX + c.name) for c in self.step_columns},
        )

    # -- push / evict -------------------------------------------------------------------------
    def push(self, segments: Sequence[GameSegment], priorities: Sequence[np.ndarray] | None = None) -> None:
        """Adds segments (oldest first), then evicts the oldest until N <= capacity.

        Registers exactly `num_owned` positions per segment. New priorities: `priorities[i]`
        (`[num_owned_i]`, >= 0, floored at priority_eps) if given; else the max priority in
        the buffer before this push when `use_max_priority_for_new_data` (1.0 if empty); else each
        segment's `initial_priorities(priority_eps)`. Validates everything before storing.
        """
        self.tables.time += 1
        if priorities is not None and len(priorities) != len(segments):
            raise ValueError(f"{len(priorities)} priority arrays for {len(segments)} segments")
        new_priorities = []
        new_data_priority = self.max_priority
        for i, segment in enumerate(segments):
            self._check_segment(segment)
            if priorities is not None:
                prio = self._clean_priorities(priorities[i], expected=segment.num_owned)
            elif self.use_max_priority_for_new_data:
                prio = np.full(segment.num_owned, new_data_priority)
            else:
                prio = segment.initial_priorities(self.priority_eps).astype(np.float64)
            new_priorities.append(prio)
            if self.tables.frame_spec is None:
                self.tables.frame_spec = (segment.frame_shape, segment.frames.dtype)
        for segment, prio in zip(segments, new_priorities):
            self._store(segment, prio)
        self._evict_to(self.capacity_transitions)
        self._record(PushChange(tuple(segments)))

    def evict_oldest(self, num_segments: int = 1) -> int:
        """Evicts the `num_segments` oldest segments; returns the positions removed."""
        self.tables.time += 1
        count = min(int(num_segments), self.num_segments)
        self._record(EvictChange(count))
        return self.tables.drop_oldest(count)

    # -- replicas (see `journal`) ------------------------------------------------------------------
    def open_journal(self) -> BufferJournal:
        """A journal of this buffer's changes from now on, for a replica to follow (its first
        drain hands over the whole buffer)."""
        journal = BufferJournal(self.capacity_transitions)
        self._journals.append(journal)
        return journal

    def close_journal(self, journal: BufferJournal) -> None:
        """Stop recording into ``journal``."""
        self._journals = [j for j in self._journals if j is not journal]

    def _record(self, change: BufferChange) -> None:
        for journal in self._journals:
            journal.record(change)

    def step_column_values(self, segment_ids: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of the columns a buffer reanalyze rewrites (``policy_target``, ``root_value``
        and the declared extras), over every step of ``segment_ids`` in `segment_steps` order."""
        rows = self._step_rows(segment_ids)
        names = ["policy_target", "root_value"] + [EXTRA_PREFIX + c.name for c in self.step_columns]
        return {name: self.tables.steps.array(name)[rows].copy() for name in names}

    def write_step_columns(self, segment_ids: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Writes `step_column_values`-shaped ``columns`` into the steps of ``segment_ids`` (a
        replica following a buffer reanalyze of its owner)."""
        rows = self._step_rows(segment_ids)
        for name, values in columns.items():
            self.tables.steps.array(name)[rows] = values

    def _step_rows(self, segment_ids: np.ndarray) -> np.ndarray:
        ids, local = reanalysis.segment_steps(self.tables, segment_ids)
        return self.tables.segments.array("step_start")[self.tables.segment_row(ids)] - self.tables.steps.base + local

    def _check_segment(self, segment: GameSegment) -> None:
        if not isinstance(segment, GameSegment):
            raise TypeError(f"expected GameSegment, got {type(segment).__name__}")
        if segment.frame_stack != self.frame_stack:
            raise ValueError(f"segment frame_stack {segment.frame_stack} != buffer frame_stack {self.frame_stack}")
        if segment.action_space_size != self.action_space_size:
            raise ValueError(f"segment has A={segment.action_space_size}, buffer A={self.action_space_size}")
        if segment.policy_target_size != self.policy_target_size:
            raise ValueError(
                f"segment has policy targets of width {segment.policy_target_size}, buffer {self.policy_target_size}"
            )
        if segment.action_dim != self.action_dim:
            raise ValueError(f"segment has action_dim={segment.action_dim}, buffer action_dim={self.action_dim}")
        stored = self.tables.frame_spec
        if stored is not None and (segment.frame_shape, segment.frames.dtype) != stored:
            raise ValueError(f"segment frames {segment.frame_shape} {segment.frames.dtype} differ from stored {stored}")
        check_extras(self.step_columns, segment.extras, rows=segment.num_steps, where="GameBuffer.push")
        need = self.num_unroll_steps + self.td_steps
        if not segment.terminal and not segment.truncated and segment.num_padding < need:
            raise ValueError(
                f"a non-terminal segment needs >= U+T={need} padding steps to build its targets, "
                f"got {segment.num_padding}"
            )

    def _clean_priorities(self, priorities, *, expected: int | None = None) -> np.ndarray:
        prio = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if expected is not None and prio.shape[0] != expected:
            raise ValueError(f"expected {expected} priorities, got {prio.shape[0]}")
        bad = ~np.isfinite(prio)
        if bad.any():
            raise ValueError(f"priorities must be finite; got {prio[bad][:5]} at rows {np.flatnonzero(bad)[:5]}")
        if (prio < 0).any():
            raise ValueError(f"priorities must be >= 0; got min {prio.min()}")
        return np.maximum(prio, self.priority_eps)

    def _store(self, segment: GameSegment, priorities: np.ndarray) -> None:
        segment_id = self.tables.segments.end
        step_start = self.tables.steps.append(
            action=segment.actions,
            reward=segment.rewards,
            root_value=segment.root_values,
            pred_value=segment.pred_values,
            policy_target=segment.policy_targets,
            action_mask=segment.action_mask,
            to_play=segment.to_play,
            timestep=segment.timesteps,
            **{EXTRA_PREFIX + c.name: np.asarray(segment.extras[c.name], c.dtype) for c in self.step_columns},
        )
        frame_start = self.tables.frames.append(frame=segment.frames)
        n = segment.num_owned
        position_start = self.tables.positions.append(
            segment_id=np.full(n, segment_id, dtype=np.int64),
            position=np.arange(n, dtype=np.int64),
            priority=priorities,
            sample_weight=sampling_weights(priorities, alpha=self.alpha),
        )
        self.tables.segments.append(
            step_start=np.array([step_start], dtype=np.int64),
            frame_start=np.array([frame_start], dtype=np.int64),
            position_start=np.array([position_start], dtype=np.int64),
            num_steps=np.array([segment.num_steps], dtype=np.int64),
            num_obs=np.array([segment.num_obs], dtype=np.int64),
            num_owned=np.array([n], dtype=np.int64),
            terminal=np.array([segment.terminal]),
            truncated=np.array([segment.truncated]),
            reanalyze_count=np.zeros(1, dtype=np.int64),  # buffer reanalyzes of this segment so far
        )

    def _evict_to(self, capacity: int) -> None:
        excess = self.num_transitions - capacity
        if excess <= 0:
            return
        owned = np.cumsum(self.tables.segments.live("num_owned"))
        count = int(np.searchsorted(owned, excess)) + 1  # fewest oldest segments covering the excess
        self.tables.drop_oldest(count)

    def check_invariants(self) -> None:
        """Raises AssertionError if the tables are not aligned (cheap enough for tests)."""
        t = self.tables
        if not len(t.segments):
            assert len(t.steps) == len(t.frames) == len(t.positions) == 0
            return
        seg = {name: t.segments.live(name) for name in t.segments.names}
        frames_per = seg["num_obs"] + self.frame_stack - 1
        for table, start, size in (
            (t.steps, seg["step_start"], seg["num_steps"]),
            (t.frames, seg["frame_start"], frames_per),
            (t.positions, seg["position_start"], seg["num_owned"]),
        ):
            assert start[0] == table.first, (start[0], table.first)
            assert np.array_equal(start[1:], start[:-1] + size[:-1])
            assert table.end == start[-1] + size[-1]
        ids = np.repeat(self.segment_ids, seg["num_owned"])
        local = np.concatenate([np.arange(k) for k in seg["num_owned"]])
        assert np.array_equal(t.positions.live("segment_id"), ids)
        assert np.array_equal(t.positions.live("position"), local)
        prio = t.positions.live("priority")
        assert np.all(np.isfinite(prio)) and np.all(prio > 0)
        assert np.allclose(t.positions.live("sample_weight"), sampling_weights(prio, alpha=self.alpha))
        assert self.num_transitions <= self.capacity_transitions

    # -- sampling and priorities --------------------------------------------------------------
    def sample(self, batch_size: int, *, beta: float | None = None) -> SampledIndex:
        """Draws B owned positions: P(i) = p_i^alpha / sum (uniform without priority).

        Without replacement when B <= N (Gumbel-top-k, O(N)), with replacement otherwise. IS
        weights w = (N P(i))^-beta / max over the batch are those of exactly the returned
        positions (uniform sampling gives all ones).
        """
        num_items = self.num_transitions
        if num_items == 0:
            raise ValueError("cannot sample from an empty buffer")
        self.tables.time += 1
        beta = self.beta if beta is None else float(beta)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if self.use_priority and self.alpha > 0:
            p_alpha = self.tables.positions.live("sample_weight")  # [N] priority ** alpha
            rows, log_probs = sample_proportional(p_alpha, batch_size, self.tables.rng)
            weights = importance_weights(log_probs, num_items, beta=beta)
        else:
            rows = self.tables.rng.choice(num_items, size=batch_size, replace=batch_size > num_items)
            weights = np.ones(batch_size, dtype=np.float32)
        return SampledIndex(
            segment_ids=self.tables.positions.live("segment_id")[rows],
            positions=self.tables.positions.live("position")[rows],
            weights=weights,
            make_time=self.tables.time,
        )

    def update_priorities(self, index: SampledIndex, priorities: np.ndarray) -> int:
        """Writes new priorities `[B]` (finite, >= 0; floored at priority_eps) back.

        Applied only when `index.make_time > clear_time` (nothing was evicted since the sample
        was drawn), at the exact (global segment id, local position) of each row. Returns the
        number of rows written (0 for a stale index).
        """
        prio = self._clean_priorities(priorities, expected=len(index))
        if index.make_time <= self.tables.clear_time or len(index) == 0:
            return 0
        seg_ids = np.asarray(index.segment_ids, dtype=np.int64)
        local = np.asarray(index.positions, dtype=np.int64)
        segments, positions = self.tables.segments, self.tables.positions
        alive = (seg_ids >= segments.first) & (seg_ids < segments.end)
        seg_rows = seg_ids[alive] - segments.base
        owned = segments.array("num_owned")[seg_rows]
        ok = (local[alive] >= 0) & (local[alive] < owned)
        if not ok.all():
            raise ValueError("index holds positions that are not owned by their segment")
        rows = segments.array("position_start")[seg_rows] + local[alive] - positions.base
        if not np.array_equal(positions.array("segment_id")[rows], seg_ids[alive]):
            raise RuntimeError("position table out of alignment")  # internal invariant
        positions.array("priority")[rows] = prio[alive]
        positions.array("sample_weight")[rows] = sampling_weights(prio[alive], alpha=self.alpha)
        return int(alive.sum())

    # -- batches (the type assembles them from these primitives; see `window`) ----------------
    def with_padding(self, index: SampledIndex) -> SampledIndex:
        """``index`` with the random actions past its segments' ends drawn now, from this buffer's
        RNG exactly as `gather_window` would draw them (`window.with_padding`)."""
        return window.with_padding(self.tables, index)

    def gather_window(self, index: SampledIndex) -> "window.UnrollWindow":
        """The common per-step data over the unroll window of every sampled position."""
        return window.gather_window(self.tables, index)

    def n_step_values(
        self,
        win: "window.UnrollWindow",
        *,
        value_fn: "window.ValueFn | None",
        use_root_value: bool = False,
        bootstrap_fn: "window.BootstrapFn | None" = None,
    ) -> np.ndarray:
        """`[B, U+1] float32` n-step value targets over a window (see `targets`)."""
        return window.n_step_values(
            self.tables, win, value_fn=value_fn, use_root_value=use_root_value, bootstrap_fn=bootstrap_fn
        )

    def gather_history(self, segment_ids: np.ndarray, positions: np.ndarray, length: int) -> "window.History":
        """Observations and actions of the `length` steps ending at each position (see `window`)."""
        return window.gather_history(self.tables, segment_ids, positions, length)

    # -- buffer reanalyze (see `reanalysis`) -------------------------------------------------------
    def choose_stale_segments(
        self,
        *,
        num_segments: int,
        partition: float = 0.75,
        staleness_decay: float = 100.0,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        """Draws segments for a buffer reanalyze among the oldest, the least reanalysed first, and
        counts it; their global ids `[k] int64` (see `reanalysis.choose_stale_segments`)."""
        return reanalysis.choose_stale_segments(
            self.tables, num_segments=num_segments, partition=partition, staleness_decay=staleness_decay, rng=rng
        )

    def enough_for_reanalysis(self, *, num_sequences: int, partition: float) -> bool:
        """LightZero's precondition of a buffer reanalyze (see `reanalysis.enough_for_reanalysis`)."""
        return reanalysis.enough_for_reanalysis(self.tables, num_sequences=num_sequences, partition=partition)

    def reanalyze_counts(self) -> np.ndarray:
        """`[num_segments] int64` how often each live segment was chosen by a buffer reanalyze, oldest first."""
        return (
            self.tables.segments.live("reanalyze_count").copy() if len(self.tables.segments) else np.zeros(0, np.int64)
        )

    def segment_steps(self, segment_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`(segment_ids [K], positions [K])` of every step of these segments (see `reanalysis`)."""
        return reanalysis.segment_steps(self.tables, segment_ids)

    def reanalyze_segments(
        self, segment_ids: np.ndarray, fn: ReanalyzeFn, *, history_length: int = 0, write_root_values: bool = True
    ) -> None:
        """Re-searches every step of these segments with `fn` and stores the results (root values
        only when ``write_root_values``); with ``history_length`` H, `fn` gets each step's H-step
        `History` in place of obs (see `reanalysis`)."""
        reanalysis.reanalyze_segments(
            self.tables, segment_ids, fn, history_length=history_length, write_root_values=write_root_values
        )
        if self._journals:
            ids = np.asarray(segment_ids, np.int64).copy()
            self._record(StepWriteChange(ids, self.step_column_values(ids)))

    def run_reanalysis(
        self, fn: ReanalyzeFn, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray
    ) -> Reanalysis:
        """`fn` over K rows in chunks of mini_infer_size, checked (see `reanalysis.run_reanalysis`)."""
        return reanalysis.run_reanalysis(self.tables, fn, obs, action_mask, to_play)

    # -- checkpointing (see `buffer_state`) ------------------------------------------------------
    def state_dict(self, *, copy: bool = True) -> dict:
        """Plain dict of numpy arrays and Python scalars (picklable, no torch); ``copy=False``:
        views of the tables, valid until the buffer next changes (what a checkpoint writes)."""
        return buffer_state.state_dict(self.tables, copy=copy)

    def load_state_dict(self, state: dict, *, copy: bool = True) -> None:
        """Restores a `state_dict` (this version or 1); U, T, S, A and the declared extra
        columns must match. Evicts if capacity shrank. ``copy=False``: the buffer takes the
        state's (writable) arrays as its tables instead of copying them."""
        buffer_state.load_state_dict(self.tables, state, alpha=self.alpha, copy=copy)
        if self.num_transitions > self.capacity_transitions:
            self.tables.time += 1
            self._evict_to(self.capacity_transitions)
        for journal in self._journals:
            journal.restart()
