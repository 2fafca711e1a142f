"""The interface every policy type implements; shared code only talks to these two classes.

- :class:`Policy` (inference side, lives in collectors, evaluators AND the learner):
  the network plus the tree search; ``act`` turns an env batch into actions and search
  statistics, ``value_targets`` / ``reanalyze`` serve the replay buffer's target building.
- :class:`Learner` (driver only): a Policy in learn mode, the target network, optimizer,
  LR schedule and ``train_iter``; ``learn(batch)`` does one update and returns priorities.

A policy type is a module of :mod:`lz_tune.algos` that provides ``make_policy`` and
``make_learner`` (see :func:`lz_tune.algos.get_algorithm`). Variants that need more state
(UniZero KV caches, EfficientZero LSTM hidden states) keep it inside their Policy and clear
it in :meth:`Policy.on_weights_loaded`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lz_tune.buffer.batch import TrainBatch
from lz_tune.envs.types import EnvBatch


@dataclass(frozen=True)
class ActResult:
    """What one batched search decided for N envs."""

    action: np.ndarray
    """[N] int64 chosen actions."""
    root_value: np.ndarray
    """[N] float32 search values of the roots."""
    pred_value: np.ndarray
    """[N] float32 the network's own value estimates of the roots."""
    visit_distribution: np.ndarray
    """[N, A] float32 normalised root visit counts (policy targets)."""


class Policy(abc.ABC):
    """Network + search for one policy type (inference only; no optimizer)."""

    network: torch.nn.Module

    @abc.abstractmethod
    def act(self, batch: EnvBatch, *, mode: str, temperature: float, rng: np.random.Generator) -> ActResult:
        """Search from every observation of ``batch`` and pick actions.

        mode: ``"collect"`` (root noise, sampling with ``temperature``) or ``"eval"`` (no
        noise, most-visited action).
        """

    @abc.abstractmethod
    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        """[K] float32 bootstrap values of stacked observations [K, *obs_shape]."""

    @abc.abstractmethod
    def reanalyze(self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Fresh search without noise: (visit distributions [K, A], root values [K])."""

    def weights(self) -> dict[str, torch.Tensor]:
        """CPU copy of the network weights (a snapshot safe to ship to other processes)."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.network.state_dict().items()}

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.network.load_state_dict(state)
        self.on_weights_loaded()

    def on_weights_loaded(self) -> None:
        """Hook for caches that depend on the weights (UniZero KV caches); none for MuZero."""


class Learner(abc.ABC):
    """Optimisation state of one policy type (driver process only)."""

    policy: Policy
    target_policy: Policy
    train_iter: int

    @abc.abstractmethod
    def learn(self, batch: TrainBatch) -> tuple[dict[str, float], np.ndarray]:
        """One update on ``batch``; returns (scalar logs, new priorities [B] float32)."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, target weights, optimizer, schedule, train_iter."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""

    @property
    @abc.abstractmethod
    def learning_rate(self) -> float:
        """The learning rate of the next update."""
