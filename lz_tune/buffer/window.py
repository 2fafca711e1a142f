"""Type-agnostic batch primitives over a buffer's `tables.ReplayTables`: the unroll window of
sampled positions and n-step value targets. A policy type builds its `TrainBatch` from these (see
:mod:`lz_tune.algos.targets`); the buffer itself builds no targets.

Notation: B = batch size, U = num_unroll_steps, A = action count, m / n_obs = a segment's
steps / observations. Positions t+k with t+k >= m (past a terminal end) are an absorbing
state: zero obs, zero reward / policy target, mask 0, to_play -1, every action legal, a
uniformly random action (drawn from the buffer's RNG; uniform in [-1, 1]^D when continuous).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from .batch import SampledIndex
from .tables import EXTRA_PREFIX, ReplayTables
from .targets import chunked_call, n_step_value_targets, plan_value_targets, player_signs

__all__ = [
    "History",
    "UnrollWindow",
    "BootstrapFn",
    "ValueFn",
    "draw_padding",
    "gather_history",
    "gather_window",
    "n_step_values",
    "with_padding",
]

ValueFn = Callable[[np.ndarray], np.ndarray]
"""`value_fn(obs [K, *obs_shape] frame dtype) -> [K] float32`: target-network value of stacked obs."""

BootstrapFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""`bootstrap_fn(rows [K] int64, segment_ids [K] int64, positions [K] int64) -> [K] float32`:
target-network value at segment-local observation positions as batch row ``rows`` sees it, for
types whose value depends on more than the observation (e.g. UniZero's context, read with
`gather_history`). A row's values depend on that row only, so a batch's targets are the same
whatever other rows it holds (a shard of it on a learner rank builds the same ones)."""


@dataclasses.dataclass(frozen=True)
class History:
    """The last H steps up to K positions p of their segments: observations at p-H+1..p and the
    actions between them, padded where a position lies outside the segment (before its first
    step or after its last observation).

    Attributes:
      obs: `[K, H, *obs_shape]` frame dtype (zeros where not valid).
      actions: `[K, H-1]` int64 a_{p-H+1}..a_{p-1} (continuous `[K, H-1, D]` float32; 0 where not valid).
      valid: `[K, H]` bool, True where the observation exists (0 <= position < n_obs).
    """

    obs: np.ndarray
    actions: np.ndarray
    valid: np.ndarray


def gather_history(tables: ReplayTables, segment_ids: np.ndarray, positions: np.ndarray, length: int) -> History:
    """The observations and actions of the `length` steps ending at `positions [K]` (segment-local
    positions >= 0) of segments `segment_ids [K]`. A segment's context starts at its first step:
    the steps of the episode before it (an earlier segment) are not included; positions past the
    segment's last observation are padding too (valid False, after the real steps)."""
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    seg_rows = tables.segment_row(segment_ids)
    table, steps = tables.segments, tables.steps
    p = np.asarray(positions, dtype=np.int64)
    if p.size and p.min() < 0:
        raise ValueError("positions must be >= 0")
    n_obs = table.array("num_obs")[seg_rows][:, None]
    m = table.array("num_steps")[seg_rows][:, None]
    ctx = p[:, None] + np.arange(1 - length, 1)  # [K, H]
    valid = (ctx >= 0) & (ctx < n_obs)
    frame0 = table.array("frame_start")[seg_rows] - tables.frames.base
    obs = tables.gather_obs(frame0[:, None] + np.clip(ctx, 0, n_obs - 1))
    if not valid.all():
        obs[~valid] = 0
    step0 = table.array("step_start")[seg_rows] - steps.base
    act_valid = valid[:, :-1] & (ctx[:, :-1] < m)
    actions = steps.array("action")[step0[:, None] + np.clip(ctx[:, :-1], 0, m - 1)]
    zero = np.zeros((), actions.dtype)
    actions = np.where(act_valid.reshape(act_valid.shape + (1,) * (actions.ndim - 2)), actions, zero)
    return History(
        obs=obs, actions=actions.astype(np.float32 if tables.layout.action_dim else np.int64, copy=False), valid=valid
    )


