"""lz_tune.algos.sampling: the math of TanhGaussian and CategoricalSampler checked against
torch.distributions and against exact sampling-without-replacement probabilities.

Everything here is seeded (numpy Generator / torch.Generator), so the statistical tests are
deterministic; their thresholds are p = 0.001 chi-squared critical values, and each one is
paired with a check that a plausibly wrong implementation would exceed it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Categorical, Independent, Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from lz_tune.algos.sampling import (
    CategoricalSampler,
    TanhGaussian,
    make_sampler,
    tanh_log_det_jacobian,
)

#: chi-squared critical values at p = 0.001 (scipy.stats.chi2.ppf(0.999, df))
CHI2_CRIT_999 = {2: 13.816, 3: 16.266, 11: 31.264}


def _chi2(counts: np.ndarray, expected: np.ndarray) -> float:
    counts = np.asarray(counts, np.float64)
    expected = np.asarray(expected, np.float64)
    assert np.all(expected > 5), "chi-squared needs expected counts > 5"
    return float(((counts - expected) ** 2 / expected).sum())


def _policy_out(n: int, d: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """``[n, 2d]``: means in about (-1, 1), raw scales giving std in about (0.2, 1.6)."""
    g = torch.Generator().manual_seed(seed)
    mean = torch.rand(n, d, generator=g, dtype=torch.float64) * 2.0 - 1.0
    raw = torch.rand(n, d, generator=g, dtype=torch.float64) * 2.5 - 1.5
    return torch.cat([mean, raw], dim=-1).to(dtype)


def _torch_tanh_normal(sampler: TanhGaussian, policy_out: torch.Tensor) -> TransformedDistribution:
    mean, std = sampler.params(policy_out)
    base = Independent(Normal(mean.unsqueeze(-2), std.unsqueeze(-2)), 1)  # batch [N, 1], event [D]
    return TransformedDistribution(base, [TanhTransform(cache_size=1)])


def _stable_reference_at_u(sampler: TanhGaussian, policy_out: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """float64 ``log pi(tanh(u))`` evaluated at the pre-tanh ``u [N, K, D]`` (no atanh)."""
    mean, std = sampler.params(policy_out.double())
    normal = Normal(mean.unsqueeze(-2), std.unsqueeze(-2))
    jac = TanhTransform().log_abs_det_jacobian(u, torch.tanh(u))
    return (normal.log_prob(u) - jac).sum(-1)


def _log_of_sum_variant(sampler: TanhGaussian, policy_out: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The WRONG density: subtract log(sum_d (1 - a_d^2)) instead of sum_d log(1 - a_d^2)."""
    mean, std = sampler.params(policy_out.double())
    normal = Normal(mean.unsqueeze(-2), std.unsqueeze(-2))
    a = torch.tanh(u)
    return normal.log_prob(u).sum(-1) - torch.log((1.0 - a * a).sum(-1))


# -- TanhGaussian.log_prob ------------------------------------------------------------------------


def test_tanh_log_det_jacobian_matches_torch_and_naive_formula():
    u = torch.linspace(-9.0, 9.0, 181, dtype=torch.float64)
    ours = tanh_log_det_jacobian(u)
    torch_jac = TanhTransform().log_abs_det_jacobian(u, torch.tanh(u))
    torch.testing.assert_close(ours, torch_jac, rtol=0, atol=1e-12)
    mid = u.abs() < 5
    naive = torch.log1p(-(torch.tanh(u[mid]) ** 2))
    torch.testing.assert_close(ours[mid], naive, rtol=0, atol=1e-9)
    # stable where the naive formula is -inf: log(1 - tanh(u)^2) ~ log 4 - 2|u|
    big = torch.tensor([30.0, -40.0], dtype=torch.float64)
    torch.testing.assert_close(tanh_log_det_jacobian(big), math.log(4.0) - 2.0 * big.abs(), rtol=0, atol=1e-9)


