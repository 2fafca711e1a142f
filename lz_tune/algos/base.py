"""The interface every policy type implements; shared code only talks to these two classes.

- :class:`Policy` (inference side, lives in collectors, evaluators AND the learner):
  the network plus the tree search; ``act`` turns an env batch into actions and search
  statistics, ``value_targets`` / ``reanalyze`` serve the training targets.
- :class:`Learner` (driver only): a Policy in learn mode, the target network, optimizer,
  LR schedule and ``train_iter``; ``make_batch`` builds the type's training batch from the
  buffer's primitives, ``learn(batch)`` does one update and returns priorities.

A policy type is a module of :mod:`lz_tune.algos` that provides ``make_policy``,
``make_learner`` and ``step_columns`` (see :func:`lz_tune.algos.get_algorithm`).

Stateful inference (history-conditioned types, UniZero KV caches) keeps its state inside the
Policy: :meth:`Policy.reset` is called for the envs whose episode ended (collector) and for
every env at the start of an evaluation; ``act`` receives the previous action of each env;
:meth:`Policy.on_weights_loaded` runs after EVERY weight change (snapshot load in a worker,
optimizer step and target sync in the learner).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from lz_tune.buffer import GameBuffer, Reanalysis, SampledIndex, StepColumn, TrainBatch
from lz_tune.envs.types import EnvBatch

__all__ = ["ActResult", "Learner", "Policy", "Reanalysis", "StepColumn"]


@dataclass(frozen=True)
class ActResult:
    """What one batched search decided for N envs."""

    action: np.ndarray
    """[N] int64 chosen actions ([N, D] float32 in [-1, 1] for continuous actions)."""
    root_value: np.ndarray
    """[N] float32 search values of the roots."""
    pred_value: np.ndarray
    """[N] float32 the network's own value estimates of the roots."""
    policy_target: np.ndarray
    """[N, P] float32 what the policy is trained towards: normalised root visit counts
    (MuZero, P = A), the improved policy (Gumbel MuZero), the visits over the K sampled root
    actions (Sampled MuZero, P = K)."""
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    """The type's extra per-step columns (its ``step_columns``), ``{name: [N, *shape]}``."""


class Policy(abc.ABC):
    """Network + search for one policy type (inference only; no optimizer)."""

    network: torch.nn.Module

    @abc.abstractmethod
    def act(self, batch: EnvBatch, *, mode: str, temperature: float, rng: np.random.Generator,
            previous_action: Optional[np.ndarray] = None) -> ActResult:
        """Search from every observation of ``batch`` and pick actions.

        mode: ``"collect"`` (root noise, exploration with ``temperature``) or ``"eval"`` (no
        noise, greedy).
        previous_action: [N] int64 the action each env took last (-1 right after a reset;
        continuous actions: [N, D] float32, NaN rows right after a reset);
        None when the caller does not track it (stateless types ignore it).
        """

    @abc.abstractmethod
    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        """[K] float32 bootstrap values of stacked observations [K, *obs_shape]."""

    @abc.abstractmethod
    def reanalyze(self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray,
                  rng: np.random.Generator) -> Reanalysis:
        """Fresh search without root noise over K stored observations."""

    def reset(self, env_ids: np.ndarray) -> None:
        """Forget per-env inference state of ``env_ids`` [k] int (their episodes ended or an
        evaluation starts). Stateless types have none."""

    def weights(self) -> dict[str, torch.Tensor]:
        """CPU copy of the network weights (a snapshot safe to ship to other processes)."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.network.state_dict().items()}

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None:
        self.network.load_state_dict(state)
        self.on_weights_loaded()

    def on_weights_loaded(self) -> None:
        """Hook for caches that depend on the weights (KV caches, recurrent history); called
        after every weight change. None for MuZero."""


class Learner(abc.ABC):
    """Optimisation state of one policy type (driver process only)."""

    policy: Policy
    target_policy: Policy
    train_iter: int

    @abc.abstractmethod
    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        """The type's training batch for the sampled positions, built from the buffer's
        primitives (``buffer.gather_window``, ``buffer.n_step_values``) and the target policy."""

    @abc.abstractmethod
    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> tuple[dict[str, float], np.ndarray]:
        """One update on ``batch``; returns (scalar logs, new priorities [B] float32).

        train_iter: the driver's update count before this update (the driver always passes it,
        as the spec's learner input does); types with schedules in train_iter read it (UniZero),
        the others ignore it. None: the learner's own ``train_iter``."""

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

    def reanalyze_segments(self, buffer: GameBuffer, segment_ids: np.ndarray, *, rng: np.random.Generator) -> None:
        """Periodic buffer reanalyze: re-search every step of these live segments (`[k]` global
        ids) with the target network and store the new policy targets and root values in the
        buffer. Default: a search from each stored observation (``target_policy.reanalyze``);
        types whose search needs the steps before a position override it."""
        target = self.target_policy
        buffer.reanalyze_segments(segment_ids, lambda obs, mask, to_play: target.reanalyze(obs, mask, to_play, rng))

    def target_changes_at(self, train_iter: int) -> bool:
        """Whether the update that takes ``train_iter`` to ``train_iter + 1`` changes the target
        network (what :meth:`make_batch` bootstraps from). True unless the type knows better: a
        data-parallel driver fetches the target weights after such updates and prepares the next
        batch ahead only across updates that leave the target unchanged."""
        return True

    def update_path_notice(self) -> Optional[str]:
        """What ``learner.update_path`` does NOT give this type, in one sentence for the start
        of a run (the driver prints it); None when the type runs the path that was asked for."""
        return None
