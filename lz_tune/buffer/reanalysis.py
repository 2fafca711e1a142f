"""Reanalysis over a buffer's `tables.ReplayTables`: re-searching stored positions with a newer network.

Periodic buffer reanalyze (LightZero's ``reanalyze_buffer``) is two steps:

* `choose_stale_segments` picks whole segments among the oldest ``reanalyze_partition`` of the
  buffer, favouring those re-searched least often: P(j) ∝ exp(-(staleness_decay / P) * c_j) over
  the P = int(partition * live) oldest, c_j the segment's reanalyze count (LightZero's
  weighting: a segment never reanalysed is ``e^100`` times likelier than one done once at
  P = 1), and adds one to the count of each chosen segment;
* `reanalyze_segments` re-searches every step of those segments (owned and padding) with
  `fn(obs [K, *obs_shape], action_mask [K, A], to_play [K]) -> Reanalysis` (types whose search
  starts from the steps before a position, such as UniZero, get a `History` in place of obs)
  and writes the new policy targets, root values and any extra columns into the buffer's
  private copies. Segment objects handed out earlier are copies and never change; priorities
  are left as they are.

`run_reanalysis` calls a search function in chunks and checks what it returns (also used for the
reanalysed rows of a training batch). All are bound as `GameBuffer` methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .columns import Reanalysis, check_extras
from .priority import gumbel_top_k
from .tables import EXTRA_PREFIX, ReplayTables
from .window import gather_history

__all__ = [
    "ReanalyzeFn",
    "segments_for_sequences",
    "enough_for_reanalysis",
    "choose_stale_segments",
    "segment_steps",
    "reanalyze_segments",
    "run_reanalysis",
    "check_reanalysis",
]

ReanalyzeFn = Callable[[Any, np.ndarray, np.ndarray], Reanalysis]
"""`fn(obs [K, *obs_shape], action_mask [K, A] bool, to_play [K] int64) -> Reanalysis` (with a
``history_length``: a `History` in place of obs)."""


def segments_for_sequences(num_sequences: int, *, game_segment_length: int, num_unroll_steps: int) -> int:
    """How many whole segments a reanalyze of ``num_sequences`` sequences re-searches.

    LightZero counts ``reanalyze_batch_size`` in sequences of ``num_unroll_steps`` steps and
    slices each chosen segment into ``s = game_segment_length // num_unroll_steps`` of them
    (positions 0, U, 2U, ...), so it takes ``num_sequences // s`` segments, plus one more segment
    per sequence of the remainder (``num_sequences % s``), as LightZero does."""
    per_segment = max(1, game_segment_length // max(1, num_unroll_steps))
    return num_sequences // per_segment + num_sequences % per_segment


def enough_for_reanalysis(tables: ReplayTables, *, num_sequences: int, partition: float) -> bool:
    """LightZero's precondition of a buffer reanalyze: ``N // U > int(num_sequences / partition)``
    (N registered positions, U num_unroll_steps, at least 1)."""
    return len(tables.positions) // max(1, tables.layout.num_unroll_steps) > int(num_sequences / partition)


def choose_stale_segments(
    tables: ReplayTables,
    *,
    num_segments: int,
    partition: float = 0.75,
    staleness_decay: float = 100.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Draws up to ``num_segments`` distinct segments among the P = int(partition * live) oldest,
    without replacement, with probability ∝ exp(-(staleness_decay / P) * reanalyze_count), and
    counts the reanalyze of each (module docstring). Returns their global ids, `[k] int64`,
    ascending (empty when P = 0)."""
    if not 0.0 < partition <= 1.0:
        raise ValueError(f"partition must be in (0, 1], got {partition}")
    if num_segments < 0 or staleness_decay < 0:
        raise ValueError("num_segments and staleness_decay must be >= 0")
    table = tables.segments
    oldest = int(len(table) * partition)
    if oldest == 0 or num_segments == 0:
        return np.zeros(0, dtype=np.int64)
    rng = tables.rng if rng is None else rng
    counts = table.live("reanalyze_count")[:oldest].astype(np.float64)
    log_weights = -(staleness_decay / oldest) * counts
    chosen = np.sort(gumbel_top_k(log_weights, min(int(num_segments), oldest), rng))
    table.live("reanalyze_count")[chosen] += 1
    return chosen + table.first


