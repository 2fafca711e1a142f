"""Checks shared by the search-engine tests (``tests/test_*_inference.py``): a policy on its CPU
engine and the same policy on the torch path make the same searches."""

from __future__ import annotations

import numpy as np
import torch

from lz_tune.algos.sampled_muzero import SampledActing


def search(policy, obs: np.ndarray, num_actions: int, *, simulations: int, seed: int, noise: bool = True):
    """``(SearchOutput, pred_value)`` of one search from ``obs [B, O]`` (the sampled search for the
    sampled types), all actions legal, single-player, the random stream of ``seed``."""
    batch = obs.shape[0]
    mask, to_play, rng = np.ones((batch, num_actions), bool), -np.ones(batch, np.int64), np.random.default_rng(seed)
    if isinstance(policy.acting, SampledActing):
        out, value, _ = policy.acting.search(
            policy, obs, mask, to_play, num_simulations=simulations, noise=noise, rng=rng
        )
        return out, value
    return policy.search(obs, mask, to_play, num_simulations=simulations, noise=noise, rng=rng)


def assert_same_search(
    auto,
    reference,
    engine_type: type,
    obs: np.ndarray,
    num_actions: int,
    *,
    simulations: int = 24,
    seed: int = 5,
    atol: float = 1e-4,
) -> None:
    """``auto`` searches through ``engine_type``, ``reference`` through torch; both give the same
    visit counts, and root values, edge rewards and predicted root values to float32 rounding."""
    (out_a, value_a), (out_t, value_t) = (
        search(p, obs, num_actions, simulations=simulations, seed=seed) for p in (auto, reference)
    )
    with torch.inference_mode():
        assert isinstance(auto.search_backend(obs)[3], engine_type)
        assert not isinstance(reference.search_backend(obs)[3], engine_type)
    np.testing.assert_array_equal(out_a.visit_counts, out_t.visit_counts)
    np.testing.assert_allclose(out_a.root_value, out_t.root_value, rtol=1e-4, atol=atol)
    np.testing.assert_allclose(out_a.tree.node_reward, out_t.tree.node_reward, rtol=1e-4, atol=atol)
    np.testing.assert_allclose(value_a, value_t, rtol=1e-4, atol=atol)


def root_values(policy, obs: np.ndarray, num_actions: int) -> np.ndarray:
    """[B] root values of a small noiseless search (to see weight changes)."""
    return search(policy, obs, num_actions, simulations=8, seed=0, noise=False)[0].root_value
