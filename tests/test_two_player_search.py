"""Two-player search (issue 38): values from the view of the player to move, the sign flip on
backup (MuZero's board games: Q(s, a) = r(s, a) - gamma * V(s')), checked on a hand-built trap
where the wrong sign picks the wrong move, for pUCT and Gumbel; and the policies' plumbing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.config import Config
from lz_tune.mcts import RootInput, gumbel_search, puct_search
from lz_tune.workers.common import env_spec_for

# The trap. State ids travel as the latent ([B, 1] float). Player 0 moves at the root (state 0):
#   a0: grab 0.5 now (state 1), but then player 1 has a0: a win worth +1 to player 1 (state 3),
#       or a1: nothing (state 4);
#   a1: nothing (state 2), and nothing follows.
# Every network value is 0; terminal states lead to an absorbing state 6. Minimax: Q(a0) =
# 0.5 - 1 = -0.5 < Q(a1) = 0. Read as one player's rewards (the wrong sign): Q(a0) = 1.5.
NEXT = {(0, 0): 1, (0, 1): 2, (1, 0): 3, (1, 1): 4}
REWARD = {(0, 0): 0.5, (1, 0): 1.0}
LOGITS = {0: np.log([0.6, 0.4]), 1: np.log([0.7, 0.3])}


def trap(latent: np.ndarray, action: np.ndarray):
    state = latent[:, 0].astype(int)
    nxt = np.array([NEXT.get((s, int(a)), 6 if s >= 1 else 0) for s, a in zip(state, action)], np.float32)
    reward = np.array([REWARD.get((s, int(a)), 0.0) for s, a in zip(state, action)], np.float32)
    logits = np.stack([LOGITS.get(int(n), np.zeros(2)) for n in nxt]).astype(np.float32)
    return nxt[:, None], reward, np.zeros(len(state), np.float32), logits


def trap_root(to_play: int) -> RootInput:
    return RootInput(
        latent=np.zeros((1, 1), np.float32),
        value=np.zeros(1, np.float32),
        policy_logits=LOGITS[0][None].astype(np.float32),
        action_mask=np.ones((1, 2), bool),
        to_play=np.array([to_play], np.int64),
    )


def test_golden_backup_of_three_simulations():
    """By hand (gamma 1, c1 1.25, c2 19652, no noise):

    sim 1: priors (.6, .4) -> a0; node1 = state 1, r .5, v 0. Q(root, a0) = .5 - 0 = .5;
           root sum 0 + (.5 - 0) = .5 over 2 visits.
    sim 2: a0 scores c*sqrt2*.6/2 + .5 = 1.030, unvisited a1 c*sqrt2*.4 + .5 (mean Q) = 1.207
           -> a1; node2 = state 2, r 0, v 0; Q(root, a1) = 0; root sum .5.
    sim 3: min-max (0, .5): a0 c*sqrt3*.6/2 + 1 = 1.650 > a1 .433 -> node1; there priors
           (.7, .3) -> a0; node3 = state 3, r 1 (player 1's win), v 0. Backup: node1 gets
           1 - 0 = 1 (sum 1, N 2, V .5); the root gets .5 - 1 = -.5 (sum 0, N 4).
    So Q(root) = (.5 - .5, 0 - 0) = (0, 0), root value 0. With the single-player sign
    node1's 1 counts for the root player: Q(root, a0) = .5 + .5 = 1, root sum .5 + 1.5 = 2.
    """
    out = puct_search(
        root=trap_root(0), recurrent_fn=trap, num_simulations=3, discount=1.0, rng=np.random.default_rng(0)
    )
    tree = out.tree
    np.testing.assert_array_equal(tree.node_parent[0], [-1, 0, 0, 1])
    np.testing.assert_array_equal(tree.node_action[0], [-1, 0, 1, 0])
    np.testing.assert_array_equal(tree.node_visits[0], [4, 2, 1, 1])
    np.testing.assert_allclose(tree.node_value_sum[0], [0.0, 1.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(out.root_q[0], [0.0, 0.0], atol=1e-6)
    assert out.root_value[0] == pytest.approx(0.0, abs=1e-6)

    wrong = puct_search(
        root=trap_root(-1), recurrent_fn=trap, num_simulations=3, discount=1.0, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(wrong.tree.node_value_sum[0], [2.0, 1.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(wrong.root_q[0], [1.0, 0.0], atol=1e-6)


@pytest.mark.parametrize("search", ["puct", "gumbel"])
def test_the_wrong_sign_walks_into_the_trap(search):
    """Two-player (to_play 0): the search avoids the move that hands the opponent a win; the same
    tree read with one player's sign (to_play -1) takes it."""

    def run(to_play):
        if search == "puct":
            out = puct_search(
                root=trap_root(to_play),
                recurrent_fn=trap,
                num_simulations=40,
                discount=1.0,
                rng=np.random.default_rng(0),
            )
            return int(out.visit_counts[0].argmax()), out
        out = gumbel_search(
            root=trap_root(to_play),
            recurrent_fn=trap,
            num_simulations=16,
            discount=1.0,
            rng=np.random.default_rng(0),
            max_num_considered_actions=2,
            gumbel_scale=0.0,
        )
        return int(out.action[0]), out

    right, out = run(0)
    wrong, out_wrong = run(-1)
    assert (right, wrong) == (1, 0)
    q, q_wrong = out.root_q[0], out_wrong.root_q[0]
    assert q[0] < -0.3 and q[1] == pytest.approx(0.0, abs=1e-6)  # 0.5 - V(state 1) -> 0.5 - 1
    assert q_wrong[0] > 1.3  # 0.5 + 1
    if search == "gumbel":  # the improved policy follows the signed values
        assert out.improved_policy[0, 1] > out.improved_policy[0, 0]
        assert out_wrong.improved_policy[0, 0] > out_wrong.improved_policy[0, 1]


@pytest.mark.parametrize("policy_type", ["muzero", "efficientzero", "gumbel_muzero"])
def test_policies_search_with_the_signed_discount_of_the_player_to_move(policy_type):
    """Every two-player root of a batch searches with -gamma, a single-player root with +gamma; the
    root mask holds at the root (interior nodes allow every action, as in MuZero)."""
    cfg = Config.from_dict(
        {
            "policy_type": policy_type,
            "env": {"env_id": "openspiel:tic_tac_toe"},
            "model": {
                "latent_dim": 16,
                "hidden_sizes": [16],
                "value_support_size": 5,
                "reward_support_size": 5,
                "projection_dim": 16,
            },
            "mcts": {"num_simulations": 8, "discount_factor": 0.9},
        }
    )
    spec = env_spec_for(cfg)
    torch.manual_seed(0)
    policy = get_algorithm(policy_type).make_policy(cfg, spec)
    obs = np.zeros((3, *spec.observation_shape), np.float32)
    mask = np.ones((3, 9), bool)
    mask[:, :4] = False
    out, _ = policy.search(
        obs, mask, np.array([0, 1, -1]), num_simulations=30, noise=True, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(out.tree.discount, [-0.9, -0.9, 0.9])
    assert out.visit_counts[:, :4].sum() == 0
    assert (out.tree.children_index[:, 1:, :4] >= 0).any()  # interior nodes expanded "illegal" moves too
