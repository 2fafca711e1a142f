"""The learner beyond one process: data-parallel updates on Ray actors with PyTorch DDP.

``learner.num_workers = N >= 2``: the driver (still the single owner of the replay buffer,
sampling, reanalyze and priority write-back) sends each global batch, split into N shards, to N
learner workers; their gradients are averaged by DDP. Modules:

- :mod:`~lz_tune.parallel.shards`: the split of a batch and its loss scaling, the merge of logs;
- :mod:`~lz_tune.parallel.learner`: :class:`DataParallelLearner`, the driver's side (the Learner
  interface);
- :mod:`~lz_tune.parallel.group`: the learner actors, their ranks and the torch process group;
- :mod:`~lz_tune.parallel.worker`: one rank (the type's learner, its loss through DDP);
- :mod:`~lz_tune.parallel.sync_batchnorm`: BatchNorm over the global batch (CPU and GPU);
- :mod:`~lz_tune.parallel.resources`: the learner bundles of a Tune trial.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (this package's resources module is imported by Tune's resource request: no torch there)
    from lz_tune.algos.base import Learner
    from lz_tune.config import Config

__all__ = ["make_learner"]


def make_learner(cfg: "Config", spec) -> "Learner":
    """The run's learner: the type's own (``learner.num_workers == 1``), or a
    :class:`~lz_tune.parallel.learner.DataParallelLearner` over it. Workers start on ``start()``."""
    from lz_tune.algos import get_algorithm

    algo = get_algorithm(cfg.policy_type)
    if cfg.learner.num_workers < 2:
        return algo.make_learner(cfg, spec)
    try:
        import ray  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"learner.num_workers={cfg.learner.num_workers} runs the learner on Ray actors, and "
            "Ray is not installed: pip install 'ray[tune,train]' (or learner.num_workers=1)"
        ) from e
    from lz_tune.parallel.learner import DataParallelLearner

    return DataParallelLearner(cfg, spec, algo.make_learner)
