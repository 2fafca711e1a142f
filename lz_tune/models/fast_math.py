"""Element-wise float32 kernels for the search engines (numba): exp, sigmoid, tanh, GELU and
LayerNorm over the rows of ``[B, W]`` arrays, in place.

Numba has no vector ``exp`` or ``erf`` without Intel SVML: a libm call per element costs
~5-10 ns, i.e. ~0.1-0.6 ms per simulation for an LSTM's gates or a transformer's GELUs at
batch 64. These kernels evaluate them in loops LLVM vectorises instead:

* ``exp``: the Cephes ``expf`` range reduction and polynomial (max relative error ~3e-7 on
  ``[-87, 88]``, the same as :mod:`lz_tune.models.support_np`); ``2^n`` is built from its bits
  in an int32 scratch row viewed as float32, the argument is clamped to ``[-87, 88]``;
* ``sigmoid(x) = 1 / (1 + exp(-x))``; ``tanh(x) = sign(x) (1 - e) / (1 + e)``, ``e = exp(-2|x|)``
  (absolute error ~2e-7);
* GELU, tanh form (``nn.GELU(approximate="tanh")``): ``x / (1 + exp(-2u))``,
  ``u = sqrt(2/pi) (x + 0.044715 x^3)``, which is ``0.5 x (1 + tanh(u))``;
* GELU, erf form (``nn.GELU()``): ``0.5 x (1 + erf(x / sqrt(2)))`` with Eigen's float32 rational
  ``erf`` (odd degree-13 over even degree-8 polynomial on ``[-4, 4]``, clamped outside; max
  absolute error ~1e-7, tested against ``math.erf``);
* LayerNorm over each row (biased variance, like ``F.layer_norm``), optionally followed by ReLU.

Kernels are compiled with ``error_model="numpy"``: numba's default (Python's) checks every float
division for a zero divisor, and that branch stops LLVM vectorising the loop (~10x slower).

The row functions work in place on ``x [B, W]`` float32 C-contiguous, with float32 ``work`` and
int32 ``bits`` scratch of at least ``2 B W`` / ``B W`` elements (allocate once per engine), and are
callable from Python and from other ``@njit`` code.
"""

from __future__ import annotations

import numba
import numpy as np

from lz_tune.models.support_np import (  # Cephes expf
    EXPF_LN2_HIGH,
    EXPF_LN2_LOW_NEG,
    EXPF_LOG2E,
    EXPF_P0,
    EXPF_P1,
    EXPF_P2,
    EXPF_P3,
    EXPF_P4,
    EXPF_P5,
)

__all__ = ["exp_row", "sigmoid_rows", "tanh_rows", "gelu_tanh_rows", "gelu_erf_rows", "layer_norm_rows", "erf_row"]

_EXP_LO = np.float32(-87.0)
_EXP_HI = np.float32(88.0)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)

