"""The history-conditioned types. muzero_context: per-env root latents carried across env steps,
reset per env, re-encoded on a per-env schedule, never used across weight versions.
muzero_rnn_full_obs: the GRU history of the real (latent, action) sequence under the same rules,
and a training unroll on the true encoded observations. Both: continuous across collect() calls,
fresh for every evaluation episode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.config import ConfigError
from lz_tune.workers import env_spec_for, make_env


@pytest.fixture
def policy_and_env(tiny_cfg):
    torch.manual_seed(0)
    cfg = tiny_cfg("policy_type=muzero_context", "context.context_length_init=3", "env.collector_env_num=3")
    spec = env_spec_for(cfg)
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
    env = make_env(cfg, num_envs=3, seed=0, mode="collect")
    yield cfg, policy, env
    env.close()


def _encode(policy, obs):
    with torch.inference_mode():
        return policy.network.representation(torch.from_numpy(obs))


def _roll(policy, latent, action):
    with torch.inference_mode():
        return policy.network.dynamics(latent, torch.from_numpy(np.asarray(action, np.int64)))[0]


def test_root_is_dynamics_of_the_previous_root_and_a_reset_is_per_env(policy_and_env):
    cfg, policy, env = policy_and_env
    batch = env.reset(seed=0)
    rng = np.random.default_rng(0)
    first = policy.root_latents(batch.observation, None)
    torch.testing.assert_close(first, _encode(policy, batch.observation))
    actions = np.array([0, 1, 1])
    batch = env.step(actions).batch
    second = policy.root_latents(batch.observation, actions)
    torch.testing.assert_close(second, _roll(policy, first, actions))  # from the ROOT latents
    policy.reset(np.array([0]))  # env 0's episode ended
    actions = np.array([-1, 0, 1])
    batch = env.step(np.array([1, 0, 1])).batch
    third = policy.root_latents(batch.observation, actions)
    torch.testing.assert_close(third[0], _encode(policy, batch.observation[:1])[0])
    torch.testing.assert_close(third[1:], _roll(policy, second[1:], actions[1:]))
    # the search itself does not move the carried state
    out = policy.act(
        env.step(np.array([0, 0, 0])).batch,
        mode="collect",
        temperature=1.0,
        rng=rng,
        previous_action=np.array([0, 0, 0]),
    )
    assert out.action.shape == (3,)


def test_re_encode_schedule_is_counted_per_env(policy_and_env):
    """context_length_init=3: env 1 re-encodes at steps 0, 3, 6; env 0, reset after step 1,
    at 0, 2, 5 (its own count restarts)."""
    cfg, policy, env = policy_and_env
    batch = env.reset(seed=0)
    carried = []
    previous = None
    for step in range(7):
        carried.append(policy.carried_envs(3, previous).copy())
        policy.root_latents(batch.observation, previous)
        previous = np.zeros(3, np.int64)
        if step == 1:
            policy.reset(np.array([0]))
            previous[0] = -1
        batch = env.step(np.zeros(3, np.int64)).batch
    carried = np.array(carried)
    np.testing.assert_array_equal(~carried[:, 1], [True, False, False, True, False, False, True])
    np.testing.assert_array_equal(~carried[:, 0], [True, False, True, False, False, True, False])


def test_state_of_old_weights_is_never_used(policy_and_env):
    cfg, policy, env = policy_and_env
    batch = env.reset(seed=0)
    policy.root_latents(batch.observation, None)
    batch = env.step(np.zeros(3, np.int64)).batch
    assert policy.carried_envs(3, np.zeros(3, np.int64)).all()
    new = {k: v + 0.01 for k, v in policy.weights().items()}
    policy.load_weights(new)  # a snapshot arrives
    assert not policy.carried_envs(3, np.zeros(3, np.int64)).any()
    latent = policy.root_latents(batch.observation, np.zeros(3, np.int64))
    torch.testing.assert_close(latent, _encode(policy, batch.observation))  # re-encoded with the new weights


HISTORY_TYPES = ["muzero_context", "muzero_rnn_full_obs", "unizero"]


@pytest.mark.parametrize("policy_type", HISTORY_TYPES)
def test_two_collects_give_the_steps_of_one_long_collect(tiny_cfg, policy_type):
    from lz_tune.workers.collector import SegmentCollector

    cfg = tiny_cfg(
        f"policy_type={policy_type}",
        "context.context_length_init=3",
        "context.rnn_hidden_size=8",
        "unizero.embed_dim=16",
    )

    def run(chunks):
        torch.manual_seed(0)
        collector = SegmentCollector(cfg, seed=5)
        steps = []
        original = collector.env.step
        collector.env.step = lambda a: (steps.append(np.array(a)), original(a))[1]
        for n in chunks:
            collector.collect(temperature=1.0, num_segments=n)
        collector.close()
        return np.concatenate(steps)

    split, whole = run([2, 2]), run([6])
    assert len(whole) >= len(split) > 10
    np.testing.assert_array_equal(split, whole[: len(split)])


@pytest.mark.parametrize("policy_type", HISTORY_TYPES)
def test_every_evaluation_episode_starts_fresh(tiny_cfg, monkeypatch, policy_type):
    from lz_tune.algos.history import EnvHistory
    from lz_tune.workers import Evaluator, WeightSnapshot

    cfg = tiny_cfg(
        f"policy_type={policy_type}",
        "context.context_length_init=3",
        "env.max_episode_steps=12",
        "context.rnn_hidden_size=8",
        "unizero.embed_dim=16",
    )
    evaluator = Evaluator(cfg, seed=3)
    seen = []
    original = EnvHistory.carried

    def spy(self, num_envs, previous_action):
        out = original(self, num_envs, previous_action)
        seen.append((None if previous_action is None else np.array(previous_action), out.copy()))
        return out

    monkeypatch.setattr(EnvHistory, "carried", spy)
    snapshot = WeightSnapshot(version=1, train_iter=1, weights=evaluator.policy.weights())
    first = evaluator.evaluate(snapshot, n_episodes=4)
    start_of_second = len(seen)
    second = evaluator.evaluate(snapshot, n_episodes=4)
    assert first.returns == second.returns  # same episodes, nothing carried over
    for index in (0, start_of_second):
        assert not seen[index][1].any()  # the first step of an evaluation re-encodes every env
    for previous, carried in seen:
        if previous is not None:
            assert not carried[previous < 0].any()  # right after an episode end: re-encoded
    evaluator.close()


@pytest.mark.parametrize("key", ["context.context_length_init", "context.rnn_hidden_size"])
def test_bad_context_keys(tiny_cfg, key):
    with pytest.raises(ConfigError, match=key):
        tiny_cfg("policy_type=muzero_rnn_full_obs", f"{key}=0")


# ---------------------------------------------------------------------------- muzero_rnn_full_obs


@pytest.fixture
def rnn_policy_and_env(tiny_cfg):
    torch.manual_seed(0)
    cfg = tiny_cfg("policy_type=muzero_rnn_full_obs", "context.context_length_init=3", "context.rnn_hidden_size=8")
    spec = env_spec_for(cfg)
    policy = get_algorithm(cfg.policy_type).make_policy(cfg, spec)
    with torch.no_grad():  # a non-zero history read-in, so that the history changes predictions
        policy.network.history_to_latent.weight.normal_(0, 0.5)
    env = make_env(cfg, num_envs=3, seed=0, mode="collect")
    yield cfg, policy, env
    env.close()


def test_rnn_history_follows_the_real_steps_and_resets_per_env(rnn_policy_and_env):
    cfg, policy, env = rnn_policy_and_env
    net = policy.network
    batch = env.reset(seed=0)
    latent0, history0 = policy.root_state(batch.observation, None)
    assert float(history0.abs().max()) == 0.0  # episode start: empty history
    actions = np.array([0, 1, 0])
    batch = env.step(actions).batch
    latent1, history1 = policy.root_state(batch.observation, actions)
    with torch.inference_mode():
        expected = net.history_step(latent0, torch.from_numpy(actions), history0)
    torch.testing.assert_close(history1, expected)
    torch.testing.assert_close(latent1, _encode(policy, batch.observation))  # always the real observation
    policy.reset(np.array([2]))
    actions = np.array([1, 1, -1])
    batch = env.step(np.array([1, 1, 0])).batch
    _, history2 = policy.root_state(batch.observation, actions)
    assert float(history2[2].abs().max()) == 0.0 and float(history2[:2].abs().max()) > 0.0
    policy.load_weights(policy.weights())  # any weight load: no env continues its history
    _, history3 = policy.root_state(env.step(np.zeros(3, np.int64)).batch.observation, np.zeros(3, np.int64))
    assert float(history3.abs().max()) == 0.0
    # the history conditions the search's root prediction
    with torch.inference_mode():
        with_history = net.prediction(latent1, history1)[0]
        without = net.prediction(latent1, torch.zeros_like(history1))[0]
    assert not torch.allclose(with_history, without)


def test_rnn_bootstrap_values_use_an_empty_history(rnn_policy_and_env):
    cfg, policy, env = rnn_policy_and_env
    obs = env.reset(seed=0).observation
    with torch.inference_mode():
        latent = _encode(policy, obs)
        expected = policy.network.prediction(latent, torch.zeros(3, cfg.context.rnn_hidden_size))[1]
    from lz_tune.models.support import support_to_scalar_np

    np.testing.assert_allclose(policy.value_targets(obs), support_to_scalar_np(expected.numpy()), rtol=1e-5)


def _rnn_unroll(learner, cfg, batch, obs=None, mask=None):
    """``learner.unroll_losses`` on a TrainBatch (``obs`` / ``mask``: tensors in place of its own)."""
    from lz_tune.models.support import scalar_to_support

    value_t = scalar_to_support(torch.from_numpy(batch.target_value), cfg.model.value_support_size)
    reward_t = scalar_to_support(torch.from_numpy(batch.target_reward), cfg.model.reward_support_size)
    return learner.unroll_losses(
        learner.policy.network,
        torch.from_numpy(batch.obs) if obs is None else obs,
        torch.from_numpy(batch.actions),
        value_t,
        reward_t,
        torch.from_numpy(batch.target_policy),
        torch.from_numpy(batch.mask) if mask is None else mask,
    )


@pytest.mark.parametrize("policy_type, depends", [("muzero_rnn_full_obs", True), ("muzero", False)])
def test_training_feeds_the_true_observation_of_every_unroll_step(tiny_cfg, policy_type, depends):
    """With the consistency loss off, the policy loss over the unroll changes with o_{t+2} for
    muzero_rnn_full_obs (prediction reads the encoded observation) and not for MuZero (it
    predicts from the dynamics' latent)."""
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg(f"policy_type={policy_type}", "learner.ssl_loss_weight=0", "context.rnn_hidden_size=8")
    spec = env_spec_for(cfg)
    learner = get_algorithm(policy_type).make_learner(cfg, spec)
    batch = _batch(cfg, spec, np.random.default_rng(0))
    obs = torch.from_numpy(batch.obs)
    other = obs.clone()
    other[:, 2] = torch.from_numpy(np.random.default_rng(1).normal(size=other[:, 2].shape).astype(np.float32))
    with torch.no_grad():
        policy_loss, changed = (_rnn_unroll(learner, cfg, batch, obs=o)[0] for o in (obs, other))
    assert (not torch.allclose(policy_loss, changed)) == depends


def test_rnn_true_observation_terms_stop_at_the_episode_end(tiny_cfg):
    """Past the episode end (mask 0) the buffer pads observations with zeros, which are no
    observation (on CartPole, zeros are the upright centred cart): no loss term depends on them.
    MuZero's absorbing-state terms stay (the search chain's, from dynamics latents)."""
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg("policy_type=muzero_rnn_full_obs", "context.rnn_hidden_size=8")
    spec = env_spec_for(cfg)
    learner = get_algorithm("muzero_rnn_full_obs").make_learner(cfg, spec)
    with torch.no_grad():  # a non-zero read-in, so that the history reaches the losses
        learner.policy.network.history_to_latent.weight.normal_(0, 0.5)
    batch = _batch(cfg, spec, np.random.default_rng(0))
    assert batch.obs.shape[1] >= 4
    mask = torch.from_numpy(batch.mask).clone()
    mask[:, 3:] = 0.0  # the episode ended after step t+2
    padded, other = torch.from_numpy(batch.obs).clone(), torch.from_numpy(batch.obs).clone()
    padded[:, 3:] = 0.0
    other[:, 3:] = 5.0
    with torch.no_grad():
        terms, changed = (_rnn_unroll(learner, cfg, batch, obs=o, mask=mask) for o in (padded, other))
        unmasked = _rnn_unroll(learner, cfg, batch, obs=other)
    for name, a, b in zip(terms._fields, terms, changed):
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}")
    assert not torch.allclose(terms.value, unmasked.value)  # the same observations matter where they are real


