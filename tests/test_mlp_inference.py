"""The numpy search engine for MLP networks agrees with the torch network it views."""

import numpy as np
import pytest
import torch

from lz_tune.algos.muzero import MuZeroPolicy
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.mlp import MuZeroMLPNetwork
from lz_tune.models.mlp_inference import MLPSearchInference, parameter_state
from lz_tune.models.support_np import support_to_scalar_np


def _network(*, actions, hidden=(64,), layer_norm=False, scale=0.1, seed=0):
    torch.manual_seed(seed)
    net = MuZeroMLPNetwork(
        observation_dim=4,
        action_space_size=actions,
        latent_dim=16,
        hidden_sizes=hidden,
        value_support_size=30,
        reward_support_size=20,
        layer_norm=layer_norm,
    )
    with torch.no_grad():  # non-trivial weights (the value/reward heads start at zero)
        for p in net.parameters():
            p.normal_(0.0, scale)
    return net.eval()


def _torch_step(net, latent, action):
    with torch.inference_mode():
        out = net.recurrent_inference(torch.from_numpy(latent), torch.from_numpy(action))
        return (
            out.latent.numpy().copy(),
            support_to_scalar_np(out.reward_logits.numpy()),
            support_to_scalar_np(out.value_logits.numpy()),
            out.policy_logits.numpy().copy(),
        )


def _assert_same_step(engine_out, torch_out):
    names = ("next_latent", "reward", "value", "policy_logits")
    for name, got, want in zip(names, engine_out, torch_out):
        assert got.dtype == np.float32 and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize(
    "actions,batch,hidden,layer_norm",
    [
        (2, 8, (64,), False),
        (18, 64, (64,), False),
        (3, 5, (32, 48), False),
        (4, 7, (24, 40), True),
        (1, 1, (8,), True),
    ],
)
def test_recurrent_step_matches_torch(actions, batch, hidden, layer_norm):
    net = _network(actions=actions, hidden=hidden, layer_norm=layer_norm)
    engine = MLPSearchInference()
    engine.bind(net)
    rng = np.random.default_rng(1)
    latent = rng.random((batch, 16), dtype=np.float32)
    action = rng.integers(0, actions, batch).astype(np.int64)
    _assert_same_step(engine(latent, action), _torch_step(net, latent, action))
    # decoded values are not trivially zero: the comparison above has teeth
    assert np.abs(engine(latent, action)[2]).max() > 0.1


def test_engine_sees_optimizer_steps_and_loaded_weights():
    net = _network(actions=3)
    engine = MLPSearchInference()
    latent = np.random.default_rng(2).random((4, 16), dtype=np.float32)
    action = np.array([0, 1, 2, 1], np.int64)
    engine.bind(net)
    before = [x.copy() for x in engine(latent, action)]
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    out = net.recurrent_inference(torch.from_numpy(latent), torch.from_numpy(action))
    (out.value_logits.pow(2).mean() + out.latent.sum()).backward()
    optimizer.step()
    engine.bind(net)
    after = engine(latent, action)
    assert not np.allclose(before[2], after[2])
    _assert_same_step(after, _torch_step(net, latent, action))
    other = _network(actions=3, seed=7)
    net.load_state_dict(other.state_dict())
    engine.bind(net)
    _assert_same_step(engine(latent, action), _torch_step(other, latent, action))


def test_parameter_state_covers_every_parameter_and_each_kind_of_change():
    """The bind key lists every parameter of the network (nested modules, ``None`` slots skipped)
    and changes on an in-place op, a replaced parameter and a cast, not on a read."""
    net = _network(actions=3, hidden=(8, 8), layer_norm=True)
    net.register_module("unused_slot", None)
    net.register_parameter("unused_param", None)
    state = parameter_state(net)
    assert state[0] == id(net)
    assert sorted(state[1]) == sorted((p.data_ptr(), p._version) for p in net.parameters())
    assert parameter_state(net) == state
    with torch.no_grad():
        next(net.parameters()).add_(1.0)
    changed = parameter_state(net)
    assert changed != state
    last = list(net.modules())[-1]
    name, param = next(iter(last.named_parameters(recurse=False)))
    setattr(last, name, torch.nn.Parameter(param.detach().clone()))
    replaced = parameter_state(net)
    assert replaced != changed
    assert parameter_state(net.double()) != replaced


