"""The numpy search engines of the composed MuZero networks agree with their torch paths on the
same weights: Stochastic MuZero (decision and chance expansions in one call) and
muzero_rnn_full_obs (GRU history and read-in), step by step and over whole searches."""

import numpy as np
import pytest
import torch
from engine_checks import assert_same_search, root_values

from lz_tune.algos.efficientzero import EfficientZeroPolicy
from lz_tune.algos.muzero import MuZeroPolicy
from lz_tune.algos.muzero_rnn_full_obs import RNNFullObsPolicy
from lz_tune.algos.stochastic_muzero import StochasticMuZeroPolicy
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.rnn_inference import RNNFullObsSearchInference
from lz_tune.models.sequential_inference import SequentialMLP
from lz_tune.models.stochastic_inference import StochasticSearchInference

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SPEC = EnvSpecInfo(observation_shape=(4,), frame_shape=(4,), frame_stack=1, action_space_size=3, is_atari=False)
BASE = {
    "model.kind": "mlp",
    "model.latent_dim": 16,
    "model.hidden_sizes": (24,),
    "model.value_support_size": 30,
    "model.reward_support_size": 20,
    "stochastic.chance_space_size": 4,
    "context.rnn_hidden_size": 12,
}


def _policies(cls, policy_type: str, **extra):
    cfg = Config().with_updates({"policy_type": policy_type, **BASE, **extra})
    torch.manual_seed(0)
    auto = cls(cfg, SPEC)
    with torch.no_grad():  # the value / reward heads start at zero
        for p in auto.network.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return auto, cls(cfg.with_updates({"mcts.inference": "torch"}), SPEC, network=auto.network)


def _assert_same(got, want, names):
    for name, g, w in zip(names, got, want):
        w = w.numpy() if isinstance(w, torch.Tensor) else np.asarray(w)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_stochastic_step_expands_decision_and_chance_nodes_like_torch(layer_norm):
    auto, reference = _policies(StochasticMuZeroPolicy, "stochastic_muzero", **{"model.layer_norm": layer_norm})
    rng = np.random.default_rng(1)
    latent = rng.random((7, 16), dtype=np.float32)
    slot = np.array([0, 5, 2, 3, 6, 1, 4], np.int64)  # actions < 3, chance codes 3..6, mixed rows
    engine = auto._chance_engine
    engine.bind(auto.network)
    for rows in (np.arange(7), np.flatnonzero(slot < 3), np.flatnonzero(slot >= 3)):
        with torch.inference_mode():
            want = reference.recurrent_inference(torch.from_numpy(latent[rows]), slot[rows])
        got = engine(latent[rows], slot[rows])
        _assert_same(got, want, ("child", "reward", "value", "logits"))
    assert np.abs(want[1]).max() > 0.1 and np.abs(got[2]).max() > 0.1  # the comparison has teeth


def test_sequential_mlp_with_a_one_hot_input_matches_the_module():
    torch.manual_seed(2)
    seq = torch.nn.Sequential(torch.nn.Linear(6 + 3, 8), torch.nn.LayerNorm(8), torch.nn.ReLU(), torch.nn.Linear(8, 5))
    x, code = torch.randn(4, 6), torch.tensor([0, 2, 1, 2])
    with torch.no_grad():
        want = seq(torch.cat([x, torch.nn.functional.one_hot(code, 3).float()], 1))
    mlp = SequentialMLP(seq, one_hot_inputs=3)
    np.testing.assert_allclose(mlp(x.numpy(), code.numpy()) + mlp.head_bias, want.numpy(), atol=1e-5)


def test_rnn_step_matches_torch():
    auto, reference = _policies(RNNFullObsPolicy, "muzero_rnn_full_obs")
    rng = np.random.default_rng(3)
    latent, history = rng.random((5, 16), dtype=np.float32), rng.normal(size=(5, 12)).astype(np.float32)
    action = rng.integers(0, 3, 5).astype(np.int64)
    engine = auto._history_engine
    engine.bind(auto.network)
    (got_latent, got_history), *got = engine((latent, history), action)
    with torch.inference_mode():
        (want_latent, want_history), *want = reference.recurrent_inference(
            (torch.from_numpy(latent), torch.from_numpy(history)), action
        )
    _assert_same(
        [got_latent, got_history, *got],
        [want_latent, want_history, *want],
        ("latent", "history", "reward", "value", "policy_logits"),
    )


@pytest.mark.parametrize(
    "cls,policy_type,engine_type",
    [
        (StochasticMuZeroPolicy, "stochastic_muzero", StochasticSearchInference),
        (RNNFullObsPolicy, "muzero_rnn_full_obs", RNNFullObsSearchInference),
    ],
)
def test_search_with_engine_equals_search_with_torch(cls, policy_type, engine_type):
    auto, reference = _policies(cls, policy_type)
    obs = np.random.default_rng(4).normal(size=(5, 4)).astype(np.float32)
    assert_same_search(auto, reference, engine_type, obs, 3)


@pytest.mark.parametrize(
    "cls, policy_type",
    [
        (MuZeroPolicy, "muzero"),
        (EfficientZeroPolicy, "efficientzero"),
        (StochasticMuZeroPolicy, "stochastic_muzero"),
        (RNNFullObsPolicy, "muzero_rnn_full_obs"),
    ],
)
def test_engines_read_the_weights_once_per_weight_change(cls, policy_type):
    """A search binds its engines; they re-read the weights only when they changed: unchanged
    weights keep what the last bind read, and a fused optimizer step (in place, no version count)
    is seen through ``on_weights_loaded``, which the learner calls after every update."""
    auto, reference = _policies(cls, policy_type)
    obs = np.random.default_rng(6).normal(size=(4, 4)).astype(np.float32)
    before = root_values(auto, obs, 3)
    engines = [e for e in auto.search_engines if e._bound is not None]  # the ones its searches bind
    assert engines
    read = [e._bound for e in engines]
    root_values(auto, obs, 3)
    assert all(e._bound is key for e, key in zip(engines, read))  # same weights: nothing re-read
    params = list(auto.network.parameters())
    versions = [p._version for p in params]
    optimizer = torch.optim.Adam(params, lr=0.05, fused=True)
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer.step()
    assert [p._version for p in params] == versions  # the premise: a fused step counts no version
    auto.on_weights_loaded()
    after = root_values(auto, obs, 3)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, root_values(reference, obs, 3), rtol=1e-4, atol=1e-4)
