"""GameBuffer: segment replay with prioritized sampling and reanalyze; the single owner of
experience. It knows no policy type: the per-step columns a type adds are declared to it
(`columns.StepColumn`), and training batches are assembled by the type from the primitives in
`window` (`gather_window`, `n_step_values`), bound here as methods.

Notation: B = batch size, U = num_unroll_steps, T = td_steps, S = frame_stack, A = action
count, N = registered positions, m / n / n_obs = a segment's steps / owned steps / observations.

Storage. Pushed segments are copied into four FIFO tables (`ColumnStore`), in push order:
per-step columns, frames, per-position columns (segment id, local position, priority; one
row per *owned* position, the only rows sampling sees) and a per-segment table whose logical
row index is the global segment id (monotone, never reused). Gathering a batch is a handful
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

Reanalysis and the buffer file live in `reanalysis` and `buffer_state` (bound here as methods).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import buffer_state, reanalysis, window
from .batch import SampledIndex
from .columns import Reanalysis, StepColumn, check_extras
from .priority import importance_weights, sample_proportional, sampling_weights
from .segment import GameSegment, stack_frames
from .storage import ColumnStore

__all__ = ["GameBuffer", "ReanalyzeFn"]

ReanalyzeFn = Callable[[np.ndarray, np.ndarray, np.ndarray], Reanalysis]
"""`fn(obs [K, *obs_shape], action_mask [K, A] bool, to_play [K] int64) -> Reanalysis`."""

_EXTRA = "extra:"  # prefix of the step-table columns holding declared extra columns


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
        if num_unroll_steps < 0 or td_steps < 1 or frame_stack < 1 or action_space_size < 1:
            raise ValueError("need num_unroll_steps >= 0, td_steps >= 1, frame_stack >= 1, action_space_size >= 1")
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        if alpha < 0 or beta < 0 or not priority_eps > 0 or mini_infer_size < 1:
            raise ValueError("need alpha >= 0, beta >= 0, priority_eps > 0, mini_infer_size >= 1")
        self.capacity_transitions = int(capacity_transitions)
        self.num_unroll_steps = int(num_unroll_steps)
        self.td_steps = int(td_steps)
        self.discount = float(discount)
        self.frame_stack = int(frame_stack)
        self.action_space_size = int(action_space_size)
        self.policy_target_size = int(policy_target_size or action_space_size)
        self.action_dim = int(action_dim)
        if self.policy_target_size < 1 or self.action_dim < 0:
            raise ValueError("need policy_target_size >= 1 and action_dim >= 0")
        self.use_priority = bool(use_priority)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.priority_eps = float(priority_eps)
        self.use_max_priority_for_new_data = bool(use_max_priority_for_new_data)
        self.mini_infer_size = int(mini_infer_size)
        self.step_columns = tuple(step_columns)
        self._rng = np.random.default_rng(seed)
        self._reset_storage()

    def _reset_storage(self) -> None:
        self._steps = ColumnStore()
        self._frames = ColumnStore()
        self._positions = ColumnStore()
        self._segments = ColumnStore()
        self._frame_spec: tuple[tuple[int, ...], np.dtype] | None = None
        self._time = 0
        self._clear_time = 0

    # -- sizes and counters -------------------------------------------------------------------
    @property
    def num_transitions(self) -> int:
        """N: registered (owned, sampleable) positions."""
        return len(self._positions)

    def __len__(self) -> int:
        return self.num_transitions

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segment_ids(self) -> np.ndarray:
        """`[num_segments] int64` global ids of the live segments, oldest first."""
        return np.arange(self._segments.first, self._segments.end, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes allocated by all tables, frames included (live rows plus spare room)."""
        return sum(s.nbytes for s in (self._steps, self._frames, self._positions, self._segments))

    @property
    def max_priority(self) -> float:
        """Largest priority of the positions in the buffer (1.0 when empty).

        This is the reference's rule; a running max over all time would let one early outlier
        set the priority of all later data.
        """
        if not len(self._positions):
            return 1.0
        return float(self._positions.live("priority").max())

    @property
    def time(self) -> int:
        """Counter increased by every push, sample and evict call."""
        return self._time

    @property
    def clear_time(self) -> int:
        """`time` of the last call that evicted something (0 if none)."""
        return self._clear_time

    @property
    def obs_shape(self) -> tuple[int, ...] | None:
        """`(S * frame_shape[0], *frame_shape[1:])`, known after the first push."""
        if self._frame_spec is None:
            return None
        shape = self._frame_spec[0]
        return (self.frame_stack * shape[0],) + shape[1:]

    def priorities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the aligned per-position arrays, oldest first.

        Returns:
          `(segment_ids [N] int64, positions [N] int64, priorities [N] float64)`.
        """
        p = self._positions
        if not len(p):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
        return p.live("segment_id").copy(), p.live("position").copy(), p.live("priority").copy()

    def get_segment(self, segment_id: int) -> GameSegment:
        """A copy of a live segment (as pushed, or as last reanalysed)."""
        row = self._segment_row(np.array([segment_id]))[0]
        seg = {name: self._segments.array(name)[row] for name in self._segments.names}
        steps = slice(seg["step_start"] - self._steps.base, seg["step_start"] - self._steps.base + seg["num_steps"])
        frame0 = seg["frame_start"] - self._frames.base
        frames = slice(frame0, frame0 + self.frame_stack - 1 + seg["num_obs"])

        def col(name: str) -> np.ndarray:
            return self._steps.array(name)[steps].copy()

        return GameSegment(
            frames=self._frames.array("frame")[frames].copy(),
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
            extras={c.name: col(_EXTRA + c.name) for c in self.step_columns},
        )

    # -- push / evict -------------------------------------------------------------------------
    def push(self, segments: Sequence[GameSegment], priorities: Sequence[np.ndarray] | None = None) -> None:
        """Adds segments (oldest first), then evicts the oldest until N <= capacity.

        Registers exactly `num_owned` positions per segment. New priorities: `priorities[i]`
        (`[num_owned_i]`, >= 0, floored at priority_eps) if given; else the max priority in
        the buffer before this push when `use_max_priority_for_new_data` (1.0 if empty); else each
        segment's `initial_priorities(priority_eps)`. Validates everything before storing.
        """
        self._time += 1
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
            if self._frame_spec is None:
                self._frame_spec = (segment.frame_shape, segment.frames.dtype)
        for segment, prio in zip(segments, new_priorities):
            self._store(segment, prio)
        self._evict_to(self.capacity_transitions)

    def evict_oldest(self, num_segments: int = 1) -> int:
        """Evicts the `num_segments` oldest segments; returns the positions removed."""
        self._time += 1
        count = min(int(num_segments), self.num_segments)
        return self._drop_oldest(count)

    def _check_segment(self, segment: GameSegment) -> None:
        if not isinstance(segment, GameSegment):
            raise TypeError(f"expected GameSegment, got {type(segment).__name__}")
        if segment.frame_stack != self.frame_stack:
            raise ValueError(f"segment frame_stack {segment.frame_stack} != buffer frame_stack {self.frame_stack}")
        if segment.action_space_size != self.action_space_size:
            raise ValueError(f"segment has A={segment.action_space_size}, buffer A={self.action_space_size}")
        if segment.policy_target_size != self.policy_target_size:
            raise ValueError(f"segment has policy targets of width {segment.policy_target_size}, "
                             f"buffer {self.policy_target_size}")
        if segment.action_dim != self.action_dim:
            raise ValueError(f"segment has action_dim={segment.action_dim}, buffer action_dim={self.action_dim}")
        if self._frame_spec is not None and (segment.frame_shape, segment.frames.dtype) != self._frame_spec:
            raise ValueError(
                f"segment frames {segment.frame_shape} {segment.frames.dtype} differ from stored {self._frame_spec}"
            )
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
        segment_id = self._segments.end
        step_start = self._steps.append(
            action=segment.actions,
            reward=segment.rewards,
            root_value=segment.root_values,
            pred_value=segment.pred_values,
            policy_target=segment.policy_targets,
            action_mask=segment.action_mask,
            to_play=segment.to_play,
            timestep=segment.timesteps,
            **{_EXTRA + c.name: np.asarray(segment.extras[c.name], c.dtype) for c in self.step_columns},
        )
        frame_start = self._frames.append(frame=segment.frames)
        n = segment.num_owned
        position_start = self._positions.append(
            segment_id=np.full(n, segment_id, dtype=np.int64),
            position=np.arange(n, dtype=np.int64),
            priority=priorities,
            sample_weight=sampling_weights(priorities, alpha=self.alpha),
        )
        self._segments.append(
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
        owned = np.cumsum(self._segments.live("num_owned"))
        count = int(np.searchsorted(owned, excess)) + 1  # fewest oldest segments covering the excess
        self._drop_oldest(count)

    def _drop_oldest(self, count: int) -> int:
        """Removes the `count` oldest segments and exactly their rows in every table."""
        if count <= 0:
            return 0
        seg = {name: self._segments.live(name)[:count] for name in ("num_steps", "num_obs", "num_owned")}
        removed = int(seg["num_owned"].sum())
        self._steps.drop_front(int(seg["num_steps"].sum()))
        self._frames.drop_front(int((seg["num_obs"] + self.frame_stack - 1).sum()))
        self._positions.drop_front(removed)
        self._segments.drop_front(count)
        self._clear_time = self._time
        return removed

    def check_invariants(self) -> None:
        """Raises AssertionError if the tables are not aligned (cheap enough for tests)."""
        seg = {name: self._segments.live(name) for name in self._segments.names} if len(self._segments) else None
        if seg is None:
            assert len(self._steps) == len(self._frames) == len(self._positions) == 0
            return
        frames_per = seg["num_obs"] + self.frame_stack - 1
        for table, start, size in (
            (self._steps, seg["step_start"], seg["num_steps"]),
            (self._frames, seg["frame_start"], frames_per),
            (self._positions, seg["position_start"], seg["num_owned"]),
        ):
            assert start[0] == table.first, (start[0], table.first)
            assert np.array_equal(start[1:], start[:-1] + size[:-1])
            assert table.end == start[-1] + size[-1]
        ids = np.repeat(self.segment_ids, seg["num_owned"])
        local = np.concatenate([np.arange(k) for k in seg["num_owned"]])
        assert np.array_equal(self._positions.live("segment_id"), ids)
        assert np.array_equal(self._positions.live("position"), local)
        prio = self._positions.live("priority")
        assert np.all(np.isfinite(prio)) and np.all(prio > 0)
        assert np.allclose(self._positions.live("sample_weight"), sampling_weights(prio, alpha=self.alpha))
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
        self._time += 1
        beta = self.beta if beta is None else float(beta)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if self.use_priority and self.alpha > 0:
            rows, log_probs = sample_proportional(self._positions.live("sample_weight"), batch_size, self._rng)
            weights = importance_weights(log_probs, num_items, beta=beta)
        else:
            rows = self._rng.choice(num_items, size=batch_size, replace=batch_size > num_items)
            weights = np.ones(batch_size, dtype=np.float32)
        return SampledIndex(
            segment_ids=self._positions.live("segment_id")[rows],
            positions=self._positions.live("position")[rows],
            weights=weights,
            make_time=self._time,
        )

    def update_priorities(self, index: SampledIndex, priorities: np.ndarray) -> int:
        """Writes new priorities `[B]` (finite, >= 0; floored at priority_eps) back.

        Applied only when `index.make_time > clear_time` (nothing was evicted since the sample
        was drawn), at the exact (global segment id, local position) of each row. Returns the
        number of rows written (0 for a stale index).
        """
        prio = self._clean_priorities(priorities, expected=len(index))
        if index.make_time <= self._clear_time or len(index) == 0:
            return 0
        seg_ids = np.asarray(index.segment_ids, dtype=np.int64)
        local = np.asarray(index.positions, dtype=np.int64)
        alive = (seg_ids >= self._segments.first) & (seg_ids < self._segments.end)
        seg_rows = seg_ids[alive] - self._segments.base
        owned = self._segments.array("num_owned")[seg_rows]
        ok = (local[alive] >= 0) & (local[alive] < owned)
        if not ok.all():
            raise ValueError("index holds positions that are not owned by their segment")
        rows = self._segments.array("position_start")[seg_rows] + local[alive] - self._positions.base
        if not np.array_equal(self._positions.array("segment_id")[rows], seg_ids[alive]):
            raise RuntimeError("position table out of alignment")  # internal invariant
        self._positions.array("priority")[rows] = prio[alive]
        self._positions.array("sample_weight")[rows] = sampling_weights(prio[alive], alpha=self.alpha)
        return int(alive.sum())

    # -- addressing (also used by `window`) ----------------------------------------------------
    def _segment_row(self, segment_ids: np.ndarray) -> np.ndarray:
        segment_ids = np.asarray(segment_ids, dtype=np.int64)
        if segment_ids.size and (segment_ids.min() < self._segments.first or segment_ids.max() >= self._segments.end):
            raise KeyError("index refers to segments that are no longer in the buffer (sample again)")
        return segment_ids - self._segments.base

    def _gather_obs(self, frame_rows: np.ndarray) -> np.ndarray:
        """Stacked obs whose oldest frame is at physical frame row `frame_rows [...]`: `[..., *obs_shape]`."""
        frames = self._frames.array("frame")
        stacked = frames[frame_rows[..., None] + np.arange(self.frame_stack)]
        return stack_frames(stacked, frame_ndim=frames.ndim - 1)

    # -- batches (the type assembles them from these primitives; see `window`) ----------------
    def gather_window(self, index: SampledIndex) -> "window.UnrollWindow":
        """The common per-step data over the unroll window of every sampled position."""
        return window.gather_window(self, index)

    def n_step_values(self, win: "window.UnrollWindow", *, value_fn: "window.ValueFn | None",
                      use_root_value: bool = False, bootstrap_fn: "window.BootstrapFn | None" = None) -> np.ndarray:
        """`[B, U+1] float32` n-step value targets over a window (see `targets`)."""
        return window.n_step_values(self, win, value_fn=value_fn, use_root_value=use_root_value,
                                    bootstrap_fn=bootstrap_fn)

    def gather_history(self, segment_ids: np.ndarray, positions: np.ndarray, length: int) -> "window.History":
        """Observations and actions of the `length` steps ending at each position (see `window`)."""
        return window.gather_history(self, segment_ids, positions, length)

    # -- buffer reanalyze (see `reanalysis`) -------------------------------------------------------
    def choose_stale_segments(self, *, num_segments: int, partition: float = 0.75, staleness_decay: float = 100.0,
                              rng: np.random.Generator | None = None) -> np.ndarray:
        """Draws segments for a buffer reanalyze among the oldest, the least reanalysed first, and
        counts it; their global ids `[k] int64` (see `reanalysis.choose_stale_segments`)."""
        return reanalysis.choose_stale_segments(self, num_segments=num_segments, partition=partition,
                                                staleness_decay=staleness_decay, rng=rng)

    def reanalyze_counts(self) -> np.ndarray:
        """`[num_segments] int64` how often each live segment was chosen by a buffer reanalyze, oldest first."""
        return self._segments.live("reanalyze_count").copy() if len(self._segments) else np.zeros(0, np.int64)

    def segment_steps(self, segment_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`(segment_ids [K], positions [K])` of every step of these segments (see `reanalysis`)."""
        return reanalysis.segment_steps(self, segment_ids)

    def reanalyze_segments(self, segment_ids: np.ndarray, fn: ReanalyzeFn, *, history_length: int = 0) -> None:
        """Re-searches every step of these segments with `fn` and stores the results; with
        ``history_length`` H, `fn` gets each step's H-step `History` in place of obs (see `reanalysis`)."""
        reanalysis.reanalyze_segments(self, segment_ids, fn, history_length=history_length)

    def run_reanalysis(self, fn: ReanalyzeFn, obs: np.ndarray, action_mask: np.ndarray,
                       to_play: np.ndarray) -> Reanalysis:
        """`fn` over K rows in chunks of mini_infer_size, checked (see `reanalysis.run_reanalysis`)."""
        return reanalysis.run_reanalysis(self, fn, obs, action_mask, to_play)

    # -- checkpointing (see `buffer_state`) ------------------------------------------------------
    def state_dict(self, *, copy: bool = True) -> dict:
        """Plain dict of numpy arrays and Python scalars (picklable, no torch); ``copy=False``:
        views of the tables, valid until the buffer next changes (what a checkpoint writes)."""
        return buffer_state.state_dict(self, copy=copy)

    def load_state_dict(self, state: dict, *, copy: bool = True) -> None:
        """Restores a `state_dict` (this version or 1); U, T, S, A and the declared extra
        columns must match. Evicts if capacity shrank. ``copy=False``: the buffer takes the
        state's (writable) arrays as its tables instead of copying them."""
        buffer_state.load_state_dict(self, state, copy=copy)
