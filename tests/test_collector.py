"""SegmentCollector: nothing lost or reordered across collect() calls, snapshot versions,
initial priorities."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from lz_tune.workers import SegmentCollector, WeightSnapshot


def _tag_segments_by_env(collector: SegmentCollector) -> dict[int, int]:
    """Wrap every builder's add_step so that each emitted segment is mapped (by id) to its env."""
    owner: dict[int, int] = {}
    for env_index, builder in enumerate(collector.builders):
        original = builder.add_step

        def add_step(*args, _original=original, _env=env_index, **kwargs):
            out = _original(*args, **kwargs)
            for seg in out:
                owner[id(seg)] = _env
            return out

        builder.add_step = add_step
    return owner


def _random_snapshot(collector: SegmentCollector, *, version: int, train_iter: int, seed: int) -> WeightSnapshot:
    torch.manual_seed(seed)
    weights = {
        k: torch.randn_like(v) * 0.1 if v.is_floating_point() else v.clone()
        for k, v in collector.policy.weights().items()
    }
    return WeightSnapshot(version=version, train_iter=train_iter, weights=weights)


@pytest.fixture(scope="module")
def collected(tiny_cfg):
    """Five collects of one collector (1 segment each), with the env of every segment."""
    cfg = tiny_cfg()
    torch.manual_seed(0)
    collector = SegmentCollector(cfg, seed=3)
    owner = _tag_segments_by_env(collector)
    collector.load_snapshot(_random_snapshot(collector, version=5, train_iter=4, seed=0))
    results, in_progress = [], []
    for _ in range(5):
        results.append(collector.collect(temperature=1.0, num_segments=1))
        in_progress.append(collector.steps_in_progress)
    segments = [(owner[id(s)], s) for r in results for s in r.segments]
    yield cfg, collector, results, in_progress, segments
    collector.close()


def test_no_transition_lost_across_collects(collected):
    cfg, collector, results, in_progress, segments = collected
    assert len(segments) >= 5
    total_steps = sum(r.env_steps for r in results)
    assert total_steps == collector.total_env_steps
    # every step taken is owned by exactly one returned segment, or still in progress
    owned = sum(r.num_transitions for r in results)
    assert total_steps == owned + collector.steps_in_progress
    # ... after every collect, not only the last one
    running_steps = running_owned = 0
    for r, pending in zip(results, in_progress):
        running_steps += r.env_steps
        running_owned += r.num_transitions
        assert r.steps_in_progress == pending
        assert running_steps == running_owned + pending
    # ... and per env: each env took total_steps / N steps
    n = cfg.env.collector_env_num
    assert total_steps % n == 0
    for env_index in range(n):
        owned_env = sum(s.num_owned for e, s in segments if e == env_index)
        assert owned_env + collector.builders[env_index].num_steps_in_progress == total_steps // n


def test_segments_of_one_env_are_contiguous(collected):
    cfg, collector, results, _, segments = collected
    L = cfg.buffer.game_segment_length
    padding = cfg.buffer.num_unroll_steps + cfg.buffer.td_steps
    by_env = defaultdict(list)
    for env_index, seg in segments:
        by_env[env_index].append(seg)
    assert set(by_env) == set(range(cfg.env.collector_env_num))
    episode_lengths = []
    for segs in by_env.values():
        assert segs[0].timesteps[0] == 0  # the very first segment starts an episode
        for prev, nxt in zip(segs, segs[1:]):
            n = prev.num_owned
            assert np.array_equal(prev.timesteps, np.arange(prev.timesteps[0], prev.timesteps[0] + prev.num_steps))
            if prev.terminal and prev.num_padding == 0:
                # the episode ended right after this segment's last owned step: the next one starts a new episode
                episode_lengths.append(int(prev.timesteps[-1]) + 1)
                assert nxt.timesteps[0] == 0
                continue
            # same episode goes on: a full segment, whose padding is the start of the next segment
            assert n == L
            if not prev.terminal:
                assert prev.num_padding == padding
            assert nxt.timesteps[0] == prev.timesteps[n - 1] + 1
            k = min(prev.num_padding, nxt.num_steps)
            assert k >= 1
            assert np.array_equal(prev.timesteps[n : n + k], nxt.timesteps[:k])
            assert np.array_equal(prev.actions[n : n + k], nxt.actions[:k])
            assert np.array_equal(prev.rewards[n : n + k], nxt.rewards[:k])
            # the observation at the next segment's first position is the one after prev's owned steps
            np.testing.assert_array_equal(prev.obs(n), nxt.obs(0))
        last = segs[-1]
        if last.terminal and last.num_padding == 0:
            episode_lengths.append(int(last.timesteps[-1]) + 1)
    # every real episode end reported by the collects is the end of a terminal segment
    reported = sorted(length for r in results for length in r.episode_lengths)
    assert reported == sorted(episode_lengths)
    assert len(reported) >= 1  # max_episode_steps=30: at least one episode ended


