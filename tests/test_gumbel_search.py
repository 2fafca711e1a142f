"""Gumbel MuZero search: golden values from mctx (its Gumbel MuZero policy), hand-computed
trees, root noise and batch independence."""

import math

import numpy as np
import pytest

from lz_tune.mcts import Gumbel, RootInput, allocate_tree, gumbel_search, run_search
from lz_tune.mcts import gumbel as gk


def make_root(logits, *, value=0.0, mask=None, to_play=-1):
    """RootInput with a numpy latent [B, 1] holding the root index (B = len(logits))."""
    logits = np.asarray(logits, np.float32)
    batch = logits.shape[0]
    return RootInput(
        latent=np.arange(batch, dtype=np.float32)[:, None],
        value=np.broadcast_to(np.asarray(value, np.float32), (batch,)).copy(),
        policy_logits=logits,
        action_mask=np.ones(logits.shape, bool) if mask is None else np.asarray(mask, bool),
        to_play=np.broadcast_to(np.asarray(to_play, np.int64), (batch,)).copy(),
    )


def reward_model(rewards, num_actions):
    """Reward ``rewards[a]`` for action a, value 0, uniform logits; the state is passed through."""
    rewards = np.asarray(rewards, np.float32)

    def recurrent(state, action):
        b = len(action)
        return state, rewards[action], np.zeros(b, np.float32), np.zeros((b, num_actions), np.float32)

    return recurrent


def root_actions(tree, b=0):
    """[n] the root action each simulation went through (the ancestor of node s+1 below the root)."""
    out = []
    for node in range(1, tree.num_nodes):
        while tree.node_parent[b, node] != 0:
            node = tree.node_parent[b, node]
        out.append(int(tree.node_action[b, node]))
    return out


# --- E1: sequential-halving schedules ------------------------------------------------------------


@pytest.mark.parametrize(
    "m, n, expected",
    [
        (4, 16, "0000 1111 22 33 44 55"),
        (2, 4, "0011"),
        (3, 8, "000 11 22 3"),
        (8, 24, "00000000 1111 2222 33 44 55 66"),
    ],
)
def test_e1_considered_visit_schedules(m, n, expected):
    assert gk.considered_visits(m, n) == [int(c) for c in expected.replace(" ", "")]
    np.testing.assert_array_equal(gk.considered_visit_table(m, n)[m], gk.considered_visits(m, n))


def test_e1_table_4_8():
    table = gk.considered_visit_table(4, 8)
    assert table.shape == (5, 8) and table.dtype == np.int32
    rows = ["01234567", "01234567", "00112233", "00011223", "00001122"]
    np.testing.assert_array_equal(table, [[int(c) for c in r] for r in rows])


# --- E2: one node, by hand -----------------------------------------------------------------------


def e2_tree():
    """Node 1 is E2's node: P = [.5, .3, .2], raw v = .4, N = [2, 1, 0], Q = [.6, .2, -], V = .45,
    N_s = 4 (rewards 0, discount 1). Its child 0 (node 2) has prior [.1, .2, .7] and no children;
    the root has only action 0 legal, leading to node 1."""
    tree = allocate_tree(1, 8, 3)
    tree.discount[:] = 1.0
    tree.root_legal[0] = [True, False, False]
    tree.children_prior[0, 0] = [1.0, 0.0, 0.0]
    tree.children_index[0, 0, 0] = 1
    tree.children_prior[0, 1] = [0.5, 0.3, 0.2]
    tree.children_index[0, 1, :2] = [2, 3]
    tree.children_prior[0, 2] = [0.1, 0.2, 0.7]
    tree.node_parent[0, 1:4] = [0, 1, 1]
    tree.node_action[0, 1:4] = [0, 0, 1]
    tree.node_visits[0, :4] = [5, 4, 2, 1]
    tree.node_raw_value[0, 1] = 0.4
    tree.node_value_sum[0, 1:4] = [0.45 * 4, 0.6 * 2, 0.2 * 1]
    return tree


def node_sigma(tree, node, c_visit=50.0, c_scale=0.1):
    """(v_mix, completed Q, rescaled Q, sigma, logits, visits) of ``node`` in tree 0."""
    A = tree.num_actions
    visits, logits, cq, sigma = np.empty(A, np.int64), np.empty(A), np.empty(A), np.empty(A)
    v_mix = gk.completed_q(
        tree.children_index,
        tree.children_prior,
        tree.node_visits,
        tree.node_value_sum,
        tree.node_reward,
        tree.node_raw_value,
        tree.discount,
        0,
        node,
        visits,
        logits,
        cq,
    )
    completed = cq.copy()
    gk.sigma_into(visits, cq, c_visit, c_scale, sigma)
    return v_mix, completed, cq, sigma, logits, visits


