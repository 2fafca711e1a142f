"""Targets built on the learner ranks (``learner.targets_on_workers``, lz_tune/parallel/).

Each rank builds its shard's batch from a replica of the driver's buffer that follows the
buffer's journal (pushes, evictions, buffer-reanalyze writes), with its own copy of the target
network at the update. Checked against one process that builds every batch from the driver's
buffer and learns on it, update by update, in float64:

- a Pong-shaped conv network with BatchNorm (MuZero, 32x32 frames, 2 stacked) and UniZero: the
  same priorities, losses, weights, target weights and optimizer state after ten updates across
  target refreshes (every 4th update), with new segments pushed (and the oldest evicted) and a
  buffer reanalyze between updates;
- the driver sends each rank a few numbers per row: the bytes of numpy arrays per update are a
  small fraction of the batch's observations, and a pushed segment's frames are put once;
- negative control: a replica that misses the buffer-reanalyze write diverges, and the
  comparison catches it;
- the buffer journal alone: a replica that applies the drained changes holds the owner's tables.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lz_tune.buffer import GameSegment
from lz_tune.buffer.journal import BufferJournal, StepWriteChange, apply_changes
from lz_tune.parallel.shards import index_rows
from lz_tune.policy_registry import POLICY_TYPES

PONG_SHAPED = (
    "env.env_id=ALE/Pong-v5",
    "model.kind=conv",
    "model.num_channels=8",
    "model.downsample=True",
    "env.frame_stack=2",
    "env.image_size=32",
    "model.value_support_size=10",
    "model.reward_support_size=5",
    "model.projection_dim=16",
    "env.max_episode_steps=40",
)


def _segment(rng: np.random.Generator, m: int, *, frame_shape=(2, 3), stack: int = 2, terminal: bool = True):
    """A terminal segment of ``m`` steps with random contents."""
    return GameSegment(
        frames=rng.integers(0, 255, size=(stack - 1 + m + (0 if terminal else 1), *frame_shape)).astype(np.uint8),
        actions=rng.integers(0, 3, size=m),
        rewards=rng.normal(size=m).astype(np.float32),
        root_values=rng.normal(size=m).astype(np.float32),
        pred_values=rng.normal(size=m).astype(np.float32),
        policy_targets=rng.dirichlet(np.ones(3), size=m).astype(np.float32),
        action_mask=np.ones((m, 3), bool),
        to_play=np.full(m, -1),
        timesteps=np.arange(m),
        num_owned=m,
        terminal=terminal,
        truncated=False,
    )


def _buffer(capacity: int):
    from lz_tune.buffer import GameBuffer

    return GameBuffer(
        capacity_transitions=capacity,
        num_unroll_steps=2,
        td_steps=3,
        discount=0.9,
        frame_stack=2,
        action_space_size=3,
        seed=0,
    )


def _assert_same_tables(a, b) -> None:
    assert a.num_transitions == b.num_transitions
    np.testing.assert_array_equal(a.segment_ids, b.segment_ids)
    for sid in a.segment_ids.tolist():
        sa, sb = a.get_segment(sid), b.get_segment(sid)
        for field in ("frames", "actions", "rewards", "root_values", "policy_targets", "timesteps"):
            np.testing.assert_array_equal(getattr(sa, field), getattr(sb, field), err_msg=f"{sid}.{field}")


def test_a_replica_that_applies_the_journal_holds_the_owner_s_tables():
    rng = np.random.default_rng(0)
    owner, replica = _buffer(40), _buffer(40)
    journal = owner.open_journal()
    owner.push([_segment(rng, 8) for _ in range(3)])
    apply_changes(replica, journal.drain(owner))  # the first drain: the whole buffer
    _assert_same_tables(owner, replica)
    for step in range(6):  # pushes past the capacity (evictions), explicit evictions, reanalyze writes
        owner.push([_segment(rng, int(rng.integers(3, 9))) for _ in range(2)])
        if step == 2:
            owner.evict_oldest(1)
        if step % 2:
            ids = owner.segment_ids[:2]
            owner.reanalyze_segments(ids, _random_search(rng))
        changes = journal.drain(owner)
        assert any(isinstance(c, StepWriteChange) for c in changes) == bool(step % 2)
        apply_changes(replica, changes)
        _assert_same_tables(owner, replica)
    # a load restarts the journal: the next drain hands over the whole buffer again
    owner.load_state_dict(_buffer_state_after_push(rng))
    apply_changes(replica, journal.drain(owner))
    _assert_same_tables(owner, replica)


def _buffer_state_after_push(rng):
    other = _buffer(40)
    other.push([_segment(rng, 5)])
    return other.state_dict()


def _random_search(rng):
    from lz_tune.buffer import Reanalysis

    def search(obs, action_mask, to_play):
        k = obs.shape[0]
        return Reanalysis(
            policy_target=rng.dirichlet(np.ones(3), size=k).astype(np.float32), root_value=rng.normal(size=k)
        )

    return search


def test_a_journal_keeps_no_more_than_the_buffer_holds():
    rng = np.random.default_rng(1)
    owner = _buffer(20)
    journal = owner.open_journal()
    journal.drain(owner)
    owner.push([_segment(rng, 8)])
    assert len(journal.drain(owner)) == 1  # one PushChange
    for _ in range(4):  # 32 positions pushed into a buffer of 20 before the next drain
        owner.push([_segment(rng, 8)])
    changes = journal.drain(owner)
    assert [type(c).__name__ for c in changes] == ["FullState"]
    replica = _buffer(20)
    apply_changes(replica, changes)
    _assert_same_tables(owner, replica)


def test_padding_drawn_ahead_is_the_padding_the_window_draws():
    rng = np.random.default_rng(2)
    a, b = _buffer(100), _buffer(100)
    segments = [_segment(rng, 3) for _ in range(5)]  # short terminal segments: most windows run past the end
    a.push(segments)
    b.push(segments)
    for _ in range(3):
        ia, ib = a.sample(8), b.sample(8)
        wa = a.gather_window(ia)
        wb = b.gather_window(b.with_padding(ib))
        np.testing.assert_array_equal(wa.actions, wb.actions)
    assert not wa.valid.all()  # (the windows did reach past the end)


# ------------------------------------------------------------------------ against one process


def _filled_driver(cfg):
    from lz_tune.pipeline.driver import Driver

    collect_only = cfg.with_overrides(
        [
            "learner.train_start_after_envsteps=1000000000",
            "max_env_step=300",
            "learner.num_workers=1",
            "learner.sync_batchnorm=False",
        ]
    )
    driver = Driver(collect_only, print_fn=None)
    driver.run()
    return driver


def _compare_on_ranks(cfg, driver, *, updates: int = 10, rtol: float = 1e-5, atol: float = 1e-7):
    """N ranks building their own targets against one process building each batch from the driver's
    buffer, update by update; between updates new segments are pushed (the oldest evicted) and, once,
    every segment is reanalysed. Returns the bytes of numpy arrays sent per update."""
    from lz_tune.algos import get_algorithm
    from lz_tune.parallel import make_learner
    from lz_tune.parallel.learner import RankTargetsBatch, mirror_config
    from lz_tune.parallel.worker import to_float64

    learner = make_learner(cfg, driver.spec)
    learner.start()
    try:
        reference = get_algorithm(cfg.policy_type).make_learner(mirror_config(cfg), driver.spec)
        to_float64(reference)
        learner.group.apply(to_float64)
        reference.load_state_dict(learner.state_dict())
        rng = np.random.default_rng(0)
        for _ in range(4):  # spread the priorities: the IS weights are not uniform
            index = driver.buffer.sample(64)
            driver.buffer.update_priorities(index, rng.uniform(0.05, 3.0, 64).astype(np.float32))
        fresh = [driver.buffer.get_segment(int(s)) for s in driver.buffer.segment_ids[-6:]]
        sent, obs_bytes = [], []
        for i in range(updates):
            if i in (3, 6):  # pushed again: the buffer is at capacity, so the oldest segments go
                driver.buffer.push(fresh[:3] if i == 3 else fresh[3:])
            if i == 5:
                driver.learner.reanalyze_segments(driver.buffer, driver.buffer.segment_ids, rng=rng)
            index = driver.buffer.sample(cfg.learner.batch_size)
            remote = learner.make_batch(driver.buffer, index, rng=rng)
            assert isinstance(remote, RankTargetsBatch)
            batch = reference.make_batch(driver.buffer, remote.index, rng=rng)
            obs_bytes.append(batch.obs.nbytes)
            logs_a, prio_a = reference.learn(batch, train_iter=reference.train_iter)
            logs_b, prio_b = learner.learn(remote, train_iter=learner.train_iter)
            sent.append(learner.bytes_sent_last_update)
            np.testing.assert_allclose(prio_b, prio_a, rtol=rtol, atol=atol, err_msg=f"priorities of update {i}")
            assert logs_b["loss/total"] == pytest.approx(logs_a["loss/total"], rel=rtol, abs=atol), f"update {i}"
            assert logs_b["timing/worker_targets_s"] > 0
        # per update and row: segment id, position (int64), IS weight (float32), U padding actions (int64)
        assert max(sent) == cfg.learner.batch_size * (8 + 8 + 4 + 8 * cfg.buffer.num_unroll_steps)
        a, b = reference.state_dict(), learner.state_dict()
        for key in ("network", "target_network"):
            for name in a[key]:
                torch.testing.assert_close(b[key][name], a[key][name], rtol=rtol, atol=atol)
        return sent, obs_bytes, learner.bytes_put_for_replicas
    finally:
        learner.close()


@pytest.fixture(scope="module")
def ranks_cfg(tiny_cfg):
    return tiny_cfg(
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
        "learner.batch_size=15",  # uneven shards (8 + 7)
        "learner.target_update_freq=4",
        "learner.optim_type=sgd",
        "learner.learning_rate=0.02",
        "buffer.replay_buffer_size=250",
    )


def test_ranks_build_the_targets_one_process_builds_for_a_pong_shaped_conv_network(ray_cluster, ranks_cfg):
    cfg = ranks_cfg.with_overrides([*PONG_SHAPED, "learner.ssl_loss_weight=0", "learner.sync_batchnorm=True"])
    driver = _filled_driver(cfg)
    try:
        from lz_tune.parallel.sync_batchnorm import has_batchnorm

        assert has_batchnorm(driver.learner.policy.network)
        sent, obs_bytes, put = _compare_on_ranks(cfg, driver)
    finally:
        driver.close()
    # per update: indices, IS weights and padding actions (~60 bytes a row), no frames
    assert max(sent) < 0.02 * min(obs_bytes), (sent, obs_bytes)  # (not a frame: 60 B a row, 12 kB of frames)
    # the whole buffer once, then only the pushed segments: far less than one batch of observations per update
    assert put < driver.buffer.nbytes + 10 * min(obs_bytes)


def test_a_replica_that_misses_a_reanalyse_write_diverges_and_the_comparison_catches_it(
    ray_cluster, ranks_cfg, monkeypatch
):
    cfg = ranks_cfg.with_overrides(["learner.ssl_loss_weight=0"])
    driver = _filled_driver(cfg)
    try:
        record = BufferJournal.record
        monkeypatch.setattr(
            BufferJournal,
            "record",
            lambda self, change: None if isinstance(change, StepWriteChange) else record(self, change),
        )
        with pytest.raises(AssertionError):
            _compare_on_ranks(cfg, driver)
    finally:
        driver.close()


def test_unizero_ranks_build_the_targets_one_process_builds(ray_cluster, ranks_cfg):
    cfg = ranks_cfg.with_overrides(
        [
            "policy_type=unizero",
            "unizero.embed_dim=16",
            "unizero.num_heads=2",
            "unizero.infer_context_length=2",
            "learner.learning_rate=0.1",
        ]
    )
    driver = _filled_driver(cfg)
    try:
        _compare_on_ranks(cfg, driver)
    finally:
        driver.close()


# ------------------------------------------------------------------ every type's rows stand alone


@pytest.mark.parametrize("policy_type", sorted(POLICY_TYPES))
def test_every_type_builds_a_row_s_targets_from_that_row_alone(tiny_cfg, policy_type):
    """A rank builds its shard's batch alone: for every policy type, the batch of a whole index is
    the concatenation of the batches of its two (uneven) halves, targets and extras included."""
    from lz_tune.algos import get_algorithm
    from lz_tune.pipeline.replay_buffer import make_game_buffer
    from lz_tune.workers import SegmentCollector, env_spec_for

    env = ("env.env_id=openspiel:tic_tac_toe",) if policy_type == "alphazero" else ()
    cfg = tiny_cfg(f"policy_type={policy_type}", "sampled.num_samples=2", "buffer.reanalyze_ratio=0", *env)
    spec = env_spec_for(cfg)
    collector = SegmentCollector(cfg.with_overrides(["mcts.num_simulations=2"]), seed=0)
    buffer = make_game_buffer(cfg, spec)
    while buffer.num_transitions < 80:
        buffer.push(collector.collect(temperature=1.0).segments)
    collector.close()
    learner = get_algorithm(policy_type).make_learner(cfg, spec)
    index = buffer.with_padding(buffer.sample(15))
    whole = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    halves = [
        learner.make_batch(buffer, index_rows(index, a, b, reanalyze_rows=0), rng=np.random.default_rng(0))
        for a, b in ((0, 8), (8, 15))
    ]
    fields = ("obs", "actions", "target_value", "target_reward", "target_policy", "mask", "weights", "to_play")
    for name in (*fields, "action_mask", "timesteps"):
        np.testing.assert_allclose(
            np.concatenate([getattr(h, name) for h in halves]), getattr(whole, name), rtol=1e-5, atol=1e-6, err_msg=name
        )
    assert whole.extras.keys() == halves[0].extras.keys()
    for name in whole.extras:
        np.testing.assert_allclose(
            np.concatenate([h.extras[name] for h in halves]), whole.extras[name], rtol=1e-5, atol=1e-6, err_msg=name
        )


def test_rank_0_publishes_the_snapshot_weights_and_only_a_reference_travels(ray_cluster, tiny_cfg):
    import pickle

    import ray

    from lz_tune.algos import get_algorithm
    from lz_tune.parallel import make_learner
    from lz_tune.workers import WeightSnapshot, env_spec_for
    from lz_tune.workers.common import StoredWeights

    cfg = tiny_cfg("learner.num_workers=2", "learner.worker_num_cpus=0.5")
    spec = env_spec_for(cfg)
    learner = make_learner(cfg, spec)
    learner.start()
    try:
        weights = learner.snapshot_weights()
        assert isinstance(weights, StoredWeights)
        rank0 = learner.group.weights("policy")
        assert len(pickle.dumps(weights)) < 1_000 < sum(v.numel() * v.element_size() for v in rank0.values())
        # through the object store as a collector or evaluator gets it, then loaded into a policy
        snapshot = ray.get(ray.put(WeightSnapshot(version=1, train_iter=0, weights=weights)))
        policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
        policy.load_weights(snapshot.weights)
        loaded = policy.network.state_dict()
        assert rank0.keys() == loaded.keys()
        for name, value in rank0.items():
            torch.testing.assert_close(loaded[name], value)
    finally:
        learner.close()
