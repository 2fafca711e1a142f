"""A numpy frame stack for N envs: the last k frames concatenated on the channel axis."""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["FrameStack", "stacked_shape"]


def stacked_shape(frame_shape: tuple[int, ...], stack: int) -> tuple[int, ...]:
    """Shape of ``stack`` frames of ``frame_shape`` ``(C, ...)`` concatenated on axis 0."""
    if stack < 1:
        raise ValueError(f"frame stack must be >= 1, got {stack}")
    if len(frame_shape) < 1:
        raise ValueError(f"frames need at least one axis to stack on, got shape {frame_shape}")
    return (stack * int(frame_shape[0]), *(int(d) for d in frame_shape[1:]))


class FrameStack:
    """Keeps ``[N, k * C, ...]`` observations from ``[N, C, ...]`` frames, oldest first.

    Args:
        num_envs: N.
        frame_shape: shape of one frame ``(C, ...)``; frames are stacked on its axis 0.
        stack: k, frames per observation.
        dtype: dtype of frames and observations.
    """

    def __init__(self, *, num_envs: int, frame_shape: tuple[int, ...], stack: int, dtype: DTypeLike) -> None:
        self.observation_shape = stacked_shape(frame_shape, stack)
        self.stack = stack
        self.channels = int(frame_shape[0])
        self.frame_shape = tuple(frame_shape)
        self._buffer = np.zeros((num_envs, *self.observation_shape), dtype=dtype)

    def reset(self, frames: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Fill every slot with copies of ``frames`` ``[N, C, ...]``, where ``mask`` ``[N]`` is set."""
        if mask is not None:
            if not mask.any():
                return
            frames = frames[mask]
        tiled = np.concatenate([frames] * self.stack, axis=1) if self.stack > 1 else frames
        if mask is None:
            self._buffer[...] = tiled
        else:
            self._buffer[mask] = tiled

    def push(self, frames: np.ndarray) -> None:
        """Drop the oldest frame of every env and append ``frames`` ``[N, C, ...]``."""
        c = self.channels
        if self.stack > 1:
            self._buffer[:, :-c] = self._buffer[:, c:]
        self._buffer[:, -c:] = frames

    def observation(self) -> np.ndarray:
        """A copy of the stacked observations ``[N, k * C, ...]``."""
        return self._buffer.copy()
