"""A toy eleventh policy type, ``muzero_mc``, for tests/test_adding_a_policy_type.py and the
README's "Adding a policy type": MuZero whose value target is the discounted sum of the next
``buffer.td_steps`` rewards WITHOUT a bootstrap value (a truncated Monte-Carlo return, where
MuZero adds ``gamma^n v_target(o_{t+n})``).

It is a composition of existing parts, no subclass: MuZero's policy as it is, and MuZero's
learner with another target builder (a :class:`lz_tune.algos.base.TargetBuilder`). Importing
this module registers the type; a config names it ``"tests.toy_policy_type:muzero_mc"``
(:data:`POLICY_TYPE`), so that Ray actors and Tune trials import this module too.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from lz_tune.algos.base import Learner
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size, step_columns  # noqa: F401  (MuZero's data)
from lz_tune.algos.targets import make_train_batch
from lz_tune.buffer import GameBuffer, SampledIndex, TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.policy_registry import register_policy_type

NAME = "muzero_mc"
register_policy_type(NAME, module=__name__)

POLICY_TYPE = f"{__name__}:{NAME}"
"""What a config's ``policy_type`` says to use this type in every process."""

BATCHES_BUILT = [0]
"""Training batches :func:`monte_carlo_targets` built in this process (the test reads it)."""


def no_bootstrap(obs: np.ndarray) -> np.ndarray:
    """[K] zeros: the value of every bootstrap observation [K, *obs_shape] counts as 0."""
    return np.zeros(obs.shape[0], np.float32)


def monte_carlo_targets(
    learner: Learner, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator
) -> TrainBatch:
    """MuZero's batch with value targets ``sum_{i<n} gamma^i r_{t+i}`` (n = ``buffer.td_steps``,
    cut at the episode end), no bootstrap; policy targets and reanalysis as MuZero's."""
    b, target = learner.cfg.buffer, learner.target_policy

    def reanalyze_fn(obs, mask, to_play):
        return target.reanalyze(obs, mask, to_play, rng)

    BATCHES_BUILT[0] += 1
    return make_train_batch(
        buffer,
        index,
        value_fn=no_bootstrap,
        reanalyze_fn=reanalyze_fn if b.reanalyze_ratio > 0 else None,
        reanalyze_ratio=b.reanalyze_ratio,
        use_root_value=False,
    )


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> MuZeroPolicy:
    return MuZeroPolicy(cfg, spec, device=device, network=network)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    return MuZeroLearner(cfg, spec, target_builder=monte_carlo_targets)
