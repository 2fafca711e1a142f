"""What a policy type stores per env step beyond the common columns, and what a reanalysis
returns.

Every segment holds the common per-step columns (action, reward, root value, predicted value,
policy target, action mask, to-play, timestep). A policy type that needs more per step declares
it as a tuple of :class:`StepColumn` (its module's ``step_columns(cfg, spec)``); segments,
buffer storage, the buffer file and checkpoints are built from that declaration, so the buffer
never knows which type it serves. Examples: Sampled MuZero's K sampled root actions
(``StepColumn("sampled_actions", (K, action_dim), "float32")``), Stochastic MuZero's chance
outcome (``StepColumn("chance", (), "int64")``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["StepColumn", "Reanalysis", "check_extras"]


@dataclasses.dataclass(frozen=True)
class StepColumn:
    """One extra per-step array: ``[*shape]`` of ``dtype`` for every step of a segment."""

    name: str
    """Identifier (letters, digits, underscores); also the key in ``extras`` mappings."""
    shape: tuple[int, ...] = ()
    """Shape of one step's value (``()`` for a scalar)."""
    dtype: str = "float32"
    """numpy dtype name."""

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"StepColumn.name must be an identifier, got {self.name!r}")
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if any(s < 1 for s in self.shape):
            raise ValueError(f"StepColumn {self.name}: shape entries must be >= 1, got {self.shape}")
        object.__setattr__(self, "dtype", np.dtype(self.dtype).str)

    def describe(self) -> list:
        """Plain list [name, shape, dtype] for state files and comparisons."""
        return [self.name, list(self.shape), self.dtype]


def check_extras(
    columns: Sequence[StepColumn], extras: Mapping[str, np.ndarray], *, rows: int, where: str
) -> dict[str, np.ndarray]:
    """``extras`` cast to the declared dtypes, checked to hold exactly ``columns`` with
    ``[rows, *shape]`` each; raises ValueError naming ``where`` and the column."""
    names = {c.name for c in columns}
    if set(extras) != names:
        raise ValueError(f"{where}: extra columns {sorted(extras)} differ from the declared {sorted(names)}")
    out = {}
    for c in columns:
        value = np.asarray(extras[c.name], dtype=c.dtype)
        if value.shape != (rows, *c.shape):
            raise ValueError(f"{where}: column {c.name} has shape {value.shape}, expected {(rows, *c.shape)}")
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ValueError(f"{where}: column {c.name} has non-finite entries")
        out[c.name] = value
    return out


@dataclasses.dataclass(frozen=True)
class Reanalysis:
    """A fresh search over K stored positions (training-batch or buffer reanalysis)."""

    policy_target: np.ndarray
    """[K, A] float32 new policy targets (visit distribution or the type's improved policy)."""
    root_value: np.ndarray
    """[K] float32 new search values."""
    extras: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """Replacements for some of the type's extra columns, ``[K, *shape]`` each (e.g. the new
    sampled actions that go with a new sampled policy target)."""
