"""Game segments: the unit of experience pushed into the replay buffer.

Notation: L = segment length, U = num_unroll_steps, T = td_steps, S = frame_stack,
A = action count, m = steps stored in a segment, n = owned steps (n <= L).

A `GameSegment` holds m consecutive steps of one episode. The first n are *owned*: they are
the only positions the buffer registers for sampling. The other m - n steps are *padding*,
copied from the start of the following segment of the same episode, so the unroll and n-step
targets of the last owned positions are built without looking into another segment.

Frames are stored once each; `frames[t : t + S]`, concatenated on axis 0, is the observation
at position t (`stack_frames`).

`SegmentBuilder` turns the step stream of one environment into segments. It lives as long as
its environment (across collect calls), so no transition is dropped or re-ordered at a collect
boundary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from .columns import StepColumn, check_extras

__all__ = ["GameSegment", "SegmentBuilder", "stack_frames"]


def stack_frames(frames: np.ndarray, *, frame_ndim: int) -> np.ndarray:
    """Concatenates stacked frames on the frame's first axis (a view when possible).

    Args:
      frames: `[..., S, *frame_shape]` with `len(frame_shape) == frame_ndim`; a frame is `[D]`
        (vector) or `[C, H, W]` (image).
      frame_ndim: rank of one frame (>= 1).

    Returns:
      `[..., S * frame_shape[0], *frame_shape[1:]]`, same dtype: `[S*D]` for vector frames,
      `[S*C, H, W]` for images, oldest frame first.
    """
    frames = np.asarray(frames)
    if frame_ndim < 1 or frames.ndim < frame_ndim + 1:
        raise ValueError(f"frames {frames.shape} cannot hold a stack of rank-{frame_ndim} frames")
    split = frames.ndim - frame_ndim - 1
    lead, stack, frame_shape = frames.shape[:split], frames.shape[split], frames.shape[split + 1 :]
    return frames.reshape(lead + (stack * frame_shape[0],) + frame_shape[1:])


def _as(name: str, value, dtype, ndim: int) -> np.ndarray:
    array = np.asarray(value, dtype=dtype)
    if array.ndim != ndim:
        raise ValueError(f"GameSegment.{name}: expected rank {ndim}, got shape {array.shape}")
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class GameSegment:
    """m consecutive steps of one episode; the first `num_owned` are sampled, the rest pad.

    Attributes:
      frames: `[S-1 + n_obs, *frame_shape]`, any dtype (uint8 images, float32 vectors): the
        S-1 frames before position 0, then the newest frame of the observation at each
        position 0..n_obs-1. Each frame is stored once.
      actions: `[m] int64`, action taken at each position (an index in [0, A)); for a
        continuous action space `[m, D] float32`, the normalised action in [-1, 1].
      rewards: `[m] float32`, reward received after the action at each position.
      root_values: `[m] float32`, search (root) value at each position.
      pred_values: `[m] float32`, the network's initial-inference value at each position.
      policy_targets: `[m, P] float32`, the policy target of each step: the normalised root
        visit distribution (MuZero, P = A), the type's improved policy (Gumbel MuZero), the
        visit distribution over the K sampled root actions (Sampled MuZero, P = K).
      action_mask: `[m, A] bool`, legal actions.
      to_play: `[m] int64`, player to move (-1 for single-player games).
      timesteps: `[m] int64`, step index inside the episode.
      num_owned: n, 1 <= n <= m. Positions 0..n-1 belong to this segment.
      terminal: the episode ended right after action m-1 with no observation kept after it
        (terminated, or truncated by an env that cannot report its last state); then
        n_obs = m, else n_obs = m + 1.
      truncated: the episode hit a time limit right after action m-1 and the observation it
        reached is stored (n_obs = m + 1) but no step follows: the value targets of the last
        positions bootstrap from that observation, and the segment needs no padding.
      extras: the policy type's extra per-step columns (see `columns.StepColumn`),
        `{name: [m, *shape]}`; empty for MuZero.
    """

    frames: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    root_values: np.ndarray
    pred_values: np.ndarray
    policy_targets: np.ndarray
    action_mask: np.ndarray
    to_play: np.ndarray
    timesteps: np.ndarray
    num_owned: int
    terminal: bool
    extras: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    truncated: bool = False

    def __post_init__(self):
        continuous = np.asarray(self.actions).ndim == 2
        fields = {
            "actions": (np.float32, 2) if continuous else (np.int64, 1),
            "rewards": (np.float32, 1),
            "root_values": (np.float32, 1),
            "pred_values": (np.float32, 1),
            "policy_targets": (np.float32, 2),
            "action_mask": (np.bool_, 2),
            "to_play": (np.int64, 1),
            "timesteps": (np.int64, 1),
        }
        for name, (dtype, ndim) in fields.items():
            object.__setattr__(self, name, _as(name, getattr(self, name), dtype, ndim))
        object.__setattr__(self, "frames", np.asarray(self.frames))
        object.__setattr__(self, "num_owned", int(self.num_owned))
        object.__setattr__(self, "terminal", bool(self.terminal))
        object.__setattr__(self, "truncated", bool(self.truncated))
        if self.terminal and self.truncated:
            raise ValueError("a segment is terminal (no observation after its last step) or truncated, not both")

        m = self.actions.shape[0]
        if m < 1:
            raise ValueError("GameSegment needs at least one step")
        for name in fields:
            if getattr(self, name).shape[0] != m:
                raise ValueError(f"GameSegment.{name} has {getattr(self, name).shape[0]} steps, actions has {m}")
        num_actions = self.action_mask.shape[1]
        if num_actions < 1 or self.policy_targets.shape[1] < 1:
            raise ValueError(
                f"policy_targets {self.policy_targets.shape} and action_mask {self.action_mask.shape} "
                "need at least one column"
            )
        extras = {}
        for name, value in dict(self.extras).items():
            value = np.asarray(value)
            if value.ndim < 1 or value.shape[0] != m:
                raise ValueError(f"GameSegment.extras[{name!r}] has shape {value.shape}, expected [{m}, ...]")
            if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                raise ValueError(f"GameSegment.extras[{name!r}] has non-finite entries")
            extras[name] = value
        object.__setattr__(self, "extras", extras)
        if not 1 <= self.num_owned <= m:
            raise ValueError(f"num_owned={self.num_owned} must be in [1, {m}]")
        if self.frames.ndim < 2:
            raise ValueError(f"frames must be [S-1 + n_obs, *frame_shape], got {self.frames.shape}")
        if self.frames.shape[0] < self.num_obs:
            raise ValueError(f"frames holds {self.frames.shape[0]} frames, fewer than n_obs={self.num_obs}")
        if continuous:
            if self.actions.shape[1] < 1 or not np.all(np.abs(self.actions) <= 1.0):
                raise ValueError("continuous actions must be finite and lie in [-1, 1]")
        elif np.any((self.actions < 0) | (self.actions >= num_actions)):
            raise ValueError(f"actions must lie in [0, {num_actions})")
        for name in ("rewards", "root_values", "pred_values", "policy_targets"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"GameSegment.{name} has non-finite entries")

    @property
    def num_steps(self) -> int:
        """m: stored steps, owned and padding."""
        return self.actions.shape[0]

    @property
    def num_obs(self) -> int:
        """n_obs: positions with an observation (m if terminal, else m + 1)."""
        return self.num_steps + (0 if self.terminal else 1)

    @property
    def num_padding(self) -> int:
        """m - n."""
        return self.num_steps - self.num_owned

    @property
    def frame_stack(self) -> int:
        """S, implied by the frame count."""
        return self.frames.shape[0] - self.num_obs + 1

    @property
    def frame_shape(self) -> tuple[int, ...]:
        return tuple(self.frames.shape[1:])

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """`(S * frame_shape[0], *frame_shape[1:])`."""
        return (self.frame_stack * self.frames.shape[1],) + tuple(self.frames.shape[2:])

    @property
    def action_space_size(self) -> int:
        """A, the width of the action mask."""
        return self.action_mask.shape[1]

    @property
    def policy_target_size(self) -> int:
        """P, the width of the policy target."""
        return self.policy_targets.shape[1]

    @property
    def action_dim(self) -> int:
        """0 for discrete actions, D for continuous ones."""
        return self.actions.shape[1] if self.actions.ndim == 2 else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        values = [getattr(self, f.name) for f in dataclasses.fields(self)] + list(self.extras.values())
        return sum(v.nbytes for v in values if isinstance(v, np.ndarray))

    def obs(self, position: int) -> np.ndarray:
        """Stacked observation at `position` (0 <= position < n_obs): `[*obs_shape]`, a view."""
        if not 0 <= position < self.num_obs:
            raise IndexError(f"position {position} outside [0, {self.num_obs})")
        return stack_frames(self.frames[position : position + self.frame_stack], frame_ndim=self.frames.ndim - 1)

    def stacked_obs(self, positions: np.ndarray) -> np.ndarray:
        """Stacked observations at `positions [K]` (each < n_obs): `[K, *obs_shape]`, a copy."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.num_obs):
            raise IndexError(f"positions outside [0, {self.num_obs})")
        index = positions[:, None] + np.arange(self.frame_stack)
        return stack_frames(self.frames[index], frame_ndim=self.frames.ndim - 1)

    def initial_priorities(self, eps: float = 1e-6) -> np.ndarray:
        """`[n] float32`: |pred_value - root_value| + eps of the owned positions."""
        n = self.num_owned
        return (np.abs(self.pred_values[:n] - self.root_values[:n]) + eps).astype(np.float32)


