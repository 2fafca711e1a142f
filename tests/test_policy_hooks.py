"""The stateful-inference hooks of the Policy interface: the collector resets exactly the envs whose
episode ended and passes every env's previous action (carried across collects); the evaluator
resets every env at the start of an evaluation; every learner-side weight change (optimizer
step, target sync, state load) goes through on_weights_loaded; the numpy search engine refuses
networks it does not know exactly."""

from __future__ import annotations

import numpy as np
import torch

from lz_tune.algos import get_algorithm
from lz_tune.models.mlp import MuZeroMLPNetwork
from lz_tune.models.mlp_inference import MLPSearchInference
from lz_tune.workers import Evaluator, SegmentCollector, WeightSnapshot, env_spec_for


class Spy:
    """Records the hooks a policy receives, delegating everything to it."""

    def __init__(self, policy) -> None:
        self.policy, self.resets, self.previous, self.actions, self.loads = policy, [], [], [], 0
        act, reset, loaded = policy.act, policy.reset, policy.on_weights_loaded

        def spy_act(batch, **kw):
            self.previous.append(None if kw.get("previous_action") is None else kw["previous_action"].copy())
            out = act(batch, **kw)
            self.actions.append(out.action.copy())
            return out

        def spy_reset(env_ids):
            self.resets.append(sorted(int(i) for i in env_ids))
            reset(env_ids)

        def spy_loaded():
            self.loads += 1
            loaded()

        policy.act, policy.reset, policy.on_weights_loaded = spy_act, spy_reset, spy_loaded


def test_collector_resets_ended_envs_and_passes_previous_actions(tiny_cfg):
    cfg = tiny_cfg("env.max_episode_steps=7")
    collector = SegmentCollector(cfg, seed=1)
    spy = Spy(collector.policy)
    done_log = []
    step = collector.env.step

    def logged_step(actions):
        res = step(actions)
        done_log.append(res.done.copy())
        return res

    collector.env.step = logged_step
    for _ in range(3):  # episodes continue across collects
        collector.collect(temperature=1.0, num_segments=1)
    n = collector.env.num_envs
    assert spy.resets[0] == list(range(n))  # the first reset of the envs
    expected_resets = [sorted(np.flatnonzero(d).tolist()) for d in done_log if d.any()]
    assert spy.resets[1:] == expected_resets and len(expected_resets) >= 2
    np.testing.assert_array_equal(spy.previous[0], np.full(n, -1))
    for t in range(1, len(spy.previous)):  # previous action = last action, -1 after an episode end
        np.testing.assert_array_equal(spy.previous[t], np.where(done_log[t - 1], -1, spy.actions[t - 1]))


def test_evaluator_resets_every_env_at_the_start_of_each_evaluation(tiny_cfg):
    cfg = tiny_cfg("env.max_episode_steps=5")
    evaluator = Evaluator(cfg, seed=2)
    spy = Spy(evaluator.policy)
    snapshot = WeightSnapshot(version=1, train_iter=0, weights=evaluator.policy.weights())
    evaluator.evaluate(snapshot)
    first = list(spy.resets)
    evaluator.evaluate(snapshot)
    n = evaluator.env.num_envs
    assert first[0] == list(range(n)) and spy.resets[len(first)] == list(range(n))
    assert spy.loads == 2  # every evaluation loads its snapshot through the hook
    np.testing.assert_array_equal(spy.previous[0], np.full(n, -1))


def test_every_learner_weight_change_goes_through_on_weights_loaded(tiny_cfg):
    from lz_tune.buffer import GameBuffer

    cfg = tiny_cfg("learner.target_update_freq=2")
    spec = env_spec_for(cfg)
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, spec)
    online, target = Spy(learner.policy), Spy(learner.target_policy)
    collector = SegmentCollector(cfg, seed=0)
    buffer = GameBuffer(
        capacity_transitions=1000,
        num_unroll_steps=cfg.buffer.num_unroll_steps,
        td_steps=cfg.buffer.td_steps,
        discount=0.99,
        frame_stack=1,
        action_space_size=spec.action_space_size,
    )
    buffer.push(collector.collect(temperature=1.0, num_segments=4).segments)
    rng = np.random.default_rng(0)
    for _ in range(4):
        learner.learn(learner.make_batch(buffer, buffer.sample(8), rng=rng))
    assert online.loads == 4  # one per optimizer step
    assert target.loads == 2  # one per target sync (every 2 updates)
    learner.load_state_dict(learner.state_dict())
    assert online.loads == 5 and target.loads == 3


def test_search_engine_refuses_a_network_it_does_not_know_exactly():
    class Variant(MuZeroMLPNetwork):  # same parameters, other arithmetic
        def dynamics(self, latent, action):
            next_latent, reward = super().dynamics(latent, action)
            return next_latent * 0, reward

    exact = MuZeroMLPNetwork(observation_dim=4, action_space_size=2, latent_dim=8, hidden_sizes=(8,))
    variant = Variant(observation_dim=4, action_space_size=2, latent_dim=8, hidden_sizes=(8,))
    assert MLPSearchInference.supports(exact)
    assert not MLPSearchInference.supports(variant)
    assert not MLPSearchInference.supports(exact.to(torch.float64))
