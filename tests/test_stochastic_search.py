"""Stochastic MuZero search: golden values of mctx's worked example, gamma once per env step,
and convergence to the expectimax value with an exact model."""

from __future__ import annotations

import numpy as np
import pytest

from lz_tune.mcts import PUCT, RootInput, StochasticPUCT, run_search

NEG_INF = -np.inf


def _e4_recurrent(num_actions: int = 2):
    """mctx's stochastic MuZero search, A = C = 2. Decision expansion (slot < A): chance logits
    log[.75, .25], afterstate value .3. Chance expansion: reward 1 (c=0) / 2 (c=1), value .5,
    action logits log[.4, .6]."""
    A = num_actions

    def recurrent(state, slot):
        batch = slot.shape[0]
        logits = np.full((batch, A + 2), NEG_INF, np.float32)
        reward = np.zeros(batch, np.float32)
        value = np.zeros(batch, np.float32)
        decision = slot < A
        logits[decision, A:] = np.log([0.75, 0.25])
        value[decision] = 0.3
        logits[~decision, :A] = np.log([0.4, 0.6])
        reward[~decision] = np.where(slot[~decision] - A == 0, 1.0, 2.0)
        value[~decision] = 0.5
        return state.copy(), reward, value, logits

    return recurrent


def _root(batch: int = 1) -> RootInput:
    return RootInput(
        latent=np.zeros((batch, 1), np.float32),
        value=np.zeros(batch, np.float32),
        policy_logits=np.log(np.tile([[0.6, 0.4]], (batch, 1))).astype(np.float32),
        action_mask=np.ones((batch, 2), bool),
        to_play=np.full(batch, -1),
    )


def test_mctx_worked_example_node_by_node():
    """E4: path root -a0-> chance -c0-> decision -a1-> chance; node values [.755, 1.006667, .4, .3];
    root visits [3, 0]; the root value after each simulation .15, .583333, .755."""
    strategy = StochasticPUCT(num_chance_outcomes=2, q_normalization="node")  # mctx normalises per node
    root_values = []
    for n in (1, 2, 3):
        out = run_search(
            strategy=strategy,
            root=_root(),
            recurrent_fn=_e4_recurrent(),
            num_simulations=n,
            discount=0.9,
            rng=np.random.default_rng(0),
        )
        root_values.append(float(out.root_value[0]))
    np.testing.assert_allclose(root_values, [0.15, 0.583333, 0.755], atol=1e-5)
    tree = out.tree
    values = tree.node_value_sum[0] / tree.node_visits[0]
    np.testing.assert_allclose(values, [0.755, 1.006667, 0.4, 0.3], atol=1e-5)
    np.testing.assert_array_equal(tree.node_is_chance[0], [False, True, False, True])
    np.testing.assert_array_equal(tree.node_parent[0], [-1, 0, 1, 2])
    np.testing.assert_array_equal(tree.node_action[0], [-1, 0, 2 + 0, 1])  # a0, chance c0 (slot A + 0), a1
    np.testing.assert_array_equal(out.visit_counts, [[3, 0]])
    # Q(root, a0) = V(afterstate) (reward 0, discount 1 on the decision -> chance edge)
    np.testing.assert_allclose(out.root_q[0, 0], 1.006667, atol=1e-5)
    assert np.isnan(out.root_q[0, 1])
    # chance slots carry sigma; the action slots of a chance node keep prior 0
    np.testing.assert_allclose(tree.children_prior[0, 1], [0, 0, 0.75, 0.25], atol=1e-6)


def test_discount_applies_once_per_env_step():
    """A chain of two real steps (reward 1 each, final value 0) has value 1 + gamma, not
    1 + gamma^2 as when gamma is applied at every tree level (the original's error)."""
    gamma = 0.5

    def recurrent(state, slot):
        batch = slot.shape[0]
        logits = np.full((batch, 2), NEG_INF, np.float32)
        decision = slot < 1
        logits[decision, 1] = 0.0
        logits[~decision, 0] = 0.0
        reward = np.where(decision, 0.0, 1.0).astype(np.float32)
        return state, reward, np.zeros(batch, np.float32), logits

    root = RootInput(
        latent=np.zeros((1, 1), np.float32),
        value=np.zeros(1, np.float32),
        policy_logits=np.zeros((1, 1), np.float32),
        action_mask=np.ones((1, 1), bool),
        to_play=np.full(1, -1),
    )
    out = run_search(
        strategy=StochasticPUCT(num_chance_outcomes=1),
        root=root,
        recurrent_fn=recurrent,
        num_simulations=4,
        discount=gamma,
        rng=np.random.default_rng(0),
    )
    tree = out.tree
    # nodes: 0 root, 1 chance, 2 decision (r=1), 3 chance, 4 decision (r=1); the leaf's return
    # seen from the root's afterstate is 1 + gamma * (0 + 1 * (1 + gamma * 0)) = 1 + gamma
    leaf_return_at_1 = 1.0 + gamma * 1.0
    value_1 = tree.node_value_sum[0, 1] / tree.node_visits[0, 1]
    # V(1) averages its raw value 0, the return 1 (sim 2), 1 (sim 3: value 0 at the afterstate) and 1 + gamma
    np.testing.assert_allclose(value_1, (0 + 1 + 1 + leaf_return_at_1) / 4, atol=1e-6)


