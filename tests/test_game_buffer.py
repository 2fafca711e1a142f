"""GameBuffer: exact push/evict, PER sampling and weights, make_time/clear_time, batches, reanalyze."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lz_tune.algos.targets import make_train_batch
from lz_tune.buffer import GameBuffer, GameSegment, Reanalysis, SampledIndex, SegmentBuilder, segment_value_targets
from lz_tune.buffer.priority import gumbel_top_k, importance_weights, sample_proportional
from lz_tune.buffer.storage import ColumnStore

A = 3


def collect_segments(*, episode_lengths, L, U, T, S, frame_shape=(2,), seed=0):
    """Segments from a SegmentBuilder over random episodes; frames are unique per step."""
    rng = np.random.default_rng(seed)
    builder = SegmentBuilder(segment_length=L, num_unroll_steps=U, td_steps=T, frame_stack=S, action_space_size=A)
    segments, counter = [], 0

    def frame():
        nonlocal counter
        counter += 1
        return np.full(frame_shape, counter, np.float32) + rng.random(frame_shape).astype(np.float32)

    for length in episode_lengths:
        builder.begin_episode(np.stack([frame() for _ in range(S)]))
        for i in range(length):
            visits = rng.dirichlet(np.ones(A)).astype(np.float32)
            mask = rng.random(A) < 0.8
            mask[rng.integers(A)] = True
            segments += builder.add_step(
                action=int(rng.integers(A)),
                reward=float(rng.normal()),
                root_value=float(rng.normal()),
                pred_value=float(rng.normal()),
                policy_target=visits,
                action_mask=mask,
                to_play=int(i % 2),
                timestep=i,
                next_frame=frame(),
                done=i == length - 1,
            )
    return segments


def tiny_segment(num_owned, *, terminal=True, padding=0, value=0.0, pred=None):
    """Vector frames [1], S = 1; `padding` extra steps (non-terminal needs >= U+T)."""
    m = num_owned + padding
    n_obs = m if terminal else m + 1
    return GameSegment(
        frames=np.full((n_obs, 1), value, np.float32),
        actions=np.zeros(m, np.int64),
        rewards=np.ones(m),
        root_values=np.zeros(m),
        pred_values=np.zeros(m) if pred is None else np.asarray(pred),
        policy_targets=np.full((m, A), 1 / A),
        action_mask=np.ones((m, A), bool),
        to_play=np.full(m, -1),
        timesteps=np.arange(m),
        num_owned=num_owned,
        terminal=terminal,
    )


def make_buffer(**overrides):
    kwargs = dict(
        capacity_transitions=1000,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=1,
        action_space_size=A,
        seed=0,
    )
    kwargs.update(overrides)
    return GameBuffer(**kwargs)


def priority_of(buffer, segment_id, position):
    ids, pos, prio = buffer.priorities()
    return prio[(ids == segment_id) & (pos == position)].item()


# -- push / evict ---------------------------------------------------------------------------------
def test_push_registers_exactly_owned_positions():
    segments = collect_segments(episode_lengths=[23, 9, 31], L=5, U=2, T=3, S=2)
    buffer = make_buffer(num_unroll_steps=2, td_steps=3, frame_stack=2)
    buffer.push(segments)
    assert buffer.num_transitions == 23 + 9 + 31 == sum(s.num_owned for s in segments)
    assert buffer.num_segments == len(segments)
    ids, pos, _ = buffer.priorities()
    np.testing.assert_array_equal(ids, np.repeat(np.arange(len(segments)), [s.num_owned for s in segments]))
    np.testing.assert_array_equal(pos, np.concatenate([np.arange(s.num_owned) for s in segments]))
    for seg_id, seg in enumerate(segments):
        stored = buffer.get_segment(seg_id)
        for name in ("frames", "actions", "rewards", "root_values", "policy_targets", "action_mask", "timesteps"):
            np.testing.assert_array_equal(getattr(stored, name), getattr(seg, name))
        assert (stored.num_owned, stored.terminal) == (seg.num_owned, seg.terminal)
    assert buffer.nbytes >= sum(s.nbytes for s in segments)
    buffer.check_invariants()


def test_eviction_removes_exactly_the_oldest_segments_positions():
    segments = collect_segments(episode_lengths=[40, 17, 26], L=6, U=2, T=2, S=1)
    buffer = make_buffer(capacity_transitions=30)
    buffer.push(segments[:3])
    before = buffer.clear_time
    buffer.push(segments[3:])
    assert buffer.clear_time == buffer.time > before
    owned = np.array([s.num_owned for s in segments])
    keep = np.flatnonzero(np.cumsum(owned[::-1]) <= 30)  # newest segments that fit
    kept_ids = len(segments) - 1 - keep[::-1]
    np.testing.assert_array_equal(buffer.segment_ids, kept_ids)
    assert buffer.num_transitions == owned[kept_ids].sum() <= 30
    ids, pos, _ = buffer.priorities()
    for seg_id in kept_ids:  # surviving segments keep all their positions
        np.testing.assert_array_equal(pos[ids == seg_id], np.arange(segments[seg_id].num_owned))
        np.testing.assert_array_equal(buffer.get_segment(seg_id).rewards, segments[seg_id].rewards)
    buffer.check_invariants()
    assert buffer.evict_oldest(1) == owned[kept_ids[0]]
    buffer.check_invariants()


def test_push_validation_is_atomic():
    buffer = make_buffer()
    buffer.push([tiny_segment(3)])
    bad = [
        ([tiny_segment(2), tiny_segment(2, terminal=False, padding=3)], None, "padding"),  # needs U+T = 4
        ([tiny_segment(2)], [np.ones(3)], "expected 2"),
        ([tiny_segment(2)], [np.array([1.0, np.nan])], "finite"),
        ([tiny_segment(2)], [np.array([1.0, -1.0])], ">= 0"),
    ]
    for segments, priorities, match in bad:
        with pytest.raises(ValueError, match=match):
            buffer.push(segments, priorities)
    other = GameSegment(**{**tiny_segment(2).__dict__, "frames": np.zeros((3, 1), np.float32)})  # S = 2
    with pytest.raises(ValueError, match="frame_stack"):
        buffer.push([other])
    assert buffer.num_transitions == 3
    buffer.check_invariants()


def test_new_data_priorities():
    buffer = make_buffer()
    buffer.push([tiny_segment(2)])
    np.testing.assert_array_equal(buffer.priorities()[2], [1.0, 1.0])  # empty buffer: 1.0
    buffer.push([tiny_segment(2)], [np.array([3.0, 0.0])])
    np.testing.assert_array_equal(buffer.priorities()[2], [1.0, 1.0, 3.0, 1e-6])  # 0 floored at eps
    buffer.push([tiny_segment(1)])
    assert buffer.priorities()[2][-1] == 3.0 == buffer.max_priority
    initial = make_buffer(use_max_priority_for_new_data=False)
    initial.push([tiny_segment(2, pred=[0.5, -2.0])])
    np.testing.assert_allclose(initial.priorities()[2], [0.5 + 1e-6, 2.0 + 1e-6])


# -- sampling --------------------------------------------------------------------------------------
def test_sampling_frequencies_follow_p_alpha():
    priorities = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    buffer = make_buffer(alpha=0.6, seed=1)
    buffer.push([tiny_segment(5)], [priorities])
    draws = 20000
    counts = np.zeros(5)
    for _ in range(draws):
        counts[buffer.sample(1).positions[0]] += 1
    expected = priorities**0.6 / (priorities**0.6).sum()
    sigma = np.sqrt(expected * (1 - expected) / draws)
    assert np.all(np.abs(counts / draws - expected) < 5 * sigma), (counts / draws, expected)


@pytest.mark.parametrize("max_rounds", [4, 0])  # 0 forces the Gumbel-top-k path
def test_without_replacement_pair_law(max_rounds):
    """Successive sampling: P(first=i, second=j) = p_i p_j / (1 - p_i)."""
    weights = np.array([1.0, 2.0, 5.0])
    p = weights / weights.sum()
    rng = np.random.default_rng(3)
    draws = 12000
    counts = np.zeros((3, 3))
    for _ in range(draws):
        (i, j), log_probs = sample_proportional(weights, 2, rng, max_rounds=max_rounds)
        counts[i, j] += 1
        np.testing.assert_allclose(np.exp(log_probs), p[[i, j]])
    expected = p[:, None] * p[None, :] / (1 - p[:, None])
    np.fill_diagonal(expected, 0)
    sigma = np.sqrt(expected * (1 - expected) / draws) + 1e-12
    assert np.all(np.abs(counts / draws - expected) <= 5 * sigma)


def test_skewed_weights_fall_back_to_gumbel_and_stay_distinct():
    weights = np.array([1e9] + [1.0] * 50)
    idx, _ = sample_proportional(weights, 51, np.random.default_rng(0))
    np.testing.assert_array_equal(np.sort(idx), np.arange(51))
    assert idx[0] == 0
    assert len(set(gumbel_top_k(np.zeros(10), 10, np.random.default_rng(0)).tolist())) == 10


def test_is_weights_hand_computed():
    # alpha = 1, priorities [1, 4] -> P = [0.2, 0.8], N = 2, beta = 0.5:
    # (2 * 0.2)^-0.5 = 1.5811, (2 * 0.8)^-0.5 = 0.7906 -> / max = [1, 0.5]
    buffer = make_buffer(alpha=1.0, beta=0.5)
    buffer.push([tiny_segment(2)], [np.array([1.0, 4.0])])
    index = buffer.sample(2)
    expected = {0: 1.0, 1: 0.5}
    np.testing.assert_allclose(index.weights, [expected[p] for p in index.positions], rtol=1e-6)
    np.testing.assert_allclose(importance_weights(np.log([0.2, 0.8]), 2, beta=0.5), [1.0, 0.5], rtol=1e-6)
    index = buffer.sample(2, beta=1.0)  # beta override: (0.4)^-1 / (1.6)^-1 = 4 -> [1, 0.25]
    np.testing.assert_allclose(index.weights, [{0: 1.0, 1: 0.25}[p] for p in index.positions], rtol=1e-6)


def test_weights_belong_to_the_exact_sampled_positions():
    segments = collect_segments(episode_lengths=[50, 33], L=8, U=2, T=2, S=1)
    buffer = make_buffer(alpha=0.7, beta=0.4, seed=5)
    rng = np.random.default_rng(0)
    buffer.push(segments, [rng.uniform(0.01, 5.0, s.num_owned) for s in segments])
    ids, pos, prio = buffer.priorities()
    index = buffer.sample(32)
    assert len({(a, b) for a, b in zip(index.segment_ids, index.positions)}) == 32  # no replacement
    lookup = {(a, b): p for a, b, p in zip(ids, pos, prio)}
    p_alpha = prio**0.7
    probs = np.array([lookup[(a, b)] ** 0.7 for a, b in zip(index.segment_ids, index.positions)]) / p_alpha.sum()
    raw = (len(prio) * probs) ** -0.4
    np.testing.assert_allclose(index.weights, raw / raw.max(), rtol=1e-5)


def test_uniform_mode():
    buffer = make_buffer(use_priority=False, seed=2)
    buffer.push([tiny_segment(4)], [np.array([1.0, 1.0, 1.0, 1000.0])])
    counts = np.zeros(4)
    for _ in range(4000):
        index = buffer.sample(2)
        assert index.positions[0] != index.positions[1]
        np.testing.assert_array_equal(index.weights, [1.0, 1.0])
        counts[index.positions] += 1
    np.testing.assert_allclose(counts / counts.sum(), 0.25, atol=0.02)


def test_batch_larger_than_buffer_samples_with_replacement():
    buffer = make_buffer()
    buffer.push([tiny_segment(3)])
    index = buffer.sample(10)
    assert len(index) == 10 and set(index.positions.tolist()) <= {0, 1, 2}


@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_huge_priorities_neither_overflow_sampling_nor_zero_the_weights(alpha):
    """Regression (found by the state machine): priorities near the float64 maximum made the
    sampling CDF overflow to inf, so every draw hit the last item and all IS weights were NaN;
    priorities 1e100 apart rounded the IS weight of the likely items to exactly 0."""
    buffer = make_buffer(alpha=alpha, seed=4)
    buffer.push([tiny_segment(4)], [np.array([1e308, 1e308, 1.0, 1e-3])])
    counts = np.zeros(4)
    for _ in range(200):
        index = buffer.sample(1)
        counts[index.positions[0]] += 1
        assert np.all(np.isfinite(index.weights)) and np.all((index.weights > 0) & (index.weights <= 1))
    assert counts[2] == counts[3] == 0 and counts[0] > 50 and counts[1] > 50
    index = buffer.sample(3)
    assert sorted(index.positions.tolist())[:2] == [0, 1]  # the two huge ones come first
    assert np.all(np.isfinite(index.weights)) and np.all(index.weights > 0) and index.weights.max() == 1.0
    rows, log_probs = sample_proportional(np.array([1e308, 1e308, 1.0]), 2, np.random.default_rng(0))
    np.testing.assert_allclose(np.exp(log_probs), [0.5, 0.5])


# -- priority write-back ---------------------------------------------------------------------------
def test_make_time_clear_time_rule():
    buffer = make_buffer(capacity_transitions=6)
    buffer.push([tiny_segment(3), tiny_segment(3)])
    stale = buffer.sample(4)
    assert stale.make_time == buffer.time > 0
    buffer.push([tiny_segment(3)])  # evicts segment 0
    _, _, before = buffer.priorities()
    assert buffer.update_priorities(stale, np.full(4, 7.0)) == 0
    np.testing.assert_array_equal(buffer.priorities()[2], before)  # nothing landed, not even on survivors

    fresh = buffer.sample(3)
    assert fresh.make_time > buffer.clear_time
    assert buffer.update_priorities(fresh, np.array([5.0, 6.0, 7.0])) == 3
    for seg_id, pos, value in zip(fresh.segment_ids, fresh.positions, [5.0, 6.0, 7.0]):
        assert priority_of(buffer, seg_id, pos) == value
    untouched = set(zip(*buffer.priorities()[:2])) - set(zip(fresh.segment_ids, fresh.positions))
    assert all(priority_of(buffer, s, p) == 1.0 for s, p in untouched)


def test_time_counter_increases_on_every_push_and_sample():
    buffer = make_buffer()
    times = []
    buffer.push([tiny_segment(3)])
    times.append(buffer.time)
    times.append(buffer.sample(2).make_time)
    times.append(buffer.sample(2).make_time)
    buffer.push([])
    times.append(buffer.time)
    assert times == sorted(set(times)) and times[0] > 0


def test_update_priorities_rejects_non_finite_and_floors_zero():
    buffer = make_buffer()
    buffer.push([tiny_segment(3)])
    index = buffer.sample(2)
    for bad in ([np.nan, 1.0], [np.inf, 1.0], [-1.0, 1.0]):
        with pytest.raises(ValueError):
            buffer.update_priorities(index, np.array(bad))
    with pytest.raises(ValueError):
        buffer.update_priorities(index, np.ones(3))
    buffer.update_priorities(index, np.zeros(2))
    assert priority_of(buffer, index.segment_ids[0], index.positions[0]) == buffer.priority_eps
    buffer.check_invariants()


# -- property test -----------------------------------------------------------------------------------
operation = st.one_of(
    st.tuples(
        st.just("push"), st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=0, max_size=3), st.booleans()
    ),
    st.tuples(st.just("sample"), st.integers(1, 8)),
    st.tuples(st.just("update"), st.integers(0, 10**6), st.floats(0.0, 50.0)),
    st.tuples(st.just("evict"), st.integers(0, 2)),
)


@settings(max_examples=120, deadline=None)
@given(ops=st.lists(operation, min_size=1, max_size=30), capacity=st.integers(1, 14), seed=st.integers(0, 99))
def test_random_operation_sequences(ops, capacity, seed):
    U, T = 1, 1
    buffer = make_buffer(capacity_transitions=capacity, num_unroll_steps=U, td_steps=T, seed=seed)
    model = {}  # segment id -> priorities of its owned positions (what the buffer must hold)
    owned = {}
    next_id, clear_time = 0, 0
    outstanding = []
    rng = np.random.default_rng(seed)
    for op in ops:
        if op[0] == "push":
            specs, give = op[1], op[2]
            segments = [tiny_segment(n, terminal=term, padding=0 if term else U + T) for n, term in specs]
            prios = [rng.uniform(0.0, 3.0, s.num_owned) for s in segments] if give else None
            new_priority = max((p.max() for p in model.values()), default=1.0)
            buffer.push(segments, prios)
            for i, seg in enumerate(segments):
                model[next_id] = np.maximum(prios[i], 1e-6) if give else np.full(seg.num_owned, new_priority)
                owned[next_id] = seg.num_owned
                next_id += 1
            if sum(owned[i] for i in model) > capacity:
                while sum(owned[i] for i in model) > capacity:
                    del model[min(model)]
                clear_time = buffer.time
        elif op[0] == "sample" and model:
            index = buffer.sample(op[1])
            assert all(s in model for s in index.segment_ids)
            assert np.all(index.positions < np.array([owned[s] for s in index.segment_ids]))
            if op[1] <= buffer.num_transitions:
                assert len(set(zip(index.segment_ids, index.positions))) == op[1]
            assert np.all((index.weights > 0) & (index.weights <= 1))
            outstanding.append(index)
        elif op[0] == "update" and outstanding:
            index = outstanding[op[1] % len(outstanding)]
            new = np.full(len(index), op[2])
            written = buffer.update_priorities(index, new)
            if index.make_time > clear_time:
                assert written == len(index)
                for s, p in zip(index.segment_ids, index.positions):
                    model[s][p] = max(op[2], 1e-6)
            else:
                assert written == 0
        elif op[0] == "evict":
            removed = buffer.evict_oldest(op[1])
            victims = sorted(model)[: op[1]]
            assert removed == sum(owned[v] for v in victims)
            for v in victims:
                del model[v]
            if victims:
                clear_time = buffer.time
        # invariants after every operation
        buffer.check_invariants()
        assert buffer.num_transitions <= capacity
        assert buffer.clear_time == clear_time
        np.testing.assert_array_equal(buffer.segment_ids, sorted(model))
        ids, pos, prio = buffer.priorities()
        expected_prio = np.concatenate([model[s] for s in sorted(model)]) if model else np.zeros(0)
        np.testing.assert_allclose(prio, expected_prio)
        np.testing.assert_array_equal(ids, np.repeat(sorted(model), [owned[s] for s in sorted(model)]).astype(int))
        assert np.all(np.isfinite(prio)) and np.all(prio > 0)


def test_column_store_keeps_logical_indices_over_compaction():
    store = ColumnStore(slack=0.25)
    values = []
    rng = np.random.default_rng(0)
    for _ in range(300):
        count = int(rng.integers(0, 7))
        first = store.append(x=np.arange(len(values), len(values) + count), y=np.ones((count, 2)))
        assert first == len(values)
        values.extend(range(len(values), len(values) + count))
        drop = int(rng.integers(0, len(store) + 1)) if rng.random() < 0.5 else 0
        store.drop_front(drop)
        live = store.live("x")
        np.testing.assert_array_equal(live, np.arange(store.first, store.end))
        np.testing.assert_array_equal(store.array("x")[store.first - store.base : store.end - store.base], live)
        assert store.array("x").shape[0] <= max(64, 1.25 * 60 + 16)  # live rows stay small here


# -- batches -------------------------------------------------------------------------------------
def newest_frame_mean(obs):
    """A deterministic 'target network': mean of the newest frame."""
    per_frame = obs.reshape(obs.shape[0], -1)
    return per_frame[:, -per_frame.shape[1] // 4 :].mean(1).astype(np.float32)


@pytest.mark.parametrize(
    "frame_shape,S,U,T",
    [((4,), 1, 5, 5), ((1, 8, 8), 4, 3, 2)],
)
def test_make_batch_matches_segments(frame_shape, S, U, T):
    segments = collect_segments(episode_lengths=[37, 3, 60, 12], L=10, U=U, T=T, S=S, frame_shape=frame_shape)
    buffer = make_buffer(num_unroll_steps=U, td_steps=T, frame_stack=S, discount=0.95)
    buffer.push(segments)
    index = buffer.sample(48)
    batch = make_train_batch(buffer, index, value_fn=newest_frame_mean)
    obs_shape = (S * frame_shape[0],) + frame_shape[1:]
    assert batch.obs.shape == (48, U + 1) + obs_shape
    assert batch.actions.shape == (48, U) and batch.actions.dtype == np.int64
    assert batch.target_value.shape == batch.mask.shape == (48, U + 1)
    assert batch.target_reward.shape == (48, U) and batch.target_policy.shape == (48, U + 1, A)
    assert batch.target_value.dtype == batch.target_reward.dtype == batch.target_policy.dtype == np.float32
    np.testing.assert_array_equal(batch.weights, index.weights)
    root_batch = make_train_batch(buffer, index, value_fn=None, use_root_value=True)
    saw_past_end = False
    for b, (seg_id, t) in enumerate(zip(index.segment_ids, index.positions)):
        seg = segments[seg_id]
        for k in range(U + 1):
            p = t + k
            if p < seg.num_obs:
                np.testing.assert_array_equal(batch.obs[b, k], seg.obs(p))
            else:
                assert not batch.obs[b, k].any()
            if p < seg.num_steps:
                assert batch.mask[b, k] == 1
                np.testing.assert_array_equal(batch.target_policy[b, k], seg.policy_targets[p])
                np.testing.assert_array_equal(batch.action_mask[b, k], seg.action_mask[p])
                if k < U:
                    assert batch.actions[b, k] == seg.actions[p]
                    assert batch.target_reward[b, k] == seg.rewards[p]
            else:
                saw_past_end = True
                assert batch.mask[b, k] == 0 and not batch.target_policy[b, k].any()
                assert batch.to_play[b, k] == -1 and batch.action_mask[b, k].all()
                if k < U:
                    assert batch.target_reward[b, k] == 0 and 0 <= batch.actions[b, k] < A
        positions = t + np.arange(U + 1)
        expected = segment_value_targets(seg, positions, td_steps=T, discount=0.95, value_fn=newest_frame_mean)
        np.testing.assert_allclose(batch.target_value[b], expected, rtol=1e-5, atol=1e-6)
        expected = segment_value_targets(seg, positions, td_steps=T, discount=0.95, use_root_value=True)
        np.testing.assert_allclose(root_batch.target_value[b], expected, rtol=1e-5, atol=1e-6)
    assert saw_past_end  # the 3-step episode guarantees positions past a terminal end


def test_value_fn_called_once_per_batch_or_in_chunks():
    segments = collect_segments(episode_lengths=[80], L=10, U=3, T=3, S=2)
    calls = []

    def value_fn(obs):
        calls.append(obs.shape[0])
        return np.zeros(obs.shape[0], np.float32)

    buffer = make_buffer(num_unroll_steps=3, td_steps=3, frame_stack=2)
    buffer.push(segments)
    make_train_batch(buffer, buffer.sample(16), value_fn=value_fn)
    assert len(calls) == 1 and calls[0] <= 16 * 4  # distinct bootstrap observations only
    chunked = make_buffer(num_unroll_steps=3, td_steps=3, frame_stack=2, mini_infer_size=5)
    chunked.push(segments)
    calls.clear()
    make_train_batch(chunked, chunked.sample(16), value_fn=value_fn)
    assert max(calls) <= 5 and len(calls) == -(-sum(calls) // 5)


def test_reanalyze_ratio_replaces_exactly_the_first_rows():
    segments = collect_segments(episode_lengths=[30, 2, 41], L=6, U=3, T=2, S=1)
    buffer = make_buffer(num_unroll_steps=3, td_steps=2)
    buffer.push(segments)
    seen = []

    def reanalyze_fn(obs, action_mask, to_play):
        seen.append((obs.shape, action_mask.shape, to_play.shape))
        out = np.zeros((obs.shape[0], A), np.float32)
        out[:, -1] = 1.0
        return Reanalysis(out, np.zeros(obs.shape[0], np.float32))

    index = buffer.sample(20)
    plain = make_train_batch(buffer, index, value_fn=newest_frame_mean)
    batch = make_train_batch(buffer, index, value_fn=newest_frame_mean, reanalyze_fn=reanalyze_fn, reanalyze_ratio=0.3)
    assert batch.num_reanalyzed == 6
    valid = plain.mask[:6] > 0
    assert seen[0][0][0] == valid.sum() and seen[0][1] == (valid.sum(), A) and seen[0][2] == (valid.sum(),)
    np.testing.assert_array_equal(batch.target_policy[:6][valid], np.tile([0, 0, 1], (valid.sum(), 1)))
    assert not batch.target_policy[:6][~valid].any()
    np.testing.assert_array_equal(batch.target_policy[6:], plain.target_policy[6:])
    for seg_id in buffer.segment_ids:  # stored data untouched
        np.testing.assert_array_equal(buffer.get_segment(seg_id).policy_targets, segments[seg_id].policy_targets)
    with pytest.raises(ValueError):
        make_train_batch(buffer, index, value_fn=newest_frame_mean, reanalyze_ratio=0.5)


@pytest.mark.parametrize("write_root_values", [True, False])
def test_reanalyze_segments_replaces_chosen_segments_only(write_root_values):
    """The chosen segments get the new policy targets; their root values too only with
    ``write_root_values`` (LightZero's MuZero buffer leaves them, its EfficientZero buffer writes them)."""
    segments = collect_segments(episode_lengths=[30, 25, 44], L=5, U=2, T=2, S=2)
    buffer = make_buffer(frame_stack=2)
    buffer.push(segments)
    originals = [s.policy_targets.copy() for s in segments]

    def fn(obs, action_mask, to_play):
        visits = np.zeros((obs.shape[0], A), np.float32)
        visits[:, 0] = 1.0
        return Reanalysis(visits, np.full(obs.shape[0], 42.0, np.float32))

    chosen = buffer.choose_stale_segments(num_segments=3, partition=0.5, rng=np.random.default_rng(0))
    assert len(chosen) == 3 and np.all(chosen < int(0.5 * len(segments)))  # among the oldest half
    assert np.array_equal(chosen, np.sort(chosen))
    buffer.reanalyze_segments(chosen, fn, write_root_values=write_root_values)
    for seg_id in buffer.segment_ids:
        stored = buffer.get_segment(seg_id)
        if seg_id in chosen:
            assert np.all(stored.policy_targets[:, 0] == 1.0)
            if write_root_values:
                assert np.all(stored.root_values == 42.0)
            else:
                np.testing.assert_array_equal(stored.root_values, segments[seg_id].root_values)
        else:
            np.testing.assert_array_equal(stored.root_values, segments[seg_id].root_values)
        np.testing.assert_array_equal(segments[seg_id].policy_targets, originals[seg_id])  # caller's copies
    counts = buffer.reanalyze_counts()
    assert counts[chosen].tolist() == [1, 1, 1] and counts.sum() == 3


def test_stale_segments_are_the_least_reanalysed_not_the_oldest():
    """The reference weights the oldest partition by exp(-(100 / P) * reanalyze_count): a segment
    reanalysed once is e^10 times less likely than a fresh one at P = 10, whatever its age. A
    weighting by age rank (what this project did before) picks the very oldest instead."""
    segments = collect_segments(episode_lengths=[200], L=5, U=2, T=2, S=1)[:10]
    buffer = make_buffer(frame_stack=1)
    buffer.push(segments)
    rng = np.random.default_rng(3)
    first = buffer.choose_stale_segments(num_segments=5, partition=1.0, rng=rng)
    assert len(first) == 5  # all weights equal: any 5
    second = buffer.choose_stale_segments(num_segments=5, partition=1.0, rng=rng)
    assert set(second.tolist()) == set(range(10)) - set(first.tolist())  # the 5 never reanalysed
    np.testing.assert_array_equal(buffer.reanalyze_counts(), np.ones(10))
    # the partition is int(P * live) oldest segments (the reference's floor): 0.35 * 10 -> 3
    third = buffer.choose_stale_segments(num_segments=5, partition=0.35, rng=rng)
    np.testing.assert_array_equal(third, [0, 1, 2])
    # golden probabilities: 4 segments, counts [2, 0, 0, 1] -> weights exp(-25 c); over many draws of
    # one segment, the count-1 segment is chosen with probability e^-25 / (2 + e^-25 + e^-50) ~ 0
    small = make_buffer(frame_stack=1)
    small.push(segments[:4])
    picks = []
    for _ in range(200):
        small.tables.segments.live("reanalyze_count")[:] = [2, 0, 0, 1]  # (each draw counts its pick: reset)
        picks.append(int(small.choose_stale_segments(num_segments=1, partition=1.0, rng=rng)[0]))
    assert set(picks) <= {1, 2, 3} and picks.count(3) <= 1 and min(picks.count(1), picks.count(2)) > 60


def test_reanalyze_sizes_follow_the_reference():
    from lz_tune.buffer.reanalysis import segments_for_sequences

    # reanalyze_batch_size counts sequences of U steps; a segment holds L // U of them
    assert segments_for_sequences(160, game_segment_length=20, num_unroll_steps=5) == 40
    assert segments_for_sequences(2000, game_segment_length=400, num_unroll_steps=5) == 25
    assert segments_for_sequences(10, game_segment_length=20, num_unroll_steps=5) == 2 + 2  # + one per remainder
    assert segments_for_sequences(3, game_segment_length=4, num_unroll_steps=0) == 0 + 3  # U = 0: as U = 1
    segments = collect_segments(episode_lengths=[60], L=5, U=2, T=2, S=1)
    buffer = make_buffer(frame_stack=1)
    buffer.push(segments)
    n = buffer.num_transitions
    assert n == 60
    # N // U > int(sequences / partition): 30 > int(29 / 1.0) but not 30 > int(30 / 1.0)
    assert buffer.enough_for_reanalysis(num_sequences=29, partition=1.0)
    assert not buffer.enough_for_reanalysis(num_sequences=30, partition=1.0)
    assert buffer.enough_for_reanalysis(num_sequences=22, partition=0.75)  # int(29.3) = 29
    assert not buffer.enough_for_reanalysis(num_sequences=23, partition=0.75)  # int(30.7) = 30


def test_state_dict_round_trip():
    segments = collect_segments(episode_lengths=[33, 21], L=6, U=2, T=2, S=2, frame_shape=(1, 3, 3))
    buffer = make_buffer(capacity_transitions=40, frame_stack=2, seed=7)
    buffer.push(segments)
    index = buffer.sample(8)
    buffer.update_priorities(index, np.linspace(0.1, 3.0, 8))
    state = pickle.loads(pickle.dumps(buffer.state_dict()))
    clone = make_buffer(capacity_transitions=40, frame_stack=2, seed=123)
    clone.load_state_dict(state)
    clone.check_invariants()
    for a, b in zip(buffer.priorities(), clone.priorities()):
        np.testing.assert_array_equal(a, b)
    assert (clone.time, clone.clear_time, clone.num_segments) == (buffer.time, buffer.clear_time, buffer.num_segments)
    i1, i2 = buffer.sample(8), clone.sample(8)
    np.testing.assert_array_equal(i1.segment_ids, i2.segment_ids)
    np.testing.assert_array_equal(i1.positions, i2.positions)
    b1 = make_train_batch(buffer, i1, value_fn=newest_frame_mean)
    b2 = make_train_batch(clone, i2, value_fn=newest_frame_mean)
    np.testing.assert_array_equal(b1.obs, b2.obs)
    np.testing.assert_array_equal(b1.target_value, b2.target_value)
    clone.push(collect_segments(episode_lengths=[9], L=6, U=2, T=2, S=2, frame_shape=(1, 3, 3), seed=1))
    clone.check_invariants()
    with pytest.raises(ValueError, match="saved with"):
        make_buffer(frame_stack=2, td_steps=3).load_state_dict(state)


def test_stale_index_in_make_batch_raises():
    buffer = make_buffer(capacity_transitions=3)
    buffer.push([tiny_segment(3)])
    index = buffer.sample(2)
    buffer.push([tiny_segment(3)])
    with pytest.raises(KeyError):
        make_train_batch(buffer, index, value_fn=newest_frame_mean)
    assert isinstance(index, SampledIndex)


# -- stateful property test ---------------------------------------------------------------------------
# A rule-based state machine drives one GameBuffer (drawn shape: capacity, U, T, S, PER settings)
# through random push / sample / update_priorities / evict / make_batch / reanalyze / checkpoint
# round-trip sequences and checks it against a plain-Python model after every step.

from hypothesis import HealthCheck  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule  # noqa: E402

EPS = 1e-6
SLACK = 0.25  # ColumnStore's default: physical rows <= ceil((1 + slack) * peak live rows) + 1

segment_spec = st.tuples(st.integers(1, 6), st.booleans(), st.integers(0, 2))  # (owned, terminal, extra padding)
priority_value = st.one_of(st.just(0.0), st.floats(1e-9, 10.0), st.floats(10.0, 1e300))


class GameBufferMachine(RuleBasedStateMachine):
    @initialize(
        capacity=st.integers(1, 30),
        U=st.integers(0, 2),
        T=st.integers(1, 2),
        S=st.integers(1, 2),
        use_priority=st.booleans(),
        alpha=st.sampled_from([0.0, 0.6, 1.0]),
        use_max=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def setup(self, capacity, U, T, S, use_priority, alpha, use_max, seed):
        self.kwargs = dict(
            num_unroll_steps=U,
            td_steps=T,
            discount=0.9,
            frame_stack=S,
            action_space_size=A,
            use_priority=use_priority,
            alpha=alpha,
            beta=0.4,
            priority_eps=EPS,
            use_max_priority_for_new_data=use_max,
            mini_infer_size=4,
        )
        self.capacity = capacity
        self.buffer = GameBuffer(capacity_transitions=capacity, seed=seed, **self.kwargs)
        self.U, self.T, self.S = U, T, S
        self.rng = np.random.default_rng(seed)
        self.segments: dict[int, GameSegment] = {}  # live segment id -> what it must hold
        self.prio: dict[int, np.ndarray] = {}  # live segment id -> priorities of its owned positions
        self.next_id = 0
        self.time = 0
        self.clear_time = 0
        self.outstanding: list[SampledIndex] = []
        self.peak = {"steps": 0, "frames": 0, "positions": 0, "segments": 0}
        self.counter = 0.0

    # ---------------------------------------------------------------------------- model helpers
    def _rows(self, segs) -> dict[str, int]:
        segs = list(segs)
        return {
            "steps": sum(s.num_steps for s in segs),
            "frames": sum(s.num_obs + self.S - 1 for s in segs),
            "positions": sum(s.num_owned for s in segs),
            "segments": len(segs),
        }

    def _make_segment(self, owned, terminal, extra) -> GameSegment:
        m = owned + extra + (0 if terminal else self.U + self.T)
        n_obs = m if terminal else m + 1
        base = self.counter
        self.counter += 1000.0
        visits = self.rng.dirichlet(np.ones(A), size=m).astype(np.float32)
        return GameSegment(
            frames=(base + np.arange(self.S - 1 + n_obs, dtype=np.float32))[:, None].repeat(2, 1),
            actions=self.rng.integers(0, A, m),
            rewards=base + np.arange(m, dtype=np.float32),
            root_values=self.rng.normal(size=m),
            pred_values=self.rng.normal(size=m),
            policy_targets=visits,
            action_mask=np.ones((m, A), bool),
            to_play=np.full(m, -1),
            timesteps=np.arange(m),
            num_owned=owned,
            terminal=terminal,
        )

    def _evict_model_to(self, capacity: int) -> None:
        evicted = False
        while sum(s.num_owned for s in self.segments.values()) > capacity:
            oldest = min(self.segments)
            del self.segments[oldest], self.prio[oldest]
            evicted = True
        if evicted:
            self.clear_time = self.time

    def _max_priority(self) -> float:
        return max((float(p.max()) for p in self.prio.values()), default=1.0)

    # ---------------------------------------------------------------------------- rules
    @rule(specs=st.lists(segment_spec, max_size=4), give=st.booleans(), data=st.data())
    def push(self, specs, give, data):
        segments = [self._make_segment(*spec) for spec in specs]
        prios = (
            [
                np.array(data.draw(st.lists(priority_value, min_size=s.num_owned, max_size=s.num_owned)))
                for s in segments
            ]
            if give
            else None
        )
        new_priority = self._max_priority()
        live_before = self._rows(self.segments.values())
        self.buffer.push(segments, prios)
        self.time += 1
        for k, v in self._rows(segments).items():
            self.peak[k] = max(self.peak[k], live_before[k] + v)
        for i, seg in enumerate(segments):
            if give:
                p = np.maximum(prios[i], EPS)
            elif self.kwargs["use_max_priority_for_new_data"]:
                p = np.full(seg.num_owned, new_priority)
            else:
                p = seg.initial_priorities(EPS).astype(np.float64)
            self.segments[self.next_id], self.prio[self.next_id] = seg, p
            self.next_id += 1
        self._evict_model_to(self.capacity)

    @rule(batch_size=st.integers(1, 12), beta=st.sampled_from([None, 0.0, 1.0]))
    def sample(self, batch_size, beta):
        if not self.segments:
            with pytest.raises(ValueError, match="empty"):
                self.buffer.sample(batch_size)
            return  # nothing happened: time unchanged (checked by the invariant)
        index = self.buffer.sample(batch_size, beta=beta)
        self.time += 1
        assert index.make_time == self.time and len(index) == batch_size
        for s, p in zip(index.segment_ids.tolist(), index.positions.tolist()):
            assert s in self.segments and 0 <= p < self.segments[s].num_owned  # owned positions only
        n = sum(s.num_owned for s in self.segments.values())
        if batch_size <= n:
            assert len(set(zip(index.segment_ids.tolist(), index.positions.tolist()))) == batch_size
        assert np.all(np.isfinite(index.weights)) and np.all((index.weights > 0) & (index.weights <= 1))
        self.outstanding = (self.outstanding + [index])[-8:]

    @precondition(lambda self: self.outstanding)
    @rule(which=st.integers(0, 7), data=st.data())
    def update_priorities(self, which, data):
        index = self.outstanding[which % len(self.outstanding)]
        new = np.array(data.draw(st.lists(priority_value, min_size=len(index), max_size=len(index))))
        written = self.buffer.update_priorities(index, new)
        if index.make_time <= self.clear_time:  # an eviction happened since the sample: nothing lands
            assert written == 0
            return
        assert written == len(index)
        for s, p, v in zip(index.segment_ids.tolist(), index.positions.tolist(), new):
            self.prio[s][p] = max(v, EPS)  # duplicates (B > N): the last write wins, as in numpy

    @precondition(lambda self: self.outstanding)
    @rule(which=st.integers(0, 7), bad=st.sampled_from([np.nan, np.inf, -np.inf, -1.0]), row=st.integers(0, 11))
    def update_priorities_rejects_bad_values(self, which, bad, row):
        index = self.outstanding[which % len(self.outstanding)]
        new = np.ones(len(index))
        new[row % len(index)] = bad
        with pytest.raises(ValueError):
            self.buffer.update_priorities(index, new)  # and nothing at all was written (invariant)

    @rule(count=st.integers(0, 3))
    def evict_oldest(self, count):
        victims = sorted(self.segments)[:count]
        removed = self.buffer.evict_oldest(count)
        self.time += 1
        assert removed == sum(self.segments[v].num_owned for v in victims)
        for v in victims:
            del self.segments[v], self.prio[v]
        if victims:
            self.clear_time = self.time

    @precondition(lambda self: self.outstanding)
    @rule(which=st.integers(0, 7), use_root_value=st.booleans())
    def make_batch(self, which, use_root_value):
        index = self.outstanding[which % len(self.outstanding)]
        value_fn = None if use_root_value else (lambda obs: obs.reshape(obs.shape[0], -1).mean(1))
        if not all(s in self.segments for s in index.segment_ids.tolist()):
            with pytest.raises(KeyError):
                make_train_batch(self.buffer, index, value_fn=value_fn, use_root_value=use_root_value)
            return
        batch = make_train_batch(self.buffer, index, value_fn=value_fn, use_root_value=use_root_value)
        U = self.U
        assert batch.obs.shape == (len(index), U + 1, 2 * self.S)
        assert np.all(np.isfinite(batch.target_value)) and np.all(np.isfinite(batch.target_reward))
        for b, (s, p) in enumerate(zip(index.segment_ids.tolist(), index.positions.tolist())):
            seg = self.segments[s]
            np.testing.assert_array_equal(batch.obs[b, 0], seg.obs(p))  # the exact position sampled
            if U:
                assert batch.target_reward[b, 0] == seg.rewards[p]

    @precondition(lambda self: self.segments)
    @rule(count=st.integers(1, 3), fraction=st.sampled_from([0.5, 1.0]))
    def reanalyze_stale(self, count, fraction):
        def fn(obs, action_mask, to_play):
            visits = np.zeros((obs.shape[0], A), np.float32)
            visits[:, 1] = 1.0
            return Reanalysis(visits, obs.reshape(obs.shape[0], -1)[:, -1].astype(np.float32))  # newest frame's value

        chosen = self.buffer.choose_stale_segments(num_segments=count, partition=fraction, rng=np.random.default_rng(0))
        self.buffer.reanalyze_segments(chosen, fn)
        assert len(set(chosen.tolist())) == len(chosen) <= count
        for s in chosen.tolist():
            seg = self.segments[s]
            m = seg.num_steps
            visits = np.zeros((m, A), np.float32)
            visits[:, 1] = 1.0
            newest = seg.frames[self.S - 1 : self.S - 1 + m, -1].astype(np.float32)
            self.segments[s] = GameSegment(**{**seg.__dict__, "policy_targets": visits, "root_values": newest})

    @rule(new_capacity=st.integers(1, 30))
    def checkpoint_round_trip(self, new_capacity):
        state = pickle.loads(pickle.dumps(self.buffer.state_dict()))
        clone = GameBuffer(capacity_transitions=new_capacity, seed=None, **self.kwargs)
        clone.load_state_dict(state)
        self.buffer, self.capacity = clone, new_capacity
        self.peak = {k: 0 for k in self.peak}  # a new set of arrays
        live = self._rows(self.segments.values())
        for k in self.peak:
            self.peak[k] = live[k]
        if sum(s.num_owned for s in self.segments.values()) > new_capacity:
            self.time += 1  # load_state_dict evicts as one timed call
            self._evict_model_to(new_capacity)

    # ---------------------------------------------------------------------------- invariants
    @invariant()
    def aligned_and_consistent(self):
        if not hasattr(self, "buffer"):
            return
        buf = self.buffer
        buf.check_invariants()
        ids = sorted(self.segments)
        live = self._rows(self.segments[s] for s in ids)
        # every table holds exactly the rows of the live segments
        for name, store in (
            ("steps", buf.tables.steps),
            ("frames", buf.tables.frames),
            ("positions", buf.tables.positions),
            ("segments", buf.tables.segments),
        ):
            assert len(store) == live[name], name
        assert buf.num_transitions == live["positions"] <= self.capacity
        assert (buf.time, buf.clear_time) == (self.time, self.clear_time)
        np.testing.assert_array_equal(buf.segment_ids, ids)
        # no segment lost or gained a position; priorities are the model's, positive and finite
        seg_ids, positions, prio = buf.priorities()
        counts = [self.segments[s].num_owned for s in ids]
        np.testing.assert_array_equal(seg_ids, np.repeat(np.array(ids, dtype=np.int64), counts))
        np.testing.assert_array_equal(positions, np.concatenate([np.arange(c) for c in counts]) if ids else [])
        np.testing.assert_array_equal(prio, np.concatenate([self.prio[s] for s in ids]) if ids else [])
        assert np.all(np.isfinite(prio)) and np.all(prio > 0)
        # every live segment still holds exactly what was pushed (or last reanalysed)
        for s in ids:
            stored, seg = buf.get_segment(s), self.segments[s]
            for name in ("frames", "actions", "rewards", "root_values", "policy_targets", "action_mask", "timesteps"):
                np.testing.assert_array_equal(getattr(stored, name), getattr(seg, name), err_msg=name)
            assert (stored.num_owned, stored.terminal) == (seg.num_owned, seg.terminal)
        # bytes: what the arrays allocate, at least the live rows, at most the peak plus slack
        stores = {
            "steps": buf.tables.steps,
            "frames": buf.tables.frames,
            "positions": buf.tables.positions,
            "segments": buf.tables.segments,
        }
        assert buf.nbytes == sum(a.nbytes for st_ in stores.values() for a in st_._arrays.values())
        for name, store in stores.items():
            if not store.names:
                continue
            physical = store.array(store.names[0]).shape[0]
            row_bytes = sum(store.array(n)[:1].nbytes if physical else 0 for n in store.names)
            assert store.nbytes == physical * row_bytes
            assert live[name] <= physical <= int(np.ceil((1 + SLACK) * self.peak[name])) + 1, (name, physical)


GameBufferMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
test_game_buffer_state_machine = GameBufferMachine.TestCase
