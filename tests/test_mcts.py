"""Tree search: golden values on a hand-computed tree, masks, noise, action choice."""

import math

import numpy as np
import pytest
import torch

from lz_tune.mcts import RootInput, dirichlet_noise, puct_search, select_action

PRIOR = np.log(np.array([0.6, 0.4], np.float32))


def toy_recurrent(latent, action):
    """Action 0 pays reward 1, action 1 pays 0; every value is 0; prior (0.6, 0.4)."""
    b = len(action)
    reward = (action == 0).astype(np.float32)
    return latent + 1, reward, np.zeros(b, np.float32), np.tile(PRIOR, (b, 1))


def toy_root(batch=1, mask=None, to_play=-1, numpy_latent=False):
    return RootInput(
        latent=np.zeros((batch, 3), np.float32) if numpy_latent else torch.zeros(batch, 3),
        value=np.zeros(batch, np.float32),
        policy_logits=np.tile(PRIOR, (batch, 1)),
        action_mask=np.ones((batch, 2), bool) if mask is None else mask,
        to_play=np.full(batch, to_play, np.int64),
    )


@pytest.mark.parametrize("numpy_latent", [False, True])
def test_golden_three_simulations(numpy_latent):
    """Hand computation (discount 0.9, c1 1.25, c2 19652, no noise):

    sim 1: root N=1, U = c*sqrt(1)*(0.6, 0.4) -> action 0; node1 r=1 v=0, Q=1, root sum 1.
    sim 2: root N=2; child0 Q=1 (raw, min=max) -> 1 + c*sqrt2*0.6/2 = 1.530;
           child1 unvisited uses root mean_q = 1 -> 1 + c*sqrt2*0.4 = 1.707 -> action 1;
           node2 r=0 v=0, Q=0; min-max = (0, 1); root sum 1.
    sim 3: root N=3; child0 1 + c*sqrt3*0.6/2 = 1.650 > child1 0 + 0.433 -> node1;
           node1 N=1, mean_q = (root mean_q 0.5 + 0)/1 = 0.5 for both unvisited children,
           priors decide -> action 0; node3 r=1 v=0; node1 sum 0 + 1 -> V=0.5, Q = 1 + 0.9*0.5;
           root sum 1 + (1 + 0.9*1) = 2.9 over 4 visits.
    """
    seen = []

    def recurrent(latent, action):
        seen.append(latent.copy() if numpy_latent else latent.clone())
        return toy_recurrent(latent, action)

    out = puct_search(
        root=toy_root(numpy_latent=numpy_latent),
        recurrent_fn=recurrent,
        num_simulations=3,
        discount=0.9,
        rng=np.random.default_rng(0),
    )
    # the latent store hands each simulation its parent's latent (root 0, node1 = root + 1), same kind as the root
    assert all(isinstance(x, np.ndarray if numpy_latent else torch.Tensor) for x in seen)
    assert [float(x[0, 0]) for x in seen] == [0.0, 0.0, 1.0]
    np.testing.assert_array_equal(out.visit_counts, [[2, 1]])
    assert out.root_value[0] == pytest.approx(2.9 / 4, abs=1e-6)
    np.testing.assert_allclose(out.root_q[0], [1.45, 0.0], atol=1e-6)
    tree = out.tree
    # node 3 hangs below node 1 via action 0; node 2 below the root via action 1
    np.testing.assert_array_equal(tree.node_parent[0], [-1, 0, 0, 1])
    np.testing.assert_array_equal(tree.node_action[0], [-1, 0, 1, 0])
    np.testing.assert_allclose(tree.min_max[0], [0.0, 1.45], atol=1e-6)
    assert select_action(out.visit_counts, temperature=1.0, rng=None, deterministic=True)[0] == 0


def test_golden_values_do_not_depend_on_batch_position():
    out1 = puct_search(
        root=toy_root(1), recurrent_fn=toy_recurrent, num_simulations=20, discount=0.9, rng=np.random.default_rng(0)
    )
    out8 = puct_search(
        root=toy_root(8), recurrent_fn=toy_recurrent, num_simulations=20, discount=0.9, rng=np.random.default_rng(1)
    )
    for b in range(8):
        np.testing.assert_array_equal(out8.visit_counts[b], out1.visit_counts[0])
        assert out8.root_value[b] == pytest.approx(out1.root_value[0])
    assert out1.visit_counts.sum() == 20


def test_illegal_root_actions_are_never_visited():
    mask = np.array([[False, True], [True, False]])
    out = puct_search(
        root=toy_root(2, mask=mask),
        recurrent_fn=toy_recurrent,
        num_simulations=15,
        discount=0.9,
        rng=np.random.default_rng(0),
        root_noise_weight=0.25,
    )
    np.testing.assert_array_equal(out.visit_counts, [[0, 15], [15, 0]])
    assert out.tree.children_prior[0, 0, 0] == 0 and out.tree.children_prior[1, 0, 1] == 0