class _Draft:
    """A segment under construction: per-step lists plus its frames (history first)."""

    __slots__ = ("frames", "steps", "extras", "num_owned")

    def __init__(self, frames: list[np.ndarray]):
        self.frames = frames
        self.steps: list[tuple] = []
        self.extras: list[dict[str, np.ndarray]] = []
        self.num_owned: int | None = None  # set when the draft stops owning new steps

    @property
    def owned(self) -> int:
        """``num_owned`` of a draft that stopped owning new steps (a pending one)."""
        assert self.num_owned is not None, "the draft still owns new steps"
        return self.num_owned

    def build(self, *, terminal: bool, columns: Sequence[StepColumn], truncated: bool = False) -> GameSegment:
        (actions, rewards, root_values, pred_values, policy_targets, action_mask, to_play, timesteps) = zip(*self.steps)
        extras = {c.name: np.stack([e[c.name] for e in self.extras]).astype(c.dtype, copy=False) for c in columns}
        return GameSegment(
            frames=np.stack(self.frames),
            actions=np.array(actions, dtype=np.float32 if np.ndim(actions[0]) else np.int64),
            rewards=np.array(rewards, dtype=np.float32),
            root_values=np.array(root_values, dtype=np.float32),
            pred_values=np.array(pred_values, dtype=np.float32),
            policy_targets=np.stack(policy_targets),
            action_mask=np.stack(action_mask),
            to_play=np.array(to_play, dtype=np.int64),
            timesteps=np.array(timesteps, dtype=np.int64),
            num_owned=self.num_owned if self.num_owned is not None else len(self.steps),
            terminal=terminal,
            extras=extras,
            truncated=truncated,
        )


