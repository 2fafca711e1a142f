"""Running totals of the real (unclipped, all-lives) episode of each env."""

from __future__ import annotations

import numpy as np

__all__ = ["EpisodeTracker"]


class EpisodeTracker:
    """Sums raw rewards and counts steps per env until the real episode ends.

    Args:
        num_envs: N.
    """

    def __init__(self, *, num_envs: int) -> None:
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._length = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> None:
        """Forget the running episodes (all envs were reset)."""
        self._return[:] = 0.0
        self._length[:] = 0

    def update(self, raw_reward: np.ndarray, real_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Account one step and close the episodes that ended.

        Args:
            raw_reward: ``[N]`` unclipped rewards of this step.
            real_end: ``[N]`` bool, the real episode ended with this step.

        Returns:
            ``episode_return`` ``[N]`` float64 (total of the ended episodes, NaN elsewhere)
            and ``episode_length`` ``[N]`` int64 (steps of the ended episodes, 0 elsewhere).
        """
        self._return += raw_reward
        self._length += 1
        episode_return = np.where(real_end, self._return, np.nan)
        episode_length = np.where(real_end, self._length, 0).astype(np.int64)
        self._return[real_end] = 0.0
        self._length[real_end] = 0
        return episode_return, episode_length
