"""EfficientZero's numpy search engine agrees with the torch path on the same weights: one step
at every depth around the LSTM resets, whole searches (discrete and sampled continuous), and
weight changes between searches."""

import numpy as np
import pytest
import torch
from engine_checks import assert_same_search, root_values

from lz_tune.algos import get_algorithm
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.efficientzero_inference import EfficientZeroSearchInference, lstm_gates_into

HORIZON = 3

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _spec(actions: int = 3, action_dim: int = 0) -> EnvSpecInfo:
    return EnvSpecInfo(
        observation_shape=(4,),
        frame_shape=(4,),
        frame_stack=1,
        action_space_size=1 if action_dim else actions,
        is_atari=False,
        action_dim=action_dim,
        action_low=(-1.0,) * action_dim,
        action_high=(1.0,) * action_dim,
    )


def _policies(policy_type: str = "efficientzero", action_dim: int = 0, seed: int = 0):
    """(engine policy, torch policy) sharing one network with non-trivial weights."""
    cfg = Config().with_updates(
        {
            "policy_type": policy_type,
            "model.kind": "mlp",
            "model.latent_dim": 16,
            "model.hidden_sizes": (24,),
            "model.value_support_size": 30,
            "model.reward_support_size": 20,
            "efficientzero.lstm_hidden_size": 12,
            "efficientzero.lstm_horizon_len": HORIZON,
            "sampled.num_samples": 4,
        }
    )
    algo = get_algorithm(policy_type)
    torch.manual_seed(seed)
    auto = algo.make_policy(cfg, _spec(action_dim=action_dim))
    with torch.no_grad():  # the value / prefix heads start at zero: give every weight a value
        for p in auto.network.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    reference = algo.make_policy(cfg.with_updates({"mcts.inference": "torch"}), _spec(action_dim=action_dim))
    reference.network = auto.network
    return auto, reference


def test_lstm_gates_match_lstm_cell():
    torch.manual_seed(1)
    cell = torch.nn.LSTMCell(5, 7)
    x, h, c = torch.randn(4, 5) * 2, torch.randn(4, 7), torch.randn(4, 7)
    with torch.no_grad():
        h_want, c_want = cell(x, (h, c))
        gates = (x @ cell.weight_ih.T + h @ cell.weight_hh.T).numpy().copy()
    h_out, c_out = np.empty((4, 7), np.float32), np.empty((4, 7), np.float32)
    lstm_gates_into(
        gates,
        (cell.bias_ih + cell.bias_hh).detach().numpy(),
        c.numpy(),
        h_out,
        c_out,
        np.empty(2 * 4 * 28, np.float32),
        np.empty(4 * 28, np.int32),
    )
    np.testing.assert_allclose(h_out, h_want.numpy(), atol=1e-6)
    np.testing.assert_allclose(c_out, c_want.numpy(), atol=1e-6)


@pytest.mark.parametrize("action_dim,fused", [(0, True), (2, True), (0, False)])
def test_one_step_matches_torch_at_every_depth_around_the_resets(action_dim, fused, monkeypatch):
    """Both engine paths: the fused numba call (narrow LSTMs) and GEMMs on numpy's BLAS."""
    if not fused:
        monkeypatch.setattr("lz_tune.models.efficientzero_inference.FUSED_MAX_HIDDEN", 0)
    auto, reference = _policies("sampled_efficientzero" if action_dim else "efficientzero", action_dim)
    rng = np.random.default_rng(2)
    batch = 2 * HORIZON + 1
    latent = rng.random((batch, 16), dtype=np.float32)
    h, c = rng.normal(size=(2, batch, 12)).astype(np.float32)
    prefix = rng.normal(size=batch).astype(np.float32)
    depth = np.arange(batch, dtype=np.int64)  # parents at, before and after reset depths
    action = (
        rng.uniform(-1, 1, (batch, action_dim)).astype(np.float32)
        if action_dim
        else rng.integers(0, 3, batch).astype(np.int64)
    )
    engine = auto._prefix_engine
    engine.bind(auto.network)
    with torch.inference_mode():
        got_state, got_reward, got_value, got_logits = engine((latent, h, c, prefix, depth), action)
        state = (
            torch.from_numpy(latent),
            torch.from_numpy(h),
            torch.from_numpy(c),
            torch.from_numpy(prefix)[:, None],
            torch.from_numpy(depth.astype(np.float32))[:, None],
        )
        want_state, want_reward, want_value, want_logits = reference.recurrent_inference(state, action)
    for name, got, want in [
        ("latent", got_state[0], want_state[0]),
        ("h", got_state[1], want_state[1]),
        ("c", got_state[2], want_state[2]),
        ("prefix", got_state[3], want_state[3][:, 0]),
        ("reward", got_reward, want_reward),
        ("value", got_value, want_value),
        ("policy_logits", got_logits, want_logits),
    ]:
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4, err_msg=name)
    np.testing.assert_array_equal(got_state[4], depth + 1)
    reset = (depth + 1) % HORIZON == 0
    assert reset.any() and not np.abs(got_state[1][reset]).any() and np.abs(got_state[1][~reset]).min() > 0
    assert np.abs(got_reward).max() > 0.1  # decoded prefixes are not trivially zero: the comparison has teeth


@pytest.mark.parametrize("policy_type", ["efficientzero", "sampled_efficientzero"])
def test_search_with_engine_equals_search_with_torch(policy_type):
    action_dim = 2 if policy_type.startswith("sampled") else 0
    auto, reference = _policies(policy_type, action_dim)
    obs = np.random.default_rng(3).normal(size=(6, 4)).astype(np.float32)
    assert_same_search(auto, reference, EfficientZeroSearchInference, obs, 1 if action_dim else 3, simulations=25)


def test_engine_sees_weight_changes_between_searches():
    auto, reference = _policies()
    obs = np.random.default_rng(5).normal(size=(4, 4)).astype(np.float32)
    before = root_values(auto, obs, 3)
    with torch.no_grad():  # an in-place change between searches, as an optimizer step makes
        for p in auto.network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    after = root_values(auto, obs, 3)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, root_values(reference, obs, 3), rtol=1e-4, atol=1e-4)


def test_conv_and_float64_networks_keep_the_torch_path():
    auto, _ = _policies()
    assert EfficientZeroSearchInference.supports(auto.network)
    assert not EfficientZeroSearchInference.supports(auto.network.double())
    with pytest.raises(ValueError, match="float32"):
        EfficientZeroSearchInference(HORIZON).bind(auto.network)
