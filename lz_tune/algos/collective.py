"""What a learner calls for the parts of an update that span data-parallel ranks.

A policy type's learner never imports ``torch.distributed``: it calls its ``collective``
(declared on :class:`lz_tune.algos.base.Learner`). In one process that is :data:`IN_PROCESS`,
which does nothing; a data-parallel rank (:mod:`lz_tune.parallel.worker`) injects one that runs
the loss through DDP and all-reduces over the process group.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import torch

__all__ = ["IN_PROCESS", "Collective"]


class Collective:
    """The in-process collective: one rank, nothing to exchange."""

    #: True on a data-parallel rank (the losses of the ranks differ; their gradients do not)
    distributed: bool = False
    world_size: int = 1
    rank: int = 0

    def run_forward(self, forward: Callable[[], Any]) -> Any:
        """Run ``forward`` (the closure computing one update's ``(loss, terms, extra)`` from the
        learner network); on a rank, through DDP, so the backward pass all-reduces the gradients."""
        return forward()

    def all_reduce(self, t: torch.Tensor, op: Literal["sum", "max"] = "sum") -> torch.Tensor:
        """``t`` summed or maxed over the ranks (a new tensor, detached, on ``t``'s device); in one
        process ``t`` itself."""
        return t


#: the collective of a learner in one process
IN_PROCESS = Collective()
