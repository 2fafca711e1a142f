"""Tests for lz_tune.models networks: shapes, normalisation, gradients, init, projection, args."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lz_tune.models import (
    InitialOutput,
    MuZeroConvNetwork,
    MuZeroMLPNetwork,
    MuZeroNetwork,
    RecurrentOutput,
    normalize_latent,
    support_to_scalar,
)

SUPPORT = 300
BINS = 2 * SUPPORT + 1


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    """Tiny tensors gain nothing from intra-op threads; on a shared 2-core box the OpenMP
    spin-waits only add noise."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _mlp(**overrides) -> MuZeroMLPNetwork:
    kwargs = dict(observation_dim=4, action_space_size=2)
    kwargs.update(overrides)
    return MuZeroMLPNetwork(**kwargs)


def _conv(**overrides) -> MuZeroConvNetwork:
    kwargs = dict(observation_shape=(4, 64, 64), action_space_size=6, num_channels=16)
    kwargs.update(overrides)
    return MuZeroConvNetwork(**kwargs)


def _pixels(batch: int, shape: tuple[int, int, int]) -> torch.Tensor:
    return torch.randint(0, 256, (batch, *shape), dtype=torch.uint8)


def _assert_normalised(latent: torch.Tensor) -> None:
    flat = latent.flatten(1)
    assert torch.all(flat >= 0.0) and torch.all(flat <= 1.0)
    torch.testing.assert_close(flat.amin(1), torch.zeros(flat.shape[0]))
    torch.testing.assert_close(flat.amax(1), torch.ones(flat.shape[0]))


# ----------------------------------------------------------------------------- shapes


def test_mlp_output_shapes_and_latent_range():
    net = _mlp().eval()
    obs = torch.randn(5, 4)
    initial = net.initial_inference(obs)
    assert isinstance(initial, InitialOutput)
    assert initial.latent.shape == (5, 128) and net.latent_shape == (128,)
    assert initial.value_logits.shape == (5, BINS)
    assert initial.policy_logits.shape == (5, 2)
    _assert_normalised(initial.latent)
    torch.testing.assert_close(net(obs).value_logits, initial.value_logits)  # forward == initial_inference

    step = net.recurrent_inference(initial.latent, torch.tensor([0, 1, 1, 0, 1]))
    assert isinstance(step, RecurrentOutput)
    assert step.latent.shape == (5, 128)
    assert step.reward_logits.shape == (5, BINS)
    assert step.value_logits.shape == (5, BINS)
    assert step.policy_logits.shape == (5, 2)
    _assert_normalised(step.latent)


def test_outputs_are_frozen():
    net = _mlp().eval()
    out = net.initial_inference(torch.randn(2, 4))
    with pytest.raises(AttributeError):
        out.latent = out.latent  # type: ignore[misc]


@pytest.mark.parametrize("hidden_sizes,layer_norm", [((32, 16), False), ((32,), True), ((32, 16, 8), True)])
def test_mlp_variants(hidden_sizes, layer_norm):
    net = _mlp(
        latent_dim=24,
        hidden_sizes=hidden_sizes,
        layer_norm=layer_norm,
        value_support_size=5,
        reward_support_size=7,
        action_space_size=3,
    ).eval()
    out = net.initial_inference(torch.randn(4, 4))
    step = net.recurrent_inference(out.latent, torch.tensor([0, 1, 2, 2]))
    assert step.latent.shape == (4, 24)
    assert step.reward_logits.shape == (4, 15) and step.value_logits.shape == (4, 11)
    assert step.policy_logits.shape == (4, 3)
    _assert_normalised(step.latent)


def test_mlp_uint8_observations_are_scaled():
    net = _mlp().eval()
    obs = torch.randint(0, 256, (3, 4), dtype=torch.uint8)
    torch.testing.assert_close(net.representation(obs), net.representation(obs.float() / 255.0))


def test_mlp_dynamics_depends_on_action():
    net = _mlp().eval()
    latent = net.representation(torch.randn(1, 4)).expand(2, -1)
    next_latent, _ = net.dynamics(latent, torch.tensor([0, 1]))
    assert not torch.allclose(next_latent[0], next_latent[1])


def test_mlp_action_embedding_equals_one_hot_concat_linear():
    net = _mlp(latent_dim=8, hidden_sizes=(6,), action_space_size=3).eval()
    latent = torch.rand(4, 8)
    action = torch.tensor([2, 0, 1, 2])
    weight = torch.cat([net.dynamics_latent_weight, net.dynamics_action_embedding])  # [D + A, H0]
    pre = torch.cat([latent, F.one_hot(action, 3).float()], dim=1) @ weight
    hidden = torch.relu(pre)
    out = hidden @ net.dynamics_head_weight + net.dynamics_head_bias
    next_latent, reward_logits = net.dynamics(latent, action)
    torch.testing.assert_close(next_latent, normalize_latent(out[:, :8]))
    torch.testing.assert_close(reward_logits, out[:, 8:])


