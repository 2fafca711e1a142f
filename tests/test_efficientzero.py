"""EfficientZero: value-prefix targets reset per sample, search rewards as prefix differences with
resets (golden values in hand-built trees), and the learner's unroll resetting the LSTM at the
same steps the targets do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lz_tune.algos.efficientzero import EfficientZeroPolicy, prefix_rewards, value_prefix_targets
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.base import InitialOutput
from lz_tune.models.efficientzero import EZRecurrentOutput
from lz_tune.models.support import scalar_to_support


def test_value_prefix_targets_reset_every_horizon_from_each_sample():
    rewards = np.array([[1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60], [1, 1, 1, 0, 0, 0]], np.float32)
    # H = 2: sums over steps {1,2}, {3,4}, {5,6} of the unroll, for EVERY sample
    np.testing.assert_array_equal(
        value_prefix_targets(rewards, 2), [[1, 3, 3, 7, 5, 11], [10, 30, 30, 70, 50, 110], [1, 2, 1, 1, 0, 0]]
    )
    # H = 5 and U + 1 = 7 > H (the original's per-batch counter drifts for the second sample on):
    # the reset falls on unroll step 6 of every row
    np.testing.assert_array_equal(
        value_prefix_targets(rewards, 5), [[1, 3, 6, 10, 15, 6], [10, 30, 60, 100, 150, 60], [1, 2, 3, 3, 3, 0]]
    )
    np.testing.assert_array_equal(value_prefix_targets(rewards, 100), np.cumsum(rewards, axis=1))


def test_prefix_rewards_use_the_parent_prefix_unless_it_is_a_reset_point():
    parent_prefix = np.array([0.0, 3.0, 7.0, 7.0], np.float32)
    parent_depth = np.array([0, 1, 2, 3], np.float32)
    child_prefix = np.array([3.0, 7.0, 2.0, 9.0], np.float32)
    np.testing.assert_array_equal(prefix_rewards(parent_prefix, parent_depth, child_prefix, 2), [3.0, 4.0, 2.0, 2.0])


def _logits_of(x: torch.Tensor, support: int) -> torch.Tensor:
    """Logits whose decoded scalar is exactly ``x`` [B] (log of its two-hot target)."""
    return torch.log(scalar_to_support(x, support).clamp_min(1e-30))


class CountingNet(nn.Module):
    """A fake EfficientZero network whose LSTM 'h' is the true sum of rewards since its last
    reset: taking action a earns a + 1, and the predicted value prefix is h itself."""

    def __init__(self, num_actions: int, support: int = 20) -> None:
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))
        self.num_actions, self.support = num_actions, support

    def initial_inference(self, obs):
        batch = obs.shape[0]
        return InitialOutput(
            latent=torch.zeros(batch, 1),
            value_logits=_logits_of(torch.zeros(batch), self.support),
            policy_logits=torch.zeros(batch, self.num_actions),
        )

    def initial_hidden(self, batch):
        return torch.zeros(batch, 1), torch.zeros(batch, 1)

    def recurrent_inference(self, latent, hidden, action):
        h = hidden[0] + (action.float() + 1.0)[:, None]
        batch = latent.shape[0]
        return EZRecurrentOutput(
            latent=latent + 1,
            hidden=(h, hidden[1]),
            value_prefix_logits=_logits_of(h[:, 0], self.support),
            value_logits=_logits_of(torch.zeros(batch), self.support),
            policy_logits=torch.zeros(batch, self.num_actions),
        )


def _policy(num_actions: int, horizon: int) -> EfficientZeroPolicy:
    cfg = Config().with_updates(
        {"policy_type": "efficientzero", "efficientzero.lstm_horizon_len": horizon, "model.kind": "mlp"}
    )
    spec = EnvSpecInfo(
        observation_shape=(3,), frame_shape=(3,), frame_stack=1, action_space_size=num_actions, is_atari=False
    )
    return EfficientZeroPolicy(cfg, spec, network=CountingNet(num_actions))


@pytest.mark.parametrize("horizon", [1, 2, 3])
def test_search_rewards_in_a_chain_with_resets(horizon):
    """One legal action: 5 simulations build a chain of depth 5. Every edge earns 1; the prefixes
    the net predicts are 1, 2, .., H, 1, 2, .. (reset after every H steps). Naive differences
    would give 1 - H at each depth after a reset; the tree must see 1 everywhere."""
    policy = _policy(1, horizon)
    out, _ = policy.search(
        np.zeros((1, 3), np.float32),
        np.ones((1, 1), bool),
        -np.ones(1, np.int64),
        num_simulations=5,
        noise=False,
        rng=np.random.default_rng(0),
    )
    tree = out.tree
    np.testing.assert_array_equal(tree.node_parent[0], [-1, 0, 1, 2, 3, 4])  # a chain
    np.testing.assert_allclose(tree.node_reward[0, 1:], np.ones(5), atol=1e-4)


def test_search_rewards_in_a_branching_tree_with_a_reset_inside():
    """Two actions earning 1 and 2 at every node, H = 2. Whatever shape the search builds, the
    reward on each edge must equal the action's true reward, below and above the reset depth."""
    policy = _policy(2, 2)
    out, _ = policy.search(
        np.zeros((3, 3), np.float32),
        np.ones((3, 2), bool),
        -np.ones(3, np.int64),
        num_simulations=12,
        noise=True,
        rng=np.random.default_rng(1),
    )
    tree = out.tree
    depth = np.zeros_like(tree.node_parent)
    for b in range(3):
        for n in range(1, tree.num_nodes):
            depth[b, n] = depth[b, tree.node_parent[b, n]] + 1
    assert depth.max() >= 3, "the tree must reach past the reset depth"
    expected = tree.node_action[:, 1:] + 1.0
    np.testing.assert_allclose(tree.node_reward[:, 1:], expected, atol=1e-4)


def test_learner_unroll_resets_the_lstm_where_the_targets_reset(tiny_cfg):
    """The prefix the learner's unroll predicts at step k only depends on actions since the last
    reset: changing the first action must not change the hidden state after step H."""
    from lz_tune.algos.efficientzero import EfficientZeroLearner
    from lz_tune.workers import env_spec_for

    cfg = tiny_cfg("policy_type=efficientzero", "efficientzero.lstm_horizon_len=2", "efficientzero.lstm_hidden_size=8")
    learner = EfficientZeroLearner(cfg, env_spec_for(cfg))
    net = learner.policy.network
    latent = net.representation(torch.rand(2, 4))
    state = learner.initial_state(latent)
    actions = [torch.tensor([0, 1]), torch.tensor([1, 1]), torch.tensor([0, 0])]
    states = []
    for k, a in enumerate(actions, start=1):
        state, _, _ = learner.unroll_step(net, state, a, k)
        states.append(state)
    assert torch.all(states[1][1] == 0) and torch.all(states[1][2] == 0)  # reset after step 2
    assert not torch.all(states[0][1] == 0) and not torch.all(states[2][1] == 0)
