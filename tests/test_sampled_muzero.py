"""Sampled MuZero / Sampled EfficientZero (``policy_type=sampled_muzero`` / ``sampled_efficientzero``)
end to end on tiny configs: root noise really changes the selection over the K sample slots, the
played action is one of the sampled root actions, reanalysis replaces the sampled actions and
their policy targets together (and in the right rows), the buffer file keeps the new columns and
refuses another K / action_dim, bad inputs fail before anything is written, and the policy loss
behaves (KL = CE + sum p log p, 0 past an episode end, its gradient pulls the Gaussian towards
the most visited sample).

The samplers themselves (TanhGaussian, CategoricalSampler) are tested in test_sampling.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from functools import lru_cache

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.algos.base import Reanalysis
from lz_tune.buffer import GameBuffer, StepColumn
from lz_tune.config import Config, ConfigError
from lz_tune.config_loader import load_config_module
from lz_tune.envs.types import EnvBatch
from lz_tune.mcts import PUCT, RootInput, dirichlet_noise, run_search
from lz_tune.workers import SegmentCollector, env_spec_for
from lz_tune.workers.common import make_env
from tests.conftest import REPO_ROOT, TINY_OVERRIDES
from tests.test_cli import _main

PENDULUM = os.path.join(REPO_ROOT, "zoo", "classic_control", "pendulum_sampled_muzero.py")
PENDULUM_EZ = os.path.join(REPO_ROOT, "zoo", "classic_control", "pendulum_sampled_efficientzero.py")
ACROBOT = os.path.join(REPO_ROOT, "zoo", "classic_control", "acrobot_sampled_muzero.py")

#: tiny sizes on top of TINY_OVERRIDES (K = 3 for the continuous configs; Acrobot keeps its K = 2)
SMALL = ("efficientzero.lstm_hidden_size=8", "efficientzero.lstm_horizon_len=2", "env.max_episode_steps=30")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    torch.set_num_threads(1)


@lru_cache(maxsize=None)
def _zoo(path: str) -> Config:
    if REPO_ROOT not in sys.path:  # pendulum_sampled_efficientzero imports zoo.classic_control...
        sys.path.insert(0, REPO_ROOT)
    return load_config_module(path)


def _cfg(path: str = PENDULUM, *extra: str) -> Config:
    k = () if path == ACROBOT else ("sampled.num_samples=3",)
    return _zoo(path).with_overrides([*TINY_OVERRIDES, *SMALL, *k, *extra])


def _buffer_for(cfg: Config, *, seed: int = 1, **overrides) -> GameBuffer:
    """The buffer the driver builds for ``cfg`` (step columns, P and action_dim from the type)."""
    spec, algo, b = env_spec_for(cfg), get_algorithm(cfg.policy_type), cfg.buffer
    kwargs = dict(
        capacity_transitions=10_000,
        num_unroll_steps=b.num_unroll_steps,
        td_steps=b.td_steps,
        discount=cfg.mcts.discount_factor,
        frame_stack=spec.frame_stack,
        action_space_size=spec.action_space_size,
        step_columns=algo.step_columns(cfg, spec),
        policy_target_size=algo.policy_target_size(cfg, spec),
        action_dim=spec.action_dim,
        seed=seed,
    )
    return GameBuffer(**(kwargs | overrides))


def _filled_buffer(cfg: Config, min_transitions: int = 60, seed: int = 0) -> GameBuffer:
    buffer = _buffer_for(cfg)
    collector = SegmentCollector(cfg.with_overrides(["mcts.num_simulations=2"]), seed=seed)
    try:
        while buffer.num_transitions < min_transitions:
            buffer.push(collector.collect(temperature=1.0).segments)
    finally:
        collector.close()
    buffer.check_invariants()
    return buffer


@pytest.fixture(scope="module")
def pendulum_buffer() -> GameBuffer:
    """A Pendulum sampled_muzero buffer (K = 3, D = 1). Tests that sample from it copy it first
    (``_copy``), so they do not depend on the order in which they run."""
    return _filled_buffer(_cfg())


def _copy(buffer: GameBuffer, cfg: Config) -> GameBuffer:
    other = _buffer_for(cfg)
    other.load_state_dict(buffer.state_dict())
    return other


def _learner(cfg: Config):
    torch.manual_seed(0)
    return get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))


# ------------------------------------------------------------------------------------- 1. root noise


K_SLOTS = 4
ROWS = 16


def _flat_root(batch: int = ROWS, k: int = K_SLOTS) -> RootInput:
    """K slots with the zero prior logits the continuous sampler gives (uniform 1/K)."""
    return RootInput(
        latent=np.zeros((batch, 2), np.float32),
        value=np.zeros(batch, np.float32),
        policy_logits=np.zeros((batch, k), np.float32),
        action_mask=np.ones((batch, k), bool),
        to_play=np.full(batch, -1, np.int64),
    )


def _flat_recurrent(state, slot):
    """Every child is worth exactly the same (reward 0, value 0, zero logits): root selection is
    driven by the prior alone."""
    n = slot.shape[0]
    return state, np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros((n, K_SLOTS), np.float32)


def _flat_search(strategy, *, sims: int = 4 * K_SLOTS, seed: int = 0):
    return run_search(
        strategy=strategy,
        root=_flat_root(),
        recurrent_fn=_flat_recurrent,
        num_simulations=sims,
        discount=0.99,
        rng=np.random.default_rng(seed),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _UniformPriorAfterNoise(PUCT):
    """The original's C++ trees: noise is drawn and mixed, but the prior term selection uses is
    a constant 1/K."""

    def init_roots(self, tree, root, rng):
        ctx = super().init_roots(tree, root, rng)
        legal = tree.root_legal
        tree.children_prior[:, 0, :] = legal / legal.sum(axis=1, keepdims=True)
        return ctx


def test_root_noise_enters_the_priors_that_selection_uses():
    sims = 4 * K_SLOTS
    clean = _flat_search(PUCT(root_noise_weight=0.0), sims=sims)
    noisy = _flat_search(PUCT(root_noise_weight=0.25, root_dirichlet_alpha=0.3), sims=sims)

    # without noise: uniform prior, equal values -> the visits are spread exactly evenly
    np.testing.assert_allclose(clean.tree.children_prior[:, 0], 1.0 / K_SLOTS)
    np.testing.assert_array_equal(clean.visit_counts, np.full((ROWS, K_SLOTS), sims // K_SLOTS))

    # with noise: the root prior is exactly 0.75 / K + 0.25 * Dirichlet (the first draw of the rng)
    eta = dirichlet_noise(np.random.default_rng(0), np.ones((ROWS, K_SLOTS), bool), 0.3)
    prior = noisy.tree.children_prior[:, 0]
    np.testing.assert_allclose(prior, 0.75 / K_SLOTS + 0.25 * eta, rtol=1e-5, atol=1e-6)
    assert np.all(prior.max(axis=1) - prior.min(axis=1) > 1e-3), prior
    np.testing.assert_allclose(prior.sum(axis=1), 1.0, rtol=1e-5)

    # ... and selection follows it: counts differ from the noise-free run in most rows, and a
    # slot with a larger prior never gets fewer visits (values are all equal, so the pUCT score
    # at the root is c * prior / (1 + visits))
    assert np.all(noisy.visit_counts.sum(axis=1) == sims)
    differs = np.any(noisy.visit_counts != clean.visit_counts, axis=1)
    assert differs.sum() >= ROWS // 2, (noisy.visit_counts, prior)
    for row in range(ROWS):
        for a in range(K_SLOTS):
            for b in range(K_SLOTS):
                if prior[row, a] > prior[row, b] + 1e-4:
                    assert noisy.visit_counts[row, a] >= noisy.visit_counts[row, b], (
                        row,
                        prior[row],
                        noisy.visit_counts[row],
                    )
    most = noisy.visit_counts.argmax(axis=1)
    assert np.mean(prior[np.arange(ROWS), most] == prior.max(axis=1)) >= 0.75

    # what the original did is inert: mixing noise but scoring with a constant 1/K prior gives
    # the noise-free visit counts
    inert = _flat_search(_UniformPriorAfterNoise(root_noise_weight=0.25, root_dirichlet_alpha=0.3), sims=sims)
    np.testing.assert_array_equal(inert.visit_counts, clean.visit_counts)


def test_sampled_search_mixes_noise_into_the_k_slot_priors_only_when_collecting():
    cfg = _cfg(PENDULUM, "mcts.root_noise_weight=0.25")
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, env_spec_for(cfg))
    obs = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
    mask, to_play = np.ones((6, 1), bool), np.full(6, -1, np.int64)
    runs = {
        noise: policy.acting.search(
            policy, obs, mask, to_play, num_simulations=8, noise=noise, rng=np.random.default_rng(5)
        )
        for noise in (False, True)
    }
    (clean, _, actions_clean), (noisy, _, actions_noisy) = runs[False], runs[True]
    assert actions_clean.shape == actions_noisy.shape == (6, 3, 1)
    np.testing.assert_allclose(clean.tree.children_prior[:, 0], 1.0 / 3, rtol=1e-6)
    prior = noisy.tree.children_prior[:, 0]
    assert np.all(prior.max(axis=1) - prior.min(axis=1) > 1e-3)
    np.testing.assert_allclose(prior.sum(axis=1), 1.0, rtol=1e-5)
    assert noisy.visit_counts.shape == (6, 3) and np.all(noisy.visit_counts.sum(axis=1) == 8)


class _EdgeRecorder:
    """A stub search model for :meth:`SampledActing.search` with D = 1: a node's state is a number
    (root b: ``10 + b``; any other node: the action of its edge), its policy mean is a function
    of that state (root b: ``0.1 (b + 1)``; else ``0.5 s + 0.2``) and its raw scale ``raw``. It
    records every edge the search expands: ``(parent state [B], action [B])``."""

    def __init__(self, real, raw: float) -> None:
        self.cfg, self.strategy, self.raw, self.edges = real.cfg, real.strategy, raw, []

    def _out(self, mean: np.ndarray) -> np.ndarray:
        return np.stack([mean, np.full_like(mean, self.raw)], axis=1).astype(np.float32)

    def search_backend(self, obs, root_latent=None):
        from lz_tune.algos.base import SearchRoots

        batch = obs.shape[0]
        state = (10.0 + np.arange(batch, dtype=np.float32))[:, None]
        return SearchRoots(state, np.zeros(batch, np.float32), self._out(0.1 * np.arange(1, batch + 1)), self.step)

    def step(self, state, action):
        self.edges.append((np.array(state[:, 0]), np.array(action[:, 0])))
        child = np.array(action, np.float32).reshape(-1, 1)
        zeros = np.zeros(child.shape[0], np.float32)
        return child, zeros, zeros, self._out(0.5 * child[:, 0] + 0.2)


def _recorded_search(raw: float, batch: int, simulations: int):
    cfg = _cfg(PENDULUM, "sampled.num_samples=4")
    model = _EdgeRecorder(get_algorithm(cfg.policy_type).make_policy(cfg, env_spec_for(cfg)), raw)
    acting = get_algorithm(cfg.policy_type).make_policy(cfg, env_spec_for(cfg)).acting
    obs = np.zeros((batch, 3), np.float32)
    _, _, root_actions = acting.search(
        model,
        obs,
        np.ones((batch, 1), bool),
        np.full(batch, -1, np.int64),
        num_simulations=simulations,
        noise=False,
        rng=np.random.default_rng(0),
    )
    parents = np.concatenate([p for p, _ in model.edges])
    actions = np.concatenate([a for _, a in model.edges])
    trees = np.tile(np.arange(batch), len(model.edges))
    return parents, actions, trees, root_actions


def test_every_edge_plays_a_sample_of_its_own_parents_policy():
    """Root edges play the root's K pre-drawn samples (the stored ``sampled_actions``); an interior
    edge draws from ITS parent's policy (std 1e-3 here: the action is tanh of that parent's mean),
    not the root's or the child's."""
    parents, actions, trees, root_actions = _recorded_search(raw=-30.0, batch=5, simulations=30)
    at_root = parents >= 10.0
    assert at_root.any() and (~at_root).any()
    for b, a in zip(trees[at_root], actions[at_root]):
        assert a in root_actions[b, :, 0], (b, a, root_actions[b])
    np.testing.assert_allclose(actions[~at_root], np.tanh(0.5 * parents[~at_root] + 0.2), atol=5e-3)


def test_interior_edge_actions_are_tanh_gaussian_draws():
    """Interior edges' actions (drawn one per edge when it is expanded) have the moments of the
    parent's Gaussian before the tanh: mean 0.5 s + 0.2, std softplus(raw) + min_std."""
    raw = 0.0  # std = log 2 + 1e-3
    parents, actions, _, _ = _recorded_search(raw=raw, batch=64, simulations=60)
    inner = parents < 10.0
    z = (np.arctanh(actions[inner].astype(np.float64)) - (0.5 * parents[inner] + 0.2)) / (np.log(2.0) + 1e-3)
    n = z.size
    assert n > 1000
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.std() - 1.0) < 5 / np.sqrt(2 * n), (z.mean(), z.std(), n)
    assert len(np.unique(actions[inner])) == n  # one fresh draw per edge


