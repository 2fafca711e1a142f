"""Stochastic MuZero: the chance encoder learns (the original's commitment term gives it no
gradient), the batched recurrent step serves mixed node kinds, true chance labels flow from
the env into segments and the loss, and bad settings fail before anything starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lz_tune.algos import get_algorithm
from lz_tune.algos.stochastic_muzero import CHANCE_COLUMN
from lz_tune.config import ConfigError
from lz_tune.models.stochastic import straight_through_one_hot
from lz_tune.workers import env_spec_for


def _stochastic(tiny_cfg, *extra):
    return tiny_cfg("policy_type=stochastic_muzero", "stochastic.chance_space_size=4", *extra)


def _batch(cfg, spec, rng):
    from lz_tune.buffer import SampledIndex, TrainBatch

    B, U, A = cfg.learner.batch_size, cfg.buffer.num_unroll_steps, spec.action_space_size
    index = SampledIndex(
        segment_ids=np.zeros(B, np.int64), positions=np.zeros(B, np.int64), weights=np.ones(B, np.float32), make_time=0
    )
    extras = (
        {CHANCE_COLUMN: rng.integers(0, spec.chance_space_size or 1, (B, U + 1))}
        if cfg.stochastic.use_true_chance_label
        else {}
    )
    return TrainBatch(
        obs=rng.normal(size=(B, U + 1, *spec.observation_shape)).astype(np.float32),
        actions=rng.integers(0, A, (B, U)),
        target_value=rng.normal(size=(B, U + 1)).astype(np.float32),
        target_reward=rng.normal(size=(B, U)).astype(np.float32),
        target_policy=np.full((B, U + 1, A), 1 / A, np.float32),
        mask=np.ones((B, U + 1), np.float32),
        weights=np.ones(B, np.float32),
        to_play=np.full((B, U + 1), -1),
        action_mask=np.ones((B, U + 1, A), bool),
        timesteps=np.zeros((B, U + 1), np.int64),
        index=index,
        extras=extras,
    )


def _encoder_grads(learner, batch):
    grads = {}
    hooks = [
        p.register_hook(lambda g, name=name: grads.__setitem__(name, g.clone()))
        for name, p in learner.policy.network.chance_encoder.named_parameters()
    ]
    logs, _ = learner.learn(batch)
    for h in hooks:
        h.remove()
    return logs, grads


def test_chance_encoder_receives_gradient(tiny_cfg):
    torch.manual_seed(0)
    cfg = _stochastic(tiny_cfg)
    spec = env_spec_for(cfg)
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, spec)
    logs, grads = _encoder_grads(learner, _batch(cfg, spec, np.random.default_rng(0)))
    assert {"loss/afterstate_value", "loss/chance", "loss/commitment"} <= set(logs)
    assert grads and all(float(g.abs().sum()) > 0 for g in grads.values())
    # the commitment term alone also reaches the encoder
    cfg_c = _stochastic(
        tiny_cfg,
        *(f"learner.{k}_loss_weight=0" for k in ("policy", "value", "reward", "ssl")),
        "stochastic.chance_loss_weight=0",
        "stochastic.afterstate_value_loss_weight=0",
        "learner.policy_entropy_weight=0",
    )
    learner_c = get_algorithm(cfg.policy_type).make_learner(cfg_c, spec)
    _, grads_c = _encoder_grads(learner_c, _batch(cfg_c, spec, np.random.default_rng(0)))
    assert grads_c and sum(float(g.abs().sum()) for g in grads_c.values()) > 0


def test_the_original_commitment_term_has_zero_gradient():
    """The original: ``OnehotArgmax`` (one-hot forward, identity backward) and the commitment
    ``MSE(c_e, OnehotArgmax(c_e))``: the forward and straight-through paths cancel, so the
    encoder gets nothing from it (what the test above would catch); ours pulls softmax(c_e)
    to a detached one-hot and has a gradient."""
    logits = torch.randn(8, 5, requires_grad=True)
    onehot_argmax = F.one_hot(logits.argmax(-1), 5).float() + logits - logits.detach()
    F.mse_loss(logits, onehot_argmax).backward()
    assert float(logits.grad.abs().max()) == 0.0
    logits.grad = None
    code = straight_through_one_hot(logits)
    ((F.softmax(logits, -1) - code.detach()) ** 2).sum(-1).mean().backward()
    assert float(logits.grad.abs().max()) > 0.0


def test_straight_through_code_is_one_hot_forward_and_softmax_backward():
    logits = torch.tensor([[0.1, 2.0, -1.0]], requires_grad=True)
    code = straight_through_one_hot(logits)
    assert torch.equal(code.detach(), torch.tensor([[0.0, 1.0, 0.0]]))
    (code * torch.tensor([[1.0, 0.0, 0.0]])).sum().backward()
    p = F.softmax(logits.detach(), -1)[0]
    np.testing.assert_allclose(logits.grad[0].numpy(), (p[0] * (torch.eye(3)[0] - p)).numpy(), rtol=1e-5)


def test_mixed_recurrent_batch_equals_each_kind_alone(tiny_cfg):
    """One simulation serves decision and chance expansions together: every row equals the
    same row computed in a batch of its own kind."""
    torch.manual_seed(0)
    cfg = _stochastic(tiny_cfg)
    spec = env_spec_for(cfg)
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
    A = spec.action_space_size
    state = torch.rand(6, cfg.model.latent_dim)
    slot = np.array([0, A + 1, 1, A + 3, A + 0, 1])
    with torch.inference_mode():
        mixed = policy.recurrent_inference(state, slot)
        for kind in (slot < A, slot >= A):
            rows = np.flatnonzero(kind)
            alone = policy.recurrent_inference(state[torch.from_numpy(rows)], slot[rows])
            torch.testing.assert_close(mixed[0][torch.from_numpy(rows)], alone[0])
            for m, a in zip(mixed[1:], alone[1:]):
                np.testing.assert_allclose(m[rows], a, rtol=1e-5, atol=1e-6)
    logits = mixed[3]
    assert np.isneginf(logits[slot < A][:, :A]).all() and np.isfinite(logits[slot < A][:, A:]).all()
    assert np.isneginf(logits[slot >= A][:, A:]).all() and (mixed[1][slot < A] == 0).all()


def test_true_chance_labels_reach_segments_and_the_loss(tiny_cfg):
    from lz_tune.envs import game_2048
    from lz_tune.workers.collector import SegmentCollector

    cfg = tiny_cfg(
        "policy_type=stochastic_muzero",
        "env.env_id=Game2048-v0",
        "stochastic.use_true_chance_label=true",
        "model.reward_support_size=10",
    )
    collector = SegmentCollector(cfg, seed=0)
    result = collector.collect(temperature=1.0, num_segments=2)
    seg = result.segments[0]
    labels = seg.extras[CHANCE_COLUMN]
    assert labels.shape == (seg.actions.shape[0],) and labels.min() >= 0 and labels.max() < 32
    # each stored label turns the afterstate of the stored move into the next stored observation
    boards = game_2048.boards_from_observation(seg.frames[:, :].reshape(seg.frames.shape[0], -1))
    steps = min(len(labels), boards.shape[0] - 1)
    after, _, _ = game_2048.apply_moves(boards[:steps], seg.actions[:steps])
    np.testing.assert_array_equal(game_2048.apply_chance(after, labels[:steps]), boards[1 : steps + 1])

    spec = env_spec_for(cfg)
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, spec)
    logs, _ = learner.learn(_batch(cfg, spec, np.random.default_rng(0)))
    assert "loss/chance" in logs and "loss/commitment" not in logs and np.isfinite(logs["loss/total"])


def test_code_usage_gap_values():
    from lz_tune.algos.stochastic_muzero import code_usage_gap

    C = 8
    one_code = F.one_hot(torch.zeros(6, dtype=torch.long), C).float()
    even = F.one_hot(torch.arange(8) % C, C).float()
    ones = torch.ones(8)
    assert torch.allclose(code_usage_gap(one_code, torch.ones(6)), torch.full((6,), np.log(C)), atol=1e-5)
    assert torch.allclose(code_usage_gap(even, ones), torch.zeros(8), atol=1e-5)
    # masked-out rows do not count: the real rows use one code
    mask = torch.tensor([1.0, 1, 0, 0, 0, 0, 0, 0])
    two_rows = torch.cat([one_code[:2], even[2:]])
    assert torch.allclose(code_usage_gap(two_rows, mask), torch.full((8,), np.log(C)), atol=1e-5)
    assert torch.equal(code_usage_gap(even, torch.zeros(8)), torch.zeros(8))


def test_code_usage_term_spreads_a_collapsed_encoder(tiny_cfg):
    """An encoder that gives one code to every transition (what the paper's loss settles on in
    2048): the usage term's gradient step raises the entropy of the batch's mean code
    distribution; without the term (the paper's loss alone) the loss has no such term."""
    torch.manual_seed(0)
    cfg = _stochastic(
        tiny_cfg,
        "stochastic.code_usage_loss_weight=1.0",
        *(f"learner.{k}_loss_weight=0" for k in ("policy", "value", "reward", "ssl")),
        "stochastic.chance_loss_weight=0",
        "stochastic.afterstate_value_loss_weight=0",
        "stochastic.commitment_loss_weight=0",
        "learner.policy_entropy_weight=0",
        "learner.optim_type=sgd",
        "learner.learning_rate=0.5",
        "learner.weight_decay=0",
    )
    spec = env_spec_for(cfg)
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, spec)
    encoder = learner.policy.network.chance_encoder
    with torch.no_grad():  # collapse: code 0 far ahead of the rest for every input
        encoder[-1].bias.copy_(torch.tensor([3.0, 0.0, 0.0, 0.0]))
    batch = _batch(cfg, spec, np.random.default_rng(0))
    obs = torch.from_numpy(batch.obs)

    def entropy_of_mean() -> float:
        with torch.no_grad():
            p = F.softmax(learner.policy.network.encode_chance(obs[:, 0], obs[:, 1]), -1).mean(0)
            return float(-(p * p.log()).sum())

    before = entropy_of_mean()
    logs, _ = learner.learn(batch)
    assert "loss/code_usage" in logs and logs["loss/code_usage"] > 0
    assert entropy_of_mean() > before + 1e-3
    plain = get_algorithm(cfg.policy_type).make_learner(_stochastic(tiny_cfg), spec)
    assert "loss/code_usage" not in plain.learn(_batch(cfg, spec, np.random.default_rng(0)))[0]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (("stochastic.chance_space_size=0",), "stochastic.chance_space_size"),
        (("stochastic.code_usage_loss_weight=-1",), "stochastic.code_usage_loss_weight"),
        (
            ("policy_type=stochastic_muzero", "stochastic.use_true_chance_label=true"),
            "stochastic.use_true_chance_label",
        ),
        (
            (
                "policy_type=stochastic_muzero",
                "env.env_id=Game2048-v0",
                "stochastic.use_true_chance_label=true",
                "stochastic.chance_space_size=16",
            ),
            "stochastic.chance_space_size",
        ),
    ],
)
def test_bad_settings_fail_with_the_key(tiny_cfg, overrides, match):
    with pytest.raises(ConfigError, match=match):
        cfg = tiny_cfg(*overrides)
        get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))


def test_bad_settings_fail_before_anything_is_written(tiny_cfg, tmp_path):
    from lz_tune.pipeline import Driver

    cfg = tiny_cfg("policy_type=stochastic_muzero", "stochastic.use_true_chance_label=true")
    with pytest.raises(ConfigError, match="reports no chance outcomes"):
        Driver(cfg, exp_dir=str(tmp_path / "exp"), print_fn=None)
    assert not (tmp_path / "exp").exists()
