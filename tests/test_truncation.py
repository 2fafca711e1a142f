"""A time limit is not a terminal state: value targets of a truncated episode bootstrap from its
last observation (kept by the env before its autoreset), with the discount of the steps actually
left; terminated episodes still do not bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from lz_tune.buffer import GameBuffer, GameSegment, SampledIndex, segment_value_targets
from lz_tune.config import Config
from lz_tune.workers import SegmentCollector


def _segment(rewards, *, terminal=False, truncated=False):
    """Vector frames [1]; the frame of position t holds t."""
    m = len(rewards)
    n_obs = m if terminal else m + 1
    return GameSegment(
        frames=np.arange(n_obs, dtype=np.float32)[:, None],
        actions=np.zeros(m, np.int64),
        rewards=np.asarray(rewards, np.float32),
        root_values=np.full(m, 100.0),
        pred_values=np.zeros(m),
        policy_targets=np.full((m, 2), 0.5),
        action_mask=np.ones((m, 2), bool),
        to_play=np.full(m, -1),
        timesteps=np.arange(m),
        num_owned=m,
        terminal=terminal,
        truncated=truncated,
    )


def ten_times_newest(obs):
    return (10.0 * obs[:, -1]).astype(np.float32)


def test_truncated_segment_bootstraps_every_position_from_what_is_left():
    # m = 4 rewards, last observation o_4 stored, T = 3, gamma = 0.5: v(o_t) = 10 t
    seg = _segment([1, 2, 3, 4], truncated=True)
    z = segment_value_targets(seg, [0, 1, 2, 3, 4], td_steps=3, discount=0.5, value_fn=ten_times_newest)
    expected = [
        1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30,  # t=0: full n-step, bootstrap from o_3
        2 + 0.5 * 3 + 0.25 * 4 + 0.125 * 40,  # t=1: t + T = 4 = m, from o_4 (as for a cut segment)
        3 + 0.5 * 4 + 0.25 * 40,  # t=2: 2 steps left, from o_4 with gamma^2
        4 + 0.5 * 40,  # t=3: 1 step left, from o_4 with gamma^1
        0.0,  # t=4 >= m: absorbing, as past any end
    ]
    np.testing.assert_allclose(z, expected, rtol=1e-6)
    # the same episode ending in a terminal state: no bootstrap once t + T reaches the end
    terminal = _segment([1, 2, 3, 4], terminal=True)
    zt = segment_value_targets(terminal, [0, 2, 3], td_steps=3, discount=0.5, value_fn=ten_times_newest)
    np.testing.assert_allclose(zt, [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30, 3 + 0.5 * 4, 4.0], rtol=1e-6)


def test_buffer_targets_match_the_segment_targets_and_survive_save_load():
    seg = _segment([1, 2, 3, 4], truncated=True)
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=2,
        td_steps=3,
        discount=0.5,
        frame_stack=1,
        action_space_size=2,
        seed=0,
    )
    buffer.push([seg])  # no padding needed: the episode ends here
    index = SampledIndex(
        segment_ids=np.zeros(4, np.int64), positions=np.arange(4), weights=np.ones(4), make_time=buffer.time
    )
    win = buffer.gather_window(index)
    z = buffer.n_step_values(win, value_fn=ten_times_newest)
    expected = segment_value_targets(
        seg, (np.arange(4)[:, None] + np.arange(3)).ravel(), td_steps=3, discount=0.5, value_fn=ten_times_newest
    ).reshape(4, 3)
    np.testing.assert_allclose(z, expected, rtol=1e-6)
    # with use_root_value there is no root value at the stored last observation: no bootstrap there
    zr = buffer.n_step_values(win, value_fn=None, use_root_value=True)
    np.testing.assert_allclose(
        zr[:, 0], [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 100, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4, 4.0], rtol=1e-6
    )
    other = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=2,
        td_steps=3,
        discount=0.5,
        frame_stack=1,
        action_space_size=2,
        seed=0,
    )
    other.load_state_dict(buffer.state_dict())
    assert other.get_segment(0).truncated
    np.testing.assert_allclose(other.n_step_values(other.gather_window(index), value_fn=ten_times_newest), z)


def test_segment_cannot_be_terminal_and_truncated():
    with pytest.raises(ValueError, match="not both"):
        _segment([1.0], terminal=True, truncated=True)


def test_collector_keeps_the_last_observation_of_a_truncated_episode():
    cfg = Config().with_updates(
        {
            "env.env_id": "CartPole-v1",
            "env.max_episode_steps": 7,
            "env.collector_env_num": 2,
            "mcts.num_simulations": 2,
            "model.latent_dim": 8,
            "model.hidden_sizes": (8,),
            "buffer.game_segment_length": 50,
        }
    )
    collector = SegmentCollector(cfg, seed=3)
    try:
        segments = collector.collect(temperature=1.0, num_segments=4).segments
    finally:
        collector.close()
    truncated = [s for s in segments if s.truncated]
    assert truncated and all(not s.terminal for s in truncated)
    for s in truncated:  # 7 steps (the time limit), 8 observations: the one reached at the limit kept
        assert s.num_steps == 7 and s.num_obs == 8 and s.frames.shape[0] == 8
        assert not np.array_equal(s.frames[-1], s.frames[-2])
    # CartPole falling over before 7 steps is a real terminal state: no observation kept
    assert all(s.terminal for s in segments if s.num_steps < 7)