def test_rnn_later_steps_value_and_policy_do_not_reach_the_encoder(tiny_cfg):
    """The true chain's value / policy terms at k >= 1 train prediction and the history on
    detached encodings: the value and policy losses send gradient to o_t only (through the k = 0
    term and the search chain from it), never to o_{t+k}, k >= 1, as in MuZero."""
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg("policy_type=muzero_rnn_full_obs", "context.rnn_hidden_size=8")
    spec = env_spec_for(cfg)
    learner = get_algorithm("muzero_rnn_full_obs").make_learner(cfg, spec)
    net = learner.policy.network
    with torch.no_grad():
        net.history_to_latent.weight.normal_(0, 0.5)
    batch = _batch(cfg, spec, np.random.default_rng(0))
    obs = torch.from_numpy(batch.obs).requires_grad_(True)
    out = _rnn_unroll(learner, cfg, batch, obs=obs)
    (out.policy.sum() + out.value.sum()).backward()
    assert float(obs.grad[:, 0].abs().sum()) > 0
    assert float(obs.grad[:, 1:].abs().sum()) == 0.0
    head = [p for n, p in net.named_parameters() if "history_to_latent" in n]
    assert all(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in head)


@pytest.mark.parametrize("chain", [True, False])
def test_rnn_trains_prediction_on_the_states_the_search_evaluates(tiny_cfg, chain):
    """context.train_search_chain: the policy loss also reads the search's interior states
    (dynamics latents), so the dynamics receives gradient through PREDICTION even with the reward
    and consistency terms out of the loss; without the chain it gets none that way (the
    true-observation unroll feeds prediction the encoder's latents only)."""
    from lz_tune.models.support import scalar_to_support
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg(
        "policy_type=muzero_rnn_full_obs",
        "learner.ssl_loss_weight=0",
        "context.rnn_hidden_size=8",
        f"context.train_search_chain={chain}",
    )
    spec = env_spec_for(cfg)
    learner = get_algorithm("muzero_rnn_full_obs").make_learner(cfg, spec)
    batch = _batch(cfg, spec, np.random.default_rng(0))
    net = learner.policy.network
    value_t = scalar_to_support(torch.from_numpy(batch.target_value), cfg.model.value_support_size)
    reward_t = scalar_to_support(torch.from_numpy(batch.target_reward), cfg.model.reward_support_size)
    out = learner.unroll_losses(
        net,
        torch.from_numpy(batch.obs),
        torch.from_numpy(batch.actions),
        value_t,
        reward_t,
        torch.from_numpy(batch.target_policy),
        torch.from_numpy(batch.mask),
    )
    out[0].sum().backward()  # the policy loss only
    dynamics_grad = sum(
        float(p.grad.abs().sum()) for n, p in net.named_parameters() if p.grad is not None and "dynamics" in n
    )
    assert (dynamics_grad > 0) == chain


