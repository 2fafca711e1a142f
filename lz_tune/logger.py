"""TensorBoard scalars (tensorboardX) and throughput meters.

Named ``logger`` rather than ``logging`` so that it never shadows the standard library.
"""

from __future__ import annotations

import os
import time
from typing import Mapping, Optional


class Throughput:
    """Counts a quantity and reports its rate per wall-clock second since the last read."""

    def __init__(self) -> None:
        self._last_t = time.perf_counter()
        self._last_n = 0
        self.total = 0

    def add(self, n: int) -> None:
        self.total += n

    def rate(self) -> float:
        now = time.perf_counter()
        dt = now - self._last_t
        r = (self.total - self._last_n) / dt if dt > 0 else 0.0
        self._last_t, self._last_n = now, self.total
        return r


class ScalarLogger:
    """Writes scalars to ``<log_dir>/events.out.tfevents.*``; a no-op when log_dir is None."""

    def __init__(self, log_dir: Optional[str]) -> None:
        self.log_dir = log_dir
        self._writer = None
        if log_dir is not None:
            from tensorboardX import SummaryWriter

            os.makedirs(log_dir, exist_ok=True)
            self._writer = SummaryWriter(log_dir=log_dir, flush_secs=10)

    def log(self, scalars: Mapping[str, float], step: int) -> None:
        if self._writer is None:
            return
        for key, value in scalars.items():
            if value is None:
                continue
            self._writer.add_scalar(key, float(value), global_step=step)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
