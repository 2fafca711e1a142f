"""Policy lag: how many learner updates behind the newest weights the weights that collected the
data were, measured three times per collect (spec: ``async_pipeline.max_policy_lag`` bounds the
first):

- at launch: ``train_iter`` when the collect is launched minus the snapshot's ``train_iter``;
- at start: ``train_iter`` when the collector really started (``CollectResult.started_at``,
  wall-clock) minus the snapshot's, from the finishing times of the recent updates;
- at return: ``train_iter`` when the result is consumed minus the snapshot's.

Recent lags are kept in bounded windows (a run of days must not grow memory); the launch maximum
is kept over the whole run, the bound ``max_policy_lag`` promises.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Optional

import numpy as np

__all__ = ["PolicyLag"]


class PolicyLag:
    """The driver's policy-lag bookkeeping (module docstring). Lags are in updates (int >= 0).

    Attributes:
      launch, start, returned: the recent lags, oldest first (at most ``window`` each).
      max_launch: the largest launch lag of the run.
      update_times: ``time.time()`` of the latest updates, newest last (at most ``update_window``:
        only updates since the oldest collect still running matter).
    """

    def __init__(self, *, window: int = 1000, update_window: int = 100_000) -> None:
        self.launch: deque[int] = deque(maxlen=window)
        self.start: deque[int] = deque(maxlen=window)
        self.returned: deque[int] = deque(maxlen=window)
        self.update_times: deque[float] = deque(maxlen=update_window)
        self.max_launch = 0

    def record_update(self, t: Optional[float] = None) -> None:
        """One learner update finished at ``t`` (default now, ``time.time()``)."""
        self.update_times.append(time.time() if t is None else t)

    def forget_update_times(self) -> None:
        """``train_iter`` jumped (a restore): start lags count from here."""
        self.update_times.clear()

    def train_iter_at(self, t: float, train_iter: int) -> int:
        """The learner's train_iter at wall-clock time ``t``, given it is ``train_iter`` now: updates
        finished after ``t`` are not counted (those older than the window are assumed before ``t``)."""
        later = 0
        for finished in reversed(self.update_times):
            if finished <= t:
                break
            later += 1
        return train_iter - later

    def record_launch(self, lag: int) -> None:
        """A collect launched ``lag`` updates behind."""
        self.launch.append(lag)
        self.max_launch = max(self.max_launch, lag)

    def record_return(self, *, started_at: float, policy_train_iter: int, train_iter: int) -> None:
        """A collect's result consumed now (learner at ``train_iter``): it started at ``started_at``
        (``time.time()``) with the weights of update ``policy_train_iter``."""
        self.start.append(self.train_iter_at(started_at, train_iter) - policy_train_iter)
        self.returned.append(train_iter - policy_train_iter)

    def metrics(self) -> dict[str, float]:
        """``policy_lag_{launch,start,return}_{mean,max}`` over the recent windows (the launch max
        over the run); zeros before the first collect."""
        start, returned = self.start or [0], self.returned or [0]
        return {
            "policy_lag_launch_mean": float(np.mean(self.launch or [0])),
            "policy_lag_launch_max": self.max_launch,
            "policy_lag_start_mean": float(np.mean(start)),
            "policy_lag_start_max": int(np.max(start)),
            "policy_lag_return_mean": float(np.mean(returned)),
            "policy_lag_return_max": int(np.max(returned)),
        }