def test_policy_version_of_loaded_snapshot(tiny_cfg):
    cfg = tiny_cfg()
    collector = SegmentCollector(cfg, seed=0)
    try:
        snap = _random_snapshot(collector, version=42, train_iter=17, seed=1)
        collector.load_snapshot(snap)
        for k, v in collector.policy.network.state_dict().items():
            assert torch.equal(v, snap.weights[k]), k
        r = collector.collect(temperature=1.0, num_segments=1)
        assert (r.policy_version, r.policy_train_iter) == (42, 17)
        # the same version is not reloaded; a new version is
        same_version = _random_snapshot(collector, version=42, train_iter=17, seed=2)
        collector.load_snapshot(same_version)
        assert all(torch.equal(v, snap.weights[k]) for k, v in collector.policy.network.state_dict().items())
        newer = _random_snapshot(collector, version=43, train_iter=18, seed=3)
        collector.load_snapshot(newer)
        assert all(torch.equal(v, newer.weights[k]) for k, v in collector.policy.network.state_dict().items())
        r = collector.collect(temperature=1.0, num_segments=1)
        assert (r.policy_version, r.policy_train_iter) == (43, 18)
    finally:
        collector.close()


@pytest.mark.parametrize("use_max", [False, True])
def test_initial_priorities(tiny_cfg, use_max):
    cfg = tiny_cfg(f"buffer.use_max_priority_for_new_data={use_max}")
    torch.manual_seed(0)
    collector = SegmentCollector(cfg, seed=1)
    try:
        r = collector.collect(temperature=1.0, num_segments=2)
        assert len(r.segments) >= 2
        if use_max:
            assert r.priorities is None
            return
        assert r.priorities is not None and len(r.priorities) == len(r.segments)
        for seg, prio in zip(r.segments, r.priorities):
            assert prio.shape == (seg.num_owned,)
            assert np.all(np.isfinite(prio)) and np.all(prio > 0)
            n = seg.num_owned
            expected = np.abs(seg.pred_values[:n] - seg.root_values[:n])
            np.testing.assert_allclose(prio, expected, atol=1e-5)
    finally:
        collector.close()


# ------------------------------------------------------------------------ epsilon-greedy


def test_epsilon_schedule_is_linear_in_env_steps(tiny_cfg):
    from lz_tune.workers import epsilon_at

    cfg = tiny_cfg(
        "collector.eps_greedy_start=1.0", "collector.eps_greedy_end=0.2", "collector.eps_greedy_decay_env_steps=1000"
    )
    assert [epsilon_at(cfg, n) for n in (0, 250, 1000, 5000)] == pytest.approx([1.0, 0.8, 0.2, 0.2])
    assert epsilon_at(tiny_cfg(), 0) == 0.0  # off by default


def _exploration(*, num_envs: int, continuous: bool = False, max_duration: int = 1, seed: int = 0):
    from lz_tune.workers.exploration import EpsilonGreedy

    return EpsilonGreedy(
        num_envs=num_envs, continuous=continuous, max_duration=max_duration, rng=np.random.default_rng(seed)
    )


def test_epsilon_greedy_replaces_actions_by_uniform_legal_ones():
    """With probability epsilon an env's action becomes a uniform draw over ITS legal actions."""
    n, a = 3, 5
    explore = _exploration(num_envs=n)
    mask = np.array([[True] * a, [True, False, True, False, False], [False, False, False, True, False]])
    searched = np.array([0, 0, 3], np.int64)
    counts = np.zeros((n, a))
    draws = 4000
    for _ in range(draws):
        out = explore.apply(searched, mask, 0.5)
        assert mask[np.arange(n), out].all() and out.dtype == np.int64
        counts[np.arange(n), out] += 1
    # row 0: with prob 0.5 the searched action 0, else uniform over 5 -> P(0) = 0.6, others 0.1
    assert counts[0] / draws == pytest.approx([0.6, 0.1, 0.1, 0.1, 0.1], abs=0.03)
    assert counts[1, [0, 2]] / draws == pytest.approx([0.75, 0.25], abs=0.03)
    assert counts[2, 3] == draws  # one legal action: always it
    assert explore.apply(searched, mask, 0.0) is searched  # epsilon 0, no option running: nothing drawn


def test_epsilon_greedy_continuous_draws_uniform_points_of_the_box():
    explore = _exploration(num_envs=4000, continuous=True)
    searched = np.full((4000, 2), 0.9, np.float32)
    out = explore.apply(searched, np.ones((4000, 1), bool), 1.0)
    assert out.dtype == np.float32 and out.shape == (4000, 2)
    assert out.min() >= -1.0 and out.max() <= 1.0
    assert out.mean(0) == pytest.approx([0.0, 0.0], abs=0.05)
    assert out.var(0) == pytest.approx([1 / 3, 1 / 3], abs=0.03)