def test_engine_rebinds_to_another_shape():
    engine = MLPSearchInference()
    for actions, hidden in [(2, (8,)), (5, (16, 16))]:
        net = _network(actions=actions, hidden=hidden)
        engine.bind(net)
        latent = np.random.default_rng(3).random((3, 16), dtype=np.float32)
        action = np.arange(3, dtype=np.int64) % actions
        _assert_same_step(engine(latent, action), _torch_step(net, latent, action))


def test_engine_limits_numpy_blas_threads_to_torch_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    previous = torch.get_num_threads()
    try:
        for threads in (2, 1):
            torch.set_num_threads(threads)
            MLPSearchInference().bind(_network(actions=2))
            info = threadpoolctl.threadpool_info()
            blas = [lib for lib in info if lib["user_api"] == "blas"]
            # numpy's own wheel BLAS when it is one (other libraries may load their own copy later)
            numpy_blas = [lib for lib in blas if "numpy" in lib["filepath"]] or blas
            assert numpy_blas, info
            assert all(lib["num_threads"] == threads for lib in numpy_blas), numpy_blas
    finally:
        torch.set_num_threads(previous)


def test_engine_refuses_unsupported_networks():
    with pytest.raises(ValueError, match="float32 parameters on the CPU"):
        MLPSearchInference().bind(_network(actions=2).double())
    with pytest.raises(RuntimeError, match="bind"):
        MLPSearchInference()(np.zeros((1, 16), np.float32), np.zeros(1, np.int64))


def _policy(inference, network):
    cfg = Config().with_updates(
        {
            "mcts.inference": inference,
            "model.kind": "mlp",
            "model.latent_dim": 16,
            "model.hidden_sizes": (64,),
            "model.value_support_size": 30,
            "model.reward_support_size": 20,
        }
    )
    spec = EnvSpecInfo(observation_shape=(4,), frame_shape=(4,), frame_stack=1, action_space_size=3, is_atari=False)
    return MuZeroPolicy(cfg, spec, network=network)


def test_search_with_engine_equals_search_with_torch():
    net = _network(actions=3)
    auto, reference = _policy("auto", net), _policy("torch", net)
    rng = np.random.default_rng(4)
    obs = rng.normal(size=(6, 4)).astype(np.float32)
    with torch.inference_mode():
        latent, value, logits, fn = auto.search_backend(obs)
        latent_t, value_t, logits_t, fn_t = reference.search_backend(obs)
    assert isinstance(latent, np.ndarray) and isinstance(fn, MLPSearchInference)
    assert isinstance(latent_t, torch.Tensor) and not isinstance(fn_t, MLPSearchInference)
    np.testing.assert_allclose(latent, latent_t.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, value_t, rtol=1e-4, atol=1e-4)  # root prediction through the engine
    np.testing.assert_allclose(logits, logits_t, rtol=1e-4, atol=1e-4)
    mask = np.ones((6, 3), bool)
    mask[0, 1] = False
    to_play = -np.ones(6, np.int64)
    out_a, value_a = auto.search(obs, mask, to_play, num_simulations=30, noise=True, rng=np.random.default_rng(5))
    out_t, value_t = reference.search(obs, mask, to_play, num_simulations=30, noise=True, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(out_a.visit_counts, out_t.visit_counts)
    np.testing.assert_allclose(out_a.root_value, out_t.root_value, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value_a, value_t, rtol=1e-5, atol=1e-5)
    assert out_a.visit_counts[0, 1] == 0


def test_inference_key_is_validated():
    with pytest.raises(ConfigError, match="mcts.inference"):
        Config().with_updates({"mcts.inference": "numba"})