class _Lottery:
    """A two-step stochastic game with a closed-form optimum, and its exact model. Step 1:
    action 0 pays a sure 1; action 1 pays 3 with probability p, else 0. Step 2 (any action):
    a fair coin pays 2 or 0. Then the game is over (every later value and reward is 0).
    Optimal value at gamma: max(1, 3p) + gamma * 1."""

    A, C = 2, 2

    def __init__(self, p: float) -> None:
        self.p = p

    def optimum(self, gamma: float) -> float:
        return max(1.0, 3 * self.p) + gamma * 1.0

    def play(self, first_action: int, gamma: float, rng: np.random.Generator) -> float:
        """The game itself: one episode's discounted return."""
        first = (3.0 if rng.random() < self.p else 0.0) if first_action == 1 else 1.0
        return first + gamma * (2.0 if rng.random() < 0.5 else 0.0)

    def recurrent(self, state, slot):
        """state [B, 2]: (steps taken, last action)."""
        A, C, p = self.A, self.C, self.p
        batch = slot.shape[0]
        logits = np.full((batch, A + C), NEG_INF, np.float32)
        reward = np.zeros(batch, np.float32)
        value = np.zeros(batch, np.float32)
        steps, last = state[:, 0].astype(np.int64), state[:, 1].astype(np.int64)
        decision = slot < A
        next_state = state.copy()
        for i in range(batch):
            if decision[i]:  # afterstate: remember the action; its chance distribution and exact value
                a = int(slot[i])
                next_state[i, 1] = a
                if steps[i] == 0:
                    probs = [p, 1 - p] if a == 1 else [1.0, 0.0]
                    value[i] = 3 * p if a == 1 else 1.0
                elif steps[i] == 1:
                    probs, value[i] = [0.5, 0.5], 1.0
                else:
                    probs = [1.0, 0.0]
                with np.errstate(divide="ignore"):
                    logits[i, A:] = np.log(probs)
            else:  # chance outcome: the reward of the real step, then the next state's value
                c = int(slot[i]) - A
                if steps[i] == 0:
                    reward[i] = (3.0 if c == 0 else 0.0) if last[i] == 1 else 1.0
                    value[i] = 1.0
                elif steps[i] == 1:
                    reward[i] = 2.0 if c == 0 else 0.0
                next_state[i, 0] = steps[i] + 1
                logits[i, :A] = 0.0
        return next_state, reward, value, logits


def test_the_lottery_optimum_is_the_games_best_mean_return():
    game, gamma, rng = _Lottery(0.25), 0.9, np.random.default_rng(0)
    means = [np.mean([game.play(a, gamma, rng) for _ in range(40_000)]) for a in (0, 1)]
    assert abs(max(means) - game.optimum(gamma)) < 0.02 and int(np.argmax(means)) == 0


@pytest.mark.parametrize("p, best", [(0.25, 0), (0.5, 1)])
def test_root_value_converges_to_expectimax_and_chance_visits_follow_probabilities(p, best):
    game, gamma = _Lottery(p), 0.9
    root = RootInput(
        latent=np.zeros((1, 2), np.float32),
        value=np.full(1, game.optimum(gamma), np.float32),
        policy_logits=np.zeros((1, 2), np.float32),
        action_mask=np.ones((1, 2), bool),
        to_play=np.full(1, -1),
    )
    errors = []
    for sims in (50, 400, 1600):
        out = run_search(
            strategy=StochasticPUCT(num_chance_outcomes=2),
            root=root,
            recurrent_fn=game.recurrent,
            num_simulations=sims,
            discount=gamma,
            rng=np.random.default_rng(1),
        )
        errors.append(abs(float(out.root_value[0]) - game.optimum(gamma)))
        assert out.visit_counts[0].argmax() == best
    assert errors[-1] < 0.05 and errors[-1] < errors[0], errors
    # at the lottery's chance node the visit frequencies match (p, 1 - p)
    tree = out.tree
    lottery = tree.children_index[0, 0, 1]
    kids = tree.children_index[0, lottery, 2:]
    visits = np.array([tree.node_visits[0, k] if k >= 0 else 0 for k in kids], float)
    np.testing.assert_allclose(visits / visits.sum(), [p, 1 - p], atol=0.02)


def test_plain_trees_are_unchanged_by_the_chance_support():
    """C = 0: the PUCT search has no chance nodes and Q uses the discount on every edge."""

    def recurrent(state, action):
        batch = action.shape[0]
        return state, np.ones(batch, np.float32), np.zeros(batch, np.float32), np.zeros((batch, 2), np.float32)

    out = run_search(
        strategy=PUCT(),
        root=_root(),
        recurrent_fn=recurrent,
        num_simulations=8,
        discount=0.5,
        rng=np.random.default_rng(0),
    )
    assert not out.tree.node_is_chance.any()
    assert out.tree.num_actions == 2 and out.tree.num_slots == 2


def test_bad_chance_count():
    with pytest.raises(ValueError, match="num_chance_outcomes"):
        StochasticPUCT(num_chance_outcomes=0)