# Eigen's generic_fast_erf_float: erf(x) = x P(x^2) / Q(x^2) on [-4, 4]
_A1 = np.float32(-1.60960333262415e-02)
_A3 = np.float32(-2.95459980854025e-03)
_A5 = np.float32(-7.34990630326855e-04)
_A7 = np.float32(-5.69250639462346e-05)
_A9 = np.float32(-2.10102402082508e-06)
_A11 = np.float32(2.77068142495902e-08)
_A13 = np.float32(-2.72614225801306e-10)
_B0 = np.float32(-1.42647390514189e-02)
_B2 = np.float32(-7.37332916720468e-03)
_B4 = np.float32(-1.68282697438203e-03)
_B6 = np.float32(-2.13374055278905e-04)
_B8 = np.float32(-1.45660718464996e-05)
_ERF_CLAMP = np.float32(4.0)
_INV_SQRT2 = np.float32(0.7071067811865476)
_GELU_K = np.float32(0.7978845608028654)  # sqrt(2 / pi)
_GELU_C = np.float32(0.044715)
_FASTMATH = {"contract", "arcp"}
_REDUCE = {"contract", "reassoc", "nsz"}  # lets LLVM vectorise float32 sums (reassociated); no nnan / ninf


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def exp_row(x, out, bits):
    """``out [n] = exp(x [n])`` (``x`` clamped to ``[-87, 88]``); ``bits [>= n]`` int32 scratch.

    ``out`` must not overlap ``x``: LLVM vectorises these loops behind a runtime overlap check
    and runs the scalar fallback (~10x slower) when the arrays alias."""
    power_of_two = bits.view(np.float32)
    for j in range(x.shape[0]):
        v = min(max(x[j], _EXP_LO), _EXP_HI)
        n = np.floor(v * EXPF_LOG2E + _HALF)
        r = v - n * EXPF_LN2_HIGH - n * EXPF_LN2_LOW_NEG
        poly = ((((EXPF_P0 * r + EXPF_P1) * r + EXPF_P2) * r + EXPF_P3) * r + EXPF_P4) * r + EXPF_P5
        out[j] = poly * r * r + r + _ONE
        bits[j] = (np.int32(n) + np.int32(127)) << np.int32(23)
    for j in range(x.shape[0]):
        out[j] *= power_of_two[j]


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def sigmoid_rows(x, work, bits):
    """In place: ``x [B, W] = 1 / (1 + exp(-x))`` (C-contiguous); ``work [>= B W]`` float32 and
    ``bits [>= B W]`` int32 scratch."""
    flat = x.reshape(x.size)
    arg = work[: flat.shape[0]]
    for j in range(flat.shape[0]):
        arg[j] = -flat[j]
    exp_row(arg, flat, bits)
    for j in range(flat.shape[0]):
        flat[j] = _ONE / (_ONE + flat[j])


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def tanh_rows(x, work, bits):
    """In place: ``x [B, W] = tanh(x)`` (C-contiguous); scratch as :func:`sigmoid_rows`."""
    flat = x.reshape(x.size)
    n = flat.shape[0]
    arg = work[:n]
    for j in range(n):
        arg[j] = np.float32(-2.0) * abs(flat[j])
    sign = work[n : 2 * n]
    for j in range(n):
        sign[j] = _ONE if flat[j] >= 0 else -_ONE
    exp_row(arg, flat, bits)
    for j in range(n):
        flat[j] = sign[j] * (_ONE - flat[j]) / (_ONE + flat[j])


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def gelu_tanh_rows(x, work, bits):
    """In place: ``x [B, W] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (C-contiguous);
    ``work [>= 2 B W]`` float32, ``bits [>= B W]`` int32 scratch."""
    flat = x.reshape(x.size)
    n = flat.shape[0]
    arg = work[:n]
    for j in range(n):
        v = flat[j]
        arg[j] = np.float32(-2.0) * _GELU_K * (v + _GELU_C * v * v * v)
    e = work[n : 2 * n]
    exp_row(arg, e, bits)
    for j in range(n):
        flat[j] = flat[j] / (_ONE + e[j])


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def erf_row(x, out):
    """``out [n] = erf(x [n])`` (Eigen's float32 rational approximation); ``out`` must not
    overlap ``x``."""
    for j in range(x.shape[0]):
        v = min(max(x[j], -_ERF_CLAMP), _ERF_CLAMP)
        v2 = v * v
        p = v2 * _A13 + _A11
        p = v2 * p + _A9
        p = v2 * p + _A7
        p = v2 * p + _A5
        p = v2 * p + _A3
        p = v2 * p + _A1
        q = v2 * _B8 + _B6
        q = v2 * q + _B4
        q = v2 * q + _B2
        q = v2 * q + _B0
        out[j] = v * p / q


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def gelu_erf_rows(x, work):
    """In place: ``x [B, W] = 0.5 x (1 + erf(x / sqrt(2)))`` (C-contiguous); ``work [>= 2 B W]``
    float32 scratch."""
    flat = x.reshape(x.size)
    n = flat.shape[0]
    arg = work[:n]
    for j in range(n):
        arg[j] = flat[j] * _INV_SQRT2
    e = work[n : 2 * n]
    erf_row(arg, e)
    for j in range(n):
        flat[j] = _HALF * flat[j] * (_ONE + e[j])


@numba.njit(cache=True, nogil=True, fastmath=_REDUCE, error_model="numpy")
def layer_norm_rows(x, weight, bias, eps, out, relu):
    """``out [B, W]`` = LayerNorm of each row of ``x [B, W]`` (``weight``, ``bias [W]``; biased
    variance), then ReLU when ``relu``; ``out`` may be ``x`` (slower: the last loop then runs
    unvectorised). The row sums are reassociated (vectorised; float32 rounding differs from
    torch's order by ~1e-7 relative)."""
    batch, width = x.shape
    for b in range(batch):
        src = x[b]
        dst = out[b]
        mean = np.float32(0.0)
        for j in range(width):
            mean += src[j]
        mean /= width
        var = np.float32(0.0)
        for j in range(width):
            d = src[j] - mean
            var += d * d
        inv = np.float32(1.0) / np.sqrt(var / width + np.float32(eps))
        for j in range(width):
            dst[j] = (src[j] - mean) * inv * weight[j] + bias[j]
        if relu:
            for j in range(width):
                if dst[j] < 0.0:
                    dst[j] = 0.0