@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-9), (torch.float32, 2e-4)])
@pytest.mark.parametrize("d", [1, 3])
def test_tanh_gaussian_log_prob_matches_torch_interior(d, dtype, atol):
    n, k = 5, 7
    sampler = TanhGaussian(action_dim=d)
    policy_out = _policy_out(n, d, dtype, seed=d)
    g = torch.Generator().manual_seed(100 + d)
    actions = (torch.rand(n, k, d, generator=g, dtype=torch.float64) * 1.8 - 0.9).to(dtype)

    ours = sampler.log_prob(policy_out, actions)
    assert ours.shape == (n, k)
    assert ours.dtype == dtype

    # torch's own TransformedDistribution, evaluated in float64 at the same (cast) actions
    ref = _torch_tanh_normal(sampler, policy_out.double()).log_prob(actions.double())
    assert ref.shape == (n, k)
    torch.testing.assert_close(ours.double(), ref, rtol=0, atol=atol)

    if d > 1:
        # the tolerance has power: the "log of the sum of the Jacobian terms" variant is far off
        wrong = _log_of_sum_variant(sampler, policy_out, torch.atanh(actions.double()))
        assert (wrong - ref).abs().min().item() > 100 * atol
        assert (wrong - ref).abs().min().item() > 0.1


@pytest.mark.parametrize("d", [1, 3])
def test_tanh_gaussian_log_prob_near_the_bounds(d):
    """Actions tanh(u) for u in {4, 6, -5, 7}: checked against the stable formula at u."""
    us = torch.tensor([4.0, 6.0, -5.0, 7.0], dtype=torch.float64)
    n = 3
    sampler = TanhGaussian(action_dim=d)
    policy_out = _policy_out(n, d, torch.float64, seed=10 + d)
    # K = 4 samples per row; dim j of sample k uses u[(k + j) % 4] (all 4 values in every dim)
    idx = (torch.arange(4)[:, None] + torch.arange(d)[None, :]) % 4
    u = us[idx].expand(n, 4, d).clone()
    actions = torch.tanh(u)  # float64; all below the 1 - 1e-6 clamp
    assert actions.abs().max().item() < 1.0 - 1e-6

    ref = _stable_reference_at_u(sampler, policy_out, u)
    ours = sampler.log_prob(policy_out, actions)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
    # torch's TransformedDistribution (its atanh) agrees too in float64
    torch.testing.assert_close(_torch_tanh_normal(sampler, policy_out).log_prob(actions), ref, rtol=0, atol=1e-6)

    # float32 inputs: compare against the density at the float32 action actually passed in
    a32 = actions.float()
    ours32 = sampler.log_prob(policy_out.float(), a32)
    ref32 = _stable_reference_at_u(sampler, policy_out.float(), torch.atanh(a32.double()))
    torch.testing.assert_close(ours32.double(), ref32, rtol=0, atol=5e-3)

    if d > 1:
        wrong = _log_of_sum_variant(sampler, policy_out, u)
        assert (wrong - ref).abs().min().item() > 1.0


def test_tanh_gaussian_log_prob_is_a_density():
    """D = 1: exp(log_prob) integrates to 1 over (-1, 1) (midpoint rule)."""
    sampler = TanhGaussian(action_dim=1)
    policy_out = torch.tensor([[0.3, -0.5], [-1.2, 0.8]], dtype=torch.float64)
    m = 200_000
    a = (torch.arange(m, dtype=torch.float64) + 0.5) / m * 2.0 - 1.0
    actions = a.view(1, m, 1).expand(2, m, 1)
    dens = sampler.log_prob(policy_out, actions).exp()
    integral = dens.sum(-1) * (2.0 / m)
    torch.testing.assert_close(integral, torch.ones(2, dtype=torch.float64), rtol=0, atol=2e-3)


# -- TanhGaussian.params / sample / entropy ----------------------------------------------------


