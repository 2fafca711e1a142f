"""Per-env inference state for the history-conditioned types (muzero_context,
muzero_rnn_full_obs): which envs may use the state they carry from their previous step.

A Policy keeps one :class:`EnvHistory` next to its per-env tensors. Its rules:

- an env's state exists only after that env's first step, and ``reset(env_ids)`` (episode end,
  start of an evaluation) drops it for exactly those envs;
- the state is tagged with the weights version it was built with: ``on_weights_loaded()``
  bumps the version, and state of another version is never used;
- every ``context_length`` steps of an env (counted per env, from its episode start or its last
  restart) the state restarts from the real observation.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["EnvHistory", "acted"]


def acted(previous_action: np.ndarray) -> np.ndarray:
    """[N] bool: the env took an action since its reset (discrete ``[N]`` int: >= 0; continuous
    ``[N, D]`` float: a row without NaN)."""
    a = np.asarray(previous_action)
    if np.issubdtype(a.dtype, np.floating):
        return ~np.isnan(a.reshape(a.shape[0], -1)).any(axis=1)
    return a.reshape(a.shape[0], -1)[:, 0] >= 0


class EnvHistory:
    """Book-keeping of N envs' carried state (the tensors live in the Policy)."""

    def __init__(self, context_length: int) -> None:
        if context_length < 1:
            raise ValueError(f"context_length must be >= 1, got {context_length}")
        self.context_length = context_length
        self.weights_version = 0
        """Bumped on every weight change."""
        self.version = np.zeros(0, np.int64)
        """[N] weights version each env's state was built with; -1: no state."""
        self.steps_since_restart = np.zeros(0, np.int64)
        """[N] env steps since each env's state last restarted from a real observation."""

    def on_weights_loaded(self) -> None:
        self.weights_version += 1

    def reset(self, env_ids: np.ndarray) -> None:
        if self.version.size:
            self.version[np.asarray(env_ids, np.int64)] = -1

    def carried(self, num_envs: int, previous_action: Optional[np.ndarray]) -> np.ndarray:
        """[N] bool: the envs that continue from their state this step: it exists for these N
        envs and the current weights, the env acted since (:func:`acted`), and no restart is due."""
        if previous_action is None or self.version.shape[0] != num_envs:
            return np.zeros(num_envs, bool)
        return (
            (self.version == self.weights_version)
            & acted(previous_action)
            & (self.steps_since_restart + 1 < self.context_length)
        )

    def advance(self, carried: np.ndarray) -> None:
        """Record this step: ``carried`` envs count one more step, the others restarted; every
        env's state is now of the current weights."""
        num_envs = carried.shape[0]
        if self.steps_since_restart.shape[0] != num_envs:
            self.steps_since_restart = np.zeros(num_envs, np.int64)
        self.steps_since_restart = np.where(carried, self.steps_since_restart + 1, 0)
        self.version = np.full(num_envs, self.weights_version, np.int64)