# ------------------------------------------------------------------------------------- 2. act


def _env_batch(cfg: Config, num_envs: int = 4) -> EnvBatch:
    env = make_env(cfg, num_envs=num_envs, seed=11, mode="collect")
    try:
        return env.reset(seed=11)
    finally:
        env.close()


@pytest.mark.parametrize("path", [PENDULUM, PENDULUM_EZ], ids=["sampled_muzero", "sampled_efficientzero"])
@pytest.mark.parametrize("mode", ["collect", "eval"])
def test_act_continuous_plays_one_of_the_sampled_root_actions(path, mode):
    cfg = _cfg(path)
    spec = env_spec_for(cfg)
    assert spec.is_continuous and spec.action_dim == 1
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
    batch = _env_batch(cfg)
    n, k, d = batch.num_envs, cfg.sampled.num_samples, spec.action_dim
    res = policy.act(batch, mode=mode, temperature=1.0, rng=np.random.default_rng(0))
    sampled = res.extras["sampled_actions"]
    assert set(res.extras) == {"sampled_actions"}
    assert res.action.shape == (n, d) and res.action.dtype == np.float32
    assert sampled.shape == (n, k, d) and sampled.dtype == np.float32
    assert np.all(np.abs(res.action) <= 1.0) and np.all(np.abs(sampled) <= 1.0)
    assert res.policy_target.shape == (n, k)
    np.testing.assert_allclose(res.policy_target.sum(axis=1), 1.0, rtol=1e-6)
    assert res.root_value.shape == (n,) and res.pred_value.shape == (n,)
    for i in range(n):
        slots = np.flatnonzero(np.all(sampled[i] == res.action[i], axis=-1))
        assert slots.size >= 1, (res.action[i], sampled[i])
        assert res.policy_target[i, slots].max() > 0  # a visited slot was played
    if mode == "eval":  # the most visited slot
        best = res.policy_target.argmax(axis=1)
        np.testing.assert_array_equal(res.action, sampled[np.arange(n), best])
    else:  # a near-zero temperature plays a most visited slot
        cold = policy.act(batch, mode=mode, temperature=1e-3, rng=np.random.default_rng(2))
        for i in range(n):
            slots = np.flatnonzero(np.all(cold.extras["sampled_actions"][i] == cold.action[i], axis=-1))
            assert cold.policy_target[i, slots].max() == cold.policy_target[i].max(), (i, cold.policy_target[i])