def test_tanh_gaussian_params_formula_and_numpy_twin():
    sampler = TanhGaussian(action_dim=2, min_std=0.01, max_std=3.0)
    policy_out = torch.tensor([[0.5, -0.25, -20.0, 0.0], [1.0, 2.0, 1.0, 50.0]], dtype=torch.float64)
    mean, std = sampler.params(policy_out)
    torch.testing.assert_close(mean, policy_out[:, :2])
    raw = policy_out[:, 2:]
    expected = torch.clamp(torch.log1p(torch.exp(raw)) + 0.01, max=3.0)
    torch.testing.assert_close(std, expected)
    assert std[0, 0].item() == pytest.approx(0.01, abs=1e-8)  # floor
    assert std[1, 1].item() == pytest.approx(3.0)  # ceiling
    mean_np, std_np = sampler.params_np(policy_out.numpy())
    np.testing.assert_allclose(mean_np, mean.numpy())
    np.testing.assert_allclose(std_np, std.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d", [1, 3])
def test_tanh_gaussian_sample_shapes_and_moments(d):
    b, k = 4, 5000
    sampler = TanhGaussian(action_dim=d)
    policy_out = _policy_out(b, d, torch.float32, seed=20 + d).numpy()
    actions, prior, valid = sampler.sample(policy_out, k, np.random.default_rng(123))
    assert actions.shape == (b, k, d) and actions.dtype == np.float32
    assert prior.shape == (b, k) and prior.dtype == np.float32
    assert valid.shape == (b, k) and valid.dtype == bool
    assert np.all(np.abs(actions) < 1.0)
    assert np.all(prior == 0.0)
    assert np.all(valid)

    mean, std = sampler.params_np(policy_out)
    u = np.arctanh(actions.astype(np.float64))
    emp_mean = u.mean(axis=1)
    emp_std = u.std(axis=1)
    # standard errors: std / sqrt(k) for the mean, std / sqrt(2k) for the std; allow 5 sigma
    np.testing.assert_array_less(np.abs(emp_mean - mean), 5.0 * std / math.sqrt(k) + 1e-4)
    np.testing.assert_array_less(np.abs(emp_std - std), 5.0 * std / math.sqrt(2 * k) + 1e-4)
    # the moments are those of the right distribution, not e.g. the unit-std one
    assert np.abs(emp_std - 1.0).max() > 10 * (std / math.sqrt(2 * k)).max()


def test_tanh_gaussian_sample_reproducible_and_seed_dependent():
    sampler = TanhGaussian(action_dim=3)
    policy_out = _policy_out(3, 3, torch.float32, seed=5).numpy()
    a1, p1, v1 = sampler.sample(policy_out, 8, np.random.default_rng(7))
    a2, p2, v2 = sampler.sample(policy_out, 8, np.random.default_rng(7))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(v1, v2)
    a3, _, _ = sampler.sample(policy_out, 8, np.random.default_rng(8))
    assert not np.array_equal(a1, a3)
    # the K samples of a row are i.i.d., not copies
    assert len(np.unique(a1[0, :, 0])) == 8


def test_tanh_gaussian_sample_extreme_means_stay_inside_the_bounds():
    sampler = TanhGaussian(action_dim=2)
    policy_out = np.array([[40.0, -40.0, 0.0, 0.0]], np.float32)
    actions, _, _ = sampler.sample(policy_out, 16, np.random.default_rng(0))
    assert np.all(np.abs(actions) < 1.0)
    # and they have a finite log-prob
    lp = sampler.log_prob(torch.from_numpy(policy_out), torch.from_numpy(actions))
    assert torch.isfinite(lp).all()


@pytest.mark.parametrize("d", [1, 3])
def test_tanh_gaussian_entropy_matches_torch_normal(d):
    sampler = TanhGaussian(action_dim=d)
    policy_out = _policy_out(6, d, torch.float64, seed=30 + d)
    mean, std = sampler.params(policy_out)
    ours = sampler.entropy(policy_out)
    assert ours.shape == (6,)
    torch.testing.assert_close(ours, Normal(mean, std).entropy().sum(-1), rtol=0, atol=1e-12)
    # and independently of params(): 0.5 * log(2 pi e sigma^2) per dim
    sigma = F.softplus(policy_out[:, d:]) + sampler.min_std
    torch.testing.assert_close(ours, (0.5 * torch.log(2 * math.pi * math.e * sigma**2)).sum(-1))


def test_tanh_gaussian_greedy_is_squashed_mean():
    sampler = TanhGaussian(action_dim=2)
    policy_out = np.array([[0.5, -2.0, 0.0, 1.0]], np.float32)
    np.testing.assert_allclose(sampler.greedy(policy_out), np.tanh([[0.5, -2.0]]), rtol=1e-6)


# -- CategoricalSampler.sample ------------------------------------------------------------------


def test_categorical_sample_distinct_and_priors():
    a, k, b = 6, 4, 200
    sampler = CategoricalSampler(num_actions=a)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(b, a)).astype(np.float32)
    actions, prior, valid = sampler.sample(logits, k, rng)
    assert actions.shape == (b, k) and actions.dtype == np.int64
    assert prior.shape == (b, k) and prior.dtype == np.float32
    assert valid.shape == (b, k) and valid.dtype == bool
    assert np.all(valid)
    assert np.all((actions >= 0) & (actions < a))
    for row in actions:
        assert len(set(row.tolist())) == k
    np.testing.assert_array_equal(prior, np.take_along_axis(logits, actions, axis=1))
    # K == A gives a permutation
    actions_all, _, valid_all = sampler.sample(logits, a, rng)
    assert np.all(valid_all)
    np.testing.assert_array_equal(np.sort(actions_all, axis=1), np.tile(np.arange(a), (b, 1)))


