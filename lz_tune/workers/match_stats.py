"""Win / draw / loss rates of evaluation games against a bot (two-player games)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lz_tune.metrics import MATCH_RATES

__all__ = ["match_rates", "format_match", "LOSS_RATE"]

LOSS_RATE = "evaluation/env_runners/loss_rate"
"""The loss rate over all games (one of :data:`MATCH_RATES`)."""


def match_rates(returns: Sequence[float], seats: Sequence[int]) -> dict[str, float]:
    """The agent's rates under the names of :data:`lz_tune.metrics.MATCH_RATES`.

    Args:
        returns: ``[G]`` the agent's return of each game (zero-sum: > 0 win, 0 draw, < 0 loss).
        seats: ``[G]`` its seat in each game (0: first player, 1: second).
    Returns:
        ``{name: rate}``; a seat it never held gets NaN rates.
    """
    r = np.asarray(returns, np.float64)
    seat = np.asarray(seats, np.int64)
    if r.shape != seat.shape:
        raise ValueError(f"returns {r.shape} and seats {seat.shape} must have the same shape")
    out: dict[str, float] = {}
    names = iter(MATCH_RATES)
    for outcome in (r > 0, r == 0, r < 0):
        for which in (np.ones_like(seat, bool), seat == 0, seat == 1):
            n = int(which.sum())
            out[next(names)] = float(outcome[which].sum() / n) if n else float("nan")
    return out


def format_match(rates: Mapping[str, float]) -> str:
    """``W/D/L 0.50/0.30/0.20 (first 0.6/0.3/0.1, second 0.4/0.3/0.3)``."""

    def triple(seat: str, digits: int) -> str:
        return "/".join(
            f"{rates[f'evaluation/env_runners/{o}_rate{seat}']:.{digits}f}" for o in ("win", "draw", "loss")
        )

    return f"W/D/L {triple('', 2)} (first {triple('_as_first', 2)}, second {triple('_as_second', 2)})"
