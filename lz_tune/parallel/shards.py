"""Splitting one global training batch over N data-parallel learner workers, and merging back.

One update is one global batch of B = ``learner.batch_size`` samples. Worker i gets the
contiguous rows ``[start_i, start_i + n_i)`` (sizes differ by at most one: B need not divide by
N). Every policy type's loss is ``mean_b(w_b * l_b) / U`` over its batch (IS weights w, per-sample
loss l), and DDP averages the workers' gradients, so worker i's loss is scaled by
``s_i = n_i * N / B``: then ``(1/N) * sum_i s_i mean_{b in i}(w_b l_b) = (1/B) * sum_b w_b l_b``,
exactly the loss, and so the gradient, of one process on the whole batch, for uneven shards too.
The scale is one float64 number applied to the loss (:func:`shard_loss_scales`), not folded into
the float32 IS weights, so the weights a shard carries are the sampled ones, bit for bit.
(Terms that use statistics of the batch itself, BatchNorm without ``learner.sync_batchnorm`` and
stochastic_muzero's code-usage term, see each worker's shard, as in LightZero's DDP.)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lz_tune.buffer import SampledIndex, TrainBatch

__all__ = ["index_rows", "merge_logs", "shard_bounds", "shard_loss_scales", "split_batch"]

#: logs that are already a global quantity on every worker after the all-reduce: the mean of the
#: workers' values is the global value (the others are per-sample means: size-weighted)
_MEAN_OVER_WORKERS = ("loss/total",)


def shard_bounds(batch_size: int, num_shards: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of ``num_shards`` contiguous shards of ``batch_size`` rows; the
    first ``batch_size % num_shards`` shards hold one row more."""
    if not 1 <= num_shards <= batch_size:
        raise ValueError(
            f"cannot split a batch of {batch_size} into {num_shards} non-empty shards "
            "(learner.num_workers must be <= learner.batch_size)"
        )
    base, extra = divmod(batch_size, num_shards)
    bounds, start = [], 0
    for i in range(num_shards):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def shard_loss_scales(sizes: list[int]) -> list[float]:
    """``s_i = n_i * N / B`` for shards of ``sizes`` (see the module docstring): Python floats."""
    total, n = sum(sizes), len(sizes)
    return [size * n / total for size in sizes]


def split_batch(batch: TrainBatch, num_shards: int) -> list[TrainBatch]:
    """The shards of ``batch`` (see the module docstring): rows sliced (IS weights as sampled: the
    loss is scaled on the rank, :func:`shard_loss_scales`), ``num_reanalyzed`` counted within
    each shard."""
    total = len(batch)
    shards = []
    for start, stop in shard_bounds(total, num_shards):
        rows = slice(start, stop)
        shard_index = index_rows(batch.index, start, stop)
        shards.append(
            dataclasses.replace(
                batch,
                obs=batch.obs[rows],
                actions=batch.actions[rows],
                target_value=batch.target_value[rows],
                target_reward=batch.target_reward[rows],
                target_policy=batch.target_policy[rows],
                mask=batch.mask[rows],
                weights=batch.weights[rows],
                to_play=batch.to_play[rows],
                action_mask=batch.action_mask[rows],
                timesteps=batch.timesteps[rows],
                index=shard_index,
                num_reanalyzed=int(min(max(batch.num_reanalyzed - start, 0), stop - start)),
                extras={k: v[rows] for k, v in batch.extras.items()},
            )
        )
    return shards


def index_rows(index: SampledIndex, start: int, stop: int, *, reanalyze_rows: int | None = None) -> SampledIndex:
    """Rows ``[start, stop)`` of a sampled index (its padding actions too, where drawn); the shard
    reanalyses its first ``reanalyze_rows`` rows (None: as the index says)."""
    rows = slice(start, stop)
    return dataclasses.replace(
        index,
        segment_ids=np.asarray(index.segment_ids)[rows],
        positions=np.asarray(index.positions)[rows],
        weights=np.asarray(index.weights)[rows],
        pad_actions=None if index.pad_actions is None else index.pad_actions[rows],
        reanalyze_rows=reanalyze_rows,
    )


def merge_logs(logs: list[dict[str, float]], sizes: list[int]) -> dict[str, float]:
    """One update's logs from the workers' logs: per-sample means weighted by shard size, the
    global loss (already scaled, see the module docstring) averaged over workers, ``timing/*``
    the slowest worker's."""
    total = float(sum(sizes))
    merged: dict[str, float] = {}
    for key in logs[0]:
        values = [float(log[key]) for log in logs]
        if key.startswith("timing/"):  # the update waits for the slowest worker
            merged[key] = max(values)
        elif key in _MEAN_OVER_WORKERS:
            merged[key] = sum(values) / len(values)
        else:
            merged[key] = sum(v * n for v, n in zip(values, sizes)) / total
    return merged