def test_categorical_sample_respects_mask_and_marks_short_rows_invalid():
    a, k, b = 5, 3, 400
    sampler = CategoricalSampler(num_actions=a)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(b, a)).astype(np.float32)
    # give illegal actions the largest logits, so an ignored mask would pick them
    mask = rng.random((b, a)) < 0.5
    mask[np.arange(b), rng.integers(0, a, size=b)] = True  # >= 1 legal action per row
    logits = np.where(mask, logits, 10.0).astype(np.float32)
    actions, prior, valid = sampler.sample(logits, k, rng, action_mask=mask)

    n_legal = mask.sum(axis=1)
    assert np.any(n_legal < k) and np.any(n_legal >= k)
    rows = np.arange(b)[:, None]
    assert np.all(mask[rows, actions]), "an illegal action was sampled"
    for i in range(b):
        m = min(int(n_legal[i]), k)
        np.testing.assert_array_equal(valid[i], np.arange(k) < m)
        first_m = actions[i, :m].tolist()
        assert len(set(first_m)) == m
        assert set(first_m) <= set(np.flatnonzero(mask[i]).tolist())
        np.testing.assert_array_equal(prior[i, :m], logits[i, actions[i, :m]])
        # extra slots: invalid, prior -inf, repeat the first sample
        assert np.all(actions[i, m:] == actions[i, 0])
        assert np.all(np.isneginf(prior[i, m:]))


def test_categorical_sample_raises_when_k_exceeds_a():
    sampler = CategoricalSampler(num_actions=3)
    with pytest.raises(ValueError):
        sampler.sample(np.zeros((2, 3), np.float32), 4, np.random.default_rng(0))


def test_categorical_sample_reproducible():
    sampler = CategoricalSampler(num_actions=7)
    logits = np.random.default_rng(3).normal(size=(10, 7)).astype(np.float32)
    r1 = sampler.sample(logits, 3, np.random.default_rng(11))
    r2 = sampler.sample(logits, 3, np.random.default_rng(11))
    for x, y in zip(r1, r2):
        np.testing.assert_array_equal(x, y)


P4 = np.array([0.1, 0.2, 0.3, 0.4])
PAIRS = list(itertools.permutations(range(4), 2))  # 12 ordered pairs


def _pair_counts(actions: np.ndarray) -> np.ndarray:
    return np.array([np.sum((actions[:, 0] == i) & (actions[:, 1] == j)) for i, j in PAIRS])