def test_root_noise_only_when_asked():
    root = toy_root(4)
    clean = puct_search(
        root=root,
        recurrent_fn=toy_recurrent,
        num_simulations=2,
        discount=0.9,
        rng=np.random.default_rng(0),
        root_noise_weight=0.0,
    )
    np.testing.assert_allclose(clean.tree.children_prior[:, 0], np.tile([0.6, 0.4], (4, 1)), atol=1e-6)
    noisy = puct_search(
        root=root,
        recurrent_fn=toy_recurrent,
        num_simulations=2,
        discount=0.9,
        rng=np.random.default_rng(0),
        root_noise_weight=0.25,
    )
    priors = noisy.tree.children_prior[:, 0]
    np.testing.assert_allclose(priors.sum(axis=1), 1.0, atol=1e-6)
    assert not np.allclose(priors, clean.tree.children_prior[:, 0])
    # the mix is at most 25% away from the network prior
    assert np.all(np.abs(priors - [0.6, 0.4]) <= 0.25 + 1e-6)


def test_dirichlet_noise_respects_mask():
    mask = np.array([[True, False, True], [False, False, True]])
    noise = dirichlet_noise(np.random.default_rng(0), mask, 0.3)
    np.testing.assert_allclose(noise.sum(axis=1), 1.0, atol=1e-6)
    assert noise[0, 1] == 0 and noise[1, 0] == 0 and noise[1, 2] == pytest.approx(1.0)


def test_two_player_values_alternate_sign():
    """With to_play >= 0 the child's value counts for the opponent: Q = r - gamma * V(child)."""

    def rec(latent, action):
        b = len(action)
        return latent, np.zeros(b, np.float32), np.ones(b, np.float32), np.zeros((b, 2), np.float32)

    out = puct_search(
        root=toy_root(1, to_play=1), recurrent_fn=rec, num_simulations=1, discount=1.0, rng=np.random.default_rng(0)
    )
    # the single child has value +1 for the player to move there, so -1 for the root player
    assert np.nanmax(out.root_q) == pytest.approx(-1.0)
    assert out.root_value[0] == pytest.approx((0.0 - 1.0) / 2)


def test_select_action_temperature():
    counts = np.array([[10, 30, 0]] * 4000)
    rng = np.random.default_rng(0)
    acts = select_action(counts, temperature=1.0, rng=rng)
    assert set(np.unique(acts)) == {0, 1}
    assert np.mean(acts == 1) == pytest.approx(0.75, abs=0.03)
    # temperature 0.5 squares the counts: 900 / (100 + 900)
    acts = select_action(counts, temperature=0.5, rng=rng)
    assert np.mean(acts == 1) == pytest.approx(0.9, abs=0.03)
    # tiny temperature does not overflow and is greedy
    assert np.all(select_action(counts[:10], temperature=1e-4, rng=rng) == 1)
    with pytest.raises(ValueError, match="temperature"):
        select_action(counts, temperature=0.0, rng=rng)


def test_select_action_per_row_temperature_zero_is_the_most_visited_with_ties_at_random():
    counts = np.array([[5, 1, 5, 0], [1, 3, 2, 0]] * 2000)
    temps = np.tile([0.0, 1.0], 2000)
    acts = select_action(counts, temperature=temps, rng=np.random.default_rng(1))
    greedy, sampled = acts[0::2], acts[1::2]
    assert set(np.unique(greedy)) == {0, 2}  # only the tied most visited, both of them
    assert np.mean(greedy == 0) == pytest.approx(0.5, abs=0.03)
    assert np.mean(sampled == 1) == pytest.approx(0.5, abs=0.03)  # 3 of 6 visits at temperature 1
    assert set(np.unique(sampled)) == {0, 1, 2}
    with pytest.raises(ValueError, match="temperature"):
        select_action(counts[:2], temperature=np.array([1.0, -0.5]), rng=np.random.default_rng(0))


def test_search_statistics_are_consistent():
    """Visits of a node = 1 + sum of its children's visits; values are means of backed-up returns."""
    rng = np.random.default_rng(3)

    def rec(latent, action):
        b = len(action)
        return (
            latent,
            rng.normal(size=b).astype(np.float32),
            rng.normal(size=b).astype(np.float32),
            rng.normal(size=(b, 4)).astype(np.float32),
        )

    root = RootInput(
        latent=torch.zeros(5, 2),
        value=np.zeros(5, np.float32),
        policy_logits=np.zeros((5, 4), np.float32),
        action_mask=np.ones((5, 4), bool),
        to_play=-np.ones(5, np.int64),
    )
    out = puct_search(root=root, recurrent_fn=rec, num_simulations=30, discount=0.99, rng=rng, root_noise_weight=0.25)
    tree = out.tree
    for b in range(5):
        for n in range(tree.num_nodes):
            kids = tree.children_index[b, n]
            kids = kids[kids >= 0]
            assert tree.node_visits[b, n] == 1 + tree.node_visits[b, kids].sum()
    assert math.isclose(out.visit_counts.sum(), 5 * 30)