def segment_steps(tables: ReplayTables, segment_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every step (owned and padding) of the given live segments, in order.

    Returns:
      `(segment_ids [K] int64, positions [K] int64)`: segment-local step indices.
    """
    rows = tables.segment_row(np.asarray(segment_ids, np.int64))
    m = tables.segments.array("num_steps")[rows]
    local = np.arange(m.sum()) - np.repeat(np.cumsum(m) - m, m)
    return np.repeat(np.asarray(segment_ids, np.int64), m), local.astype(np.int64)


def reanalyze_segments(
    tables: ReplayTables,
    segment_ids: np.ndarray,
    fn: ReanalyzeFn,
    *,
    history_length: int = 0,
    write_root_values: bool = True,
) -> None:
    """Re-searches every step of the given segments with `fn` (in chunks of mini_infer_size) and
    writes the results (module docstring): the policy targets and declared extras always, the
    root values only when ``write_root_values`` (``Config.reanalyze_writes_root_values``).
    ``history_length`` H > 0: `fn` gets, in place of the stacked observations, the `History` of
    the H stored steps ending at each step (`GameBuffer.gather_history`), for types whose search
    starts from a context."""
    ids, local = segment_steps(tables, segment_ids)
    rows = tables.segment_row(ids)
    steps, table, size = tables.steps, tables.segments, tables.layout.mini_infer_size
    step_rows = table.array("step_start")[rows] - steps.base + local
    action_mask, to_play = steps.array("action_mask")[step_rows], steps.array("to_play")[step_rows]
    if history_length > 0:
        parts = [
            fn(
                gather_history(tables, ids[i : i + size], local[i : i + size], history_length),
                action_mask[i : i + size],
                to_play[i : i + size],
            )
            for i in range(0, len(ids), size)
        ]
        result = check_reanalysis(tables, parts, len(ids))
    else:
        frame_rows = table.array("frame_start")[rows] - tables.frames.base + local
        result = run_reanalysis(tables, fn, tables.gather_obs(frame_rows), action_mask, to_play)
    steps.array("policy_target")[step_rows] = result.policy_target
    if write_root_values:
        steps.array("root_value")[step_rows] = result.root_value
    for name, value in result.extras.items():
        steps.array(EXTRA_PREFIX + name)[step_rows] = value


def run_reanalysis(
    tables: ReplayTables, fn: ReanalyzeFn, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray
) -> Reanalysis:
    """Calls `fn` over K rows in chunks of mini_infer_size and checks what it returns
    (`check_reanalysis`)."""
    size = tables.layout.mini_infer_size
    parts = [
        fn(obs[i : i + size], action_mask[i : i + size], to_play[i : i + size]) for i in range(0, obs.shape[0], size)
    ]
    return check_reanalysis(tables, parts, obs.shape[0])


def check_reanalysis(tables: ReplayTables, parts: list[Reanalysis], count: int) -> Reanalysis:
    """The concatenation of `parts` after checking it: policy targets `[K, P]` finite >= 0, root
    values `[K]` finite, extras among the declared columns with `[K, *shape]`."""
    if not all(isinstance(p, Reanalysis) for p in parts):
        raise TypeError("a reanalysis function must return a Reanalysis")
    policy = (
        np.concatenate([np.asarray(p.policy_target, np.float32) for p in parts])
        if parts
        else np.zeros((0, tables.layout.policy_target_size), np.float32)
    )
    if policy.shape != (count, tables.layout.policy_target_size):
        raise ValueError(
            f"reanalysis must return [{count}, {tables.layout.policy_target_size}] policy targets, got {policy.shape}"
        )
    if not np.all(np.isfinite(policy)) or (policy < 0).any():
        raise ValueError("reanalysed policy targets must be finite and >= 0")
    values = (
        np.concatenate([np.asarray(p.root_value, np.float32).reshape(-1) for p in parts])
        if parts
        else np.zeros(0, np.float32)
    )
    if values.shape[0] != count or not np.all(np.isfinite(values)):
        raise ValueError(f"reanalysis must return {count} finite root values, got {values.shape}")
    names = set(parts[0].extras) if parts else set()
    declared = {c.name: c for c in tables.layout.step_columns}
    if any(set(p.extras) != names for p in parts) or not names <= set(declared):
        raise ValueError(f"reanalysis extras {sorted(names)} are not among the declared columns {sorted(declared)}")
    extras = check_extras(
        [declared[n] for n in sorted(names)],
        {n: np.concatenate([np.asarray(p.extras[n]) for p in parts]) for n in names},
        rows=count,
        where="reanalysis",
    )
    return Reanalysis(policy_target=policy, root_value=values, extras=extras)
