"""A FIFO table of named numpy columns: rows appended at the back, dropped at the front.

Rows keep a *logical* index for the table's whole life (0, 1, 2, ... in append order), so
another table can refer to them by a number that never shifts. The physical row of logical
index i is `i - base`; `base` changes only when the table compacts itself.

Memory: the arrays hold at most (1 + slack) x the largest live row count (plus one append).
When the back is full the live rows are moved to the front (or into a larger array), so each
row is copied about 1/slack times over its life.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ColumnStore"]


class ColumnStore:
    """Named columns sharing one row count; FIFO with stable logical row indices."""

    def __init__(self, *, slack: float = 0.25):
        if slack <= 0:
            raise ValueError(f"slack must be > 0, got {slack}")
        self._slack = slack
        self._arrays: dict[str, np.ndarray] = {}
        self._base = 0  # logical index of physical row 0
        self._start = 0  # physical live range [start, stop)
        self._stop = 0

    # -- addressing -------------------------------------------------------------------------
    @property
    def base(self) -> int:
        """Subtract from a logical index to get the physical row in `array(name)`."""
        return self._base

    @property
    def first(self) -> int:
        """Logical index of the oldest live row."""
        return self._base + self._start

    @property
    def end(self) -> int:
        """Logical index one past the newest live row."""
        return self._base + self._stop

    def __len__(self) -> int:
        return self._stop - self._start

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    def array(self, name: str) -> np.ndarray:
        """The whole physical array (live rows are `[first - base, end - base)`); index, don't keep."""
        return self._arrays[name]

    def live(self, name: str) -> np.ndarray:
        """View of the live rows of column `name`, oldest first."""
        return self._arrays[name][self._start : self._stop]

    @property
    def nbytes(self) -> int:
        """Bytes allocated by all columns (live rows and spare room)."""
        return sum(a.nbytes for a in self._arrays.values())

    # -- mutation ---------------------------------------------------------------------------
    def append(self, **columns: np.ndarray) -> int:
        """Appends rows; returns the logical index of the first one.

        The first call fixes the column names, dtypes and trailing shapes; later calls must give
        the same columns with the same trailing shapes (values are cast to the column dtype).
        """
        counts = {np.shape(v)[0] for v in columns.values()}
        if len(counts) != 1:
            raise ValueError(f"columns have different row counts: {sorted(counts)}")
        count = counts.pop()
        if not self._arrays:
            self._arrays = {k: np.empty((0,) + np.shape(v)[1:], dtype=np.asarray(v).dtype) for k, v in columns.items()}
        elif set(columns) != set(self._arrays):
            raise ValueError(f"expected columns {sorted(self._arrays)}, got {sorted(columns)}")
        for name, value in columns.items():
            if np.shape(value)[1:] != self._arrays[name].shape[1:]:
                raise ValueError(
                    f"column {name}: rows of shape {np.shape(value)[1:]}, expected {self._arrays[name].shape[1:]}"
                )
        self._reserve(count)
        first = self.end
        for name, value in columns.items():
            self._arrays[name][self._stop : self._stop + count] = value
        self._stop += count
        return first

    def drop_front(self, count: int) -> None:
        """Removes the `count` oldest rows."""
        if not 0 <= count <= len(self):
            raise ValueError(f"cannot drop {count} of {len(self)} rows")
        self._start += count
        if self._start == self._stop:  # empty: restart at the front for free
            self._base += self._start
            self._start = self._stop = 0

    def _reserve(self, count: int) -> None:
        capacity = next(iter(self._arrays.values())).shape[0]
        if self._stop + count <= capacity:
            return
        live = len(self)
        needed = live + count
        target = max(needed + 1, math.ceil(needed * (1.0 + self._slack)))
        if target <= capacity:  # enough dead rows at the front: compact in place
            for array in self._arrays.values():
                array[:live] = array[self._start : self._stop]
        else:
            for name, array in self._arrays.items():
                grown = np.empty((target,) + array.shape[1:], dtype=array.dtype)
                grown[:live] = array[self._start : self._stop]
                self._arrays[name] = grown
        self._base += self._start
        self._start, self._stop = 0, live

    # -- persistence ------------------------------------------------------------------------
    def state_dict(self, *, copy: bool = True) -> dict:
        """Copies of the live rows (``copy=False``: views, valid until the next mutation) and the
        logical index of the first one."""
        return {
            "first": self.first,
            "columns": {k: self.live(k).copy() if copy else self.live(k) for k in self._arrays},
        }

    def load_state_dict(self, state: dict, *, copy: bool = True) -> None:
        """Take the rows of a `state_dict` (``copy=False``: its arrays themselves, when writable)."""
        columns = {k: np.asarray(v) for k, v in state["columns"].items()}
        self._arrays = {k: v if not copy and v.flags.writeable else v.copy() for k, v in columns.items()}
        lengths = {v.shape[0] for v in self._arrays.values()}
        if len(lengths) > 1:
            raise ValueError("state columns have different lengths")
        self._base, self._start = int(state["first"]), 0
        self._stop = lengths.pop() if lengths else 0
