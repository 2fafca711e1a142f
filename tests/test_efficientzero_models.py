"""Tests for lz_tune.models.efficientzero: shapes, zero prefix at init, the LSTM state,
gradients through the unroll, batch-1 eval, state-dict round trip, argument checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lz_tune.models.base import InitialOutput
from lz_tune.models.conv import MuZeroConvNetwork
from lz_tune.models.efficientzero import EfficientZeroNetwork, EZRecurrentOutput
from lz_tune.models.mlp import MuZeroMLPNetwork
from lz_tune.models.support import support_to_scalar

OBS_SHAPE = (4, 16, 16)
H = 24  # lstm hidden size
R = 2 * 5 + 1  # reward bins
V = 2 * 10 + 1  # value bins


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _mlp(**overrides) -> EfficientZeroNetwork:
    kwargs = dict(
        observation_dim=4,
        action_space_size=3,
        latent_dim=16,
        hidden_sizes=(32,),
        value_support_size=10,
        reward_support_size=5,
        projection_dim=8,
        layer_norm=True,
        lstm_hidden_size=H,
        projection_hidden_dim=16,
        predictor_hidden_dim=8,
    )
    kwargs.update(overrides)
    return EfficientZeroNetwork.mlp(**kwargs)


def _conv(**overrides) -> EfficientZeroNetwork:
    kwargs = dict(
        observation_shape=OBS_SHAPE,
        action_space_size=3,
        num_channels=8,
        num_res_blocks=1,
        downsample=False,
        value_support_size=10,
        reward_support_size=5,
        projection_dim=8,
        lstm_hidden_size=H,
        reduced_channels=4,
        projection_hidden_dim=16,
        predictor_hidden_dim=8,
    )
    kwargs.update(overrides)
    return EfficientZeroNetwork.conv(**kwargs)


def _obs(kind: str, batch: int) -> torch.Tensor:
    if kind == "mlp":
        return torch.randn(batch, 4)
    return torch.randint(0, 256, (batch, *OBS_SHAPE), dtype=torch.uint8)


NETS = {"mlp": _mlp, "conv": _conv}
KINDS = pytest.mark.parametrize("kind", ["mlp", "conv"])


def _randomise_prefix_output(net: EfficientZeroNetwork) -> None:
    """The zero-initialised last Linear blocks every upstream gradient and hides the hidden
    state; give it random weights."""
    torch.nn.init.normal_(net.prefix_mlp[-1].weight, std=0.5)


@KINDS
def test_shapes_and_attributes(kind):
    net = NETS[kind]().eval()
    latent_shape = (16,) if kind == "mlp" else (8, 16, 16)
    assert net.latent_shape == latent_shape
    assert (net.action_space_size, net.value_support_size, net.reward_support_size) == (3, 10, 5)
    assert (net.projection_dim, net.lstm_hidden_size) == (8, H)
    assert type(net.muzero) is (MuZeroMLPNetwork if kind == "mlp" else MuZeroConvNetwork)
    assert not isinstance(net, (MuZeroMLPNetwork, MuZeroConvNetwork))

    obs = _obs(kind, 5)
    initial = net.initial_inference(obs)
    assert isinstance(initial, InitialOutput)
    assert initial.latent.shape == (5, *latent_shape)
    assert initial.value_logits.shape == (5, V) and initial.policy_logits.shape == (5, 3)
    torch.testing.assert_close(net(obs).value_logits, initial.value_logits)

    h, c = net.initial_hidden(5)
    assert h.shape == c.shape == (5, H) and not h.any() and not c.any()
    step = net.recurrent_inference(initial.latent, (h, c), torch.tensor([0, 1, 2, 1, 0]))
    assert isinstance(step, EZRecurrentOutput)
    assert step.latent.shape == (5, *latent_shape)
    assert step.hidden[0].shape == step.hidden[1].shape == (5, H)
    assert step.value_prefix_logits.shape == (5, R)
    assert step.value_logits.shape == (5, V) and step.policy_logits.shape == (5, 3)
    flat = step.latent.flatten(1)
    torch.testing.assert_close(flat.amin(1), torch.zeros(5))
    torch.testing.assert_close(flat.amax(1), torch.ones(5))
    assert net.project(step.latent, with_grad=True).shape == (5, 8)

    # next latent is exactly the wrapped MuZero dynamics latent
    next_latent, _, _ = net.dynamics(initial.latent, (h, c), torch.tensor([0, 1, 2, 1, 0]))
    torch.testing.assert_close(next_latent, net.muzero.dynamics(initial.latent, torch.tensor([0, 1, 2, 1, 0]))[0])


def test_conv_reward_head_is_not_computed():
    net = _conv()
    assert isinstance(net.muzero.reward_head, torch.nn.Identity)
    assert not any(key.startswith("muzero.reward_head") for key in net.state_dict())


@KINDS
def test_zero_value_prefix_at_init(kind):
    net = NETS[kind]().train()
    initial = net.initial_inference(_obs(kind, 4))
    _, hidden, logits = net.dynamics(initial.latent, net.initial_hidden(4), torch.tensor([0, 1, 2, 0]))
    _, _, logits = net.dynamics(initial.latent, hidden, torch.tensor([2, 1, 0, 0]))  # non-zero hidden too
    assert torch.equal(logits, torch.zeros(4, R))
    assert torch.equal(support_to_scalar(logits), torch.zeros(4))


@KINDS
def test_hidden_state_carries_information(kind):
    net = NETS[kind]().eval()
    _randomise_prefix_output(net)
    with torch.no_grad():
        latent = net.representation(_obs(kind, 1)).expand(2, *net.latent_shape)
        action = torch.tensor([1, 1])
        _, first_hidden, _ = net.dynamics(latent, net.initial_hidden(2), torch.tensor([0, 2]))
        assert not torch.allclose(first_hidden[0][0], first_hidden[0][1])
        # same latent and action, different hidden -> different prefix
        _, _, logits = net.dynamics(latent, first_hidden, action)
        assert not torch.allclose(logits[0], logits[1])
        _, _, from_zero = net.dynamics(latent, net.initial_hidden(2), action)
        torch.testing.assert_close(from_zero[0], from_zero[1])
        assert not torch.allclose(logits, from_zero)


@KINDS
def test_gradients_reach_lstm_and_encoder_through_two_steps(kind):
    net = NETS[kind]().train()
    _randomise_prefix_output(net)
    batch = 4
    initial = net.initial_inference(_obs(kind, batch))
    latent, hidden = initial.latent, net.initial_hidden(batch)
    loss = torch.zeros(())
    for actions in (torch.tensor([0, 1, 2, 0]), torch.tensor([2, 2, 1, 0])):
        latent, hidden, logits = net.dynamics(latent, hidden, actions)
        loss = loss + F.cross_entropy(logits, torch.randint(0, R, (batch,)))
    loss.backward()

    encoder = net.muzero.representation_in_weight if kind == "mlp" else net.muzero.stem[0].weight
    for name, param in [
        ("lstm.weight_ih", net.lstm.weight_ih),
        ("lstm.weight_hh", net.lstm.weight_hh),
        ("prefix_norm.weight", net.prefix_norm.weight),
        ("encoder", encoder),
    ]:
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name  # weight_hh: only through the second step's hidden
    if kind == "mlp":
        assert net.muzero.dynamics_latent_weight.grad.abs().sum() > 0
    else:
        assert net.muzero.dynamics_conv.weight.grad.abs().sum() > 0
        assert net.prefix_reduce[0].weight.grad.abs().sum() > 0


@KINDS
def test_batch_of_one_in_eval_mode(kind):
    net = NETS[kind]().eval()
    with torch.no_grad():
        initial = net.initial_inference(_obs(kind, 1))
        step = net.recurrent_inference(initial.latent, net.initial_hidden(1), torch.tensor([2]))
        step = net.recurrent_inference(step.latent, step.hidden, torch.tensor([0]))
    assert step.value_prefix_logits.shape == (1, R) and step.hidden[0].shape == (1, H)
    assert torch.isfinite(step.value_prefix_logits).all() and torch.isfinite(step.hidden[1]).all()


@KINDS
def test_state_dict_round_trip(kind):
    net = NETS[kind]()
    _randomise_prefix_output(net)
    net.train()
    net.initial_inference(_obs(kind, 4))  # move the BatchNorm running stats away from init
    torch.manual_seed(1)
    other = NETS[kind]()
    other.load_state_dict(net.state_dict())
    net.eval()
    other.eval()
    obs = _obs(kind, 3)
    action = torch.tensor([0, 1, 2])
    with torch.no_grad():
        outs = []
        for model in (net, other):
            initial = model.initial_inference(obs)
            step = model.recurrent_inference(initial.latent, model.initial_hidden(3), action)
            step = model.recurrent_inference(step.latent, step.hidden, action)
            outs.append(
                (
                    initial.value_logits,
                    step.latent,
                    step.hidden[0],
                    step.value_prefix_logits,
                    step.value_logits,
                    step.policy_logits,
                )
            )
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert any(key.startswith("lstm.") for key in net.state_dict())


def test_initial_hidden_follows_parameter_dtype():
    net = _mlp().double()
    h, c = net.initial_hidden(2)
    assert h.dtype == c.dtype == torch.float64
    assert h.data_ptr() != c.data_ptr()
    _, hidden, logits = net.dynamics(
        net.representation(torch.randn(2, 4, dtype=torch.float64)), (h, c), torch.tensor([0, 1])
    )
    assert logits.dtype == torch.float64


def test_output_is_frozen():
    net = _mlp().eval()
    step = net.recurrent_inference(torch.rand(2, 16), net.initial_hidden(2), torch.tensor([0, 1]))
    with pytest.raises(AttributeError):
        step.latent = step.latent  # type: ignore[misc]


class _SubclassedMLP(MuZeroMLPNetwork):
    pass


@pytest.mark.parametrize(
    "muzero", [None, _SubclassedMLP(observation_dim=4, action_space_size=2), torch.nn.Linear(2, 2)]
)
def test_rejects_other_network_types(muzero):
    with pytest.raises(TypeError, match="muzero"):
        EfficientZeroNetwork(muzero)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"lstm_hidden_size": 0}, "lstm_hidden_size"),
        ({"reduced_channels": 0}, "reduced_channels"),
        ({"fc_hidden": (0,)}, "fc_hidden"),
    ],
)
def test_argument_checks(kwargs, name):
    muzero = MuZeroMLPNetwork(observation_dim=4, action_space_size=2, latent_dim=8, hidden_sizes=(8,))
    with pytest.raises(ValueError, match=name):
        EfficientZeroNetwork(muzero, **kwargs)


@pytest.mark.parametrize("steps,horizon", [(1, 5), (4, 2), (5, 5), (7, 3), (3, 1)])
def test_value_prefix_unroll_equals_the_step_by_step_dynamics(steps, horizon):
    """The learner's batched value prefix (one torch.lstm call over chunks of `horizon` steps, the
    LSTM reset after each) gives the logits and gradients of `dynamics` step by step with the
    unroll's resets, whatever U and the horizon (a padded last chunk included)."""
    net = _mlp()
    _randomise_prefix_output(net)
    batch = 6
    obs, actions = _obs("mlp", batch), torch.randint(0, 3, (batch, steps))

    def stepwise():
        latent, hidden, out = net.initial_inference(obs).latent, net.initial_hidden(batch), []
        for k in range(1, steps + 1):
            latent, hidden, logits = net.dynamics(latent, hidden, actions[:, k - 1])
            out.append(logits)
            if k % horizon == 0:
                hidden = net.initial_hidden(batch)
        return torch.stack(out)

    def batched():
        latent, inputs = net.initial_inference(obs).latent, []
        for k in range(steps):
            latent, lstm_input = net.latent_dynamics(latent, actions[:, k])
            inputs.append(lstm_input)
        return net.value_prefix_unroll(torch.stack(inputs), horizon)

    grads = []
    for fn in (stepwise, batched):
        net.zero_grad()
        logits = fn()
        (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()
        grads.append({n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None})
        if fn is stepwise:
            expected = logits.detach()
    assert logits.shape == (steps, batch, R)
    torch.testing.assert_close(logits.detach(), expected, rtol=1e-5, atol=1e-6)
    assert grads[0].keys() == grads[1].keys() and any(n.startswith("lstm.") for n in grads[0])
    for name in grads[0]:
        torch.testing.assert_close(
            grads[1][name],
            grads[0][name],
            rtol=1e-4,
            atol=1e-5,  # summation order
            msg=lambda m, name=name: f"{name}: {m}",
        )
