"""Reanalysis over a `GameBuffer`: re-searching stored positions with a newer network.

`reanalyze_oldest` rewrites the policy targets and root values (and any extra columns the search
returns) of whole segments among the oldest, in the buffer's private copies; `run_reanalysis`
calls a search function in chunks and checks what it returns (also used for the reanalysed rows
of a training batch). Both are bound as `GameBuffer` methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .columns import Reanalysis, check_extras
from .priority import gumbel_top_k

if TYPE_CHECKING:
    from .game_buffer import GameBuffer, ReanalyzeFn

__all__ = ["reanalyze_oldest", "run_reanalysis"]


def reanalyze_oldest(
    buffer: "GameBuffer",
    *,
    num_segments: int,
    fn: ReanalyzeFn,
    fraction_oldest: float = 0.75,
    age_decay: float = 100.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Recomputes the policy targets and root values (and any extra columns the reanalysis
    returns) of whole segments among the oldest.

    Chooses `min(num_segments, P)` distinct segments among the P = ceil(fraction_oldest *
    num_segments_live) oldest, with probability ∝ exp(-age_decay * j / P) for the j-th
    oldest (the original's weighting at age_decay=100: strongly toward the oldest; 0 is
    uniform). All m steps of each (owned and padding) are re-searched with
    `fn(obs [K, *obs_shape], action_mask [K, A], to_play [K]) -> Reanalysis`, called in
    chunks of mini_infer_size, and replace the buffer's private copies. Segment objects
    handed out earlier (`push` inputs, `get_segment` results) are copies and never change.
    Priorities are left as they are.

    Returns:
      `[k] int64` the global ids of the reanalysed segments.
    """
    if not 0.0 < fraction_oldest <= 1.0:
        raise ValueError(f"fraction_oldest must be in (0, 1], got {fraction_oldest}")
    if num_segments < 0 or age_decay < 0:
        raise ValueError("num_segments and age_decay must be >= 0")
    live = buffer.num_segments
    if live == 0 or num_segments == 0:
        return np.zeros(0, dtype=np.int64)
    rng = buffer._rng if rng is None else rng
    partition = max(1, int(np.ceil(fraction_oldest * live)))
    log_weights = -age_decay * np.arange(partition) / partition
    chosen = np.sort(gumbel_top_k(log_weights, min(int(num_segments), partition), rng))

    table = buffer._segments
    rows = table.first - table.base + chosen
    m = table.array("num_steps")[rows]
    step_rows = np.repeat(table.array("step_start")[rows] - buffer._steps.base, m)
    local = np.arange(m.sum()) - np.repeat(np.cumsum(m) - m, m)
    frame_rows = np.repeat(table.array("frame_start")[rows] - buffer._frames.base, m) + local
    step_rows = step_rows + local

    obs = buffer._gather_obs(frame_rows)
    action_mask = buffer._steps.array("action_mask")[step_rows]
    to_play = buffer._steps.array("to_play")[step_rows]
    result = run_reanalysis(buffer, fn, obs, action_mask, to_play)
    buffer._steps.array("policy_target")[step_rows] = result.policy_target
    buffer._steps.array("root_value")[step_rows] = result.root_value
    for name, value in result.extras.items():
        buffer._steps.array("extra:" + name)[step_rows] = value
    return chosen + table.first

def run_reanalysis(buffer: "GameBuffer", fn: ReanalyzeFn, obs: np.ndarray, action_mask: np.ndarray,
                   to_play: np.ndarray) -> Reanalysis:
    """Calls `fn` over K rows in chunks of mini_infer_size and checks what it returns:
    policy targets `[K, P]` finite >= 0, root values `[K]` finite, extras among the
    declared columns with `[K, *shape]`."""
    count = obs.shape[0]
    parts = [fn(obs[i:i + buffer.mini_infer_size], action_mask[i:i + buffer.mini_infer_size],
                to_play[i:i + buffer.mini_infer_size]) for i in range(0, count, buffer.mini_infer_size)]
    if not all(isinstance(p, Reanalysis) for p in parts):
        raise TypeError("a reanalysis function must return a Reanalysis")
    policy = np.concatenate([np.asarray(p.policy_target, np.float32) for p in parts]) if parts else \
        np.zeros((0, buffer.policy_target_size), np.float32)
    if policy.shape != (count, buffer.policy_target_size):
        raise ValueError(f"reanalysis must return [{count}, {buffer.policy_target_size}] policy targets, "
                         f"got {policy.shape}")
    if not np.all(np.isfinite(policy)) or (policy < 0).any():
        raise ValueError("reanalysed policy targets must be finite and >= 0")
    values = np.concatenate([np.asarray(p.root_value, np.float32).reshape(-1) for p in parts]) if parts else \
        np.zeros(0, np.float32)
    if values.shape[0] != count or not np.all(np.isfinite(values)):
        raise ValueError(f"reanalysis must return {count} finite root values, got {values.shape}")
    names = set(parts[0].extras) if parts else set()
    declared = {c.name: c for c in buffer.step_columns}
    if any(set(p.extras) != names for p in parts) or not names <= set(declared):
        raise ValueError(f"reanalysis extras {sorted(names)} are not among the declared columns {sorted(declared)}")
    extras = check_extras([declared[n] for n in sorted(names)],
                          {n: np.concatenate([np.asarray(p.extras[n]) for p in parts]) for n in names},
                          rows=count, where="reanalysis")
    return Reanalysis(policy_target=policy, root_value=values, extras=extras)
