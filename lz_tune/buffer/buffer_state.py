"""The replay buffer file: a buffer's `tables.ReplayTables` as a plain dict and back
(`GameBuffer.state_dict` / `load_state_dict`).

The state stores the declared extra step columns (`columns.StepColumn`) with the tables and
checks them on load (another declaration is refused, naming it).
"""

from __future__ import annotations

import numpy as np

from .priority import sampling_weights
from .tables import ReplayTables

__all__ = ["STATE_VERSION", "APPEND_ONLY", "state_dict", "load_state_dict"]

STATE_VERSION = 2

#: arrays of the state whose rows never change once appended (a logical row keeps its contents
#: until it is evicted): a checkpoint need not hash or write them again (`snapshot`). Every other
#: array may change in place (priorities, reanalysed targets, per-segment counters).
APPEND_ONLY = (("tables", "frames", "columns", "frame"),)


def state_dict(tables: ReplayTables, *, copy: bool = True) -> dict:
    """Plain dict of numpy arrays and Python scalars (picklable, no torch). ``copy=False``: the
    arrays are views of the live tables, valid until the buffer next changes."""
    return {
        "version": STATE_VERSION,
        "config": tables.layout.describe(),
        "time": tables.time,
        "clear_time": tables.clear_time,
        "rng": tables.rng.bit_generator.state,
        "frame_spec": None if tables.frame_spec is None else (tables.frame_spec[0], tables.frame_spec[1].str),
        "tables": {name: store.state_dict(copy=copy) for name, store in tables.stores.items()},
    }


def load_state_dict(tables: ReplayTables, state: dict, *, alpha: float, copy: bool = True) -> None:
    """Restores a `state_dict` (this version) into ``tables``; U, T, S, A and the declared
    extra columns must match (checked before anything is replaced). The cached sampling
    weights are recomputed with this buffer's ``alpha``; the caller evicts if its capacity is
    smaller. ``copy=False``: the tables take the state's arrays (they must be writable and not
    used elsewhere)."""
    version = state.get("version")
    if version != STATE_VERSION:
        raise ValueError(f"unsupported buffer state version {version} (this lz_tune reads version {STATE_VERSION})")
    config = dict(state["config"])
    config["step_columns"] = [[n, list(shape), d] for n, shape, d in config["step_columns"]]
    mine = tables.layout.describe()
    if config != mine:
        raise ValueError(f"buffer state was saved with {config}, this buffer has {mine}")
    segments = state["tables"]["segments"]
    if (
        segments["columns"] and "truncated" not in segments["columns"]
    ):  # files before truncation bootstrap: no segment was truncated
        count = len(next(iter(segments["columns"].values()))) if segments["columns"] else 0
        columns = {**segments["columns"], "truncated": np.zeros(count, bool)}
        state = {**state, "tables": {**state["tables"], "segments": {**segments, "columns": columns}}}
        segments = state["tables"]["segments"]
    if segments["columns"] and "reanalyze_count" not in segments["columns"]:  # files before staleness counts
        count = len(next(iter(segments["columns"].values())))
        columns = {**segments["columns"], "reanalyze_count": np.zeros(count, np.int64)}
        state = {**state, "tables": {**state["tables"], "segments": {**segments, "columns": columns}}}
    tables.reset()
    for name, store in tables.stores.items():
        store.load_state_dict(state["tables"][name], copy=copy)
    spec = state["frame_spec"]
    tables.frame_spec = None if spec is None else (tuple(spec[0]), np.dtype(spec[1]))
    tables.time = int(state["time"])
    tables.clear_time = int(state["clear_time"])
    tables.rng.bit_generator.state = state["rng"]
    if len(tables.positions):  # the cached p^alpha follows this buffer's alpha
        live = tables.positions.live("sample_weight")
        live[:] = sampling_weights(tables.positions.live("priority"), alpha=alpha)
