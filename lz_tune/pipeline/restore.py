"""Rules a checkpoint restore follows beyond loading tensors (train ``--resume``, Tune trial
restore, PBT exploit).

* The config's optimizer hyperparameters win over the checkpoint's: torch's
  ``Optimizer.load_state_dict`` also overwrites each param group's momentum, weight decay and
  learning rate with the saved ones, so a PBT exploit that perturbed ``learner.momentum`` would
  silently train with the donor's value (:func:`with_config_hyperparameters`).
* A restore that loaded a trainable buffer trains at once: the queued train budgets of the
  checkpoint come back, or, if it had none (the sync pipeline checkpoints between budgets),
  one budget of a collect's size is queued, so the first update comes before any new env step
  (:func:`budgets_after_restore`).
* :class:`RestoreReport`: what the last restore loaded and how many env steps were collected
  before the first update after it (result keys ``restore/...``).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from lz_tune.config import Config

__all__ = ["with_config_hyperparameters", "budgets_after_restore", "RestoreReport"]


def with_config_hyperparameters(learner_state: dict[str, Any], cfg: Config) -> dict[str, Any]:
    """``learner_state`` (a ``Learner.state_dict()``) with the param groups of its optimizer
    carrying ``learner.momentum`` / ``learner.weight_decay`` / ``learner.learning_rate`` of
    ``cfg`` where the optimizer has those keys (moments and step counts stay the checkpoint's).
    The learning rate is recomputed from the schedule before every update anyway. A shallow
    copy: the checkpoint dict is not changed."""
    optimizer = learner_state.get("optimizer")
    if not isinstance(optimizer, dict) or "param_groups" not in optimizer:
        return learner_state
    lc = cfg.learner
    wanted = {"momentum": lc.momentum, "weight_decay": lc.weight_decay, "lr": lc.learning_rate}
    groups = [{**g, **{k: v for k, v in wanted.items() if k in g}} for g in optimizer["param_groups"]]
    return {**learner_state, "optimizer": {**optimizer, "param_groups": groups}}


def budgets_after_restore(
    saved: Optional[dict[str, Any]], *, cfg: Config, env_steps: int, collects: int
) -> tuple[list[int], int]:
    """(pending budgets, updates already done in the head one) for the queue after a restore that
    loaded a trainable buffer: the checkpoint's (``TrainBudgetQueue.state_dict()``), or one
    budget of ``updates_for_collect`` for the mean transitions per collect so far."""
    from lz_tune.pipeline.budget import updates_for_collect

    if saved and saved.get("budgets"):
        return [int(b) for b in saved["budgets"]], int(saved.get("head_done", 0))
    per_collect = env_steps / collects if collects else cfg.env.collector_env_num * cfg.buffer.game_segment_length
    return [updates_for_collect(cfg, max(1, int(per_collect)))], 0


class RestoreReport:
    """Transitions the last restore loaded into the buffer, and env steps collected after it
    before the first update (NaN until that update; NaN throughout when nothing was restored)."""

    def __init__(self) -> None:
        self.fallbacks = 0  # damaged newer checkpoints passed over for an older one (train --resume RUN)
        self.weights_only = 0  # restores that kept the weights but not a replay buffer that did not load (Tune)
        self.buffer_transitions = 0
        self._env_steps_at_restore: Optional[int] = None
        self.env_steps_before_first_update = math.nan

    def restored(self, *, buffer_transitions: int, env_steps: int) -> None:
        self.buffer_transitions = int(buffer_transitions)
        self._env_steps_at_restore = int(env_steps)
        self.env_steps_before_first_update = math.nan

    def on_update(self, env_steps: int) -> None:
        """Call before every update (cheap)."""
        if self._env_steps_at_restore is not None:
            self.env_steps_before_first_update = float(env_steps - self._env_steps_at_restore)
            self._env_steps_at_restore = None

    def metrics(self) -> dict[str, float]:
        return {
            "restore_fallbacks": self.fallbacks,
            "restore_weights_only": self.weights_only,
            "restore_buffer_transitions": self.buffer_transitions,
            "restore_env_steps_before_first_update": self.env_steps_before_first_update,
        }