@pytest.mark.parametrize("mode", ["collect", "eval"])
def test_act_discrete_k2_of_3_plays_one_of_two_distinct_sampled_actions(mode):
    cfg = _cfg(ACROBOT)
    spec = env_spec_for(cfg)
    assert not spec.is_continuous and spec.action_space_size == 3 and cfg.sampled.num_samples == 2
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
    batch = _env_batch(cfg, num_envs=6)
    n = batch.num_envs
    res = policy.act(batch, mode=mode, temperature=1.0, rng=np.random.default_rng(1))
    sampled = res.extras["sampled_actions"]
    assert sampled.shape == (n, 2) and sampled.dtype == np.int64
    assert res.action.shape == (n,) and res.action.dtype == np.int64
    assert np.all((sampled >= 0) & (sampled < 3))
    assert np.all(sampled[:, 0] != sampled[:, 1]), sampled
    assert res.policy_target.shape == (n, 2)
    np.testing.assert_allclose(res.policy_target.sum(axis=1), 1.0, rtol=1e-6)
    slot = np.argmax(sampled == res.action[:, None], axis=1)
    np.testing.assert_array_equal(sampled[np.arange(n), slot], res.action)
    assert np.all(res.policy_target[np.arange(n), slot] > 0)
    if mode == "eval":
        np.testing.assert_array_equal(slot, res.policy_target.argmax(axis=1))
    else:  # a near-zero temperature plays a most visited slot
        cold = policy.act(batch, mode=mode, temperature=1e-3, rng=np.random.default_rng(2))
        cold_slot = np.argmax(cold.extras["sampled_actions"] == cold.action[:, None], axis=1)
        np.testing.assert_array_equal(cold.policy_target[np.arange(n), cold_slot], cold.policy_target.max(axis=1))


