"""UniZero's numpy search engine (cached transformer step over per-node windows) agrees with the
torch world model on the same weights: steps from empty, partial and full windows, long
positions, continuous actions, whole searches, and weight changes between searches."""

import numpy as np
import pytest
import torch

from lz_tune.algos.sampled_unizero import SampledUniZeroPolicy
from lz_tune.algos.unizero import UniZeroPolicy
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.transformer import KVWindow
from lz_tune.models.transformer_inference import TransformerSearchInference

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _policies(*, context: int = 3, action_dim: int = 0, seed: int = 0):
    """(engine policy, torch policy) sharing one world model with non-trivial weights."""
    cfg = Config().with_updates({"policy_type": "sampled_unizero" if action_dim else "unizero", "model.kind": "mlp",
                                 "unizero.embed_dim": 32, "unizero.num_heads": 2, "unizero.num_layers": 2,
                                 "unizero.infer_context_length": context, "model.hidden_sizes": (24,),
                                 "model.value_support_size": 30, "model.reward_support_size": 20,
                                 "sampled.num_samples": 3})
    spec = EnvSpecInfo(observation_shape=(4,), frame_shape=(4,), frame_stack=1, action_space_size=1 if action_dim else 3,
                       is_atari=False, action_dim=action_dim, action_low=(-1.0,) * action_dim,
                       action_high=(1.0,) * action_dim)
    cls = SampledUniZeroPolicy if action_dim else UniZeroPolicy
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


@pytest.mark.parametrize("context,action_dim,fused", [(3, 0, True), (1, 0, True), (2, 2, True), (3, 0, False),
                                                      (2, 2, False)])
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
        state_np = tuple(t.numpy().copy() for t in window.as_tuple())
        state_t = window.as_tuple()
        for depth in range(2 * context + 2):
            action = _actions(rng, 5, action_dim)
            got = engine(state_np, action)
            want = reference._recurrent(state_t, action)
            for name, g, w in [("reward", got[1], want[1]), ("value", got[2], want[2]), ("policy", got[3], want[3])]:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4, err_msg=f"{name} at depth {depth}")
            for name, g, w in zip(("keys", "values", "key_pos", "valid", "next_pos"), got[0], want[0]):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{name} at depth {depth}")
            assert np.abs(want[1]).max() > 0.1 and np.abs(want[2]).max() > 0.1  # the comparison has teeth
            state_np, state_t = tuple(a.copy() for a in got[0]), want[0]


@pytest.mark.parametrize("action_dim", [0, 2])
def test_search_with_engine_equals_search_with_torch(action_dim):
    auto, reference = _policies(action_dim=action_dim)
    rng = np.random.default_rng(2)
    obs = rng.normal(size=(4, 4)).astype(np.float32)
    mask = np.ones((4, 1 if action_dim else 3), bool)
    to_play = -np.ones(4, np.int64)
    outs = []
    for policy in (auto, reference):
        if action_dim:
            out, value, _ = policy.sampled_search(obs, mask, to_play, num_simulations=20, noise=True,
                                                  rng=np.random.default_rng(3))
        else:
            out, value = policy.search(obs, mask, to_play, num_simulations=20, noise=True, rng=np.random.default_rng(3))
        outs.append(out)
    with torch.inference_mode():
        assert isinstance(auto.search_backend(obs)[3], TransformerSearchInference)
        assert not isinstance(reference.search_backend(obs)[3], TransformerSearchInference)
    np.testing.assert_array_equal(outs[0].visit_counts, outs[1].visit_counts)
    np.testing.assert_allclose(outs[0].root_value, outs[1].root_value, rtol=1e-4, atol=2e-4)


def test_engine_copies_weights_again_after_a_weight_change():
    auto, reference = _policies()
    obs = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    mask, to_play = np.ones((3, 3), bool), -np.ones(3, np.int64)

    def root_values(policy):
        return policy.search(obs, mask, to_play, num_simulations=8, noise=False, rng=np.random.default_rng(0))[0].root_value

    before = root_values(auto)
    packed = auto._window_engine._weights
    assert root_values(auto) is not None and auto._window_engine._weights is packed  # unchanged: no copy
    optimizer = torch.optim.AdamW(auto.network.parameters(), lr=0.05, fused=True)  # bumps no tensor version
    latent = auto.network.encode(torch.from_numpy(obs))
    policy_logits, value_logits, _ = auto.network.root_step(None, None, latent)
    (value_logits.pow(2).mean() + policy_logits.pow(2).mean()).backward()
    optimizer.step()
    auto.on_weights_loaded()  # what the learner does after every update
    after = root_values(auto)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, root_values(reference), rtol=1e-4, atol=2e-4)


def test_uncached_reference_and_float64_keep_the_torch_path():
    auto, _ = _policies()
    assert TransformerSearchInference.supports(auto.network)
    assert not TransformerSearchInference.supports(auto.network.double())