def test_categorical_sample_ordered_pairs_follow_successive_sampling():
    """P(first = i, second = j) = p_i p_j / (1 - p_i): chi-squared with df = 11."""
    n = 20_000
    sampler = CategoricalSampler(num_actions=4)
    rng = np.random.default_rng(2024)
    logits = np.tile(np.log(P4).astype(np.float32), (n, 1))
    actions, _, valid = sampler.sample(logits, 2, rng)
    assert np.all(valid)
    assert np.all(actions[:, 0] != actions[:, 1])

    probs = np.array([P4[i] * P4[j] / (1.0 - P4[i]) for i, j in PAIRS])
    assert probs.sum() == pytest.approx(1.0)
    expected = n * probs
    stat = _chi2(_pair_counts(actions), expected)
    assert stat < CHI2_CRIT_999[11], stat

    # power: a wrong sampler (second action uniform among the other three) is rejected clearly
    wrong_probs = np.array([P4[i] / 3.0 for i, j in PAIRS])
    wrong_counts = rng.multinomial(n, wrong_probs)
    wrong_stat = _chi2(wrong_counts, expected)
    assert wrong_stat > 5 * CHI2_CRIT_999[11], wrong_stat
    # ...and so is i.i.d. sampling (with replacement) conditioned on distinct pairs
    iid_probs = np.array([P4[i] * P4[j] for i, j in PAIRS])
    iid_counts = rng.multinomial(n, iid_probs / iid_probs.sum())
    assert _chi2(iid_counts, expected) > 2 * CHI2_CRIT_999[11]

    # first slot's marginal is softmax(logits): chi-squared with df = 3
    first_counts = np.bincount(actions[:, 0], minlength=4)
    assert _chi2(first_counts, n * P4) < CHI2_CRIT_999[3]
    # power: a uniform first slot would be rejected
    assert _chi2(rng.multinomial(n, np.full(4, 0.25)), n * P4) > 5 * CHI2_CRIT_999[3]


def test_categorical_sample_first_slot_under_mask_is_renormalised_softmax():
    n = 20_000
    sampler = CategoricalSampler(num_actions=4)
    rng = np.random.default_rng(99)
    logits = np.tile(np.log(P4).astype(np.float32), (n, 1))
    mask = np.tile(np.array([True, False, True, True]), (n, 1))
    actions, _, valid = sampler.sample(logits, 2, rng, action_mask=mask)
    assert np.all(valid)
    legal = np.array([0, 2, 3])
    p = P4[legal] / P4[legal].sum()
    counts = np.array([np.sum(actions[:, 0] == j) for j in legal])
    assert np.sum(actions == 1) == 0
    assert _chi2(counts, n * p) < CHI2_CRIT_999[2]


# -- CategoricalSampler.log_prob / entropy -----------------------------------------------------


def test_categorical_log_prob_and_entropy_match_torch():
    g = torch.Generator().manual_seed(0)
    n, a, k = 8, 6, 3
    sampler = CategoricalSampler(num_actions=a)
    logits = torch.randn(n, a, generator=g, dtype=torch.float64) * 2.0
    actions = torch.randint(0, a, (n, k), generator=g)
    lp = sampler.log_prob(logits, actions)
    assert lp.shape == (n, k)
    dist = Categorical(logits=logits)
    ref = dist.log_prob(actions.T).T  # [K, N] -> [N, K]
    torch.testing.assert_close(lp, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(lp, F.log_softmax(logits, -1).gather(-1, actions))
    # logit shifts do not change log-probs
    torch.testing.assert_close(sampler.log_prob(logits + 3.0, actions), lp)
    # int32 indices are accepted
    torch.testing.assert_close(sampler.log_prob(logits, actions.int()), lp)

    ent = sampler.entropy(logits)
    assert ent.shape == (n,)
    torch.testing.assert_close(ent, dist.entropy(), rtol=0, atol=1e-12)
    uniform = torch.zeros(2, a, dtype=torch.float64)
    torch.testing.assert_close(sampler.entropy(uniform), torch.full((2,), math.log(a), dtype=torch.float64))


# -- make_sampler / validation -------------------------------------------------------------------


def test_make_sampler_returns_the_right_class():
    s = make_sampler(action_dim=3, num_actions=0, min_std=0.01, max_std=2.0)
    assert isinstance(s, TanhGaussian)
    assert (s.action_dim, s.min_std, s.max_std) == (3, 0.01, 2.0)
    assert s.action_shape == (3,)
    c = make_sampler(action_dim=0, num_actions=5)
    assert isinstance(c, CategoricalSampler)
    assert c.num_actions == 5
    assert c.action_shape == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(action_dim=0),
        dict(action_dim=-1),
        dict(action_dim=2, min_std=1.0, max_std=1.0),
        dict(action_dim=2, min_std=2.0, max_std=1.0),
        dict(action_dim=2, min_std=0.0, max_std=1.0),
    ],
)
def test_tanh_gaussian_validates(kwargs):
    with pytest.raises(ValueError):
        TanhGaussian(**kwargs)


def test_make_sampler_rejects_negative_action_dim():
    with pytest.raises(ValueError):
        make_sampler(action_dim=-2, num_actions=4)
