"""GameSegment and SegmentBuilder: every step owned exactly once, contiguity, padding, frames."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lz_tune.buffer import GameSegment, SegmentBuilder, stack_frames

A = 3


class StackingEnv:
    """Fake env: frame of step i of episode e is [e, i] (vector) or a [1, 2, 2] image of e*1000+i;
    the observation is the stack of the last S frames, oldest first."""

    def __init__(self, frame_stack, image=False):
        self.frame_stack = frame_stack
        self.image = image

    def frame(self, episode, step):
        if self.image:
            return np.full((1, 2, 2), episode * 1000 + step, np.float32)
        return np.array([episode, step], np.float32)

    def initial_stack(self, episode, history):
        """S frames: `history` given frames (e.g. a stack continued over a life loss), else repeats."""
        first = self.frame(episode, 0)
        if history is None:
            return np.stack([first] * self.frame_stack)
        return np.stack(list(history[-(self.frame_stack - 1) :]) + [first]) if self.frame_stack > 1 else first[None]


def run_builder(episode_lengths, *, L, U, T, S, image=False, continue_stack=False, check_every_step=None):
    """Feeds episodes to one builder; returns (segments, per-step records)."""
    env = StackingEnv(S, image)
    builder = SegmentBuilder(segment_length=L, num_unroll_steps=U, td_steps=T, frame_stack=S, action_space_size=A)
    segments, records = [], []  # record: (episode, step-in-episode, stacked obs before the action)
    step_id = 0
    last_stack = None
    for episode, length in enumerate(episode_lengths):
        stack = env.initial_stack(episode, None if not continue_stack or last_stack is None else last_stack)
        builder.begin_episode(stack)
        frames = list(stack)
        for i in range(length):
            done = i == length - 1
            obs = stack_frames(np.stack(frames[-S:]), frame_ndim=frames[0].ndim)
            records.append((episode, i, obs, done))
            visit = np.zeros(A, np.float32)
            visit[step_id % A] = 1.0
            out = builder.add_step(
                action=step_id % A,
                reward=float(step_id),  # unique id of the step
                root_value=0.5 * step_id,
                pred_value=0.25 * step_id,
                policy_target=visit,
                action_mask=np.arange(A) != (step_id + 1) % A,
                to_play=-1,
                timestep=i,
                next_frame=None if done else env.frame(episode, i + 1),
                done=done,
            )
            segments.extend(out)
            step_id += 1
            if not done:
                frames.append(env.frame(episode, i + 1))
            if check_every_step is not None:
                check_every_step(builder, segments, step_id)
        last_stack = np.stack(frames[-S:])
    assert not builder.in_episode
    return segments, records


def owned_ids(segment):
    return segment.rewards[: segment.num_owned].astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(
    episode_lengths=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    L=st.integers(1, 12),
    U=st.integers(0, 6),
    T=st.integers(1, 6),
    S=st.integers(1, 4),
    image=st.booleans(),
    continue_stack=st.booleans(),
)
def test_builder_invariants(episode_lengths, L, U, T, S, image, continue_stack):
    def count_check(builder, segments, steps_added):
        owned = sum(s.num_owned for s in segments)
        assert owned + builder.num_steps_in_progress == steps_added

    segments, records = run_builder(
        episode_lengths,
        L=L,
        U=U,
        T=T,
        S=S,
        image=image,
        continue_stack=continue_stack,
        check_every_step=count_check,
    )
    total = len(records)
    # every step owned by exactly one segment, in order (owned parts are contiguous)
    np.testing.assert_array_equal(np.concatenate([owned_ids(s) for s in segments]), np.arange(total))

    for k, seg in enumerate(segments):
        first = int(seg.rewards[0])
        m = seg.num_steps
        # all stored steps (owned + padding) are consecutive steps of one episode
        np.testing.assert_array_equal(seg.rewards, np.arange(first, first + m))
        episodes = {records[first + t][0] for t in range(m)}
        assert len(episodes) == 1
        last_of_episode = records[first + m - 1][3]
        assert seg.terminal == last_of_episode
        assert seg.num_owned <= L and seg.frame_stack == S
        if seg.terminal:
            assert seg.num_padding <= U + T
        else:
            assert seg.num_owned == L and seg.num_padding == U + T
        np.testing.assert_array_equal(seg.actions, np.arange(first, first + m) % A)
        np.testing.assert_array_equal(seg.timesteps, [records[first + t][1] for t in range(m)])
        # stacked obs at every position equals what the env stacking gave
        for t in range(seg.num_obs):
            np.testing.assert_array_equal(seg.obs(t), records[first + t][2])
        np.testing.assert_array_equal(
            seg.stacked_obs(np.arange(seg.num_obs)), np.stack([records[first + t][2] for t in range(seg.num_obs)])
        )
        # padding equals the next segment's first entries (same episode)
        if k + 1 < len(segments) and seg.num_padding and not (seg.terminal and segments[k + 1].timesteps[0] == 0):
            nxt = segments[k + 1]
            overlap = min(seg.num_padding, nxt.num_steps)
            n = seg.num_owned
            np.testing.assert_array_equal(seg.actions[n : n + overlap], nxt.actions[:overlap])
            np.testing.assert_array_equal(seg.rewards[n : n + overlap], nxt.rewards[:overlap])
            np.testing.assert_array_equal(seg.policy_targets[n : n + overlap], nxt.policy_targets[:overlap])
            np.testing.assert_array_equal(seg.frames[n : n + overlap + S - 1], nxt.frames[: overlap + S - 1])


def test_history_frames_at_episode_start_and_segment_boundary():
    S, L = 3, 4
    segments, _ = run_builder([10], L=L, U=1, T=1, S=S)
    first, second = segments[0], segments[1]
    # episode start: history = repeated first frame (env's own stack)
    np.testing.assert_array_equal(first.frames[:S], [[0, 0]] * S)
    # segment boundary: history = the true previous S-1 frames, then the frame of position 0
    np.testing.assert_array_equal(second.frames[:S], [[0, 2], [0, 3], [0, 4]])
    assert second.timesteps[0] == L


def test_continued_stack_across_episode_start():
    """Atari episodic life: the stack continues over the new 'episode' start."""
    S = 4
    segments, records = run_builder([3, 5], L=10, U=1, T=1, S=S, continue_stack=True)
    second = segments[1]
    np.testing.assert_array_equal(second.frames[: S - 1], [[0, 0], [0, 1], [0, 2]])
    np.testing.assert_array_equal(second.obs(0), records[3][2])


def test_done_at_segment_boundary_and_short_tail():
    segments, _ = run_builder([4], L=4, U=2, T=2, S=1)
    assert len(segments) == 1 and segments[0].terminal and segments[0].num_owned == 4
    segments, _ = run_builder([6], L=4, U=2, T=2, S=1)  # pending gets only 2 padding steps
    assert [s.num_owned for s in segments] == [4, 2]
    assert [s.num_padding for s in segments] == [2, 0]
    assert all(s.terminal for s in segments)
    assert segments[0].num_obs == segments[0].num_steps == 6


def test_builder_usage_errors_and_abandon():
    builder = SegmentBuilder(segment_length=4, num_unroll_steps=1, td_steps=1, frame_stack=2, action_space_size=2)
    step = dict(
        action=0,
        reward=0.0,
        root_value=0.0,
        pred_value=0.0,
        policy_target=[1, 0],
        action_mask=[True, True],
        to_play=-1,
        timestep=0,
        next_frame=np.zeros(3),
        done=False,
    )
    with pytest.raises(RuntimeError):
        builder.add_step(**step)
    with pytest.raises(ValueError):
        builder.begin_episode(np.zeros((3, 3)))  # wrong stack size
    builder.begin_episode(np.zeros((2, 3)))
    with pytest.raises(RuntimeError):
        builder.begin_episode(np.zeros((2, 3)))
    for _ in range(5):
        builder.add_step(**step)
    assert builder.num_steps_in_progress == 5
    assert builder.abandon_episode() == 5
    assert builder.num_steps_in_progress == 0 and not builder.in_episode


def test_image_obs_shape_and_segment_helpers():
    segments, records = run_builder([7], L=3, U=1, T=1, S=4, image=True)
    seg = segments[0]
    assert seg.frame_shape == (1, 2, 2) and seg.obs_shape == (4, 2, 2)
    assert seg.obs(0).shape == (4, 2, 2)
    np.testing.assert_allclose(seg.initial_priorities(eps=1e-3), 0.25 * np.arange(3) + 1e-3, rtol=1e-6)
    assert seg.nbytes == sum(
        getattr(seg, name).nbytes
        for name in (
            "frames",
            "actions",
            "rewards",
            "root_values",
            "pred_values",
            "policy_targets",
            "action_mask",
            "to_play",
            "timesteps",
        )
    )


def test_segment_validation():
    good = dict(
        frames=np.zeros((4, 2), np.float32),
        actions=[0, 1, 0],
        rewards=[0, 0, 0],
        root_values=[0, 0, 0],
        pred_values=[0, 0, 0],
        policy_targets=np.full((3, 2), 0.5),
        action_mask=np.ones((3, 2), bool),
        to_play=[-1] * 3,
        timesteps=[0, 1, 2],
        num_owned=2,
        terminal=False,
    )
    seg = GameSegment(**good)
    assert seg.frame_stack == 1 and seg.num_obs == 4 and seg.actions.dtype == np.int64
    assert seg.policy_targets.dtype == np.float32
    for change, match in [
        (dict(num_owned=4), "num_owned"),
        (dict(rewards=[0, 0]), "rewards"),
        (dict(action_mask=np.ones((3, 0), bool)), "at least one column"),
        (dict(actions=[[0.5], [1.5], [0.0]]), r"\[-1, 1\]"),  # continuous actions outside the box
        (dict(actions=[[0.5], [np.nan], [0.0]]), r"\[-1, 1\]"),
        (dict(frames=np.zeros((3, 2))), "fewer than n_obs"),
        (dict(actions=[0, 2, 0]), "actions"),
        (dict(root_values=[0, np.nan, 0]), "non-finite"),
    ]:
        with pytest.raises(ValueError, match=match):
            GameSegment(**{**good, **change})
    # the policy target may be narrower than the action mask (K sampled actions of A)
    narrow = GameSegment(**{**good, "policy_targets": np.full((3, 1), 1.0), "action_mask": np.ones((3, 3), bool)})
    assert narrow.policy_target_size == 1 and narrow.action_space_size == 3
    cont = GameSegment(
        **{**good, "actions": [[0.5, -1.0], [1.0, 0.0], [0.0, 0.25]], "action_mask": np.ones((3, 1), bool)}
    )
    assert cont.action_dim == 2 and cont.actions.dtype == np.float32
