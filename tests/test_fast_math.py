"""The engines' vectorised element-wise kernels agree with torch (float64 references)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lz_tune.models import fast_math as fm

X = np.linspace(-12.0, 12.0, 4001).astype(np.float32).reshape(1, -1)
WORK = np.empty(2 * X.size, np.float32)
BITS = np.empty(X.size, np.int32)


def _rows(fn) -> np.ndarray:
    x = X.copy()
    fn(x)
    return x


@pytest.mark.parametrize(
    "name,kernel,reference,atol",
    [
        ("sigmoid", lambda x: fm.sigmoid_rows(x, WORK, BITS), torch.sigmoid, 2e-7),
        ("tanh", lambda x: fm.tanh_rows(x, WORK, BITS), torch.tanh, 3e-7),
        ("gelu_tanh", lambda x: fm.gelu_tanh_rows(x, WORK, BITS), lambda t: F.gelu(t, approximate="tanh"), 2e-6),
        ("gelu_erf", lambda x: fm.gelu_erf_rows(x, WORK), F.gelu, 2e-6),
    ],
)
def test_row_kernels_match_torch(name, kernel, reference, atol):
    want = reference(torch.from_numpy(X).double()).numpy()
    got = _rows(kernel)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=atol, err_msg=name)


def test_exp_and_erf_rows():
    x = np.clip(X[0] * 8, -87, 88).astype(np.float32)
    out = np.empty_like(x)
    fm.exp_row(x, out, BITS)
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)), rtol=3e-7)
    fm.erf_row(X[0], out)
    np.testing.assert_allclose(out, [math.erf(v) for v in X[0].astype(np.float64)], atol=5e-7)


@pytest.mark.parametrize("relu", [False, True])
def test_layer_norm_rows_match_f_layer_norm(relu):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 24)).astype(np.float32) * 3 + 1
    weight, bias = rng.normal(size=24).astype(np.float32), rng.normal(size=24).astype(np.float32)
    out = np.empty_like(x)
    fm.layer_norm_rows(x, weight, bias, 1e-5, out, relu)
    want = F.layer_norm(torch.from_numpy(x), (24,), torch.from_numpy(weight), torch.from_numpy(bias), 1e-5)
    np.testing.assert_allclose(out, (want.relu() if relu else want).numpy(), rtol=1e-5, atol=1e-5)
