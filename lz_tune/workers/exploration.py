"""Epsilon-greedy exploration for collection, plain or temporally extended.

With probability epsilon a collect step of env i plays a uniformly random legal action (Box
actions: a uniform point of [-1, 1]^D) instead of the one its search chose. With
``max_duration > 1`` that random action is an *option* held for n steps, n drawn from a zeta
distribution ``P(n) ~ n^-2`` on ``1..max_duration`` (Dabney, Ostrovski & Barreto 2021,
"Temporally-Extended epsilon-Greedy Exploration"): on tasks whose reward is the same at every step
until a goal, held random actions travel much further than one-step dithering (Acrobot-v1:
uniform random play reaches the goal within 500 steps in ~8% of episodes, random actions held
for zeta(2)-distributed durations up to 20 steps in ~25%). An option ends early at the env's
episode end, or when its action is not legal any more.

The per-env option state lives here, so an option carries across ``collect()`` calls just as the
envs do. Only the played action changes: the step keeps the search's policy target and root value.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EpsilonGreedy"]


class EpsilonGreedy:
    """Per-env epsilon-greedy exploration state of one collector's ``N`` envs."""

    def __init__(self, *, num_envs: int, continuous: bool, max_duration: int, rng: np.random.Generator) -> None:
        self.continuous = continuous
        self.rng = rng
        n = np.arange(1, max_duration + 1, dtype=np.float64)
        self._duration_cdf = np.cumsum(n**-2.0) / np.sum(n**-2.0)  # zeta(2) on 1..max_duration
        self.steps_left = np.zeros(num_envs, np.int64)
        """[N] steps the current option of each env still holds its action (0: none running)."""
        self.held_action: np.ndarray | None = None
        """[N] int64 or [N, D] float32, the action each running option repeats."""

    def _duration(self, size: int) -> np.ndarray:
        return (
            np.searchsorted(self._duration_cdf, self.rng.random(size), side="right").clip(
                max=len(self._duration_cdf) - 1
            )
            + 1
        )

    def apply(self, action: np.ndarray, action_mask: np.ndarray, epsilon: float) -> np.ndarray:
        """The actions to play this step: the searched ``action`` (``[N]`` int64 or ``[N, D]``
        float32) where no option runs, else the option's (``action_mask [N, A]`` bool legal actions).
        A new option starts in each free env with probability ``epsilon``."""
        if epsilon <= 0.0 and not self.steps_left.any():
            return action  # the default (off): nothing to draw or hold, no work in the actor loop
        if self.held_action is None:
            self.held_action = np.zeros_like(action)
        if not self.continuous:  # an option whose action became illegal ends here
            holding = np.flatnonzero(self.steps_left > 0)
            illegal = holding[~action_mask[holding, self.held_action[holding]]]
            self.steps_left[illegal] = 0
        if epsilon > 0.0:
            free = np.flatnonzero(self.steps_left == 0)
            start = free[self.rng.random(free.size) < epsilon]
            if start.size:
                if self.continuous:
                    self.held_action[start] = self.rng.uniform(-1.0, 1.0, size=(start.size, *action.shape[1:]))
                else:
                    for i in start:
                        self.held_action[i] = self.rng.choice(np.flatnonzero(action_mask[i]))
                self.steps_left[start] = self._duration(start.size)
        running = self.steps_left > 0
        if not running.any():
            return action
        self.steps_left[running] -= 1
        played = action.copy()
        played[running] = self.held_action[running]
        return played

    def end_episodes(self, done: np.ndarray) -> None:
        """``done [N]`` bool: the envs whose episode just ended; their options end too."""
        self.steps_left[done] = 0
