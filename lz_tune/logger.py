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


def read_scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the TensorBoard event files of ``log_dir``: ``{tag: [(step, value), ...]}``
    in file order (no TensorBoard install needed; a torn last record of a killed run is skipped)."""
    import struct

    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for name in sorted(os.listdir(log_dir)):
        if "tfevents" not in name:
            continue
        with open(os.path.join(log_dir, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):  # TFRecord: uint64 length, uint32 crc, payload, uint32 crc
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            start, end = pos + 12, pos + 12 + length
            if end + 4 > len(data):
                break
            event = event_pb2.Event.FromString(data[start:end])
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append((int(event.step), float(v.simple_value)))
            pos = end + 4
    return out