def test_rnn_history_trains_the_gru_but_not_the_latents_it_reads(tiny_cfg, monkeypatch):
    """The GRU reads detached latents in training (both chains): the history's gradient reaches
    the GRU, never the encoder or the dynamics through the history."""
    from lz_tune.models.support import scalar_to_support
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg("policy_type=muzero_rnn_full_obs", "context.rnn_hidden_size=8")
    spec = env_spec_for(cfg)
    learner = get_algorithm("muzero_rnn_full_obs").make_learner(cfg, spec)
    net = learner.policy.network
    with torch.no_grad():  # a non-zero read-in, so that the history reaches the losses
        net.history_to_latent.weight.normal_(0, 0.5)
    inputs = []
    step = net.history_step
    monkeypatch.setattr(
        net, "history_step", lambda latent, action, history: inputs.append(latent) or step(latent, action, history)
    )
    batch = _batch(cfg, spec, np.random.default_rng(0))
    value_t = scalar_to_support(torch.from_numpy(batch.target_value), cfg.model.value_support_size)
    reward_t = scalar_to_support(torch.from_numpy(batch.target_reward), cfg.model.reward_support_size)
    out = learner.unroll_losses(
        net,
        torch.from_numpy(batch.obs),
        torch.from_numpy(batch.actions),
        value_t,
        reward_t,
        torch.from_numpy(batch.target_policy),
        torch.from_numpy(batch.mask),
    )
    (out[0].sum() + out[1].sum()).backward()  # policy and value
    assert len(inputs) == 2 * batch.actions.shape[1] and not any(t.requires_grad for t in inputs)
    assert float(net.gru.weight_ih.grad.abs().sum()) > 0
