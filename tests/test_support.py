"""Tests for lz_tune.models.support: h / h^-1, two-hot targets, decoding, numba twin."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lz_tune.models.support import (
    inverse_scalar_transform,
    scalar_to_support,
    scalar_transform,
    support_to_scalar,
    support_to_scalar_np,
    two_hot,
)


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


WIDE = torch.cat(
    [
        torch.tensor([0.0, 1e-30, -1e-30, 1e-8, -1e-8, 0.5, -0.5, 1.0, -1.0, 299.5, -299.5]),
        torch.logspace(-8, 8, 400),
        -torch.logspace(-8, 8, 400),
    ]
)


def _textbook_h(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + eps * x


def _textbook_h_inverse(y: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.sign(y) * (((torch.sqrt(1 + 4 * eps * (torch.abs(y) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1)


@pytest.mark.parametrize("eps", [0.001, 0.01, 0.0])
def test_round_trip_float64(eps):
    x = WIDE.double()
    torch.testing.assert_close(inverse_scalar_transform(scalar_transform(x, eps), eps), x, rtol=1e-12, atol=0.0)


def test_round_trip_float32():
    x = WIDE.float()
    back = inverse_scalar_transform(scalar_transform(x))
    assert back.dtype == torch.float32
    torch.testing.assert_close(back, x, rtol=2e-6, atol=0.0)
    assert back[0].item() == 0.0


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_round_trip_property(value):
    x = torch.tensor([value], dtype=torch.float64)
    torch.testing.assert_close(inverse_scalar_transform(scalar_transform(x)), x, rtol=1e-12, atol=1e-300)


def test_transform_matches_textbook_formula():
    x = torch.cat([torch.logspace(-2, 7, 100), -torch.logspace(-2, 7, 100)]).double()
    torch.testing.assert_close(scalar_transform(x), _textbook_h(x, 0.001), rtol=1e-10, atol=0.0)
    y = scalar_transform(x)
    torch.testing.assert_close(inverse_scalar_transform(y), _textbook_h_inverse(y, 0.001), rtol=1e-6, atol=0.0)


def test_transform_is_odd_and_monotone():
    x = torch.linspace(-1e4, 1e4, 10001, dtype=torch.float64)
    y = scalar_transform(x)
    torch.testing.assert_close(scalar_transform(-x), -y)
    assert torch.all(torch.diff(y) > 0)


@pytest.mark.parametrize("support_size", [1, 10, 300])
def test_two_hot_integers_are_one_hot(support_size):
    y = torch.arange(-support_size, support_size + 1, dtype=torch.float32)
    torch.testing.assert_close(two_hot(y, support_size), torch.eye(2 * support_size + 1), rtol=0.0, atol=0.0)


def test_scalar_to_support_one_hot_at_integer_transforms():
    target = scalar_to_support(torch.tensor([0.0]), 10)
    expected = torch.zeros(1, 21)
    expected[0, 10] = 1.0
    torch.testing.assert_close(target, expected, rtol=0.0, atol=0.0)
    k = torch.arange(-10, 11, dtype=torch.float64)
    torch.testing.assert_close(scalar_to_support(inverse_scalar_transform(k), 10), torch.eye(21, dtype=torch.float64))


def test_two_hot_expectation_equals_transform_in_range():
    support_size = 300
    x = torch.cat([torch.linspace(-1e4, 1e4, 2001), torch.randn(500) * 50]).double()
    target = scalar_to_support(x, support_size)
    assert target.shape == (x.shape[0], 2 * support_size + 1)
    support = torch.arange(-support_size, support_size + 1, dtype=torch.float64)
    torch.testing.assert_close(target @ support, scalar_transform(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(target.sum(-1), torch.ones_like(x))
    assert torch.all(target >= 0)
    assert torch.all((target > 0).sum(-1) <= 2)


def test_two_hot_neighbours_share_mass_linearly():
    target = two_hot(torch.tensor([2.25, -0.5]), 3)
    expected = torch.zeros(2, 7)
    expected[0, 5], expected[0, 6] = 0.75, 0.25
    expected[1, 2], expected[1, 3] = 0.5, 0.5
    torch.testing.assert_close(target, expected)


def test_two_hot_clips_outside_range():
    support_size = 5
    x = torch.tensor([1e6, -1e6, 3e38, -3e38])
    target = scalar_to_support(x, support_size)
    assert target[0, -1] == 1.0 and target[2, -1] == 1.0
    assert target[1, 0] == 1.0 and target[3, 0] == 1.0
    torch.testing.assert_close(target.sum(-1), torch.ones(4))


def test_two_hot_keeps_leading_shape_and_dtype():
    x = torch.randn(4, 3, 2, dtype=torch.float64)
    target = scalar_to_support(x, 7)
    assert target.shape == (4, 3, 2, 15)
    assert target.dtype == torch.float64
    assert two_hot(torch.tensor([1, -2]), 3).dtype == torch.float32


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-9), (torch.float32, 1e-4)])
def test_support_to_scalar_inverts_two_hot(dtype, rtol):
    x = torch.cat([torch.linspace(-3e4, 3e4, 1001), torch.tensor([0.0, 0.3, -0.7])]).to(dtype)
    tiny = 1e-30 if dtype == torch.float64 else 1e-12
    logits = torch.log(scalar_to_support(x, 300) + tiny)
    torch.testing.assert_close(support_to_scalar(logits), x, rtol=rtol, atol=rtol)


def test_support_to_scalar_is_zero_for_uniform_logits():
    out = support_to_scalar(torch.zeros(3, 601))
    assert out.shape == (3,)
    assert torch.all(out == 0.0)


def test_support_to_scalar_rejects_even_bins():
    with pytest.raises(ValueError, match="odd"):
        support_to_scalar(torch.zeros(2, 10))
    with pytest.raises(ValueError, match="odd"):
        support_to_scalar_np(np.zeros((2, 10), np.float32))


@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("support_size", [10, 300])
def test_numpy_twin_matches_torch(scale, support_size):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 2 * support_size + 1, generator=generator) * scale
    expected = support_to_scalar(logits).numpy()
    actual = support_to_scalar_np(logits.numpy())
    assert actual.dtype == np.float32 and actual.shape == (64,)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_numpy_twin_matches_torch_on_peaked_and_strided_inputs():
    x = torch.cat([torch.linspace(-1e4, 1e4, 101), torch.zeros(1)])
    logits = torch.log(scalar_to_support(x, 300) + 1e-12)
    fused = torch.cat([torch.randn(x.shape[0], 7), logits], dim=1)  # strided view, like the fused heads
    strided = fused[:, 7:].numpy()
    assert not strided.flags.c_contiguous
    np.testing.assert_allclose(support_to_scalar_np(strided), support_to_scalar(logits).numpy(), rtol=1e-5, atol=1e-5)
    assert support_to_scalar_np(np.zeros((2, 601), np.float32)).tolist() == [0.0, 0.0]


def test_numpy_twin_non_finite_rows_are_nan():
    logits = np.zeros((4, 11), np.float32)
    logits[0, 2], logits[1, 3], logits[2, 4] = np.nan, np.inf, -np.inf
    out = support_to_scalar_np(logits)
    assert np.isnan(out[:3]).all() and out[3] == 0.0


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="support_size"):
        scalar_to_support(torch.zeros(1), 0)
    with pytest.raises(ValueError, match="support_size"):
        two_hot(torch.zeros(1), 2.5)
    with pytest.raises(ValueError, match="eps"):
        scalar_transform(torch.zeros(1), eps=-0.1)
    with pytest.raises(ValueError, match="eps"):
        inverse_scalar_transform(torch.zeros(1), eps=float("nan"))