def test_e2_completed_q_sigma_and_interior_choice():
    tree = e2_tree()
    v_mix, completed, rescaled, sigma, logits, visits = node_sigma(tree, 1)
    np.testing.assert_array_equal(visits, [2, 1, 0])
    np.testing.assert_allclose(logits, np.log([0.5, 0.3, 0.2]), atol=1e-6)
    assert v_mix == pytest.approx(0.4375, abs=1e-6)
    np.testing.assert_allclose(completed, [0.6, 0.2, 0.4375], atol=1e-6)
    np.testing.assert_allclose(rescaled, [1.0, 0.0, 0.59375], atol=1e-6)
    np.testing.assert_allclose(sigma, [5.2, 0.0, 3.0875], atol=1e-5)

    probs = np.empty(3)
    assert gk.interior_action(visits, logits, sigma, probs) == 0
    np.testing.assert_allclose(probs, [0.950856, 0.003147, 0.045997], atol=1e-6)
    np.testing.assert_allclose(probs - visits / (1 + visits.sum()), [0.450856, -0.246853, 0.045997], atol=1e-6)

    # the whole descent: root -> node 1 (only legal action, N = 4 = table[1][4]) -> E2 picks 0 -> node 2,
    # unvisited there (sigma 0), so the prior [.1, .2, .7] decides: expand node 2 via action 2
    parents, actions = np.empty(1, np.int32), np.empty(1, np.int64)
    gk.select_leaves(
        tree.children_index,
        tree.children_prior,
        tree.node_visits,
        tree.node_value_sum,
        tree.node_reward,
        tree.node_raw_value,
        tree.root_legal,
        tree.discount,
        np.zeros((1, 3), np.float32),
        gk.considered_visit_table(16, 7),
        16,
        50.0,
        0.1,
        parents,
        actions,
    )
    assert (parents[0], actions[0]) == (2, 2)


