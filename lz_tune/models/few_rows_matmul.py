"""``x [M, K] @ W [K, N]`` for a few rows M against a weight matrix too big for the L2 cache: the
GEMM of a search engine's wide layers (UniZero's Pong world model: ``K, N`` = 256 .. 1024, M = the
number of envs).

At M = 8 a weight is used by 8 multiply-adds only, so the cost is reading ``W``. numpy's BLAS
(OpenBLAS) packs ``W`` into a buffer before its kernel runs, i.e. reads it, writes it and reads it
again, and streams ~7-9 GB/s from L3 on one core of the 2-core AMD EPYC box of benchmarks/README.md.
:func:`few_rows_matmul` reads each weight once, from a copy laid out for it
(:class:`FewRowsWeight`): ``W`` transposed and cut along ``K`` into chunks of at most
``CHUNK = 256``, ``[C, N, CH]``, so that one chunk of the 8 rows of ``x`` (``[8, CH]``, 8 KB) stays
in L1 while every output column is 8 dot products over a contiguous ``CH``-run of weights, which
LLVM vectorises (8 accumulators). It streams the weights faster than BLAS does at these row
counts (the figures per shape: benchmarks/README.md, "Tree search speed").

Rows are taken 8 at a time (a shorter last group computes 8 sums and keeps its own), so ``W`` is
read once per 8 rows: from ``FEW_ROWS_MAX`` rows on BLAS, which reads ``W`` once for all rows, is
faster (and for one row its matrix-vector product), and :meth:`FewRowsWeight.matmul` calls it there
instead. Sums are in another order than BLAS's: results agree to float32 rounding.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

__all__ = ["CHUNK", "FEW_ROWS_MIN", "FEW_ROWS_MAX", "FewRowsWeight", "few_rows_matmul"]

CHUNK = 256
"""Most ``K`` per chunk: 8 rows x 256 float32 = 8 KB of ``x`` kept in L1 while a chunk of ``W``
streams past (512 and unchunked run ~1.3-2x slower at K = 1024)."""

FEW_ROWS_MIN, FEW_ROWS_MAX = 2, 32
"""Row counts :meth:`FewRowsWeight.matmul` sends to :func:`few_rows_matmul`; BLAS takes the
others: where this kernel beat BLAS over the GEMMs of one UniZero Pong simulation (one core; at 1
row BLAS's matrix-vector product reads ``W`` once too, from 64 rows BLAS wins; the ratios per
row count: benchmarks/README.md, "Tree search speed")."""


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=True)
def few_rows_matmul(x, w_chunks, out, x_chunk):
    """``out = x @ W``.

    Args:
        x: ``[M, K]`` float32, C-contiguous.
        w_chunks: ``[C, N, CH]`` float32: ``w_chunks[c, n, k] = W[c CH + k, n]``, zero where
            ``c CH + k >= K`` (:class:`FewRowsWeight`).
        out: ``[M, N]`` float32 (written).
        x_chunk: ``[8, >= CH]`` float32 scratch (one chunk of 8 rows of ``x``).
    """
    rows_total, width = x.shape
    chunks, columns, chunk = w_chunks.shape
    for r0 in range(0, rows_total, 8):
        rows = min(8, rows_total - r0)
        for c in range(chunks):
            k0 = c * chunk
            span = min(chunk, width - k0)
            # rows past the group's end keep stale values: their sums are dropped below
            for r in range(rows):
                source, target = x[r0 + r], x_chunk[r]
                for k in range(span):
                    target[k] = source[k0 + k]
                for k in range(span, chunk):  # padded K (zero weights): no stale inf / nan
                    target[k] = 0.0
            w = w_chunks[c]
            for n in range(columns):
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
                for k in range(chunk):
                    wk = w[n, k]
                    a0 += x_chunk[0, k] * wk
                    a1 += x_chunk[1, k] * wk
                    a2 += x_chunk[2, k] * wk
                    a3 += x_chunk[3, k] * wk
                    a4 += x_chunk[4, k] * wk
                    a5 += x_chunk[5, k] * wk
                    a6 += x_chunk[6, k] * wk
                    a7 += x_chunk[7, k] * wk
                if rows == 8:
                    if c == 0:
                        out[r0, n], out[r0 + 1, n], out[r0 + 2, n], out[r0 + 3, n] = a0, a1, a2, a3
                        out[r0 + 4, n], out[r0 + 5, n], out[r0 + 6, n], out[r0 + 7, n] = a4, a5, a6, a7
                    else:
                        out[r0, n] += a0
                        out[r0 + 1, n] += a1
                        out[r0 + 2, n] += a2
                        out[r0 + 3, n] += a3
                        out[r0 + 4, n] += a4
                        out[r0 + 5, n] += a5
                        out[r0 + 6, n] += a6
                        out[r0 + 7, n] += a7
                else:  # the last, shorter group: its padded rows' sums are dropped
                    sums = (a0, a1, a2, a3, a4, a5, a6, a7)
                    for r in range(rows):
                        if c == 0:
                            out[r0 + r, n] = sums[r]
                        else:
                            out[r0 + r, n] += sums[r]


@dataclasses.dataclass(frozen=True)
class FewRowsWeight:
    """One weight matrix ``W [K, N]`` in both layouts: ``dense`` (contiguous ``[K, N]``, for BLAS)
    and ``chunks`` (``[C, N, CH]``, for :func:`few_rows_matmul`). Build with :meth:`of`."""

    dense: np.ndarray  # [K, N] float32
    chunks: np.ndarray  # [C, N, CH] float32

    @classmethod
    def of(cls, dense: np.ndarray) -> "FewRowsWeight":
        """From a ``[K, N]`` array: ``dense`` is that array itself when it is C-contiguous float32
        (e.g. a view of the engine's stacked weights), else a contiguous float32 copy; ``chunks``
        is always a new array."""
        dense = np.ascontiguousarray(dense, dtype=np.float32)
        width, columns = dense.shape
        count = -(-width // CHUNK)
        chunk = -(-width // count)
        padded = np.zeros((count * chunk, columns), np.float32)
        padded[:width] = dense
        return cls(dense=dense, chunks=np.ascontiguousarray(padded.reshape(count, chunk, columns).transpose(0, 2, 1)))

    def matmul(self, x: np.ndarray, out: np.ndarray, x_chunk: np.ndarray) -> np.ndarray:
        """``out [M, N] = x [M, K] @ W`` (x C-contiguous float32): :func:`few_rows_matmul` for
        ``FEW_ROWS_MIN <= M <= FEW_ROWS_MAX``, BLAS otherwise. ``x_chunk``: ``[8, CHUNK]``
        float32 scratch (one per engine, shared by all its weights)."""
        if FEW_ROWS_MIN <= x.shape[0] <= FEW_ROWS_MAX:
            few_rows_matmul(x, self.chunks, out, x_chunk)
        else:
            np.dot(x, self.dense, out=out)
        return out
