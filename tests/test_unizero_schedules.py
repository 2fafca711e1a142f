"""UniZero's train_iter schedules and checks (the original's ``policy/unizero.py``): the defaults
are the original's, the annealed values at given train_iters, the encoder and head clips bound
what they clip (and change nothing when off), the adaptive entropy weight moves the right way,
is the entropy weight of the update and survives a checkpoint, monitoring runs every
``monitor_norm_freq`` updates and repeats its values in between."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.algos.muzero import MuZeroLearner
from lz_tune.buffer import SampledIndex, TrainBatch
from lz_tune.config import Config, ConfigError
from lz_tune.workers import env_spec_for

UNI = ("policy_type=unizero", "unizero.embed_dim=16", "unizero.num_heads=2", "unizero.infer_context_length=2")


def _learner(tiny_cfg, *extra):
    cfg = tiny_cfg(*UNI, *extra)
    spec = env_spec_for(cfg)
    torch.manual_seed(0)
    return get_algorithm("unizero").make_learner(cfg, spec), spec


def _batch(learner, spec, seed: int = 0) -> TrainBatch:
    cfg, rng = learner.cfg, np.random.default_rng(seed)
    b, u, a = cfg.learner.batch_size, cfg.buffer.num_unroll_steps, spec.action_space_size
    index = SampledIndex(
        segment_ids=np.zeros(b, np.int64), positions=np.zeros(b, np.int64), weights=np.ones(b, np.float32), make_time=0
    )
    policy = rng.dirichlet(np.ones(a), (b, u + 1)).astype(np.float32)
    return TrainBatch(
        obs=rng.normal(size=(b, u + 1, *spec.observation_shape)).astype(np.float32),
        actions=rng.integers(0, a, (b, u)),
        target_value=rng.normal(size=(b, u + 1)).astype(np.float32),
        target_reward=rng.normal(size=(b, u)).astype(np.float32),
        target_policy=policy,
        mask=np.ones((b, u + 1), np.float32),
        weights=np.ones(b, np.float32),
        to_play=np.full((b, u + 1), -1),
        action_mask=np.ones((b, u + 1, a), bool),
        timesteps=np.zeros((b, u + 1), np.int64),
        index=index,
    )


def _max_latent_norm(learner, batch) -> float:
    net = learner.policy.network
    with torch.no_grad():
        obs = torch.from_numpy(batch.obs).reshape(-1, *batch.obs.shape[2:])
        return float(net.encode(obs).norm(dim=-1).max())


def _state_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------ keys, values


def test_defaults_are_the_originals():
    """``UniZeroPolicy.config`` of LightZero's ``lzero/policy/unizero.py`` (its Atari config
    differs in the entropy schedule and monitor_norm_freq; a user sets those)."""
    u = Config().unizero
    assert (
        u.use_adaptive_entropy_weight,
        u.adaptive_entropy_alpha_lr,
        u.adaptive_entropy_alpha_min,
        u.adaptive_entropy_alpha_max,
    ) == (False, 1e-3, 1e-4, 10.0)
    assert (u.target_entropy_start_ratio, u.target_entropy_end_ratio, u.target_entropy_decay_steps) == (
        0.98,
        0.05,
        500_000,
    )
    assert (
        u.use_encoder_clip_annealing,
        u.encoder_clip_anneal_type,
        u.encoder_clip_start_value,
        u.encoder_clip_end_value,
        u.encoder_clip_anneal_steps,
        u.latent_norm_clip_threshold,
    ) == (False, "cosine", 30.0, 10.0, 100_000, 0.0)
    assert (
        u.head_clip_heads,
        u.head_clip_use_annealing,
        u.head_clip_anneal_type,
        u.head_clip_start_value,
        u.head_clip_end_value,
        u.head_clip_anneal_steps,
        u.head_clip_threshold,
        u.head_clip_monitor_freq,
    ) == ((), True, "cosine", 30.0, 10.0, 500_000, 15.0, 1)
    assert (u.use_continuous_label_smoothing, u.continuous_ls_eps, u.monitor_norm_freq) == (False, 0.05, 5000)


@pytest.mark.parametrize(
    "override, key",
    [
        ({"unizero.adaptive_entropy_alpha_min": 20.0}, "unizero.adaptive_entropy_alpha_min"),
        ({"unizero.target_entropy_end_ratio": 1.5}, "unizero.target_entropy_end_ratio"),
        ({"unizero.encoder_clip_anneal_type": "step"}, "unizero.encoder_clip_anneal_type"),
        ({"unizero.latent_norm_clip_threshold": -1.0}, "unizero.latent_norm_clip_threshold"),
        ({"unizero.head_clip_heads": ["logits"]}, "unizero.head_clip_heads"),
        ({"unizero.monitor_norm_freq": -5}, "unizero.monitor_norm_freq"),
    ],
)
def test_bad_values_are_refused_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Config().with_updates(override)


def test_sampled_unizero_refuses_the_adaptive_entropy_weight(tiny_cfg):
    cfg = tiny_cfg(
        "policy_type=sampled_unizero",
        "unizero.embed_dim=16",
        "unizero.num_heads=2",
        "unizero.use_adaptive_entropy_weight=true",
    )
    with pytest.raises(ConfigError, match=r"unizero\.use_adaptive_entropy_weight"):
        get_algorithm("sampled_unizero").make_learner(cfg, env_spec_for(cfg))


def test_schedules_at_given_train_iters(tiny_cfg):
    learner, _ = _learner(tiny_cfg, "unizero.use_encoder_clip_annealing=true", "unizero.head_clip_heads=['policy']")
    clip = learner.encoder_clip_threshold
    # cosine from 30 to 10 over 100000 updates: 10 + 20 * (1 + cos(pi p)) / 2, then flat
    assert [clip(t) for t in (0, 25_000, 50_000, 100_000, 400_000)] == pytest.approx(
        [30.0, 10.0 + 10.0 * (1.0 + math.sqrt(0.5)), 20.0, 10.0, 10.0]
    )
    assert learner.head_clip_threshold(0) == 30.0 and learner.head_clip_threshold(250_000) == pytest.approx(20.0)
    assert learner.head_clip_threshold(10**6) == pytest.approx(10.0)
    # target entropy ratio: linear 0.98 -> 0.05 over 500000 updates
    assert [learner.target_entropy_ratio(t) for t in (0, 250_000, 500_000, 10**6)] == pytest.approx(
        [0.98, 0.515, 0.05, 0.05]
    )

    linear, _ = _learner(
        tiny_cfg,
        "unizero.use_encoder_clip_annealing=true",
        "unizero.encoder_clip_anneal_type=linear",
        "unizero.head_clip_use_annealing=false",
        "unizero.head_clip_threshold=7.0",
    )
    assert [linear.encoder_clip_threshold(t) for t in (0, 25_000, 50_000, 100_000)] == pytest.approx(
        [30.0, 25.0, 20.0, 10.0]
    )
    assert linear.head_clip_threshold(123) == 7.0
    fixed, _ = _learner(tiny_cfg, "unizero.latent_norm_clip_threshold=12.5")
    assert fixed.encoder_clip_threshold(0) == fixed.encoder_clip_threshold(10**6) == 12.5

    # label smoothing as the original's: the schedule only when its start is > 0, or a fixed eps
    off_start, _ = _learner(tiny_cfg, "unizero.policy_ls_eps_start=0", "unizero.policy_ls_eps_end=0.3")
    assert off_start.policy_label_smoothing(10**6) == 0.0
    smooth, _ = _learner(
        tiny_cfg,
        "unizero.policy_ls_eps_start=0.4",
        "unizero.policy_ls_eps_end=0.1",
        "unizero.policy_ls_eps_decay_steps=100",
    )
    assert [smooth.policy_label_smoothing(t) for t in (0, 50, 100, 200)] == pytest.approx([0.4, 0.25, 0.1, 0.1])
    continuous, _ = _learner(
        tiny_cfg,
        "unizero.policy_ls_eps_start=0.4",
        "unizero.use_continuous_label_smoothing=true",
        "unizero.continuous_ls_eps=0.07",
    )
    assert continuous.policy_label_smoothing(0) == continuous.policy_label_smoothing(10**6) == 0.07


# ------------------------------------------------------------------------------ clips


def test_encoder_clip_bounds_the_latent_norms(tiny_cfg):
    """Latents of a fresh encoder have norm ~4 (a LayerNorm of width 16); a threshold of 2
    scales the final LayerNorm by ~1/2 before the step (tiny lr: the step hardly moves it)."""
    learner, spec = _learner(tiny_cfg, "unizero.latent_norm_clip_threshold=2.0", "learner.learning_rate=1e-6")
    batch = _batch(learner, spec)
    before = _max_latent_norm(learner, batch)
    assert before > 3.0
    logs, _ = learner.learn(batch, train_iter=0)
    assert _max_latent_norm(learner, batch) <= 2.0 * (1 + 1e-4)
    assert logs["encoder_clip/applied"] == 1.0 and logs["encoder_clip/apply_count"] == 1.0
    assert logs["encoder_clip/max_latent_norm"] == pytest.approx(before, rel=1e-5)
    assert logs["encoder_clip/scale_factor"] == pytest.approx(2.0 / before, rel=1e-5)
    assert logs["encoder_clip/threshold"] == 2.0


def test_the_annealed_encoder_clip_reads_the_train_iter_given_to_learn(tiny_cfg):
    learner, spec = _learner(
        tiny_cfg,
        "unizero.use_encoder_clip_annealing=true",
        "unizero.encoder_clip_start_value=30",
        "unizero.encoder_clip_end_value=2",
        "unizero.encoder_clip_anneal_steps=1000",
        "learner.learning_rate=1e-6",
    )
    batch = _batch(learner, spec)
    logs, _ = learner.learn(batch, train_iter=0)  # threshold 30: nothing to clip
    assert logs["encoder_clip/threshold"] == 30.0 and logs["encoder_clip/applied"] == 0.0
    logs, _ = learner.learn(batch, train_iter=1000)  # the learner's own count is 1; the driver's 1000 rules
    assert learner.train_iter == 2 and logs["encoder_clip/threshold"] == pytest.approx(2.0)
    assert logs["encoder_clip/applied"] == 1.0 and _max_latent_norm(learner, batch) <= 2.0 * (1 + 1e-4)


def test_clips_off_leave_the_update_alone(tiny_cfg):
    """Clips off (the defaults): an update equals one whose pre-step hook is MuZero's no-op."""
    learner, spec = _learner(tiny_cfg, "unizero.monitor_norm_freq=1")
    other, _ = _learner(tiny_cfg, "unizero.monitor_norm_freq=1")
    other.load_state_dict(learner.state_dict())
    other.before_optimizer_step = lambda: MuZeroLearner.before_optimizer_step(other)
    batch = _batch(learner, spec)
    logs, _ = learner.learn(batch, train_iter=0)
    other.learn(batch, train_iter=0)
    assert _state_equal(learner.state_dict()["network"], other.state_dict()["network"])
    assert logs["encoder_clip/enabled"] == 0.0 and logs["encoder_clip/applied"] == 0.0
    assert logs["encoder_clip/max_latent_norm"] > 3.0  # a threshold of 2 would have clipped
    assert not any(k.startswith("head_clip/") for k in logs)


