"""TrainBudgetQueue: one budget of learner updates per collect (budget-locked replay ratio).

The learner consumes budgets one update at a time, so the number of updates equals the sum
of the budgets enqueued, whatever the overlap between collecting and training.
"""

from __future__ import annotations

from collections import deque

from lz_tune.config import Config


def updates_for_collect(cfg: Config, num_transitions: int) -> int:
    """learner.update_per_collect, or max(1, int(transitions * replay_ratio))."""
    if cfg.learner.update_per_collect is not None:
        return cfg.learner.update_per_collect
    return max(1, int(num_transitions * cfg.learner.replay_ratio))


class TrainBudgetQueue:
    def __init__(self) -> None:
        self._budgets: deque[int] = deque()  # updates left in each budget, oldest first
        self.head_done = 0  # updates already done in the head budget
        self.total_enqueued = 0
        self.total_consumed = 0
        self.budgets_completed = 0

    def __len__(self) -> int:
        return len(self._budgets)

    def push(self, updates: int) -> None:
        if updates > 0:
            self._budgets.append(updates)
            self.total_enqueued += updates

    @property
    def remaining(self) -> int:
        return sum(self._budgets)

    @property
    def head_size(self) -> int:
        """Updates of the head budget when it was enqueued (0 if empty)."""
        return self._budgets[0] + self.head_done if self._budgets else 0

    def take(self, max_updates: int) -> int:
        """Reserve up to ``max_updates`` updates from the head budget; call :meth:`consumed`
        after each one. Returns how many may be done now (0 if empty)."""
        return min(max_updates, self._budgets[0]) if self._budgets else 0

    def consumed(self) -> bool:
        """Record one finished update; True when it completed the head budget."""
        self._budgets[0] -= 1
        self.head_done += 1
        self.total_consumed += 1
        if self._budgets[0] == 0:
            self._budgets.popleft()
            self.head_done = 0
            self.budgets_completed += 1
            return True
        return False

    def state_dict(self) -> dict:
        return {
            "budgets": list(self._budgets),
            "head_done": self.head_done,
            "total_enqueued": self.total_enqueued,
            "total_consumed": self.total_consumed,
            "budgets_completed": self.budgets_completed,
        }

    def load_state_dict(self, state: dict) -> None:
        self._budgets = deque(int(b) for b in state["budgets"])
        self.head_done = int(state.get("head_done", 0))
        self.total_enqueued = int(state["total_enqueued"])
        self.total_consumed = int(state["total_consumed"])
        self.budgets_completed = int(state["budgets_completed"])

    def restore_pending(self, budgets: list[int], head_done: int = 0) -> None:
        """Replace the pending budgets (after a checkpoint restore; ``head_done``: updates already
        done in the first one). Lifetime counts stay this queue's; the new budgets count as
        enqueued."""
        self._budgets = deque(int(b) for b in budgets if int(b) > 0)
        self.head_done = int(head_done) if self._budgets else 0
        self.total_enqueued += sum(self._budgets)