def test_temporally_extended_options_hold_their_action_for_zeta_durations():
    """max_duration > 1: a random action is held for n ~ zeta(2) steps on 1..M (P(n) ~ n^-2)."""
    m, n_envs, steps = 6, 500, 400
    explore = _exploration(num_envs=n_envs, max_duration=m)
    mask = np.ones((n_envs, 4), bool)
    searched = np.full(n_envs, -1, np.int64)  # never a random action: marks "no option"
    runs, current = [], np.zeros(n_envs, np.int64)
    previous = np.full(n_envs, -2, np.int64)
    for _ in range(steps):
        left_before = explore.steps_left.copy()
        out = explore.apply(searched, mask, 0.3)
        started = (left_before == 0) & (out >= 0)
        # an option's action never changes while it runs
        held = left_before > 0
        assert (out[held] == previous[held]).all()
        for i in np.flatnonzero(started):
            if current[i]:
                runs.append(current[i])
            current[i] = 1
        cont = held & (out >= 0)
        current[cont] += 1
        stopped = (out < 0) & (current > 0)
        runs.extend(current[stopped].tolist())
        current[stopped] = 0
        previous = out
    runs = np.array(runs)
    p = np.arange(1, m + 1, dtype=float) ** -2.0
    p /= p.sum()
    freq = np.bincount(runs, minlength=m + 1)[1:] / runs.size
    assert runs.max() <= m and runs.size > 3000
    assert freq == pytest.approx(p, abs=0.02)


def test_options_end_at_episode_end_and_when_their_action_becomes_illegal():
    explore = _exploration(num_envs=2, max_duration=1000)
    explore.apply(np.array([0, 0]), np.ones((2, 3), bool), 1.0)
    explore.steps_left[:] = 50  # both envs inside a long option
    explore.end_episodes(np.array([True, False]))
    assert explore.steps_left.tolist() == [0, 50]
    held = int(explore.held_action[1])
    mask = np.ones((2, 3), bool)
    mask[1, held] = False
    out = explore.apply(np.array([0, 2 if held != 2 else 1]), mask, 0.0)
    assert explore.steps_left[1] == 0 and mask[1, out[1]]  # the illegal option ended: the searched action


def test_epsilon_one_plays_random_actions_and_keeps_the_search_targets(tiny_cfg):
    """epsilon = 1: the played (stored) actions are random, the policy targets and root values
    are the search's own (the search's random stream is not touched by the exploration draws)."""
    cfg = tiny_cfg()
    runs = {}
    for eps in (0.0, 1.0):
        torch.manual_seed(0)
        collector = SegmentCollector(cfg, seed=3)
        owner = _tag_segments_by_env(collector)
        collector.load_snapshot(_random_snapshot(collector, version=1, train_iter=0, seed=0))
        segments = collector.collect(temperature=0.25, epsilon=eps, num_segments=3 * cfg.env.collector_env_num).segments
        first = {}
        for seg in segments:
            first.setdefault(owner[id(seg)], seg)
        runs[eps] = (first, segments)
        collector.close()
    (greedy, _), (explored, explored_all) = runs[0.0], runs[1.0]
    assert set(greedy) == set(explored) == set(range(cfg.env.collector_env_num))
    for env in greedy:  # every env's first step sees its reset observation in both runs: same search output
        np.testing.assert_allclose(explored[env].policy_targets[0], greedy[env].policy_targets[0], rtol=1e-5)
        assert explored[env].root_values[0] == pytest.approx(greedy[env].root_values[0], rel=1e-5)
    acts = np.concatenate([s.actions for s in explored_all])
    assert 0.3 < acts.mean() < 0.7 and acts.size > 50  # CartPole's 2 actions, uniformly at random


def test_temperature_moves_samples_the_opening_and_plays_the_most_visited_after_it(tiny_cfg):
    """``collector.temperature_moves=2``: from each episode's third step on the action is a most
    visited one (the policy target of the pUCT types is the visit distribution); the first two
    steps are sampled, so some of them are not."""
    from lz_tune.workers.collector import step_temperatures

    cfg = tiny_cfg("collector.temperature_moves=2", "mcts.num_simulations=8")
    assert step_temperatures(cfg, 1.0, np.array([0, 1, 2, 7])).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert step_temperatures(tiny_cfg(), 0.5, np.array([0, 9])) == 0.5
    torch.manual_seed(0)
    collector = SegmentCollector(cfg, seed=4)
    collector.load_snapshot(_random_snapshot(collector, version=1, train_iter=0, seed=1))
    segments = collector.collect(temperature=1.0, num_segments=4).segments
    collector.close()
    opening_not_most_visited = 0
    for seg in segments:
        targets = seg.policy_targets
        chosen = targets[np.arange(len(seg.actions)), seg.actions]
        most = chosen >= targets.max(axis=1) - 1e-6
        assert most[seg.timesteps >= 2].all()
        opening_not_most_visited += int((~most[seg.timesteps < 2]).sum())
    assert sum(int((s.timesteps >= 2).sum()) for s in segments) > 20
    assert opening_not_most_visited > 0


def test_temperature_moves_must_not_be_negative(tiny_cfg):
    from lz_tune.config import ConfigError

    with pytest.raises(ConfigError, match="collector.temperature_moves"):
        tiny_cfg("collector.temperature_moves=-1")