# ------------------------------------------------------------------------------------- 3. reanalysis


@pytest.fixture(scope="module")
def ez_buffer() -> GameBuffer:
    return _filled_buffer(_cfg(PENDULUM_EZ), seed=4)


@pytest.mark.parametrize("which", ["sampled_muzero", "sampled_efficientzero"])
def test_batch_reanalysis_equals_a_fresh_sampled_search_of_the_same_positions(which, request):
    path, fixture = (PENDULUM, "pendulum_buffer") if which == "sampled_muzero" else (PENDULUM_EZ, "ez_buffer")
    cfg = _cfg(path, "buffer.reanalyze_ratio=1.0")
    buffer = _copy(request.getfixturevalue(fixture), cfg)
    learner = _learner(cfg)
    index = buffer.sample(cfg.learner.batch_size)
    stored = buffer.gather_window(index)
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(7))
    assert batch.num_reanalyzed == len(index)
    valid = batch.mask > 0
    assert valid.sum() > len(index)  # more than the first step of each sample
    fresh = learner.target_policy.reanalyze(
        batch.obs[valid], batch.action_mask[valid], batch.to_play[valid], np.random.default_rng(7)
    )
    k = cfg.sampled.num_samples
    actions = batch.extras["sampled_actions"]
    assert actions.shape == (len(index), cfg.buffer.num_unroll_steps + 1, k, 1)
    np.testing.assert_array_equal(actions[valid], fresh.extras["sampled_actions"])
    np.testing.assert_array_equal(batch.target_policy[valid], fresh.policy_target)
    # reanalyze = one noise-free sampled search: its visits go with ITS root samples, slot by slot
    search, _, root_actions = learner.target_policy.acting.search(
        learner.target_policy,
        batch.obs[valid],
        batch.action_mask[valid],
        batch.to_play[valid],
        num_simulations=cfg.mcts.num_simulations,
        noise=False,
        rng=np.random.default_rng(7),
    )
    np.testing.assert_array_equal(fresh.extras["sampled_actions"], root_actions)
    np.testing.assert_array_equal(fresh.policy_target, search.visit_distribution)
    np.testing.assert_array_equal(fresh.root_value, search.root_value)
    # a fresh search: new samples (not the stored ones) with their own visits
    assert not np.array_equal(actions[valid], stored.extras["sampled_actions"][valid])
    # past an episode end nothing is reanalysed: zeros, as stored
    assert np.all(actions[~valid] == 0) and np.all(batch.target_policy[~valid] == 0)
    # the stored segments are untouched
    again = buffer.gather_window(index)
    np.testing.assert_array_equal(again.extras["sampled_actions"], stored.extras["sampled_actions"])
    np.testing.assert_array_equal(again.policy_targets, stored.policy_targets)


