"""The default update path (``learner.update_path=fused``) computes what the eager reference path
computes: the same losses, gradients, priorities and BatchNorm running statistics on fixed
batches, for every registered policy type, MLP and conv networks, with and without the SSL and
entropy terms; and its fused optimizer makes the same step from the same gradients. (Weights
after an Adam step are not compared: a parameter whose gradient is float noise, such as a bias
before a BatchNorm, moves by about the learning rate in either direction.)"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.buffer import GameBuffer
from lz_tune.policy_registry import POLICY_TYPES
from lz_tune.workers import SegmentCollector, env_spec_for

CONV = (
    "env.env_id=ALE/Pong-v5",
    "model.kind=conv",
    "model.num_channels=8",
    "model.downsample=True",
    "env.frame_stack=2",
    "env.image_size=32",
    "model.value_support_size=10",
    "model.reward_support_size=5",
    "model.projection_dim=16",
    "efficientzero.lstm_hidden_size=8",
    "env.max_episode_steps=40",
)


def _batch_and_learners(cfg, seed: int = 0):
    spec = env_spec_for(cfg)
    collector = SegmentCollector(cfg.with_overrides(["mcts.num_simulations=2"]), seed=seed)
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
    while buffer.num_transitions < 60:
        buffer.push(collector.collect(temperature=1.0).segments)
    collector.close()
    learners = {}
    for path in ("fused", "eager"):
        c = cfg.with_overrides([f"learner.update_path={path}"])
        learners[path] = get_algorithm(c.policy_type).make_learner(c, spec)
    learners["eager"].load_state_dict(copy.deepcopy(learners["fused"].state_dict()))
    index = buffer.sample(cfg.learner.batch_size)
    batch = learners["eager"].make_batch(buffer, index, rng=np.random.default_rng(2))
    return batch, learners


def _grads_of_one_update(learner, batch):
    """(logs, priorities, gradients, state after the step) of one learn() call."""
    grads = {}
    hooks = [
        p.register_hook(lambda g, name=name: grads.__setitem__(name, g.clone()))
        for name, p in learner.policy.network.named_parameters()
    ]
    logs, priorities = learner.learn(batch)
    for h in hooks:
        h.remove()
    params = {name for name, _ in learner.policy.network.named_parameters()}
    buffers = {k: v.clone() for k, v in learner.policy.network.state_dict().items() if k not in params}
    return logs, priorities, grads, buffers


# types with one unroll path (update_path only picks the optimizer kernel) or MuZero's learner unchanged
# are not rows here (alphazero: one batched pass over the window's positions on either path, and
# board games only: tests/test_alphazero.py)
ONE_PATH = {"stochastic_muzero", "muzero_rnn_full_obs", "muzero_context", "unizero", "sampled_unizero", "alphazero"}
#: the env a type needs instead of the tiny CartPole config's (alphazero searches a game's true rules)
TYPE_ENV = {"alphazero": ("env.env_id=openspiel:tic_tac_toe",)}
CASES = [
    (t, kind, extra)
    for t in sorted(POLICY_TYPES)
    if t not in ONE_PATH
    for kind in ("mlp", "conv")
    for extra in ((), ("learner.ssl_loss_weight=0", "learner.policy_entropy_weight=0.01"))
]
# the MLP network behind a conv stem (model.kind=conv_mlp) on a small channels-last image env
CONV_MLP = (
    "env.env_id='LzTuneTest/HwcRows-v0'",
    "env.import_modules=('tests.registered_env:register',)",
    "model.kind=conv_mlp",
    "model.num_channels=4",
    "model.num_res_blocks=1",
)
CASES += [(t, "conv_mlp", ()) for t in ("muzero", "efficientzero", "gumbel_muzero", "sampled_efficientzero")]
# UniZero: one unroll path, but the fused path runs its image encoder channels-last
CASES += [("unizero", "conv", ())]
# continuous actions (tanh-Gaussian policy, float actions) for the sampled types
CASES += [
    (t, "pendulum", extra)
    for t in sorted(POLICY_TYPES)
    if t.startswith("sampled_") and t not in ONE_PATH
    for extra in ((), ("learner.ssl_loss_weight=0", "learner.policy_entropy_weight=0.01"))
]


@pytest.mark.parametrize(
    "policy_type,kind,extra", CASES, ids=[f"{t}-{k}-{'ssl' if not e else 'entropy'}" for t, k, e in CASES]
)
def test_fused_path_equals_eager_path(tiny_cfg, policy_type, kind, extra):
    torch.manual_seed(0)
    env = (
        CONV
        if kind == "conv"
        else CONV_MLP
        if kind == "conv_mlp"
        else (("env.env_id=Pendulum-v1", "env.max_episode_steps=30") if kind == "pendulum" else ())
    )
    cfg = tiny_cfg(
        f"policy_type={policy_type}",
        "efficientzero.lstm_hidden_size=8",
        "efficientzero.lstm_horizon_len=2",
        "sampled.num_samples=2",
        *env,
        *extra,
    )
    batch, learners = _batch_and_learners(cfg)
    if kind == "conv":
        # The fused path runs conv networks channels-last: its convolutions sum in another order.
        # In float32 that rounding flips near-ties in the latent's min-max normalisation, whose
        # gradient goes to the arg-max element, and moves up to ~5% of a conv weight's gradient;
        # in float64 nothing flips and both paths must agree to the tolerances below.
        for learner in learners.values():
            learner.policy.network.double()
            learner.target_policy.network.double()
    fused = _grads_of_one_update(learners["fused"], batch)
    eager = _grads_of_one_update(learners["eager"], batch)
    for key in eager[0]:
        np.testing.assert_allclose(fused[0][key], eager[0][key], rtol=2e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(fused[1], eager[1], rtol=1e-5, atol=1e-6)
    assert fused[2].keys() == eager[2].keys() and len(eager[2]) > 10
    for name, g in eager[2].items():
        scale = float(g.abs().max()) + 1e-12
        assert float((fused[2][name] - g).abs().max()) <= 1e-4 * scale + 1e-7, name
    for name, v in eager[3].items():  # BatchNorm running statistics and counters
        if v.is_floating_point():
            np.testing.assert_allclose(fused[3][name].numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
        else:
            assert torch.equal(fused[3][name], v), name


CONV_TYPES = sorted({t for t, kind, _ in CASES if kind == "conv"} - ONE_PATH)


@pytest.mark.parametrize("policy_type", CONV_TYPES)
def test_fused_path_runs_conv_networks_channels_last(tiny_cfg, policy_type):
    """The fused learner's conv weights (learner and target network) and its latents are
    channels-last; the eager reference path keeps the default NCHW layout."""
    cfg = tiny_cfg(f"policy_type={policy_type}", "efficientzero.lstm_hidden_size=8", "sampled.num_samples=2", *CONV)
    spec = env_spec_for(cfg)
    for path in ("fused", "eager"):
        c = cfg.with_overrides([f"learner.update_path={path}"])
        learner = get_algorithm(c.policy_type).make_learner(c, spec)
        for net in (learner.policy.network, learner.target_policy.network):
            convs = [p for p in net.parameters() if p.dim() == 4 and p.shape[-1] > 1]
            assert convs and all(
                p.is_contiguous(memory_format=torch.channels_last) == (path == "fused") for p in convs
            ), path
        obs = torch.zeros((2, *spec.observation_shape), dtype=torch.uint8)
        latent = learner.policy.network.representation(obs)
        assert latent.is_contiguous(memory_format=torch.channels_last) == (path == "fused"), path


@pytest.mark.parametrize("policy_type", ["unizero", "sampled_unizero"])
def test_fused_path_runs_unizero_image_encoders_channels_last(tiny_cfg, policy_type):
    """UniZero's image encoder (learner and target network) is channels-last on the fused path,
    and its input too; the eager path and vector encoders keep the default layout."""
    cfg = tiny_cfg(f"policy_type={policy_type}", "sampled.num_samples=2", *CONV)
    spec = env_spec_for(cfg)
    seen = []
    for path in ("fused", "eager"):
        c = cfg.with_overrides([f"learner.update_path={path}"])
        learner = get_algorithm(c.policy_type).make_learner(c, spec)
        for net in (learner.policy.network, learner.target_policy.network):
            convs = [p for p in net.encoder.parameters() if p.dim() == 4 and p.shape[-1] > 1]
            assert convs and all(
                p.is_contiguous(memory_format=torch.channels_last) == (path == "fused") for p in convs
            ), path
        first_conv = next(m for m in learner.policy.network.encoder.modules() if isinstance(m, torch.nn.Conv2d))
        hook = first_conv.register_forward_hook(
            lambda m, args, out: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
        )
        learner.policy.network.encode(torch.zeros((2, *spec.observation_shape), dtype=torch.uint8))
        hook.remove()
    assert seen == [True, False]
    vector = get_algorithm("unizero").make_learner(tiny_cfg("policy_type=unizero"), env_spec_for(tiny_cfg()))
    assert not vector.policy.network.channels_last


def test_eager_path_is_selectable_and_validated(tiny_cfg):
    from lz_tune.config import ConfigError

    assert tiny_cfg().learner.update_path == "fused"
    with pytest.raises(ConfigError, match="learner.update_path"):
        tiny_cfg("learner.update_path=compiled")


@pytest.mark.parametrize("optim_type", ["adam", "adamw", "sgd"])
def test_fused_optimizer_makes_the_same_step(tiny_cfg, optim_type):
    from lz_tune.algos.common import make_optimizer

    cfg = tiny_cfg(f"learner.optim_type={optim_type}", "learner.weight_decay=1e-2")
    torch.manual_seed(0)
    shapes = [(16, 8), (8,), (3, 4, 5)]
    params = {
        fused: [
            torch.nn.Parameter(torch.randn(s, generator=torch.Generator().manual_seed(i))) for i, s in enumerate(shapes)
        ]
        for fused in (True, False)
    }
    optims = {fused: make_optimizer(cfg, params[fused], fused=fused) for fused in (True, False)}
    for _ in range(3):
        grads = [torch.randn(s) for s in shapes]
        for fused in (True, False):
            for p, g in zip(params[fused], grads):
                p.grad = g.clone()
            optims[fused].step()
        for a, b in zip(params[True], params[False]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


ONE_UNROLL_PATH = {"stochastic_muzero", "muzero_rnn_full_obs", "unizero", "sampled_unizero"}


@pytest.mark.parametrize("policy_type", sorted(POLICY_TYPES))
def test_a_type_without_the_batched_unroll_says_so(tiny_cfg, policy_type):
    """No type loses the fast path silently: the types whose unroll has one path return a
    notice naming the type when the fused path is asked for; the others (and any type asked
    for the eager path) return None."""
    cfg = tiny_cfg(f"policy_type={policy_type}", "sampled.num_samples=2", *TYPE_ENV.get(policy_type, ()))
    spec = env_spec_for(cfg)
    fused = get_algorithm(policy_type).make_learner(cfg, spec).update_path_notice()
    eager = (
        get_algorithm(policy_type)
        .make_learner(cfg.with_overrides(["learner.update_path=eager"]), spec)
        .update_path_notice()
    )
    assert eager is None
    if policy_type in ONE_UNROLL_PATH:
        assert fused and f"policy_type={policy_type}" in fused and "learner.update_path" in fused, fused
    else:
        assert fused is None, fused


def test_the_driver_prints_the_notice_at_start(tiny_cfg, tmp_path):
    from lz_tune.pipeline import Driver

    lines: list[str] = []
    driver = Driver(tiny_cfg("policy_type=stochastic_muzero"), exp_dir=str(tmp_path / "run"), print_fn=lines.append)
    try:
        assert any("note: policy_type=stochastic_muzero has one unroll path" in line for line in lines), lines
    finally:
        driver.close()
    lines.clear()
    driver = Driver(tiny_cfg(), exp_dir=str(tmp_path / "run2"), print_fn=lines.append)
    try:
        assert not any("note:" in line for line in lines), lines
    finally:
        driver.close()
