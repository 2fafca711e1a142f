"""Argument checks shared by the network constructors; errors name the argument."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TypeGuard


def _is_int(value: object) -> TypeGuard[numbers.Integral]:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(name: str, value: object) -> int:
    """Return ``int(value)`` or raise ``ValueError`` naming ``name``."""
    if not _is_int(value) or int(value) < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def non_negative_int(name: str, value: object) -> int:
    """Return ``int(value)`` or raise ``ValueError`` naming ``name``."""
    if not _is_int(value) or int(value) < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return int(value)


def positive_int_tuple(name: str, value: object, *, allow_empty: bool) -> tuple[int, ...]:
    """Return a tuple of positive ints or raise ``ValueError`` naming ``name``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence of positive ints, got {value!r}")
    if not allow_empty and len(value) == 0:
        raise ValueError(f"{name} must not be empty")
    if not all(_is_int(v) and int(v) >= 1 for v in value):
        raise ValueError(f"{name} must contain only positive ints, got {value!r}")
    return tuple(int(v) for v in value)


def boolean(name: str, value: object) -> bool:
    """Return ``value`` or raise ``ValueError`` naming ``name`` if it is not a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value
