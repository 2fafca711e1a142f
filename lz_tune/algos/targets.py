"""Training batches of the MuZero family, assembled from the buffer's type-agnostic primitives.

:func:`make_train_batch` is the common assembly (MuZero, Gumbel MuZero, EfficientZero before its
value-prefix targets): the unroll window, n-step value targets bootstrapped by ``value_fn``,
and, for the first ``int(B * reanalyze_ratio)`` rows, policy targets (and any extra columns)
from a fresh search. A type with other targets adds them to ``TrainBatch.extras``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lz_tune.buffer import GameBuffer, ReanalyzeFn, SampledIndex, TrainBatch, ValueFn

__all__ = ["make_train_batch", "with_extras"]


def make_train_batch(
    buffer: GameBuffer,
    index: SampledIndex,
    *,
    value_fn: ValueFn | None,
    reanalyze_fn: ReanalyzeFn | None = None,
    reanalyze_ratio: float = 0.0,
    use_root_value: bool = False,
) -> TrainBatch:
    """Unroll inputs and targets of the sampled positions (see `TrainBatch`).

    Args:
      index: from ``buffer.sample``, with no eviction of its segments since.
      value_fn: target-network values of bootstrap observations (see ``GameBuffer.n_step_values``);
        unused (may be None) when ``use_root_value``.
      reanalyze_fn: fresh search for rows 0..k-1 (k = ``index.num_reanalyzed(reanalyze_ratio)``) over all their valid
        unroll positions: ``fn(obs [K, *obs], action_mask [K, A], to_play [K]) -> Reanalysis``.
        Its policy targets (and extras) replace the stored ones in the batch; stored segments
        are not modified.
    """
    if not 0.0 <= reanalyze_ratio <= 1.0:
        raise ValueError(f"reanalyze_ratio must be in [0, 1], got {reanalyze_ratio}")
    if value_fn is None and not use_root_value:
        raise ValueError("value_fn is required unless use_root_value=True")
    win = buffer.gather_window(index)
    target_value = buffer.n_step_values(win, value_fn=value_fn, use_root_value=use_root_value)
    target_policy = win.policy_targets
    extras = dict(win.extras)
    num_reanalyzed = index.num_reanalyzed(reanalyze_ratio)  # a shard's own share of the batch's rows
    if num_reanalyzed > 0:
        if reanalyze_fn is None:
            raise ValueError("reanalyze_ratio > 0 needs a reanalyze_fn")
        sel = win.valid[:num_reanalyzed]
        fresh = buffer.run_reanalysis(
            reanalyze_fn,
            win.obs[:num_reanalyzed][sel],
            win.action_mask[:num_reanalyzed][sel],
            win.to_play[:num_reanalyzed][sel],
        )
        target_policy[:num_reanalyzed][sel] = fresh.policy_target
        for name, value in fresh.extras.items():
            extras[name][:num_reanalyzed][sel] = value
    return TrainBatch(
        obs=win.obs,
        actions=win.actions,
        target_value=target_value,
        target_reward=win.rewards,
        target_policy=target_policy,
        mask=win.mask,
        weights=np.asarray(index.weights, np.float32),
        to_play=win.to_play,
        action_mask=win.action_mask,
        timesteps=win.timesteps,
        index=index,
        num_reanalyzed=num_reanalyzed,
        extras=extras,
    )


def with_extras(batch: TrainBatch, **extras: np.ndarray) -> TrainBatch:
    """``batch`` with more named extra targets."""
    return dataclasses.replace(batch, extras={**batch.extras, **extras})
