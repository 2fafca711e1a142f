"""``learner.precision=bfloat16``: the learner's forward pass really runs its matrix products in
bfloat16 (torch.autocast), the losses stay float32 and close to the float32 update's for every
registered policy type, and a bfloat16 learner fits a fixed buffer as the float32 one does.
Also ``learner.device``: a device this torch cannot use is a ConfigError naming the key."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.algos.common import require_device
from lz_tune.buffer import GameBuffer
from lz_tune.config import ConfigError
from lz_tune.policy_registry import POLICY_TYPES
from lz_tune.workers import SegmentCollector, env_spec_for


def _buffer(cfg, transitions: int = 80) -> GameBuffer:
    spec = env_spec_for(cfg)
    collector = SegmentCollector(cfg.with_overrides(["mcts.num_simulations=2"]), seed=0)
    b, algo = cfg.buffer, get_algorithm(cfg.policy_type)
    buffer = GameBuffer(
        capacity_transitions=10_000,
        num_unroll_steps=b.num_unroll_steps,
        td_steps=b.td_steps,
        discount=0.99,
        frame_stack=spec.frame_stack,
        action_space_size=spec.action_space_size,
        step_columns=algo.step_columns(cfg, spec),
        policy_target_size=algo.policy_target_size(cfg, spec),
        action_dim=spec.action_dim,
        seed=1,
    )
    while buffer.num_transitions < transitions:
        buffer.push(collector.collect(temperature=1.0).segments)
    collector.close()
    return buffer


def _learners(cfg):
    """A float32 and a bfloat16 learner with the same weights and optimizer state."""
    spec = env_spec_for(cfg)
    out = {}
    for precision in ("float32", "bfloat16"):
        c = cfg.with_overrides([f"learner.precision={precision}"])
        out[precision] = get_algorithm(c.policy_type).make_learner(c, spec)
    out["bfloat16"].load_state_dict(copy.deepcopy(out["float32"].state_dict()))
    return out


def _linear_output_dtypes(learner, batch) -> set:
    """dtypes of every nn.Linear output during one learn() call."""
    seen: set = set()
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
        for m in learner.policy.network.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    try:
        logs, priorities = learner.learn(batch)
    finally:
        for h in hooks:
            h.remove()
    return seen, logs, priorities


@pytest.mark.parametrize("policy_type", sorted(POLICY_TYPES))
def test_bfloat16_update_runs_in_bfloat16_and_matches_float32(tiny_cfg, policy_type):
    torch.manual_seed(0)
    env: tuple[str, ...] = ()
    if policy_type.startswith("sampled_"):
        env = ("env.env_id=Pendulum-v1", "env.max_episode_steps=30")
    elif policy_type == "alphazero":  # searches a game's true rules: an OpenSpiel game
        env = ("env.env_id=openspiel:tic_tac_toe", "env.max_episode_steps=None")
    cfg = tiny_cfg(
        f"policy_type={policy_type}",
        "efficientzero.lstm_hidden_size=8",
        "efficientzero.lstm_horizon_len=2",
        "sampled.num_samples=2",
        *env,
    )
    buffer = _buffer(cfg, 60)
    learners = _learners(cfg)
    batch = learners["float32"].make_batch(buffer, buffer.sample(cfg.learner.batch_size), rng=np.random.default_rng(2))
    dtypes32, logs32, prio32 = _linear_output_dtypes(learners["float32"], batch)
    dtypes16, logs16, prio16 = _linear_output_dtypes(learners["bfloat16"], batch)
    assert dtypes32 == {torch.float32}
    assert torch.bfloat16 in dtypes16, "learner.precision=bfloat16 ran no matrix product in bfloat16"
    assert logs16["loss/total"] != logs32["loss/total"]  # the arithmetic did change
    for key in ("loss/total", "loss/policy", "loss/value"):
        assert np.isfinite(logs16[key])
        np.testing.assert_allclose(logs16[key], logs32[key], rtol=0.05, atol=0.02, err_msg=key)
    assert prio16.dtype == np.float32 and np.isfinite(prio16).all()
    np.testing.assert_allclose(prio16, prio32, rtol=0.1, atol=0.1)
    # weights and optimizer state stay float32 (autocast casts copies)
    assert {p.dtype for p in learners["bfloat16"].policy.network.parameters()} == {torch.float32}


def test_bfloat16_learner_fits_a_fixed_buffer_like_float32(tiny_cfg):
    """60 updates on one fixed buffer: the bfloat16 learner's loss falls as the float32 one's does."""
    torch.manual_seed(0)
    cfg = tiny_cfg("learner.optim_type=adam", "learner.learning_rate=3e-3", "learner.batch_size=32")
    buffer = _buffer(cfg, 120)
    learners = _learners(cfg)
    curves = {}
    for precision, learner in learners.items():
        rng = np.random.default_rng(3)
        losses = []
        for _ in range(60):
            batch = learner.make_batch(buffer, buffer.sample(cfg.learner.batch_size), rng=rng)
            losses.append(learner.learn(batch)[0]["loss/total"])
        curves[precision] = (np.mean(losses[:5]), np.mean(losses[-5:]))
    for precision, (first, last) in curves.items():
        assert last < 0.8 * first, (precision, curves)
    assert curves["bfloat16"][1] < 1.15 * curves["float32"][1], curves


def test_learner_device_this_torch_cannot_use_is_a_config_error():
    with pytest.raises(ConfigError, match="learner.device"):
        require_device("gpu0", "learner.device")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="learner.device: asks for 'cuda'.*no CUDA device"):
            require_device("cuda", "learner.device")
    else:
        with pytest.raises(ConfigError, match="learner.device"):
            require_device(f"cuda:{torch.cuda.device_count()}", "learner.device")
    assert require_device("cpu", "learner.device") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_learner_on_cuda_without_cuda_fails_before_building(tiny_cfg):
    cfg = tiny_cfg("learner.device=cuda")
    with pytest.raises(ConfigError, match="learner.device"):
        get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))
