"""Reads the scalars of TensorBoard event files back, for tests (no TensorBoard install needed)."""

from __future__ import annotations

import os
import struct


def read_scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the TensorBoard event files of ``log_dir``: ``{tag: [(step, value), ...]}``
    in file order (no TensorBoard install needed; a torn last record of a killed run is skipped)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for name in sorted(os.listdir(log_dir)):
        if "tfevents" not in name:
            continue
        with open(os.path.join(log_dir, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):  # TFRecord: uint64 length, uint32 crc, payload, uint32 crc
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            start, end = pos + 12, pos + 12 + length
            if end + 4 > len(data):
                break
            event = event_pb2.Event.FromString(data[start:end])
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append((int(event.step), float(v.simple_value)))
            pos = end + 4
    return out