class SegmentBuilder:
    """Cuts one environment's step stream into `GameSegment`s; one per env, kept across collects.

    A segment owns up to L steps. When it reaches L it becomes *pending* and a new segment
    starts at the next position (its history = the true previous S-1 frames); the following
    steps are also appended to the pending segment until it holds U + T padding steps, then it
    is emitted. At the end of an episode every pending segment and the current one are emitted
    with `terminal=True` (shorter padding, no observation after the last step); at a time limit
    whose last observation is known (`truncated=True` with `next_frame`), with `truncated=True`
    and that observation stored.

    Every step added is owned by exactly one emitted segment, or is still in progress
    (`num_steps_in_progress`); owned positions of consecutive segments are contiguous.
    """

    def __init__(
        self,
        *,
        segment_length: int,
        num_unroll_steps: int,
        td_steps: int,
        frame_stack: int,
        action_space_size: int,
        step_columns: Sequence[StepColumn] = (),
        policy_target_size: int | None = None,
        action_dim: int = 0,
    ):
        """action_space_size: A, the action-mask width; policy_target_size: P (default A);
        action_dim: 0 for discrete actions, D for continuous ones (``[D]`` float in [-1, 1])."""
        if segment_length < 1 or frame_stack < 1 or action_space_size < 1:
            raise ValueError("segment_length, frame_stack and action_space_size must be >= 1")
        if (policy_target_size is not None and policy_target_size < 1) or action_dim < 0:
            raise ValueError("policy_target_size must be >= 1 and action_dim >= 0")
        if num_unroll_steps < 0 or td_steps < 1:
            raise ValueError("num_unroll_steps must be >= 0 and td_steps >= 1")
        self.segment_length = int(segment_length)
        self.num_padding = int(num_unroll_steps) + int(td_steps)
        self.frame_stack = int(frame_stack)
        self.action_space_size = int(action_space_size)
        self.policy_target_size = int(policy_target_size or action_space_size)
        self.action_dim = int(action_dim)
        self.step_columns = tuple(step_columns)
        self._frame_shape: tuple[int, ...] | None = None
        self._frame_dtype: np.dtype | None = None
        self._current: _Draft | None = None
        self._pending: list[_Draft] = []

    @property
    def in_episode(self) -> bool:
        return self._current is not None

    @property
    def num_steps_in_progress(self) -> int:
        """Steps taken but not yet emitted as owned positions (current + pending owned)."""
        if self._current is None:
            return 0
        return len(self._current.steps) + sum(d.owned for d in self._pending)

    def begin_episode(self, stacked_frames: np.ndarray) -> None:
        """Starts an episode from the env's first stacked observation.

        Args:
          stacked_frames: `[S, *frame_shape]`, oldest first: the S-1 history frames and the
            frame of position 0, exactly as the search saw them (e.g. a stack that continues
            across an Atari life loss).
        """
        if self._current is not None:
            raise RuntimeError("an episode is in progress: finish it with add_step(done=True) or abandon_episode()")
        stacked_frames = np.asarray(stacked_frames)
        if stacked_frames.ndim < 2 or stacked_frames.shape[0] != self.frame_stack:
            raise ValueError(f"expected [S={self.frame_stack}, *frame_shape], got {stacked_frames.shape}")
        if self._frame_shape is None:
            self._frame_shape, self._frame_dtype = tuple(stacked_frames.shape[1:]), stacked_frames.dtype
        elif tuple(stacked_frames.shape[1:]) != self._frame_shape:
            raise ValueError(f"frame shape changed from {self._frame_shape} to {stacked_frames.shape[1:]}")
        self._current = _Draft([np.array(f, dtype=self._frame_dtype) for f in stacked_frames])

    def abandon_episode(self) -> int:
        """Drops the episode in progress (e.g. after a weight exploit); returns the steps dropped."""
        dropped = self.num_steps_in_progress
        self._current, self._pending = None, []
        return dropped

    def add_step(
        self,
        *,
        action: int | np.ndarray,
        reward: float,
        root_value: float,
        pred_value: float,
        policy_target: np.ndarray,
        action_mask: np.ndarray,
        to_play: int,
        timestep: int,
        next_frame: np.ndarray | None,
        done: bool,
        extras: Mapping[str, np.ndarray] | None = None,
        truncated: bool = False,
    ) -> list[GameSegment]:
        """Records one transition; returns the segments it completed (oldest first).

        Args:
          action: action taken at the current position, in [0, A) (continuous: `[D]` in [-1, 1]).
          reward: reward received after it.
          root_value, pred_value: search value and network value at the current position.
          policy_target: `[P]` the policy target (normalised visits or improved policy).
          action_mask: `[A]` bool legal actions.
          to_play, timestep: player to move and step index at the current position.
          next_frame: `[*frame_shape]` newest frame of the next observation; when `done`, the
            frame of the last observation of a truncated episode (None: not known, or terminated).
          done: the episode terminated or was truncated after this action.
          truncated: the episode hit a time limit (with `next_frame` given, the emitted segments
            keep that observation and bootstrap from it).
          extras: one value `[*shape]` per declared `StepColumn` (None when none are declared).
        """
        if self._current is None:
            raise RuntimeError("add_step called outside an episode: call begin_episode first")
        policy_target = np.array(policy_target, dtype=np.float32)
        action_mask = np.array(action_mask, dtype=np.bool_)
        if policy_target.shape != (self.policy_target_size,) or action_mask.shape != (self.action_space_size,):
            raise ValueError(
                f"policy_target must be [P={self.policy_target_size}], action_mask [A={self.action_space_size}]"
            )
        if self.action_dim:
            action = np.array(action, dtype=np.float32)
            if action.shape != (self.action_dim,):
                raise ValueError(f"a continuous action must be [D={self.action_dim}], got shape {action.shape}")
        else:
            action = int(action)
        row: dict[str, np.ndarray] = {}
        if self.step_columns or extras:  # the collector's hot loop: nothing to check for a type without columns
            checked = check_extras(
                self.step_columns,
                {k: np.asarray(v)[None] for k, v in (extras or {}).items()},
                rows=1,
                where="SegmentBuilder.add_step",
            )
            row = {k: v[0] for k, v in checked.items()}
        step = (
            action,
            float(reward),
            float(root_value),
            float(pred_value),
            policy_target,
            action_mask,
            int(to_play),
            int(timestep),
        )
        drafts = self._pending + [self._current]
        for draft in drafts:
            draft.steps.append(step)
            draft.extras.append(row)

        keep_last = done and truncated and next_frame is not None
        if next_frame is None and not done:
            raise ValueError("next_frame is required unless done")
        if not done or keep_last:
            frame = np.array(next_frame, dtype=self._frame_dtype)
            if frame.shape != self._frame_shape:
                raise ValueError(f"next_frame has shape {frame.shape}, expected {self._frame_shape}")
            for draft in drafts:
                draft.frames.append(frame)
        if done:
            self._current, self._pending = None, []
            return [
                draft.build(terminal=not keep_last, truncated=keep_last, columns=self.step_columns) for draft in drafts
            ]

        current = self._current
        if len(current.steps) == self.segment_length:
            current.num_owned = self.segment_length
            self._pending.append(current)
            self._current = _Draft(current.frames[-self.frame_stack :])

        emitted = []
        while self._pending and len(self._pending[0].steps) - self._pending[0].owned >= self.num_padding:
            emitted.append(self._pending.pop(0).build(terminal=False, columns=self.step_columns))
        return emitted
