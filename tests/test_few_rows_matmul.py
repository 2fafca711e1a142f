"""few_rows_matmul: the GEMM of the wide search engines against a float64 reference, for every
row count (full and partial groups of 8, both sides of the BLAS thresholds) and for K that is
not a multiple of the chunk."""

import numpy as np
import pytest

from lz_tune.models.few_rows_matmul import (
    CHUNK,
    FEW_ROWS_MAX,
    FEW_ROWS_MIN,
    FewRowsWeight,
    few_rows_matmul,
)


@pytest.mark.parametrize("width", [1, 31, CHUNK, CHUNK + 1, 600, 4 * CHUNK])
@pytest.mark.parametrize("rows", [1, 2, 5, 8, 9, 16, 17, 40])
def test_kernel_matches_float64_reference(width, rows):
    rng = np.random.default_rng(width * 100 + rows)
    dense = rng.normal(size=(width, 37)).astype(np.float32)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    weight = FewRowsWeight.of(dense)
    out = np.full((rows, 37), np.nan, np.float32)
    few_rows_matmul(x, weight.chunks, out, np.full((8, CHUNK), np.nan, np.float32))  # stale scratch
    want = x.astype(np.float64) @ dense.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(width))


def test_chunks_hold_the_transposed_weight_zero_padded():
    dense = np.arange(600 * 3, dtype=np.float32).reshape(600, 3)
    chunks = FewRowsWeight.of(dense).chunks
    count, columns, chunk = chunks.shape
    assert (columns, count) == (3, 3) and chunk * count >= 600 and chunk <= CHUNK
    flat = chunks.transpose(0, 2, 1).reshape(count * chunk, columns)
    np.testing.assert_array_equal(flat[:600], dense)
    assert not flat[600:].any()


def test_matmul_uses_the_kernel_between_the_thresholds_and_blas_outside(monkeypatch):
    import lz_tune.models.few_rows_matmul as module

    calls = []
    monkeypatch.setattr(module, "few_rows_matmul", lambda *a: calls.append(a[0].shape[0]))
    weight, scratch = FewRowsWeight.of(np.ones((4, 2), np.float32)), np.zeros((8, CHUNK), np.float32)
    for rows in (1, FEW_ROWS_MIN, FEW_ROWS_MAX, FEW_ROWS_MAX + 1):
        out = np.zeros((rows, 2), np.float32)
        weight.matmul(np.ones((rows, 4), np.float32), out, scratch)
        if rows not in calls:  # BLAS did it
            np.testing.assert_array_equal(out, 4.0)
    assert calls == [FEW_ROWS_MIN, FEW_ROWS_MAX]


def test_a_short_row_group_of_a_wide_output():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(8, 3000)).astype(np.float32)
    x = rng.normal(size=(3, 8)).astype(np.float32)
    out = FewRowsWeight.of(dense).matmul(x, np.empty((3, 3000), np.float32), np.zeros((8, CHUNK), np.float32))
    np.testing.assert_allclose(out, x @ dense, rtol=1e-5, atol=1e-5)