def test_no_visits_gives_zero_sigma():
    tree = e2_tree()
    v_mix, completed, _, sigma, _, _ = node_sigma(tree, 2)  # node 2: no children, raw value 0
    assert v_mix == 0.0
    np.testing.assert_array_equal(completed, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(sigma, [0.0, 0.0, 0.0])


# --- E3 and further full searches ----------------------------------------------------------------


def test_e3_full_search():
    """mctx E3: A = 2, logits log[.6, .4], root value 0, no noise, m = 2, n = 4, reward [0, 1][a], gamma 0."""
    out = gumbel_search(
        root=make_root(np.log([[0.6, 0.4]])),
        recurrent_fn=reward_model([0, 1], 2),
        num_simulations=4,
        discount=0.0,
        rng=np.random.default_rng(0),
        max_num_considered_actions=2,
        gumbel_scale=0.0,
    )
    tree = out.tree
    assert root_actions(tree) == [0, 1, 1, 0]
    # sims 3 and 4 went one level deeper (interior rule: all unvisited, uniform prior -> action 0)
    np.testing.assert_array_equal(tree.node_parent[0], [-1, 0, 0, 2, 1])
    np.testing.assert_array_equal(tree.node_action[0], [-1, 0, 1, 0, 0])
    np.testing.assert_array_equal(out.visit_counts, [[2, 2]])
    np.testing.assert_allclose(out.root_q, [[0.0, 1.0]], atol=1e-6)
    assert out.root_value[0] == pytest.approx(0.4, abs=1e-6)
    _, _, _, sigma, _, _ = node_sigma(tree, 0)
    np.testing.assert_allclose(sigma, [0.0, 5.2], atol=1e-5)
    np.testing.assert_array_equal(out.action, [1])
    np.testing.assert_allclose(out.improved_policy, [[0.008207, 0.991793]], atol=1e-6)
    np.testing.assert_allclose(out.policy_target, out.improved_policy)


def test_considered_actions_capped_by_legal_count():
    """A = 3, action 1 illegal, m = 4 -> k* = 2 (row 2 of the table for n = 4: 0 0 1 1; row 4 would be
    0 0 0 0 and strand sim 2 with no legal candidate). Root logits log[.5, .3, .2] -> legal priors
    [5/7, 0, 2/7]; reward [0, 0, 1][a], gamma 0, values 0, no noise.

    sim 0: cv 0, sigma 0: log(5/7) > log(2/7) -> 0, Q(0) = 0
    sim 1: cv 0, only action 2 unvisited -> 2, Q(2) = 1
    sim 2: cv 1: v_mix = 2 * (2/7) / 3 = .190476, Q~ = [0, .190476, 1] (min-max 0..1),
           sigma = 5.1 * Q~: log(5/7) = -.336 vs log(2/7) + 5.1 = 3.847 -> 2 (then one level deeper)
    sim 3: cv 1: only action 0 has N = 1 -> 0
    end:   N = [2, 0, 2], V_root = (0 + 0 + 1 + 1 + 0) / 5 = .4, v_mix = 4 * (2/7) / 5 = .228571,
           sigma = 5.2 * [0, .228571, 1]; policy = softmax(log(5/7), log(2/7) + 5.2) over {0, 2}
           = [5/7, 2/7 e^5.2] / (5/7 + 2/7 e^5.2) = [.013604, .986396]; action: N = 2 for both -> 2.
    """
    out = gumbel_search(
        root=make_root(np.log([[0.5, 0.3, 0.2]]), mask=[[True, False, True]]),
        recurrent_fn=reward_model([0, 0, 1], 3),
        num_simulations=4,
        discount=0.0,
        rng=np.random.default_rng(0),
        max_num_considered_actions=4,
        gumbel_scale=0.0,
    )
    assert root_actions(out.tree) == [0, 2, 2, 0]
    np.testing.assert_array_equal(out.visit_counts, [[2, 0, 2]])
    assert out.root_value[0] == pytest.approx(0.4, abs=1e-6)
    _, _, _, sigma, _, _ = node_sigma(out.tree, 0)
    np.testing.assert_allclose(sigma, [0.0, 5.2 * 0.228571, 5.2], atol=1e-5)
    e = 2 / 7 * math.exp(5.2)
    np.testing.assert_allclose(out.improved_policy, [[5 / 7 / (5 / 7 + e), 0.0, e / (5 / 7 + e)]], atol=1e-6)
    np.testing.assert_allclose(out.improved_policy, [[0.013604, 0.0, 0.986396]], atol=1e-6)
    assert out.improved_policy[0, 1] == 0.0  # exactly 0 on the illegal action
    np.testing.assert_array_equal(out.action, [2])


def test_root_rescale_spans_all_actions_like_mctx():
    """The corner where rescaling over all A (mctx) differs from the legal actions only: A = 3,
    action 2 illegal, root value 5, logits log[.5, .5, .5], reward [0, 1, 0][a], gamma 0, m = 2, n = 2.

    sims: tie at sim 0 -> first index 0, then cv 0 leaves action 1. N = [1, 1, 0], Q = [0, 1].
    v_mix = (5 + 2 * (.5 * 0 + .5 * 1) / 1) / 3 = 2, Q~ = [0, 1, 2] (illegal action 2 -> v_mix)
    -> rescaled [0, .5, 1], sigma = 5.1 * [0, .5, 1] = [0, 2.55, 5.1];
    policy = softmax(log .5, log .5 + 2.55) over {0, 1} = [1, e^2.55] / (1 + e^2.55)
    (legal-only rescaling would give sigma [0, 5.1] and [.006061, .993939]).
    """
    out = gumbel_search(
        root=make_root(np.log([[0.5, 0.5, 0.5]]), value=5.0, mask=[[True, True, False]]),
        recurrent_fn=reward_model([0, 1, 0], 3),
        num_simulations=2,
        discount=0.0,
        rng=np.random.default_rng(0),
        max_num_considered_actions=2,
        gumbel_scale=0.0,
    )
    assert root_actions(out.tree) == [0, 1]
    assert out.root_value[0] == pytest.approx(2.0, abs=1e-6)
    v_mix, _, _, sigma, _, _ = node_sigma(out.tree, 0)
    assert v_mix == pytest.approx(2.0, abs=1e-6)
    np.testing.assert_allclose(sigma, [0.0, 2.55, 5.1], atol=1e-5)
    e = math.exp(2.55)
    np.testing.assert_allclose(out.improved_policy, [[1 / (1 + e), e / (1 + e), 0.0]], atol=1e-6)
    np.testing.assert_array_equal(out.action, [1])


# --- root noise ----------------------------------------------------------------------------------


def test_gumbel_noise_is_fresh_per_root_and_per_search():
    root = make_root(np.zeros((2, 4)))
    tree = allocate_tree(2, 9, 4)
    tree.root_legal[:] = True
    rng = np.random.default_rng(5)
    g1, table = Gumbel(gumbel_scale=2.0).init_roots(tree, root, rng)
    g2, _ = Gumbel(gumbel_scale=2.0).init_roots(tree, root, rng)
    assert g1.shape == (2, 4) and g1.dtype == np.float32 and table.shape == (17, 8)
    assert not np.allclose(g1[0], g1[1])  # two roots of one batch
    assert not np.allclose(g1, g2)  # two consecutive searches with the same rng
    np.testing.assert_allclose(g1, 2.0 * np.random.default_rng(5).gumbel(size=(2, 4)), rtol=1e-6)


def test_first_simulation_takes_argmax_of_gumbel_plus_logits():
    """Sim 0 at the root has sigma 0, so each root's first action is argmax g + logit: with 32 identical
    roots the noise must spread them over several actions."""
    logits = np.tile(np.log([[0.4, 0.3, 0.2, 0.1]]), (32, 1))
    out = gumbel_search(
        root=make_root(logits),
        recurrent_fn=reward_model([0, 0, 0, 0], 4),
        num_simulations=1,
        discount=0.9,
        rng=np.random.default_rng(11),
        max_num_considered_actions=4,
    )
    g = np.random.default_rng(11).gumbel(size=(32, 4)).astype(np.float32)
    first = out.tree.node_action[:, 1]
    np.testing.assert_array_equal(first, np.argmax(g + np.log(out.tree.children_prior[:, 0]), axis=1))
    assert len(set(first.tolist())) >= 3


def toy_model(state, action):
    """Row-wise deterministic model over a numpy state [B, 4] (4 actions)."""
    a = action.astype(np.float32)[:, None]
    nxt = np.sin(1.7 * state + 0.9 * a + 0.3).astype(np.float32)
    reward = np.cos(nxt[:, 0] + 2.0 * nxt[:, 1]).astype(np.float32)
    value = np.sin(3.0 * nxt[:, 2] - nxt[:, 3]).astype(np.float32)
    return nxt, reward, value, (2.0 * nxt).astype(np.float32)


def toy_roots(seed=0, batch=5):
    r = np.random.default_rng(seed)
    mask = r.random((batch, 4)) < 0.7
    mask[:, 0] = True
    return RootInput(
        latent=r.normal(size=(batch, 4)).astype(np.float32),
        value=r.normal(size=batch).astype(np.float32),
        policy_logits=r.normal(size=(batch, 4)).astype(np.float32),
        action_mask=mask,
        to_play=np.array([-1, 0, -1, 1, -1][:batch], np.int64),
    )


def test_same_seed_reproduces_the_search():
    runs = [
        gumbel_search(
            root=toy_roots(),
            recurrent_fn=toy_model,
            num_simulations=12,
            discount=0.9,
            rng=np.random.default_rng(3),
            max_num_considered_actions=3,
        )
        for _ in range(2)
    ]
    a, b = runs
    np.testing.assert_array_equal(a.tree.node_action, b.tree.node_action)
    np.testing.assert_array_equal(a.tree.node_parent, b.tree.node_parent)
    np.testing.assert_array_equal(a.improved_policy, b.improved_policy)
    np.testing.assert_array_equal(a.action, b.action)


class FixedRng:
    """Stands in for np.random.Generator: ``gumbel`` returns preset noise (to compare batch vs single)."""

    def __init__(self, noise):
        self.noise = noise

    def gumbel(self, size=None):
        assert tuple(size) == self.noise.shape
        return self.noise


def test_batch_matches_searching_each_root_alone():
    roots = toy_roots()
    noise = np.random.default_rng(9).gumbel(size=(5, 4))
    strategy = Gumbel(max_num_considered_actions=3)
    batch = run_search(
        strategy=strategy, root=roots, recurrent_fn=toy_model, num_simulations=12, discount=0.9, rng=FixedRng(noise)
    )
    assert batch.visit_counts.sum(axis=1).tolist() == [12] * 5
    assert not batch.visit_counts[~roots.action_mask].any()
    assert roots.action_mask[np.arange(5), batch.action].all()
    np.testing.assert_allclose(batch.improved_policy.sum(axis=1), 1.0, atol=1e-6)
    for i in range(5):
        one = RootInput(
            latent=roots.latent[i : i + 1],
            value=roots.value[i : i + 1],
            policy_logits=roots.policy_logits[i : i + 1],
            action_mask=roots.action_mask[i : i + 1],
            to_play=roots.to_play[i : i + 1],
        )
        alone = run_search(
            strategy=strategy,
            root=one,
            recurrent_fn=toy_model,
            num_simulations=12,
            discount=0.9,
            rng=FixedRng(noise[i : i + 1]),
        )
        np.testing.assert_array_equal(alone.tree.node_action[0], batch.tree.node_action[i])
        np.testing.assert_array_equal(alone.tree.node_parent[0], batch.tree.node_parent[i])
        np.testing.assert_array_equal(alone.visit_counts[0], batch.visit_counts[i])
        np.testing.assert_allclose(alone.improved_policy[0], batch.improved_policy[i], atol=1e-7)
        assert alone.action[0] == batch.action[i]
        assert alone.root_value[0] == pytest.approx(batch.root_value[i], abs=1e-7)
