"""n-step value targets (pure functions).

For position t of a segment with m steps and n_obs observations, T = td_steps, gamma = discount:

  t >= m:  z_t = 0 (absorbing state past the episode end)
  t <  m:  z_t = sum_{i < k} gamma^i r_{t+i} + gamma^k v(o_{t+k}) * bootstrap_mask,
           k = min(T, m - t),
           bootstrap_mask = 1 iff t + T < n_obs, or the segment ends in a truncation.

The bootstrap never reaches past a terminal end (n_obs = m there), and a segment cut inside an
episode bootstraps from the observation after its last step when t + T = m. A segment whose
episode hit a time limit (truncated: its last observation o_m is stored, n_obs = m + 1)
bootstraps every position from o_{min(t+T, m)}: a time limit is not a terminal state, and
treating it as one makes the value depend on the (unobserved) time left. Rewards past the end
count as 0, which is the same as summing k terms. v(o) is the target network's value of the
stacked observation, or the stored search root value (then only positions with t + k < m
bootstrap).

Two-player games (to_play >= 0): a reward is the mover's and a value the player-to-move's, so
every term enters z_t from the view of the player p_t to move at t (:func:`player_signs`):

  z_t = sum_{i < k} gamma^i s_{t+i} r_{t+i} + gamma^k s_{t+k} v(o_{t+k}),
  s_j = +1 if p_j == p_t else -1.

With alternating turns s_j = (-1)^(j-t), the sign the search gives every ply (MuZero's board
games). The player at o_m (the observation after a segment's last step) is not stored: turns are
taken to alternate there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

__all__ = [
    "ValueTargetPlan",
    "player_signs",
    "plan_value_targets",
    "n_step_value_targets",
    "chunked_call",
    "segment_value_targets",
]


@dataclasses.dataclass(frozen=True)
class ValueTargetPlan:
    """Where the value targets of P positions read from, as segment-local indices.

    Attributes:
      reward_index: `[P, T] int64`, t + i clipped into [0, m-1] (safe to gather with).
      reward_mask: `[P, T] float32`, 1 iff t + i < m.
      bootstrap_position: `[P] int64`, t + T clipped into [0, n_obs-1].
      bootstrap_mask: `[P] float32`, 1 iff t + T < n_obs, or t < m in a truncated segment.
      step_mask: `[P] float32`, 1 iff t < m (a real step exists at t).
      bootstrap_steps: `[P] int64`, k = bootstrap_position - t, the discount exponent.
    """

    reward_index: np.ndarray
    reward_mask: np.ndarray
    bootstrap_position: np.ndarray
    bootstrap_mask: np.ndarray
    step_mask: np.ndarray
    bootstrap_steps: np.ndarray


def plan_value_targets(
    positions: np.ndarray,
    num_steps: np.ndarray,
    num_obs: np.ndarray,
    *,
    td_steps: int,
    truncated: np.ndarray | None = None,
) -> ValueTargetPlan:
    """Index plan of the n-step targets.

    Args:
      positions: `[P] int` local positions t >= 0.
      num_steps: `[P] int` m of each position's segment (>= 1).
      num_obs: `[P] int` n_obs of each position's segment (m or m + 1).
      td_steps: T >= 1.
      truncated: `[P] bool` the position's segment ends in a truncation (None: none does).
    """
    if td_steps < 1:
        raise ValueError(f"td_steps must be >= 1, got {td_steps}")
    t = np.asarray(positions, dtype=np.int64)
    m = np.asarray(num_steps, dtype=np.int64)
    n_obs = np.asarray(num_obs, dtype=np.int64)
    window = t[:, None] + np.arange(td_steps)
    bootstrap = t + td_steps
    position = np.minimum(bootstrap, n_obs - 1)
    mask = bootstrap < n_obs
    if truncated is not None:
        mask = mask | (np.asarray(truncated, dtype=bool) & (t < m))
    return ValueTargetPlan(
        reward_index=np.minimum(window, m[:, None] - 1),
        reward_mask=(window < m[:, None]).astype(np.float32),
        bootstrap_position=position,
        bootstrap_mask=mask.astype(np.float32),
        step_mask=(t < m).astype(np.float32),
        bootstrap_steps=np.maximum(position - t, 0),
    )


def player_signs(
    plan: ValueTargetPlan, positions: np.ndarray, num_steps: np.ndarray, to_play_at: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Signs that turn rewards and bootstrap values into the view of the player to move at t.

    Args:
      plan: the positions' `plan_value_targets`.
      positions: `[P]` local positions t; num_steps: `[P]` m of each position's segment.
      to_play_at: `fn(local_index [P, K] int64, each in [0, m-1] of its row's segment) -> [P, K]`
        the stored to_play there.
    Returns:
      `([P, T] reward signs, [P] bootstrap signs)`, float32 +-1: +1 where the player there is
      p_t, or where p_t < 0 (single-player: all +1).
    """
    t = np.asarray(positions, np.int64)
    last = np.asarray(num_steps, np.int64) - 1
    me = to_play_at(np.minimum(t, last)[:, None])[:, 0]
    movers = to_play_at(plan.reward_index)
    b = plan.bootstrap_position
    at_b = to_play_at(np.minimum(b, last)[:, None])[:, 0]
    at_b = np.where((b > last) & (at_b >= 0), 1 - at_b, at_b)  # o_m: the other player of step m-1
    single = (me < 0)[:, None]
    reward_sign = np.where(single | (movers == me[:, None]), 1.0, -1.0).astype(np.float32)
    bootstrap_sign = np.where(single[:, 0] | (at_b == me), 1.0, -1.0).astype(np.float32)
    return reward_sign, bootstrap_sign