@pytest.mark.parametrize("size,latent_hw", [(64, 4), (96, 6)])
def test_conv_output_shapes_and_latent_range(size, latent_hw):
    net = MuZeroConvNetwork(observation_shape=(4, size, size), action_space_size=6).eval()
    assert net.latent_shape == (64, latent_hw, latent_hw)
    initial = net.initial_inference(_pixels(2, (4, size, size)))
    assert initial.latent.shape == (2, 64, latent_hw, latent_hw)
    assert initial.value_logits.shape == (2, BINS)
    assert initial.policy_logits.shape == (2, 6)
    _assert_normalised(initial.latent)

    step = net.recurrent_inference(initial.latent, torch.tensor([0, 5]))
    assert step.latent.shape == (2, 64, latent_hw, latent_hw)
    assert step.reward_logits.shape == (2, BINS)
    assert step.value_logits.shape == (2, BINS)
    assert step.policy_logits.shape == (2, 6)
    _assert_normalised(step.latent)


def test_conv_without_downsampling_keeps_resolution():
    net = MuZeroConvNetwork(
        observation_shape=(3, 7, 9),
        action_space_size=4,
        num_channels=8,
        num_res_blocks=2,
        downsample=False,
        value_support_size=10,
        reward_support_size=5,
        fc_hidden=(),
    ).eval()
    assert net.latent_shape == (8, 7, 9)
    out = net.initial_inference(torch.rand(2, 3, 7, 9))
    step = net.recurrent_inference(out.latent, torch.tensor([1, 3]))
    assert step.latent.shape == (2, 8, 7, 9)
    assert step.reward_logits.shape == (2, 11) and step.value_logits.shape == (2, 21)
    assert net.project(step.latent, with_grad=False).shape == (2, net.projection_dim)


def test_conv_uint8_observations_are_scaled():
    net = _conv().eval()
    obs = _pixels(2, (4, 64, 64))
    torch.testing.assert_close(net.representation(obs), net.representation(obs.float() / 255.0))


def test_conv_dynamics_depends_on_action():
    net = _conv().eval()
    latent = net.representation(_pixels(1, (4, 64, 64))).expand(2, -1, -1, -1)
    next_latent, _ = net.dynamics(latent, torch.tensor([0, 5]))
    assert not torch.allclose(next_latent[0], next_latent[1])


# ----------------------------------------------------------------------------- gradients