@dataclasses.dataclass(frozen=True)
class UnrollWindow:
    """The stored per-step data at t..t+U of B sampled positions t.

    Attributes:
      obs: `[B, U+1, *obs_shape]` frame dtype, stacked observations (zeros where none exists).
      actions: `[B, U] int64` actions at t..t+U-1 (continuous: `[B, U, D] float32`).
      rewards: `[B, U] float32` r_{t+k}, the reward after action t+k (0 past the end).
      policy_targets: `[B, U+1, P] float32` stored policy targets (0 past the end).
      mask: `[B, U+1] float32` 1 where a real step exists at t+k.
      to_play: `[B, U+1] int64`.
      action_mask: `[B, U+1, A] bool` (all True past the end).
      timesteps: `[B, U+1] int64` episode step index (continues counting past the end).
      extras: the type's extra columns, `{name: [B, U+1, *shape]}` (zeros past the end).
      index: the `SampledIndex` it was gathered for.
      positions: `[B, U+1] int64` segment-local positions t+k.
      num_steps, num_obs: `[B, 1] int64` m and n_obs of each sample's segment.
      step0, frame0: `[B] int64` physical first step / frame row of each sample's segment.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    policy_targets: np.ndarray
    mask: np.ndarray
    to_play: np.ndarray
    action_mask: np.ndarray
    timesteps: np.ndarray
    extras: Mapping[str, np.ndarray]
    index: SampledIndex
    positions: np.ndarray
    num_steps: np.ndarray
    num_obs: np.ndarray
    step0: np.ndarray
    frame0: np.ndarray

    @property
    def valid(self) -> np.ndarray:
        """`[B, U+1] bool` mask > 0."""
        return self.mask > 0


def draw_padding(tables: ReplayTables, valid: np.ndarray) -> np.ndarray:
    """The random actions of unroll steps past a segment's end, from the buffer's RNG, for a
    window whose steps ``valid [B, U]`` exist: `[B, U]` int64 uniform over the A actions
    (continuous: `[B, U, D]` float32 uniform in [-1, 1]). Nothing is drawn (zeros) when every
    step exists, so the RNG moves exactly as when the window draws its own padding."""
    B, U = valid.shape
    D, A = tables.layout.action_dim, tables.layout.action_space_size
    if D:
        if valid.all():
            return np.zeros((B, U, D), np.float32)
        return tables.rng.uniform(-1.0, 1.0, size=(B, U, D)).astype(np.float32)
    if valid.all():
        return np.zeros((B, U), np.int64)
    return tables.rng.integers(0, A, size=(B, U))


def with_padding(tables: ReplayTables, index: SampledIndex) -> SampledIndex:
    """``index`` with its `SampledIndex.pad_actions` drawn (see `draw_padding`)."""
    U = tables.layout.num_unroll_steps
    seg_rows = tables.segment_row(index.segment_ids)
    m = tables.segments.array("num_steps")[seg_rows][:, None]
    valid = (np.asarray(index.positions, dtype=np.int64)[:, None] + np.arange(U)) < m
    return dataclasses.replace(index, pad_actions=draw_padding(tables, valid))


def gather_window(tables: ReplayTables, index: SampledIndex) -> UnrollWindow:
    """Gathers the unroll window of every position of `index` (no eviction of its segments since
    it was drawn). A handful of fancy-indexing calls, no Python loop over samples."""
    U = tables.layout.num_unroll_steps
    seg_rows = tables.segment_row(index.segment_ids)
    table, steps = tables.segments, tables.steps
    step0 = table.array("step_start")[seg_rows] - steps.base  # [B] physical
    frame0 = table.array("frame_start")[seg_rows] - tables.frames.base  # [B] physical
    m = table.array("num_steps")[seg_rows][:, None]  # [B, 1]
    n_obs = table.array("num_obs")[seg_rows][:, None]  # [B, 1]

    pos = np.asarray(index.positions, dtype=np.int64)[:, None] + np.arange(U + 1)  # [B, U+1]
    valid = pos < m
    step_rows = step0[:, None] + np.minimum(pos, m - 1)  # [B, U+1]

    actions = steps.array("action")[step_rows[:, :U]]
    if not valid[:, :U].all():
        pad = index.pad_actions if index.pad_actions is not None else draw_padding(tables, valid[:, :U])
        where = valid[:, :U, None] if tables.layout.action_dim else valid[:, :U]
        actions = np.where(where, actions, pad)
    rewards = np.where(valid[:, :U], steps.array("reward")[step_rows[:, :U]], np.float32(0))
    policy = steps.array("policy_target")[step_rows]
    policy *= valid[..., None]
    extras = {}
    for c in tables.layout.step_columns:
        value = steps.array(EXTRA_PREFIX + c.name)[step_rows]
        extras[c.name] = np.where(valid.reshape(valid.shape + (1,) * len(c.shape)), value, np.zeros((), value.dtype))

    obs = tables.gather_obs(frame0[:, None] + np.minimum(pos, n_obs - 1))  # [B, U+1, *obs_shape]
    has_obs = pos < n_obs
    if not has_obs.all():
        obs[~has_obs] = 0
    return UnrollWindow(
        obs=obs,
        actions=actions.astype(np.float32 if tables.layout.action_dim else np.int64, copy=False),
        rewards=rewards.astype(np.float32, copy=False),
        policy_targets=policy,
        mask=valid.astype(np.float32),
        to_play=np.where(valid, steps.array("to_play")[step_rows], -1),
        action_mask=steps.array("action_mask")[step_rows] | ~valid[..., None],
        timesteps=steps.array("timestep")[step_rows] + np.maximum(pos - (m - 1), 0),
        extras=extras,
        index=index,
        positions=pos,
        num_steps=m,
        num_obs=n_obs,
        step0=step0,
        frame0=frame0,
    )


def n_step_values(
    tables: ReplayTables,
    win: UnrollWindow,
    *,
    value_fn: ValueFn | None,
    use_root_value: bool = False,
    bootstrap_fn: BootstrapFn | None = None,
) -> np.ndarray:
    """`[B, U+1] float32` n-step value targets at every window position (see `targets`).

    value_fn: target-network values of bootstrap observations, called once per batch over the
    distinct observations needed (chunks of mini_infer_size); unused (may be None) when
    `use_root_value`, which bootstraps from the stored root values instead, or when
    `bootstrap_fn` is given: it is called once per batch with the distinct (row, position) pairs
    needed instead.
    """
    if value_fn is None and not use_root_value and bootstrap_fn is None:
        raise ValueError("value_fn is required unless use_root_value=True or a bootstrap_fn is given")
    pos, m, n_obs = win.positions, win.num_steps, win.num_obs
    shape = pos.shape
    truncated = tables.segments.array("truncated")[tables.segment_row(win.index.segment_ids)]  # [B]
    plan = plan_value_targets(
        pos.ravel(),
        np.broadcast_to(m, shape).ravel(),
        np.broadcast_to(n_obs, shape).ravel(),
        td_steps=tables.layout.td_steps,
        truncated=np.repeat(truncated, shape[1]),
    )
    step0_flat = np.repeat(win.step0, shape[1])
    steps = tables.steps
    rewards = steps.array("reward")[step0_flat[:, None] + plan.reward_index]
    bootstrap_sign = None
    if (win.to_play >= 0).any():  # two-player: rewards and values from the view of the player to move at t
        to_play = steps.array("to_play")
        reward_sign, bootstrap_sign = player_signs(
            plan, pos.ravel(), np.broadcast_to(m, shape).ravel(), lambda index: to_play[step0_flat[:, None] + index]
        )
        rewards = rewards * reward_sign
    needed = plan.bootstrap_mask > 0
    bootstrap_mask = plan.bootstrap_mask
    if use_root_value:  # truncated segments: no root value at the stored last observation
        needed &= plan.bootstrap_position < np.broadcast_to(m, shape).ravel()
        bootstrap_mask = needed.astype(np.float32)
    values = np.zeros(needed.shape[0], dtype=np.float32)
    if needed.any():
        where = plan.bootstrap_position[needed]
        if use_root_value:
            # push guarantees t + T < m wherever an observation exists (padding >= U + T), except
            # at the end of a truncated segment, masked out above
            values[needed] = steps.array("root_value")[step0_flat[needed] + where]
        elif bootstrap_fn is not None:
            rows = np.repeat(np.arange(shape[0], dtype=np.int64), shape[1])[needed]
            pairs, inverse = np.unique(np.stack([rows, where]), axis=1, return_inverse=True)
            seg_ids = np.asarray(win.index.segment_ids, np.int64)[pairs[0]]
            out = np.asarray(bootstrap_fn(pairs[0], seg_ids, pairs[1]), dtype=np.float32).reshape(-1)
            if out.shape[0] != pairs.shape[1] or not np.all(np.isfinite(out)):
                raise ValueError(f"bootstrap_fn must return {pairs.shape[1]} finite values, got {out.shape}")
            values[needed] = out[inverse.reshape(-1)]
        else:
            assert value_fn is not None  # checked above
            frame_rows = np.repeat(win.frame0, shape[1])[needed] + where
            unique_rows, inverse = np.unique(frame_rows, return_inverse=True)
            out = chunked_call(value_fn, tables.gather_obs(unique_rows), chunk_size=tables.layout.mini_infer_size)
            out = np.asarray(out, dtype=np.float32).reshape(-1)
            if out.shape[0] != unique_rows.shape[0] or not np.all(np.isfinite(out)):
                raise ValueError(f"value_fn must return {unique_rows.shape[0]} finite values, got {out.shape}")
            values[needed] = out[inverse]
    if bootstrap_sign is not None:
        values *= bootstrap_sign
    targets = n_step_value_targets(
        rewards,
        plan.reward_mask,
        values,
        bootstrap_mask,
        discount=tables.layout.discount,
        bootstrap_steps=plan.bootstrap_steps,
    )
    return targets.reshape(shape)
