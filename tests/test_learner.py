"""MuZeroLearner: the loss goes down on a fixed batch, priorities, the hard target copy, and
an exact state_dict round trip."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lz_tune.algos.muzero import MuZeroLearner
from lz_tune.algos.targets import make_train_batch
from lz_tune.models.support import support_to_scalar
from lz_tune.pipeline.replay_buffer import make_game_buffer
from lz_tune.workers import SegmentCollector, env_spec_for


@pytest.fixture(scope="module")
def setup(tiny_cfg):
    """(cfg, spec, buffer filled by two collects, one fixed TrainBatch)."""
    cfg = tiny_cfg("learner.target_update_freq=4")
    spec = env_spec_for(cfg)
    torch.manual_seed(0)  # the collector's (random) network: same data whatever ran before
    collector = SegmentCollector(cfg, seed=0)
    buffer = make_game_buffer(cfg, spec)
    try:
        for _ in range(2):
            r = collector.collect(temperature=1.0)
            buffer.push(r.segments, r.priorities)
    finally:
        collector.close()
    assert buffer.num_transitions >= cfg.learner.batch_size
    torch.manual_seed(0)
    learner = MuZeroLearner(cfg, spec)
    batch = make_train_batch(
        buffer, buffer.sample(cfg.learner.batch_size), value_fn=learner.target_policy.value_targets
    )
    return cfg, spec, buffer, batch


def _new_learner(cfg, spec, seed: int) -> MuZeroLearner:
    torch.manual_seed(seed)
    return MuZeroLearner(cfg, spec)


def _params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_loss_decreases_on_a_fixed_batch(setup):
    cfg, spec, _, batch = setup
    learner = _new_learner(cfg, spec, seed=1)
    losses = [learner.learn(batch)[0]["loss/total"] for _ in range(30)]
    assert all(np.isfinite(losses))
    assert learner.train_iter == 30
    assert np.mean(losses[-3:]) < 0.7 * losses[0], losses


def test_priorities_are_value_errors_at_k0(setup):
    cfg, spec, _, batch = setup
    learner = _new_learner(cfg, spec, seed=2)
    with torch.no_grad():
        init = learner.policy.network.initial_inference(torch.from_numpy(batch.obs[:, 0]))
        pred_value = support_to_scalar(init.value_logits).cpu().numpy()
    logs, priorities = learner.learn(batch)
    B = cfg.learner.batch_size
    assert priorities.shape == (B,)
    assert priorities.dtype == np.float32
    assert np.all(np.isfinite(priorities)) and np.all(priorities > 0)
    # priorities come from the weights BEFORE the update: |pred value - target value| at k = 0
    np.testing.assert_allclose(priorities, np.abs(pred_value - batch.target_value[:, 0]), atol=1e-4)
    assert np.isfinite(logs["loss/total"])


def test_target_network_hard_copy(setup):
    cfg, spec, _, batch = setup
    freq = cfg.learner.target_update_freq
    assert freq == 4
    learner = _new_learner(cfg, spec, seed=3)
    target = learner.target_policy.network
    initial = _params(learner.policy.network)
    assert _same(_params(target), initial)
    last_copy = initial
    for _ in range(2 * freq + 1):
        learner.learn(batch)
        online = _params(learner.policy.network)
        if learner.train_iter % freq == 0:
            assert _same(_params(target), online), f"no hard copy at train_iter={learner.train_iter}"
            last_copy = online
        else:
            assert _same(_params(target), last_copy), f"target changed at train_iter={learner.train_iter}"
            assert not _same(online, last_copy)
    # the target is a copy, not an alias of the online network
    assert target is not learner.policy.network
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(target.parameters(), learner.policy.network.parameters()))


def test_state_dict_round_trip(setup):
    cfg, spec, _, batch = setup
    original = _new_learner(cfg, spec, seed=4)
    for _ in range(3):  # optimizer moments are non-trivial, target not yet copied (freq 4)
        original.learn(batch)
    state = copy.deepcopy(original.state_dict())

    restored = _new_learner(cfg, spec, seed=5)  # different initial weights
    assert not _same(_params(restored.policy.network), _params(original.policy.network))
    restored.load_state_dict(state)
    assert restored.train_iter == original.train_iter == 3
    assert _same(_params(restored.policy.network), _params(original.policy.network))
    assert _same(_params(restored.target_policy.network), _params(original.target_policy.network))
    assert restored.learning_rate == original.learning_rate

    # continuing both on the same batch with the same torch seed gives identical results
    for step in range(3):  # crosses the target copy at train_iter 4
        torch.manual_seed(100 + step)
        logs_a, prio_a = original.learn(batch)
        torch.manual_seed(100 + step)
        logs_b, prio_b = restored.learn(batch)
        assert logs_a == logs_b
        np.testing.assert_array_equal(prio_a, prio_b)
    assert restored.train_iter == original.train_iter == 6
    assert _same(_params(restored.policy.network), _params(original.policy.network))
    assert _same(_params(restored.target_policy.network), _params(original.target_policy.network))

    # the saved state was not changed by the continued training (it is a snapshot, not a view)
    fresh = _new_learner(cfg, spec, seed=6)
    fresh.load_state_dict(state)
    assert fresh.train_iter == 3
    assert not _same(_params(fresh.policy.network), _params(original.policy.network))


def test_round_trip_needs_optimizer_state(setup):
    """Control for the round trip test: without the optimizer state, continuing differs
    (so the comparison above really checks the optimizer state)."""
    cfg, spec, _, batch = setup
    original = _new_learner(cfg, spec, seed=4)
    for _ in range(3):
        original.learn(batch)
    state = copy.deepcopy(original.state_dict())
    restored = _new_learner(cfg, spec, seed=5)
    state["optimizer"] = copy.deepcopy(restored.optimizer.state_dict())
    restored.load_state_dict(state)
    torch.manual_seed(100)
    original.learn(batch)
    torch.manual_seed(100)
    restored.learn(batch)
    assert not _same(_params(restored.policy.network), _params(original.policy.network))