def test_head_clip_scales_the_head_whose_output_exceeds_the_threshold(tiny_cfg):
    learner, spec = _learner(
        tiny_cfg,
        "unizero.head_clip_heads=['reward', 'value']",
        "unizero.head_clip_use_annealing=false",
        "unizero.head_clip_threshold=0.05",
        "unizero.head_clip_monitor_freq=2",
        "learner.learning_rate=1e-6",
    )
    net = learner.policy.network
    with torch.no_grad():  # (zero-initialised) reward outputs well over the threshold, value outputs under it
        net.reward_head[-1].weight.normal_(0, 1.0)
        net.value_head[-1].weight.normal_(0, 1e-4)
    batch = _batch(learner, spec)
    reward_before = [p.detach().clone() for p in net.reward_head.parameters()]
    value_before = [p.detach().clone() for p in net.value_head.parameters()]
    logs, _ = learner.learn(batch, train_iter=1)  # not a multiple of head_clip_monitor_freq: no clip
    assert not any(k.startswith("head_clip/") for k in logs)
    logs, _ = learner.learn(batch, train_iter=2)
    scale = logs["head_clip/reward_scale_factor"]
    assert logs["head_clip/reward_max_logits"] > 0.05 and scale == pytest.approx(
        0.05 / logs["head_clip/reward_max_logits"]
    )
    assert logs["head_clip/value_max_logits"] < 0.05 and "head_clip/value_scale_factor" not in logs
    # the reward head's parameters shrank by the scale (two steps of lr 1e-6 aside), the value head's did not
    for before, after in zip(reward_before, net.reward_head.parameters()):
        torch.testing.assert_close(after.detach(), before * scale, atol=1e-5, rtol=0)
    for before, after in zip(value_before, net.value_head.parameters()):
        torch.testing.assert_close(after.detach(), before, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------ adaptive entropy weight


def test_adaptive_alpha_falls_above_the_target_entropy_and_rises_below_it(tiny_cfg):
    """Target 0 (ratio 0): every policy is above it, alpha falls from 1. Target ln(A) (ratio 1):
    a non-uniform policy is below it, alpha rises."""
    above, spec = _learner(
        tiny_cfg,
        "unizero.use_adaptive_entropy_weight=true",
        "unizero.target_entropy_start_ratio=0",
        "unizero.target_entropy_end_ratio=0",
    )
    batch = _batch(above, spec)
    for t in range(3):
        logs, _ = above.learn(batch, train_iter=t)
    assert logs["entropy/adaptive_alpha"] < 1.0 - 2e-3  # Adam: ~lr per step
    assert logs["entropy/target_ratio"] == 0.0

    below, _ = _learner(
        tiny_cfg,
        "unizero.use_adaptive_entropy_weight=true",
        "unizero.target_entropy_start_ratio=1",
        "unizero.target_entropy_end_ratio=1",
    )
    with torch.no_grad():
        below.policy.network.policy_head[-1].bias.copy_(torch.tensor([3.0, -3.0]))
    for t in range(3):
        logs, _ = below.learn(batch, train_iter=t)
    assert logs["entropy/adaptive_alpha"] > 1.0 + 2e-3


def test_adaptive_alpha_is_the_entropy_weight_and_stays_in_its_bounds(tiny_cfg):
    """Only the entropy term weighted: the total is -alpha * entropy / U with the alpha after
    this update's step (learner.policy_entropy_weight=0 is replaced), alpha clamped to its max."""
    zero = (
        "learner.policy_loss_weight=0",
        "learner.value_loss_weight=0",
        "learner.reward_loss_weight=0",
        "learner.ssl_loss_weight=0",
        "learner.policy_entropy_weight=0",
    )
    learner, spec = _learner(
        tiny_cfg, *zero, "unizero.use_adaptive_entropy_weight=true", "unizero.adaptive_entropy_alpha_max=0.5"
    )
    logs, _ = learner.learn(_batch(learner, spec), train_iter=0)
    assert logs["entropy/adaptive_alpha"] == pytest.approx(0.5)
    u = learner.cfg.buffer.num_unroll_steps
    assert logs["loss/total"] == pytest.approx(-0.5 * logs["policy/entropy"] / u, rel=1e-5)

    fixed, _ = _learner(tiny_cfg, *zero[:-1], "learner.policy_entropy_weight=0.25")
    logs, _ = fixed.learn(_batch(fixed, spec), train_iter=0)
    assert "entropy/adaptive_alpha" not in logs
    assert logs["loss/total"] == pytest.approx(-0.25 * logs["policy/entropy"] / u, rel=1e-5)


def test_adaptive_alpha_and_its_optimizer_survive_a_checkpoint(tiny_cfg):
    opts = (
        "unizero.use_adaptive_entropy_weight=true",
        "unizero.target_entropy_start_ratio=0",
        "unizero.target_entropy_end_ratio=0",
    )
    learner, spec = _learner(tiny_cfg, *opts)
    batch = _batch(learner, spec)
    for t in range(3):
        learner.learn(batch, train_iter=t)
    state = copy.deepcopy(learner.state_dict())  # as the driver's checkpoints (optimizer states are live tensors)
    assert float(state["log_alpha"]) < 0.0
    restored, _ = _learner(tiny_cfg, *opts)
    restored.load_state_dict(state)
    assert torch.equal(restored.log_alpha.detach(), learner.log_alpha.detach())
    logs_a, _ = learner.learn(batch, train_iter=3)
    logs_b, _ = restored.learn(batch, train_iter=3)  # the same Adam moments: the same next step
    assert logs_b["entropy/adaptive_alpha"] == logs_a["entropy/adaptive_alpha"]
    assert "log_alpha" not in _learner(tiny_cfg)[0].state_dict()  # off: the state is MuZero's


# ------------------------------------------------------------------------------ monitoring


def test_monitoring_runs_every_monitor_norm_freq_updates_and_repeats_in_between(tiny_cfg):
    learner, spec = _learner(tiny_cfg, "unizero.monitor_norm_freq=3")
    batch = _batch(learner, spec)
    checks, at_check = [], {}
    for t in range(5, 12):  # the first update checks whatever its train_iter; then multiples of 3
        logs, _ = learner.learn(batch, train_iter=t)
        checks.append(logs["stability/last_check_iter"])
        at_check = logs if t == 9 else at_check
    assert checks == [5, 6, 6, 6, 9, 9, 9]
    assert all(logs[k] == v for k, v in at_check.items() if k.startswith(("norm/", "grad/", "logits/")))
    logs = at_check  # the groups cover the network: their gradient norms make up the clipped global norm
    groups = (
        "encoder",
        "transformer",
        "action_embedding",
        "head_observation",
        "head_reward",
        "head_value",
        "head_policy",
    )
    assert math.sqrt(sum(logs[f"grad/{g}"] ** 2 for g in groups)) == pytest.approx(logs["learner/grad_norm"], rel=1e-4)
    for key in (
        "norm/encoder",
        "norm/transformer",
        "norm/head_policy",
        "norm/x_token_mean",
        "logits/value_abs_max",
        "embeddings/obs_norm_mean",
        "activation/x_token_feature_std_mean",
        "stability/warning_count",
    ):
        assert np.isfinite(logs[key]), key
    assert logs["embeddings/obs_norm_mean"] == pytest.approx(4.0, rel=0.05)  # LayerNorm of width 16

    learner.load_state_dict(learner.state_dict())  # a restore checks at its next update
    logs, _ = learner.learn(batch, train_iter=13)
    assert logs["stability/last_check_iter"] == 13

    quiet, _ = _learner(tiny_cfg, "unizero.monitor_norm_freq=0")
    logs, _ = quiet.learn(batch, train_iter=0)
    assert not any(k.startswith(("norm/", "grad/", "logits/", "stability/")) for k in logs)


# ------------------------------------------------------------------------------ value / reward label smoothing


def _seen_targets(learner, spec):
    """The value and reward targets [B, U+1, K] / [B, U, K] one update hands to the loss."""
    seen = {}
    original = learner.unroll_losses

    def spy(net, obs, actions, value_t, reward_t, *rest):
        seen["value"], seen["reward"] = value_t.detach().clone(), reward_t.detach().clone()
        return original(net, obs, actions, value_t, reward_t, *rest)

    learner.unroll_losses = spy
    batch = _batch(learner, spec)
    learner.learn(batch, train_iter=0)
    return seen, batch


@pytest.mark.parametrize(
    "policy_type,override,eps",
    [("unizero", None, 0.1), ("unizero", 0.0, 0.0), ("unizero", 0.3, 0.3), ("sampled_unizero", None, 0.0)],
)
def test_value_and_reward_targets_are_label_smoothed_as_the_reference(tiny_cfg, policy_type, override, eps):
    """LightZero's UniZero trains on (1 - 0.1) two_hot + 0.1 / K (policy.label_smoothing_eps=0.1);
    its sampled UniZero does not smooth; unizero.label_smoothing_eps sets it."""
    from lz_tune.models.support import scalar_to_support

    extra = [f"policy_type={policy_type}"] + ([] if override is None else [f"unizero.label_smoothing_eps={override}"])
    if policy_type == "sampled_unizero":
        extra += ["env.env_id=Pendulum-v1", "sampled.num_samples=3"]
    cfg = tiny_cfg(*UNI, *extra)
    spec = env_spec_for(cfg)
    learner = get_algorithm(policy_type).make_learner(cfg, spec)
    assert learner.value_reward_label_smoothing == eps
    if policy_type == "sampled_unizero":
        return  # (its batches hold sampled-action targets; the loss path is unizero's)
    seen, batch = _seen_targets(learner, spec)
    value = scalar_to_support(torch.from_numpy(batch.target_value), cfg.model.value_support_size)
    reward = scalar_to_support(torch.from_numpy(batch.target_reward), cfg.model.reward_support_size)
    torch.testing.assert_close(seen["value"], (1 - eps) * value + eps / value.shape[-1])
    torch.testing.assert_close(seen["reward"], (1 - eps) * reward + eps / reward.shape[-1])
    torch.testing.assert_close(seen["value"].sum(-1), torch.ones(value.shape[:-1]))


def test_label_smoothing_key_is_checked(tiny_cfg):
    with pytest.raises(ConfigError, match="unizero.label_smoothing_eps"):
        tiny_cfg(*UNI, "unizero.label_smoothing_eps=1.0")