def _fake_sampled(obs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic function of each observation: K actions [n, K, 1] and a one-hot target."""
    base = np.tanh(0.7 * obs[:, 0] + 0.3 * obs[:, 2]).astype(np.float32)
    actions = np.clip(base[:, None, None] + 0.01 * np.arange(k, dtype=np.float32)[None, :, None], -0.999, 0.999)
    slot = (np.abs(obs[:, 2] * 1e4).astype(np.int64)) % k
    return actions.astype(np.float32), np.eye(k, dtype=np.float32)[slot]


@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_reanalysed_actions_and_targets_land_together_in_their_rows(pendulum_buffer, monkeypatch, ratio):
    cfg = _cfg(PENDULUM, f"buffer.reanalyze_ratio={ratio}")
    buffer = _copy(pendulum_buffer, cfg)
    learner = _learner(cfg)
    k = cfg.sampled.num_samples
    calls = []

    def fake(obs, action_mask, to_play, rng):
        calls.append(obs.copy())
        actions, target = _fake_sampled(obs, k)
        return Reanalysis(
            policy_target=target, root_value=np.zeros(len(obs), np.float32), extras={"sampled_actions": actions}
        )

    monkeypatch.setattr(learner.target_policy, "reanalyze", fake)
    index = buffer.sample(cfg.learner.batch_size)
    stored = buffer.gather_window(index)
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    r = int(len(index) * ratio)
    assert batch.num_reanalyzed == r
    valid = batch.mask > 0
    fresh_rows = np.zeros_like(valid)
    fresh_rows[:r] = valid[:r]
    assert sum(len(c) for c in calls) == fresh_rows.sum()
    want_actions, want_target = _fake_sampled(batch.obs[fresh_rows], k)
    np.testing.assert_array_equal(batch.extras["sampled_actions"][fresh_rows], want_actions)
    np.testing.assert_array_equal(batch.target_policy[fresh_rows], want_target)
    # every other position keeps what was stored (sampled actions and visits alike)
    rest = ~fresh_rows
    np.testing.assert_array_equal(batch.extras["sampled_actions"][rest], stored.extras["sampled_actions"][rest])
    np.testing.assert_array_equal(batch.target_policy[rest], stored.policy_targets[rest])


def test_without_reanalysis_the_batch_holds_the_stored_columns(pendulum_buffer, monkeypatch):
    cfg = _cfg(PENDULUM, "buffer.reanalyze_ratio=0.0")
    buffer = _copy(pendulum_buffer, cfg)
    learner = _learner(cfg)

    def forbidden(*args, **kwargs):
        raise AssertionError("reanalyze called with reanalyze_ratio=0")

    monkeypatch.setattr(learner.target_policy, "reanalyze", forbidden)
    index = buffer.sample(cfg.learner.batch_size)
    stored = buffer.gather_window(index)
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    assert batch.num_reanalyzed == 0
    np.testing.assert_array_equal(batch.extras["sampled_actions"], stored.extras["sampled_actions"])
    np.testing.assert_array_equal(batch.target_policy, stored.policy_targets)
    np.testing.assert_array_equal(batch.obs, stored.obs)
    valid = batch.mask > 0
    np.testing.assert_array_equal(batch.actions[valid[:, :-1]], stored.actions[valid[:, :-1]])
    # the stored action of every real step is one of its stored root samples, and it was visited
    segment = buffer.get_segment(int(buffer.segment_ids[0]))
    hit = np.all(segment.extras["sampled_actions"] == segment.actions[:, None, :], axis=-1)  # [m, K]
    assert np.all(hit.any(axis=1))
    assert np.all((segment.policy_targets * hit).sum(axis=1) > 0)


# ------------------------------------------------------------------------------------- 4. buffer file


def test_buffer_file_round_trip_keeps_continuous_actions_and_sampled_columns(pendulum_buffer, tmp_path):
    cfg = _cfg(PENDULUM)
    k, u = cfg.sampled.num_samples, cfg.buffer.num_unroll_steps
    source = _copy(pendulum_buffer, cfg)
    state = _through_a_snapshot(source.state_dict(), tmp_path / "store")
    restored = _buffer_for(cfg, seed=99)  # another seed: the rng state comes from the file
    restored.load_state_dict(state)
    restored.check_invariants()
    assert restored.num_transitions == source.num_transitions
    index_a, index_b = source.sample(24), restored.sample(24)
    np.testing.assert_array_equal(index_a.segment_ids, index_b.segment_ids)
    np.testing.assert_array_equal(index_a.positions, index_b.positions)
    a, b = source.gather_window(index_a), restored.gather_window(index_b)
    assert a.actions.shape == (24, u, 1) and a.actions.dtype == np.float32
    assert a.policy_targets.shape == (24, u + 1, k)
    assert a.extras["sampled_actions"].shape == (24, u + 1, k, 1)
    assert a.extras["sampled_actions"].dtype == np.float32
    for name in ("obs", "actions", "rewards", "policy_targets", "mask", "to_play", "action_mask", "timesteps"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.extras["sampled_actions"], b.extras["sampled_actions"])
    assert np.any(a.extras["sampled_actions"] != 0)
    seg = int(source.segment_ids[-1])
    np.testing.assert_array_equal(
        source.get_segment(seg).extras["sampled_actions"], restored.get_segment(seg).extras["sampled_actions"]
    )


@pytest.mark.parametrize("other", ["more_samples", "fewer_samples", "action_dim_2", "discrete_columns"])
def test_buffer_state_of_another_k_or_action_dim_is_refused(pendulum_buffer, other):
    cfg = _cfg(PENDULUM)
    state = pendulum_buffer.state_dict()
    k = cfg.sampled.num_samples
    if other == "more_samples":
        kwargs = dict(step_columns=(StepColumn("sampled_actions", (k + 1, 1), "float32"),), policy_target_size=k + 1)
    elif other == "fewer_samples":
        kwargs = dict(step_columns=(StepColumn("sampled_actions", (k - 1, 1), "float32"),), policy_target_size=k - 1)
    elif other == "action_dim_2":
        kwargs = dict(step_columns=(StepColumn("sampled_actions", (k, 2), "float32"),), action_dim=2)
    else:  # the same K, but the discrete type's [K] int64 column and no action_dim
        kwargs = dict(step_columns=(StepColumn("sampled_actions", (k,), "int64"),), action_dim=0)
    buffer = _buffer_for(cfg, **kwargs)
    with pytest.raises(ValueError, match="buffer state was saved with"):
        buffer.load_state_dict(state)
    assert buffer.num_transitions == 0  # nothing half-loaded


# ------------------------------------------------------------------------------------- 5. bad inputs


class _Started(AssertionError):
    pass


@pytest.fixture
def guards(monkeypatch, tmp_path):
    """Starting an env, a worker back-end or the logger fails the test; runs in an empty cwd."""
    import lz_tune.pipeline.driver as driver_mod
    import lz_tune.workers.collector as collector_mod
    import lz_tune.workers.common as common_mod
    import lz_tune.workers.evaluator as evaluator_mod

    def forbid(what):
        def fail(*args, **kwargs):
            raise _Started(f"{what} was started for a bad input")

        return fail

    for mod in (common_mod, collector_mod, evaluator_mod):
        monkeypatch.setattr(mod, "make_env", forbid("an env"))
    monkeypatch.setattr(driver_mod, "make_backend", forbid("a worker back-end"))
    monkeypatch.setattr(driver_mod, "ScalarLogger", forbid("the TensorBoard logger"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


BAD_CLI = [
    pytest.param(
        ACROBOT,
        ("sampled.num_samples=5",),
        ("sampled.num_samples", "Acrobot-v1", "K=5", "3 actions"),
        id="k-above-action-count",
    ),
    pytest.param(
        PENDULUM, ("policy_type=muzero",), ("policy_type", "'muzero'", "Pendulum-v1", "continuous"), id="box-env-muzero"
    ),
    pytest.param(
        PENDULUM,
        ("policy_type=efficientzero",),
        ("policy_type", "'efficientzero'", "Pendulum-v1"),
        id="box-env-efficientzero",
    ),
    pytest.param(
        PENDULUM,
        ("policy_type=gumbel_muzero",),
        ("policy_type", "'gumbel_muzero'", "Pendulum-v1"),
        id="box-env-gumbel_muzero",
    ),
    pytest.param(PENDULUM, ("sampled.num_samples=0",), ("sampled.num_samples",), id="zero-samples"),
    pytest.param(
        PENDULUM, ("sampled.policy_loss_type=mse",), ("sampled.policy_loss_type", "mse"), id="unknown-policy-loss-type"
    ),
    pytest.param(PENDULUM, ("sampled.min_std=5.0",), ("sampled.min_std", "max_std"), id="min-std-above-max"),
]


@pytest.mark.parametrize("zoo,extra,names", BAD_CLI)
def test_cli_bad_sampled_input_fails_before_writing_anything(zoo, extra, names, guards, capsys):
    exp_dir = guards.parent / "exp"
    code, out, err = _main(str(guards), capsys, "train", zoo, *TINY_OVERRIDES, *extra, "--exp-dir", str(exp_dir))
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert err.startswith("error: "), err
    for name in names:
        assert name in err, f"{name!r} not in: {err}"
    assert not exp_dir.exists(), "the experiment folder was created for a bad input"
    assert list(guards.iterdir()) == [], "something was written into the working directory"
    assert sorted(p.name for p in guards.parent.iterdir()) == ["cwd"]


def test_driver_refuses_k_above_action_count_and_box_env_for_discrete_types(guards):
    from lz_tune.pipeline import Driver

    exp_dir = guards.parent / "exp"
    with pytest.raises(ConfigError, match=r"sampled\.num_samples.*'Acrobot-v1'"):
        Driver(_cfg(ACROBOT, "sampled.num_samples=4"), exp_dir=str(exp_dir), print_fn=None)
    with pytest.raises(ConfigError, match=r"policy_type: 'muzero'.*'Pendulum-v1'"):
        Driver(_cfg(PENDULUM, "policy_type=muzero"), exp_dir=str(exp_dir), print_fn=None)
    assert not exp_dir.exists()
    assert list(guards.iterdir()) == []
    # K = A is fine for a discrete env (every action, in a random order)
    algo, cfg = get_algorithm("sampled_muzero"), _cfg(ACROBOT, "sampled.num_samples=3")
    assert algo.policy_target_size(cfg, env_spec_for(cfg)) == 3
    # and every entry point of the type checks K, not only the policy
    bad = _cfg(ACROBOT, "sampled.num_samples=4")
    for fn in (algo.step_columns, algo.policy_target_size, algo.make_policy, algo.check_num_samples):
        with pytest.raises(ConfigError, match="sampled.num_samples"):
            fn(bad, env_spec_for(bad))


def test_zero_samples_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"sampled\.num_samples"):
        _cfg(PENDULUM, "sampled.num_samples=0")
    with pytest.raises(ConfigError, match=r"sampled\.num_samples"):
        Config.from_dict({"sampled": {"num_samples": -2}})


# ------------------------------------------------------------------------------------- 6. the loss


def _policy_out(n: int, d: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(n, d, generator=g) * 0.5, torch.randn(n, d, generator=g) * 0.5 - 0.5], dim=-1)


def _target(n: int, k: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    probs = torch.rand(n, k, generator=g)
    probs[0, 1:] = 0.0  # all mass on one sample (0 log 0 = 0)
    probs[1] = 0.0  # past an episode end: all zero
    return probs / probs.sum(-1, keepdim=True).clamp_min(1e-12)


@pytest.mark.parametrize("path", [PENDULUM, ACROBOT], ids=["continuous", "discrete"])
def test_kl_and_cross_entropy_differ_exactly_by_the_target_entropy(path):
    ce = _learner(_cfg(path, "sampled.policy_loss_type=cross_entropy"))
    kl = _learner(_cfg(path, "sampled.policy_loss_type=kl"))
    spec, k, n = env_spec_for(ce.cfg), ce.cfg.sampled.num_samples, 6
    if spec.is_continuous:
        policy_out = _policy_out(n, spec.action_dim)
        g = torch.Generator().manual_seed(1)
        actions = torch.rand(n, k, spec.action_dim, generator=g) * 1.8 - 0.9
        actions[1] = 0.0  # what the buffer holds past an episode end
    else:
        policy_out = torch.randn(n, spec.action_space_size, generator=torch.Generator().manual_seed(2))
        actions = torch.stack([torch.randperm(spec.action_space_size)[:k] for _ in range(n)])
    probs = _target(n, k)
    loss_ce = ce.policy_loss(policy_out, (probs, actions))
    loss_kl = kl.policy_loss(policy_out, (probs, actions))
    assert loss_ce.shape == (n,) and torch.isfinite(loss_ce).all() and torch.isfinite(loss_kl).all()
    plogp = torch.xlogy(probs, probs).sum(-1)
    torch.testing.assert_close(loss_kl - loss_ce, plogp, rtol=0, atol=1e-5)
    log_prob = ce.policy.acting.sampler.log_prob(policy_out, actions)
    torch.testing.assert_close(loss_ce, -(probs * log_prob).sum(-1))
    # zero-weighted where the target is all zero, for both types of loss
    assert loss_ce[1].item() == 0.0 and loss_kl[1].item() == 0.0
    # the one-hot row: KL = CE (its entropy is 0)
    assert loss_kl[0].item() == pytest.approx(loss_ce[0].item(), abs=1e-6)
    # same gradient (the target entropy does not depend on the network)
    grads = []
    for learner in (ce, kl):
        x = policy_out.clone().requires_grad_(True)
        learner.policy_loss(x, (probs, actions)).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    assert torch.all(grads[0][1] == 0)  # the all-zero row contributes no gradient


def test_policy_gradient_pulls_the_gaussian_mean_towards_the_visited_sample():
    learner = _learner(_cfg(PENDULUM, "sampled.num_samples=4"))
    d, k = 1, 4
    actions = torch.tensor([[[-0.6], [0.2], [0.85], [-0.1]]]).repeat(3, 1, 1)  # [3, K, 1]
    probs = torch.zeros(3, k)
    probs[:, 2] = 1.0  # all visits on sample 2
    goal = torch.atanh(actions[:, 2])  # [3, 1]
    x = torch.cat([torch.tensor([[-1.0], [0.0], [2.5]]), torch.full((3, d), -0.5)], dim=-1).requires_grad_(True)
    learner.policy_loss(x, (probs, actions)).sum().backward()
    # d loss / d mean = -(atanh(a) - mean) / std^2: a descent step moves the mean towards atanh(a)
    assert torch.all(torch.sign(-x.grad[:, :d]) == torch.sign(goal - x.detach()[:, :d]))

    # a few SGD steps of the network on the policy loss alone
    net = learner.policy.network
    net.train()
    obs = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32))
    sampler = learner.policy.acting.sampler

    def mean_of():
        mean, _ = sampler.params(net.initial_inference(obs).policy_logits)
        return mean

    with torch.no_grad():
        before = (mean_of() - goal).abs()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(25):
        opt.zero_grad()
        learner.policy_loss(net.initial_inference(obs).policy_logits, (probs, actions)).mean().backward()
        opt.step()
    with torch.no_grad():
        after = (mean_of() - goal).abs()
    assert torch.all(after < before), (before, after)
    assert after.max() < 0.5 * before.max()


@pytest.mark.parametrize("which", ["sampled_muzero", "sampled_efficientzero"])
def test_a_few_learner_updates_on_pendulum_stay_finite(which, request):
    path, fixture = (PENDULUM, "pendulum_buffer") if which == "sampled_muzero" else (PENDULUM_EZ, "ez_buffer")
    cfg = _cfg(path, "buffer.reanalyze_ratio=0.5", "learner.policy_entropy_weight=0.01")
    buffer = _copy(request.getfixturevalue(fixture), cfg)
    learner = _learner(cfg)
    start = {name: p.detach().clone() for name, p in learner.policy.network.named_parameters()}
    rng = np.random.default_rng(0)
    for _ in range(4):
        index = buffer.sample(cfg.learner.batch_size)
        batch = learner.make_batch(buffer, index, rng=rng)
        logs, priorities = learner.learn(batch)
        assert all(np.isfinite(v) for v in logs.values()), logs
        assert priorities.shape == (len(index),) and np.all(np.isfinite(priorities)) and np.all(priorities > 0)
        buffer.update_priorities(index, priorities)
    assert learner.train_iter == 4
    assert "loss/policy" in logs and "policy/entropy" in logs
    moved = [name for name, p in learner.policy.network.named_parameters() if not torch.equal(p, start[name])]
    assert moved, "no parameter changed"
    for p in learner.policy.network.parameters():
        assert torch.isfinite(p).all()


def _through_a_snapshot(state, folder):
    """``state`` saved as a replay-buffer snapshot (content-addressed chunks, as checkpoints save
    it) and read back."""
    from lz_tune.buffer.buffer_state import APPEND_ONLY
    from lz_tune.buffer.chunk_store import LocalChunkStore
    from lz_tune.buffer.snapshot import SnapshotWriter, read_state

    store = LocalChunkStore(folder)
    encoded, _, _ = SnapshotWriter(store, append_only=APPEND_ONLY).write(state)
    return read_state(encoded, store)
