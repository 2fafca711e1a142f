"""UniZero's numpy search engine (cached transformer step over per-node windows) agrees with the
torch world model on the same weights: steps from empty, partial and full windows, long
positions, continuous actions, whole searches, and weight changes between searches."""

import numpy as np
import pytest
import torch
from engine_checks import assert_same_search, root_values

from lz_tune.algos.sampled_unizero import make_policy as make_sampled_unizero_policy
from lz_tune.algos.unizero import UniZeroPolicy
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.transformer import KVWindow
from lz_tune.models.transformer_inference import TransformerSearchInference

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _policies(*, context: int = 3, action_dim: int = 0, seed: int = 0):
    """(engine policy, torch policy) sharing one world model with non-trivial weights."""
    cfg = Config().with_updates(
        {
            "policy_type": "sampled_unizero" if action_dim else "unizero",
            "model.kind": "mlp",
            "unizero.embed_dim": 32,
            "unizero.num_heads": 2,
            "unizero.num_layers": 2,
            "unizero.infer_context_length": context,
            "model.hidden_sizes": (24,),
            "model.value_support_size": 30,
            "model.reward_support_size": 20,
            "sampled.num_samples": 3,
        }
    )
    spec = EnvSpecInfo(
        observation_shape=(4,),
        frame_shape=(4,),
        frame_stack=1,
        action_space_size=1 if action_dim else 3,
        is_atari=False,
        action_dim=action_dim,
        action_low=(-1.0,) * action_dim,
        action_high=(1.0,) * action_dim,
    )
    cls = make_sampled_unizero_policy if action_dim else UniZeroPolicy
    torch.manual_seed(seed)
    auto = cls(cfg, spec)
    with torch.no_grad():  # the value / reward / policy heads start at zero
        for p in auto.network.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return auto, cls(cfg.with_updates({"mcts.inference": "torch"}), spec, network=auto.network)


def _actions(rng, batch, action_dim):
    if action_dim:
        return rng.uniform(-1, 1, (batch, action_dim)).astype(np.float32)
    return rng.integers(0, 3, batch).astype(np.int64)


@pytest.mark.parametrize(
    "context,action_dim,fused", [(3, 0, True), (1, 0, True), (2, 2, True), (3, 0, False), (2, 2, False)]
)
def test_steps_match_torch_from_empty_to_full_windows(context, action_dim, fused):
    """Root windows holding 1 observation token (mostly empty slots), then steps until the window
    is full and its oldest tokens fall out; positions start past the first RoPE table. Both
    engine paths: fused numba calls (small E) and GEMMs on numpy's BLAS (wide models)."""
    auto, reference = _policies(context=context, action_dim=action_dim)
    auto._window_engine.fused = fused
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(5, 4)).astype(np.float32)
    with torch.inference_mode():
        latent = auto.network.encode(torch.from_numpy(obs))
        _, _, window = auto.network.root_step(None, None, latent)
        window = KVWindow(*window.as_tuple()[:4], window.next_pos + 300)  # a long episode
        engine = auto._window_engine
        engine.bind(auto.network)
        rows = engine.root(tuple(t.numpy() for t in window.as_tuple()))
        state_t = window.as_tuple()
        for depth in range(2 * context + 2):
            action = _actions(rng, 5, action_dim)
            rows, *got = engine(rows, action)
            want = reference.recurrent_inference(state_t, action)
            for name, g, w in [("reward", got[0], want[1]), ("value", got[1], want[2]), ("policy", got[2], want[3])]:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4, err_msg=f"{name} at depth {depth}")
            for name, g, w in zip(("keys", "values", "key_pos", "valid", "next_pos"), engine.windows(rows), want[0]):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{name} at depth {depth}")
            assert np.abs(want[1]).max() > 0.1 and np.abs(want[2]).max() > 0.1  # the comparison has teeth
            state_t = want[0]


@pytest.mark.parametrize("action_dim", [0, 2])
def test_search_with_engine_equals_search_with_torch(action_dim):
    auto, reference = _policies(action_dim=action_dim)
    obs = np.random.default_rng(2).normal(size=(4, 4)).astype(np.float32)
    assert_same_search(
        auto, reference, TransformerSearchInference, obs, 1 if action_dim else 3, simulations=20, atol=2e-4
    )


def test_engine_copies_weights_again_after_a_weight_change():
    auto, reference = _policies()
    obs = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    before = root_values(auto, obs, 3)
    packed = auto._window_engine._weights
    root_values(auto, obs, 3)
    assert auto._window_engine._weights is packed  # unchanged weights: no new copy
    for p in auto.network.parameters():  # in place without a version bump, as torch's fused optimizers step
        p.data.add_(torch.randn_like(p) * 0.05)
    auto.on_weights_loaded()  # what the learner does after every update
    after = root_values(auto, obs, 3)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, root_values(reference, obs, 3), rtol=1e-4, atol=2e-4)


def test_uncached_reference_and_float64_keep_the_torch_path():
    auto, _ = _policies()
    assert TransformerSearchInference.supports(auto.network)
    assert not TransformerSearchInference.supports(auto.network.double())
