"""Declared per-step columns: segments, buffer storage, batches, reanalysis and the buffer file are
built from a type's StepColumn declaration; buffer files of format version 1 still load."""

from __future__ import annotations

import numpy as np
import pytest

from lz_tune.algos.targets import make_train_batch
from lz_tune.buffer import GameBuffer, Reanalysis, SegmentBuilder, StepColumn

A = 3
COLUMNS = (StepColumn("sampled", (2, A), "float32"), StepColumn("chance", (), "int64"))


def _episode(builder: SegmentBuilder, length: int, rng: np.random.Generator, t0: float):
    """Runs one episode through the builder; step j stores sampled = t0 + j and chance = j."""
    builder.begin_episode(np.zeros((1, 2), np.float32))
    segments = []
    for j in range(length):
        segments += builder.add_step(
            action=j % A,
            reward=1.0,
            root_value=0.0,
            pred_value=0.0,
            policy_target=np.full(A, 1 / A),
            action_mask=np.ones(A, bool),
            to_play=-1,
            timestep=j,
            next_frame=rng.random(2).astype(np.float32),
            done=j == length - 1,
            extras={"sampled": np.full((2, A), t0 + j), "chance": j},
        )
    return segments


def _buffer(**kw) -> GameBuffer:
    return GameBuffer(
        capacity_transitions=1000,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=1,
        action_space_size=A,
        step_columns=COLUMNS,
        seed=0,
        **kw,
    )


def test_extra_columns_flow_from_builder_to_batches_and_back_from_reanalysis():
    rng = np.random.default_rng(0)
    builder = SegmentBuilder(
        segment_length=5, num_unroll_steps=2, td_steps=2, frame_stack=1, action_space_size=A, step_columns=COLUMNS
    )
    segments = _episode(builder, 13, rng, 100.0)
    assert [s.num_owned for s in segments] == [5, 5, 3]
    for seg in segments:  # padding steps carry the next segment's extras
        np.testing.assert_array_equal(seg.extras["chance"], seg.timesteps)
        assert seg.extras["sampled"].shape == (seg.num_steps, 2, A)
    buffer = _buffer()
    buffer.push(segments)
    buffer.check_invariants()
    for seg_id, seg in zip(buffer.segment_ids, segments):
        np.testing.assert_array_equal(buffer.get_segment(seg_id).extras["sampled"], seg.extras["sampled"])

    index = buffer.sample(20)
    batch = make_train_batch(buffer, index, value_fn=lambda o: np.zeros(len(o), np.float32))
    chance, sampled = batch.extras["chance"], batch.extras["sampled"]
    assert chance.shape == (20, 3) and sampled.shape == (20, 3, 2, A)
    np.testing.assert_array_equal(np.where(batch.mask > 0, batch.timesteps, 0), chance)  # aligned, 0 past the end
    np.testing.assert_array_equal(sampled[..., 0, 0], np.where(batch.mask > 0, 100.0 + batch.timesteps, 0))

    def fn(obs, mask, to_play):  # a reanalysis that replaces one of the extra columns
        k = obs.shape[0]
        return Reanalysis(
            np.tile([0, 0, 1], (k, 1)).astype(np.float32),
            np.zeros(k, np.float32),
            extras={"sampled": np.full((k, 2, A), -1.0)},
        )

    chosen = buffer.choose_stale_segments(num_segments=1, partition=0.4)  # int(0.4 * 3): the oldest
    buffer.reanalyze_segments(chosen, fn)
    stored = buffer.get_segment(int(chosen[0]))
    assert np.all(stored.extras["sampled"] == -1.0) and np.all(stored.policy_targets[:, 2] == 1.0)
    np.testing.assert_array_equal(stored.extras["chance"], stored.timesteps)  # not returned: untouched
    batch = make_train_batch(
        buffer, index, value_fn=lambda o: np.zeros(len(o), np.float32), reanalyze_fn=fn, reanalyze_ratio=0.5
    )
    valid = batch.mask[:10] > 0
    assert np.all(batch.extras["sampled"][:10][valid] == -1.0)


def test_undeclared_or_misshapen_extras_are_refused():
    rng = np.random.default_rng(1)
    plain = SegmentBuilder(segment_length=5, num_unroll_steps=2, td_steps=2, frame_stack=1, action_space_size=A)
    plain_segments = _episode_without_extras(plain, 6, rng)
    with pytest.raises(ValueError, match="extra columns"):
        _buffer().push(plain_segments)  # the buffer expects the declared columns
    with pytest.raises(ValueError, match="sampled"):
        builder = SegmentBuilder(
            segment_length=5, num_unroll_steps=2, td_steps=2, frame_stack=1, action_space_size=A, step_columns=COLUMNS
        )
        builder.begin_episode(np.zeros((1, 2), np.float32))
        builder.add_step(
            action=0,
            reward=0.0,
            root_value=0.0,
            pred_value=0.0,
            policy_target=np.full(A, 1 / A),
            action_mask=np.ones(A, bool),
            to_play=-1,
            timestep=0,
            next_frame=np.zeros(2, np.float32),
            done=False,
            extras={"sampled": np.zeros((3, A)), "chance": 0},
        )


def _episode_without_extras(builder, length, rng):
    builder.begin_episode(np.zeros((1, 2), np.float32))
    out = []
    for j in range(length):
        out += builder.add_step(
            action=0,
            reward=1.0,
            root_value=0.0,
            pred_value=0.0,
            policy_target=np.full(A, 1 / A),
            action_mask=np.ones(A, bool),
            to_play=-1,
            timestep=j,
            next_frame=rng.random(2).astype(np.float32),
            done=j == length - 1,
        )
    return out


def test_buffer_file_round_trip_keeps_extra_columns_and_checks_the_declaration(tmp_path):
    rng = np.random.default_rng(2)
    builder = SegmentBuilder(
        segment_length=4, num_unroll_steps=2, td_steps=2, frame_stack=1, action_space_size=A, step_columns=COLUMNS
    )
    buffer = _buffer()
    buffer.push(_episode(builder, 11, rng, 7.0))
    state = _through_a_snapshot(buffer.state_dict(), tmp_path / "store")
    clone = _buffer()
    clone.load_state_dict(state)
    clone.check_invariants()
    for seg_id in buffer.segment_ids:
        np.testing.assert_array_equal(
            clone.get_segment(seg_id).extras["sampled"], buffer.get_segment(seg_id).extras["sampled"]
        )
    other = GameBuffer(
        capacity_transitions=1000,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=1,
        action_space_size=A,
        step_columns=COLUMNS[:1],
    )
    with pytest.raises(ValueError, match="step_columns"):
        other.load_state_dict(_through_a_snapshot(buffer.state_dict(), tmp_path / "store2"))


def _through_a_snapshot(state, folder):
    """``state`` saved as a replay-buffer snapshot (content-addressed chunks, as checkpoints save
    it) and read back."""
    from lz_tune.buffer.buffer_state import APPEND_ONLY
    from lz_tune.buffer.chunk_store import LocalChunkStore
    from lz_tune.buffer.snapshot import SnapshotWriter, read_state

    store = LocalChunkStore(folder)
    encoded, _, _ = SnapshotWriter(store, append_only=APPEND_ONLY).write(state)
    return read_state(encoded, store)
