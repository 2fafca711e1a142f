"""Atari preprocessing options and the collect/eval mode switch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["AtariOptions", "Mode", "check_mode"]

Mode = Literal["collect", "eval"]
"""``collect``: training data (episodic life, clipped rewards); ``eval``: raw game."""

_MODES = ("collect", "eval")


def check_mode(mode: str) -> None:
    """Raise ``ValueError`` unless ``mode`` is ``"collect"`` or ``"eval"``."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


@dataclass(frozen=True, kw_only=True)
class AtariOptions:
    """How an ALE game is turned into model inputs.

    The env id only picks the game (ROM) and the action set; every option below applies
    whatever the id's own defaults are (``ALE/Pong-v5`` registers sticky actions 0.25 and
    frameskip 4, ``PongNoFrameskip-v4`` registers 0.0 and 1: both give the same env here).

    Attributes:
        frame_skip: emulator frames per env step (the last two are max-pooled).
        image_size: side of the square resized frame (64 or 96 are typical).
        grayscale: one gray channel per frame (C=1), else RGB (C=3).
        frame_stack: frames per observation, so observations are ``[stack*C, H, W]``.
        noop_max: up to this many random no-op actions after each game reset.
        episodic_life: collect mode only: a lost life is reported as ``terminated``
            while the game (and the frame stack) goes on.
        clip_rewards: collect mode only: training rewards are ``sign(reward)``.
        repeat_action_probability: sticky actions (0.0 as in LightZero; 0.25 is the
            ALE v5 default).
        max_episode_steps: cap on EMULATOR FRAMES per game (no-op and skipped frames
            included), reported as ``truncated``; None keeps ALE's 108000 (30 minutes).
        num_threads: C++ worker threads stepping the games (0 lets ALE pick).
        use_fire_reset: press FIRE after each game reset in games that need it.
    """

    frame_skip: int = 4
    image_size: int = 64
    grayscale: bool = True
    frame_stack: int = 4
    noop_max: int = 30
    episodic_life: bool = True
    clip_rewards: bool = True
    repeat_action_probability: float = 0.0
    max_episode_steps: int | None = None
    num_threads: int = 1
    use_fire_reset: bool = True

    def __post_init__(self) -> None:
        if self.frame_skip < 1:
            raise ValueError(f"AtariOptions.frame_skip must be >= 1, got {self.frame_skip}")
        if self.image_size < 8:
            raise ValueError(f"AtariOptions.image_size must be >= 8, got {self.image_size}")
        if self.frame_stack < 1:
            raise ValueError(f"AtariOptions.frame_stack must be >= 1, got {self.frame_stack}")
        if self.noop_max < 0:
            raise ValueError(f"AtariOptions.noop_max must be >= 0, got {self.noop_max}")
        if not 0.0 <= self.repeat_action_probability <= 1.0:
            raise ValueError(
                f"AtariOptions.repeat_action_probability must be in [0, 1], got {self.repeat_action_probability}"
            )
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"AtariOptions.max_episode_steps must be >= 1 or None, got {self.max_episode_steps}")
        if self.num_threads < 0:
            raise ValueError(f"AtariOptions.num_threads must be >= 0, got {self.num_threads}")

    @property
    def channels(self) -> int:
        """C, channels of one frame: 1 for grayscale, 3 for RGB."""
        return 1 if self.grayscale else 3

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """Shape of one frame, ``(C, H, W)``."""
        return (self.channels, self.image_size, self.image_size)

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        """Shape of one observation, ``(stack * C, H, W)``."""
        return (self.frame_stack * self.channels, self.image_size, self.image_size)