def _unroll_loss(net: MuZeroNetwork, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of every head over a K-step unroll; returns (loss, root latent)."""
    initial = net.initial_inference(obs)
    root = initial.latent
    root.retain_grad()
    batch = obs.shape[0]
    value_bins = initial.value_logits.shape[1]
    loss = F.cross_entropy(initial.value_logits, torch.randint(0, value_bins, (batch,)))
    loss = loss + F.cross_entropy(initial.policy_logits, torch.randint(0, net.action_space_size, (batch,)))
    latent = root
    for k in range(actions.shape[1]):
        step = net.recurrent_inference(latent, actions[:, k])
        reward_bins = step.reward_logits.shape[1]
        loss = loss + F.cross_entropy(step.reward_logits, torch.randint(0, reward_bins, (batch,)))
        loss = loss + F.cross_entropy(step.value_logits, torch.randint(0, value_bins, (batch,)))
        loss = loss + F.cross_entropy(step.policy_logits, torch.randint(0, net.action_space_size, (batch,)))
        latent = step.latent
    return loss, root


def _assert_all_grads(net: torch.nn.Module, zero_ok: tuple[str, ...] = ()) -> None:
    """Every non-projector parameter gets a finite gradient, non-zero unless its name starts
    with one of ``zero_ok`` (layers feeding a zero-initialised output layer)."""
    for name, param in net.named_parameters():
        if name.startswith("projector."):
            assert param.grad is None, name
            continue
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        if not name.startswith(zero_ok):
            assert param.grad.abs().sum() > 0, name


@pytest.mark.parametrize("layer_norm", [False, True])
def test_mlp_gradients_flow_through_unroll(layer_norm):
    net = _mlp(latent_dim=32, hidden_sizes=(32, 32), layer_norm=layer_norm).train()
    loss, root = _unroll_loss(net, torch.randn(6, 4), torch.randint(0, 2, (6, 5)))
    loss.backward()
    assert root.grad is not None and root.grad.abs().sum() > 0
    _assert_all_grads(net)


def test_conv_gradients_flow_through_unroll():
    net = _conv(num_channels=8, reduced_channels_value=4, reduced_channels_reward=4, reduced_channels_policy=4).train()
    loss, root = _unroll_loss(net, _pixels(4, (4, 64, 64)), torch.randint(0, 6, (4, 3)))
    loss.backward()
    assert root.grad is not None and root.grad.abs().sum() > 0
    # The value/reward output layers are zero-initialised, so at init nothing flows back
    # into the rest of those two heads; their output layers themselves do get gradients.
    upstream_of_zero_init = ("value_head.reduce.", "value_head.mlp.0.", "reward_head.reduce.", "reward_head.mlp.0.")
    _assert_all_grads(net, zero_ok=upstream_of_zero_init)
    assert net.value_head.mlp[-1].weight.grad.abs().sum() > 0
    assert net.reward_head.mlp[-1].weight.grad.abs().sum() > 0


def test_gradient_reaches_root_from_last_step_only():
    net = _mlp(latent_dim=16, hidden_sizes=(16,))
    root = net.representation(torch.randn(3, 4))
    latent = root
    for _ in range(4):
        latent = net.recurrent_inference(latent, torch.tensor([0, 1, 0])).latent
    policy = net.prediction(latent)[0]
    (grad,) = torch.autograd.grad(policy.sum(), root)
    assert grad.abs().sum() > 0


# ----------------------------------------------------------------------------- init


@pytest.mark.parametrize("make,obs", [(_mlp, lambda: torch.randn(4, 4)), (_conv, lambda: _pixels(4, (4, 64, 64)))])
def test_value_and_reward_are_zero_at_init(make, obs):
    net = make().eval()
    initial = net.initial_inference(obs())
    step = net.recurrent_inference(initial.latent, torch.tensor([0, 1, 1, 0]))
    for logits in (initial.value_logits, step.value_logits, step.reward_logits):
        assert torch.all(logits == 0.0)
        assert torch.all(support_to_scalar(logits) == 0.0)
    assert not torch.all(initial.policy_logits == 0.0)


# ----------------------------------------------------------------------------- projection


@pytest.mark.parametrize("make,obs", [(_mlp, lambda: torch.randn(4, 4)), (_conv, lambda: _pixels(4, (4, 64, 64)))])
def test_project_shapes_and_prediction_head_only_with_grad(make, obs):
    net = make(projection_dim=48, projection_hidden_dim=40, predictor_hidden_dim=12).train()
    calls = []
    net.projector.prediction_head.register_forward_hook(lambda *_: calls.append(1))
    latent = net.representation(obs())

    online = net.project(latent, with_grad=True)
    assert online.shape == (4, 48) and len(calls) == 1
    with torch.no_grad():
        target = net.project(latent, with_grad=False)
    assert target.shape == (4, 48) and len(calls) == 1
    assert not target.requires_grad

    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net.project(latent, with_grad=False), net.projector.projection(latent.flatten(1)))


# ----------------------------------------------------------------------------- misc


def test_inference_mode_matches_grad_mode():
    net = _mlp().eval()
    latent = net.representation(torch.randn(8, 4))
    action = torch.randint(0, 2, (8,))
    expected = net.recurrent_inference(latent, action)
    with torch.inference_mode():
        actual = net.recurrent_inference(latent, action)
    for field in ("latent", "reward_logits", "value_logits", "policy_logits"):
        torch.testing.assert_close(getattr(actual, field), getattr(expected, field).detach())


@pytest.mark.parametrize("make,obs", [(_mlp, lambda: torch.randn(3, 4)), (_conv, lambda: _pixels(3, (4, 64, 64)))])
def test_state_dict_round_trip(make, obs):
    source, target = make().eval(), make().eval()
    target.load_state_dict(source.state_dict())
    x = obs()
    a = source.initial_inference(x)
    b = target.initial_inference(x)
    torch.testing.assert_close(a.latent, b.latent)
    torch.testing.assert_close(a.policy_logits, b.policy_logits)


def test_normalize_latent_constant_and_shape():
    constant = torch.full((2, 3, 4, 4), 7.0)
    out = normalize_latent(constant)
    assert out.shape == constant.shape and torch.all(out == 0.0)
    x = torch.randn(3, 2, 5, 5)
    _assert_normalised(normalize_latent(x))


def test_base_class_is_abstract():
    with pytest.raises(TypeError):
        MuZeroNetwork(action_space_size=2, value_support_size=1, reward_support_size=1, projection_dim=4)


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "name,value",
    [
        ("observation_dim", 0),
        ("observation_dim", 4.0),
        ("action_space_size", 0),
        ("action_space_size", True),
        ("latent_dim", -1),
        ("hidden_sizes", ()),
        ("hidden_sizes", (64, 0)),
        ("hidden_sizes", 64),
        ("value_support_size", 0),
        ("reward_support_size", "300"),
        ("projection_dim", 0),
        ("projection_hidden_dim", 0),
        ("predictor_hidden_dim", 0),
        ("layer_norm", 1),
    ],
)
def test_mlp_bad_arguments(name, value):
    with pytest.raises(ValueError, match=name):
        _mlp(**{name: value})


@pytest.mark.parametrize(
    "name,value",
    [
        ("observation_shape", (64, 64)),
        ("observation_shape", (4, 0, 64)),
        ("observation_shape", "4x64x64"),
        ("action_space_size", 0),
        ("num_channels", 0),
        ("num_channels", 15),
        ("num_res_blocks", -1),
        ("downsample", "yes"),
        ("value_support_size", -3),
        ("reward_support_size", 0),
        ("reduced_channels_value", 0),
        ("reduced_channels_reward", 0),
        ("reduced_channels_policy", 0),
        ("fc_hidden", (32, -1)),
        ("projection_dim", 0),
    ],
)
def test_conv_bad_arguments(name, value):
    with pytest.raises(ValueError, match=name):
        _conv(**{name: value})
