"""n-step value targets on hand-made segments with hand-computed numbers."""

import numpy as np
import pytest

from lz_tune.buffer import GameSegment, n_step_value_targets, plan_value_targets, segment_value_targets
from lz_tune.buffer.targets import chunked_call


def make_segment(rewards, *, num_owned, terminal, root_values=None, frame_stack=1):
    """Vector frames [1]; the frame of position t holds t (history frames hold -1)."""
    m = len(rewards)
    n_obs = m if terminal else m + 1
    frames = np.concatenate([np.full(frame_stack - 1, -1.0), np.arange(n_obs, dtype=np.float64)])[:, None]
    return GameSegment(
        frames=frames.astype(np.float32),
        actions=np.zeros(m, np.int64),
        rewards=np.asarray(rewards, np.float32),
        root_values=np.zeros(m) if root_values is None else np.asarray(root_values),
        pred_values=np.zeros(m),
        policy_targets=np.full((m, 2), 0.5),
        action_mask=np.ones((m, 2), bool),
        to_play=np.full(m, -1),
        timesteps=np.arange(m),
        num_owned=num_owned,
        terminal=terminal,
    )


def ten_times_newest(obs):
    """v(o_t) = 10 t for the segments above."""
    return (10.0 * obs[:, -1]).astype(np.float32)


def test_bootstrap_within_segment_and_into_padding():
    # m = 6, n = 2, non-terminal (n_obs = 7), T = 2, gamma = 0.5
    seg = make_segment([1, 2, 3, 4, 5, 6], num_owned=2, terminal=False)
    z = segment_value_targets(seg, [0, 1, 3, 4], td_steps=2, discount=0.5, value_fn=ten_times_newest)
    expected = [
        1 + 0.5 * 2 + 0.25 * 20,  # t=0 (owned): bootstrap from o_2, the first padding position = 7.0
        2 + 0.5 * 3 + 0.25 * 30,  # t=1: from o_3 (padding) = 11.0
        4 + 0.5 * 5 + 0.25 * 50,  # t=3 (padding): from o_5 = 19.0
        5 + 0.5 * 6 + 0.25 * 60,  # t=4: from o_6, the observation after the last step = 23.0
    ]
    np.testing.assert_allclose(z, expected, rtol=1e-6)
    np.testing.assert_allclose(z, [7.0, 11.0, 19.0, 23.0])


def test_terminal_mask_partial_sums_and_past_end():
    # terminal, m = n_obs = 4, T = 3, gamma = 0.5
    seg = make_segment([1, 2, 3, 4], num_owned=4, terminal=True)
    z = segment_value_targets(seg, [0, 1, 2, 3, 4, 6], td_steps=3, discount=0.5, value_fn=ten_times_newest)
    np.testing.assert_allclose(
        z,
        [
            1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30,  # t+T = 3 < n_obs: bootstrap from o_3 = 6.5
            2 + 0.5 * 3 + 0.25 * 4,  # t+T = 4 = n_obs: no bootstrap, k = 3 = 4.5
            3 + 0.5 * 4,  # k = 2
            4.0,  # k = 1
            0.0,  # past the end
            0.0,
        ],
        rtol=1e-6,
    )


def test_use_root_value():
    seg = make_segment([1, 2, 3, 4], num_owned=4, terminal=True, root_values=[0.1, 0.2, 0.3, 0.4])
    z = segment_value_targets(seg, [0, 1], td_steps=3, discount=0.5, use_root_value=True)
    np.testing.assert_allclose(z, [1 + 1 + 0.75 + 0.125 * 0.4, 4.5], rtol=1e-6)


def test_use_root_value_needs_a_step_at_the_bootstrap_position():
    seg = make_segment([1, 2, 3], num_owned=1, terminal=False)  # t + T = 3 = m: obs but no root value
    with pytest.raises(ValueError, match="t \\+ T < m"):
        segment_value_targets(seg, [1], td_steps=2, discount=0.5, use_root_value=True)


def test_value_fn_called_once_for_all_bootstraps():
    seg = make_segment([1] * 8, num_owned=3, terminal=False)
    calls = []

    def value_fn(obs):
        calls.append(obs.shape)
        return np.zeros(obs.shape[0], np.float32)

    segment_value_targets(seg, np.arange(5), td_steps=3, discount=0.9, value_fn=value_fn)
    assert calls == [(5, 1)]


def test_discount_powers():
    rewards = np.ones((1, 3), np.float32)
    z = n_step_value_targets(rewards, np.ones((1, 3)), np.array([2.0]), np.array([1.0]), discount=0.9)
    np.testing.assert_allclose(z, [1 + 0.9 + 0.81 + 0.729 * 2.0], rtol=1e-6)
    z = n_step_value_targets(rewards, np.array([[1, 1, 0]]), np.array([2.0]), np.array([0.0]), discount=0.9)
    np.testing.assert_allclose(z, [1.9], rtol=1e-6)


def test_plan_masks():
    plan = plan_value_targets(np.array([0, 2, 3, 5]), np.full(4, 4), np.full(4, 5), td_steps=2)
    np.testing.assert_array_equal(plan.reward_mask, [[1, 1], [1, 1], [1, 0], [0, 0]])
    np.testing.assert_array_equal(plan.reward_index, [[0, 1], [2, 3], [3, 3], [3, 3]])
    np.testing.assert_array_equal(plan.bootstrap_mask, [1, 1, 0, 0])  # 2 < 5, 4 < 5, 5, 7
    np.testing.assert_array_equal(plan.bootstrap_position, [2, 4, 4, 4])
    np.testing.assert_array_equal(plan.step_mask, [1, 1, 1, 0])


def test_frame_stack_bootstrap_obs():
    seg = make_segment([1, 2, 3, 4], num_owned=2, terminal=False, frame_stack=3)
    seen = []

    def value_fn(obs):
        seen.append(obs.copy())
        return np.zeros(obs.shape[0], np.float32)

    segment_value_targets(seg, [0], td_steps=1, discount=1.0, value_fn=value_fn)
    np.testing.assert_array_equal(seen[0], [[-1.0, 0.0, 1.0]])  # stack of frames -1..1 ends at o_1


def test_chunked_call():
    calls = []

    def fn(x, y):
        calls.append(x.shape[0])
        return x + y

    out = chunked_call(fn, np.arange(5), np.ones(5), chunk_size=2)
    np.testing.assert_array_equal(out, np.arange(5) + 1)
    assert calls == [2, 2, 1]