def n_step_value_targets(
    rewards: np.ndarray,
    reward_mask: np.ndarray,
    bootstrap_values: np.ndarray,
    bootstrap_mask: np.ndarray,
    *,
    discount: float,
    bootstrap_steps: np.ndarray | None = None,
) -> np.ndarray:
    """z = sum_i gamma^i r_i mask_i + gamma^k v * bootstrap_mask.

    Args:
      rewards: `[P, T]` r_{t+i} (any value where masked out).
      reward_mask: `[P, T]` 1 iff t + i < m.
      bootstrap_values: `[P]` v(o_{t+k}) (any finite value where masked out).
      bootstrap_mask: `[P]` 1 where the target bootstraps.
      bootstrap_steps: `[P]` k, the discount exponent of the bootstrap (None: T everywhere).
    Returns:
      `[P] float32`. Rows with t >= m have an all-zero mask and give 0.
    """
    td_steps = rewards.shape[-1]
    powers = np.float64(discount) ** np.arange(td_steps + 1)
    reward_part = (np.asarray(rewards, np.float64) * reward_mask) @ powers[:td_steps]
    exponent = td_steps if bootstrap_steps is None else np.minimum(np.asarray(bootstrap_steps), td_steps)
    bootstrap_part = powers[exponent] * np.asarray(bootstrap_values, np.float64) * bootstrap_mask
    return (reward_part + bootstrap_part).astype(np.float32)


def chunked_call(fn: Callable[..., np.ndarray], *arrays: np.ndarray, chunk_size: int) -> np.ndarray:
    """Calls `fn(*chunks)` over the leading axis in chunks of `chunk_size`; concatenates results.

    Args:
      arrays: `[K, ...]` each, same K.
    Returns:
      `[K, ...]`, the concatenation of `fn`'s outputs (empty calls are skipped).
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    total = arrays[0].shape[0]
    outputs = [np.asarray(fn(*(a[i : i + chunk_size] for a in arrays))) for i in range(0, total, chunk_size)]
    return np.concatenate(outputs) if outputs else np.zeros((0,), dtype=np.float32)


def segment_value_targets(
    segment,
    positions: np.ndarray,
    *,
    td_steps: int,
    discount: float,
    value_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    use_root_value: bool = False,
) -> np.ndarray:
    """Value targets of one `GameSegment` at `positions [P]` (t may exceed m-1): `[P] float32`.

    v(o) comes from `value_fn(obs [K, *obs_shape]) -> [K]` (called once), or from the
    stored root values when `use_root_value` (then every bootstrapped t + T must be < m).
    """
    positions = np.asarray(positions, dtype=np.int64)
    count = positions.shape[0]
    plan = plan_value_targets(
        positions,
        np.full(count, segment.num_steps),
        np.full(count, segment.num_obs),
        td_steps=td_steps,
        truncated=np.full(count, segment.truncated),
    )
    rewards = segment.rewards[plan.reward_index]
    bootstrap_sign: float | np.ndarray = 1.0  # an array of signs for two-player games
    if np.any(segment.to_play >= 0):  # two-player: every term from the view of the player to move at t
        reward_sign, bootstrap_sign = player_signs(
            plan, positions, np.full(count, segment.num_steps), lambda index: segment.to_play[index]
        )
        rewards = rewards * reward_sign
    needed = plan.bootstrap_mask > 0
    mask = plan.bootstrap_mask
    if use_root_value and segment.truncated:  # no root value at the stored last observation
        needed &= plan.bootstrap_position < segment.num_steps
        mask = needed.astype(np.float32)
    values = np.zeros(count, dtype=np.float32)
    if needed.any():
        where = plan.bootstrap_position[needed]
        if use_root_value:
            if where.max() >= segment.num_steps:
                raise ValueError("use_root_value needs t + T < m: no root value after the last step")
            values[needed] = segment.root_values[where]
        elif value_fn is None:
            raise ValueError("value_fn is required unless use_root_value")
        else:
            values[needed] = np.asarray(value_fn(segment.stacked_obs(where)), dtype=np.float32).reshape(-1)
    return n_step_value_targets(
        rewards,
        plan.reward_mask,
        values * bootstrap_sign,
        mask,
        discount=discount,
        bootstrap_steps=plan.bootstrap_steps,
    )
