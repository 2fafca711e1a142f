"""Comparing replay buffers in tests: every array (exact dtype, shape, values), clock and RNG."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_buffer_states_equal(actual: Any, expected: Any, path: str = "state") -> None:
    """``GameBuffer.state_dict()`` of two buffers are identical: same keys at every level, arrays
    equal in dtype, shape and every value, scalars (time, clear_time, table first rows, RNG
    state) equal. The message names the first difference by its path."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (
            f"{path}: keys differ: {sorted(set(actual) ^ set(expected)) if isinstance(actual, dict) else actual}"
        )
        for key in expected:
            assert_buffer_states_equal(actual[key], expected[key], f"{path}/{key}")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{path}: not an array"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
            f"{path}: {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}"
        )
        np.testing.assert_array_equal(actual, expected, err_msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_buffer_states_equal(a, e, f"{path}/{i}")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
