"""AlphaZero (``policy_type=alphazero``, issue 48 item 2): the search over true game states
(golden positions with a uniform-prior, value-0 network; the two-player backup; legal moves
only), the game states an OpenSpiel batch carries, the config checks, the targets and one update,
the ``config`` listing. Training through the CLI with a resume, on Ray actors and in Tune:
``tests/test_policy_types.py`` (``SMOKE_CONFIG``); the slow test here trains tic-tac-toe until no
game in 100 is lost against the perfect minimax bot."""

from __future__ import annotations

import os
import time

import numpy as np
import pyspiel
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.buffer import GameBuffer, SampledIndex
from lz_tune.config import Config, ConfigError
from lz_tune.config_loader import load_config_module
from lz_tune.envs import make_vector_env
from lz_tune.mcts.rules_search import GameNode, RulesPUCT, search_game_states
from lz_tune.workers.common import env_spec_for, make_env
from tests.conftest import REPO_ROOT, run_cli

ZOO = os.path.join("zoo", "board_games", "tictactoe_alphazero.py")
TINY = (
    "env.collector_env_num=2",
    "env.evaluator_env_num=2",
    "model.latent_dim=16",
    "model.hidden_sizes=(16,)",
    "learner.batch_size=8",
)
GAME = pyspiel.load_game("tic_tac_toe")


def uniform(states):
    """A network that knows nothing: uniform prior, value 0."""
    return np.zeros((len(states), 9), np.float32), np.zeros(len(states), np.float32)


def position(*moves):
    state = GAME.new_initial_state()
    for action in moves:
        state.apply_action(action)
    return state


def search(states, sims, **rule):
    return search_game_states(
        states,
        evaluate=uniform,
        num_actions=9,
        num_simulations=sims,
        rule=RulesPUCT(**rule),
        rng=np.random.default_rng(0),
    )


# boards: x moved first; cells 0 1 2 / 3 4 5 / 6 7 8
WIN_IN_ONE = ((0, 3, 1, 4), 2)  # x: 0 1, o: 3 4, x to move: 2 completes the top row
WIN_IN_TWO = ((0, 1, 2, 7), 4)  # x: 0 2, o: 1 7, x to move: 4 forks (6 and 8), the only forced win
BLOCK = ((0, 4, 1), 2)  # x: 0 1, o: 4, o to move: only 2 stops the top row


@pytest.mark.parametrize("q_normalization", ["game", "tree"])
@pytest.mark.parametrize(
    "case,sims",
    [(WIN_IN_ONE, 25), (WIN_IN_TWO, 100), (BLOCK, 50)],
    ids=["win-in-one", "win-in-two", "block"],
)
def test_golden_positions_with_a_uniform_prior_and_value_zero(case, sims, q_normalization):
    moves, best = case
    out = search([position(*moves)], sims, q_normalization=q_normalization)
    assert int(out.visit_counts[0].argmax()) == best, out.visit_counts[0]
    assert out.visit_counts[0].sum() == sims


def test_the_golden_positions_in_one_batched_search():
    """All three trees in one search (one network call per simulation for all), each finds its
    move; the win in one is valued exactly: Q = +1 (x's reward) and the game is over below it."""
    cases = (WIN_IN_ONE, WIN_IN_TWO, BLOCK)
    calls = []

    def counting(states):
        calls.append(len(states))
        return uniform(states)

    out = search_game_states(
        [position(*m) for m, _ in cases],
        evaluate=counting,
        num_actions=9,
        num_simulations=100,
        rule=RulesPUCT(),
        rng=np.random.default_rng(1),
    )
    assert [int(a) for a in out.visit_counts.argmax(axis=1)] == [b for _, b in cases]
    assert len(calls) <= 101 and calls[0] == 3 and max(calls) <= 3  # the roots, then <= 1 leaf per tree
    root = out.roots[0]
    i = root.actions.index(2)
    assert out.root_q[0, 2] == pytest.approx(1.0) and root.reward[i] == 1.0 and root.children[i].terminal
    assert out.root_value[0] > 0.5 and out.pred_value[0] == 0.0


def _check_backup(node: GameNode, discount: float = 1.0) -> int:
    """Every edge of the tree below ``node``: W = n r + gamma sign sum(G of the child), the child's
    visits = n, the node's own sums; sign -1 where the other player moves next. Returns the nodes
    checked."""
    if node.terminal:
        return 1
    assert node.visits == 1 + sum(node.n)
    assert node.value_sum == pytest.approx(node.raw_value + sum(node.w), abs=1e-9)
    checked = 1
    for i, child in enumerate(node.children):
        if child is None:
            assert node.n[i] == 0
            continue
        assert node.sign[i] == (1.0 if child.player == node.player else -1.0)
        if child.terminal:
            assert node.w[i] == pytest.approx(node.n[i] * node.reward[i])
            assert node.reward[i] == child.state.rewards()[node.player]
            checked += 1
            continue
        assert child.visits == node.n[i]
        assert node.w[i] == pytest.approx(node.n[i] * node.reward[i] + discount * node.sign[i] * child.value_sum)
        checked += _check_backup(child, discount)
    return checked


def test_two_player_backup_signs():
    """o to move can win at once (5) whatever x did; x's move 2 that does not block is a loss for x:
    its child (o to move) values o's win +1 from o's view, x's edge sees it as -1."""
    state = position(0, 3, 8, 4)  # x: 0 8, o: 3 4; x to move must block 5
    out = search([state], 200)
    root = out.roots[0]
    assert int(out.visit_counts[0].argmax()) == 5
    i = root.actions.index(2)
    child = root.children[i]
    j = child.actions.index(5)
    assert child.player == 1 and child.q(j) == pytest.approx(1.0) and child.children[j].terminal
    assert root.q(i) < -0.5 and all(s == -1.0 for s, c in zip(root.sign, root.children) if c is not None)
    assert _check_backup(root) > 30  # (5 empty cells: the whole game tree is 60-odd nodes)
    # a discount < 1 enters every edge
    out = search([position(0, 3, 8, 4)], 60, discount=0.9)
    assert _check_backup(out.roots[0], discount=0.9) > 15


class ExtraTurn:
    """A tiny game whose mover sometimes moves again (OpenSpiel's board games alternate): a pile
    of stones, take 1 (action 0) or 2 (action 1); taking 2 keeps the turn; who takes the last wins."""

    def __init__(self, stones=5, player=0):
        self.stones, self.player, self.winner = stones, player, -1

    def clone(self):
        other = ExtraTurn(self.stones, self.player)
        other.winner = self.winner
        return other

    def is_terminal(self):
        return self.stones == 0

    def current_player(self):
        return -4 if self.is_terminal() else self.player

    def legal_actions(self):
        return [0, 1] if self.stones >= 2 else [0]

    def apply_action(self, action):
        self.stones -= action + 1
        if self.stones == 0:
            self.winner = self.player
        elif action == 0:
            self.player = 1 - self.player

    def rewards(self):
        if self.winner < 0:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in (0, 1)]


def test_the_backup_sign_follows_who_moves_next():
    """Taking 2 keeps the turn: that edge's sign is +1, the others' -1. From 3 stones the mover
    wins by taking 2 (then 1), and taking 1 leaves the opponent 2 (taken at once): a loss."""
    out = search_game_states(
        [ExtraTurn(3)],
        evaluate=lambda s: (np.zeros((len(s), 2), np.float32), np.zeros(len(s), np.float32)),
        num_actions=2,
        num_simulations=60,
        rule=RulesPUCT(),
        rng=np.random.default_rng(0),
    )
    root = out.roots[0]
    assert root.sign == [-1.0, 1.0]
    assert int(out.visit_counts[0].argmax()) == 1
    # (the child's own value-0 evaluation counts as one visit: |Q| just under 1)
    assert out.root_q[0, 1] > 0.95 and out.root_q[0, 0] < -0.5
    assert _check_backup(root) > 3


def test_root_noise_mixes_over_the_legal_moves_only():
    out = search([position(0, 4, 8)], 30, root_noise_weight=0.5, root_dirichlet_alpha=0.3)
    root = out.roots[0]
    assert root.actions == [1, 2, 3, 5, 6, 7] and sum(root.prior) == pytest.approx(1.0)
    assert max(root.prior) > 1 / 6 + 1e-3  # the noise moved the uniform prior
    assert set(np.flatnonzero(out.visit_counts[0])) <= set(root.actions)


def _tiny_cfg(*extra: str) -> Config:
    torch.set_num_threads(1)
    return load_config_module(os.path.join(REPO_ROOT, ZOO)).with_overrides([*TINY, *extra])


def test_batches_carry_game_states_and_the_policy_plays_legal_moves_only():
    """Self-play and against a bot: every search node's moves are its state's legal moves, the
    visit counts and policy targets put nothing on illegal moves, the actions are legal; the
    batch's states are clones (the search leaves the env's games alone)."""
    cfg = _tiny_cfg("mcts.num_simulations=12")
    policy = get_algorithm("alphazero").make_policy(cfg, env_spec_for(cfg))
    rng = np.random.default_rng(0)
    for mode in ("collect", "eval"):
        env = make_env(cfg, num_envs=3, seed=1, mode=mode)
        batch = env.reset()
        for _ in range(12):
            assert batch.game_states is not None and len(batch.game_states) == 3
            for i, state in enumerate(batch.game_states):
                assert state.current_player() == batch.to_play[i]
                legal = np.zeros(9, bool)
                legal[state.legal_actions()] = True
                np.testing.assert_array_equal(legal, batch.action_mask[i])
                assert state is not env._games()[i].state and str(state) == str(env._games()[i].state)
            before = [str(s) for s in batch.game_states]
            act = policy.act(batch, mode=mode, temperature=1.0, rng=rng)
            assert [str(s) for s in batch.game_states] == before
            assert batch.action_mask[np.arange(3), act.action].all()
            assert not act.policy_target[~batch.action_mask].any()
            np.testing.assert_allclose(act.policy_target.sum(axis=1), 1.0, rtol=1e-6)
            out = policy.search(batch.game_states, num_simulations=12, noise=mode == "collect", rng=rng)
            stack = list(out.roots)
            while stack:
                node = stack.pop()
                if not node.terminal:
                    assert node.actions == list(node.state.legal_actions())
                    stack.extend(c for c in node.children if c is not None)
            batch = env.step(act.action).batch
        env.close()
    cartpole = make_vector_env(env_id="CartPole-v1", num_envs=1, seed=0, mode="collect")
    with pytest.raises(ValueError, match="EnvBatch.game_states is None"):
        policy.act(cartpole.reset(), mode="collect", temperature=1.0, rng=rng)
    cartpole.close()


def test_any_openspiel_game_connect_four_against_a_depth_limited_minimax():
    cfg = _tiny_cfg("env.env_id=openspiel:connect_four", "mcts.num_simulations=8", "evaluator.opponent=minimax")
    cfg = cfg.with_overrides(["evaluator.opponent_minimax_depth=2"])
    spec = env_spec_for(cfg)
    policy = get_algorithm("alphazero").make_policy(cfg, spec)
    env, rng = make_env(cfg, num_envs=2, seed=0, mode="eval"), np.random.default_rng(0)
    batch = env.reset()
    for _ in range(6):
        act = policy.act(batch, mode="eval", temperature=1.0, rng=rng)
        assert act.policy_target.shape == (2, 7) and batch.action_mask[np.arange(2), act.action].all()
        batch = env.step(act.action).batch
    env.close()


@pytest.mark.parametrize(
    "overrides,key",
    [
        (("env.env_id=CartPole-v1",), "env.env_id"),
        (("env.frame_stack=2",), "env.frame_stack"),
        (("model.kind=conv",), "model.kind"),  # a flat observation: no planes for the conv tower
        (("model.kind=conv_mlp", "env.openspiel_planes=True"), "model.kind"),
        (("buffer.reanalyze_ratio=0.5",), "buffer.reanalyze_ratio"),
        (("buffer.buffer_reanalyze_freq=1",), "buffer.buffer_reanalyze_freq"),
    ],
)
def test_settings_it_cannot_run_are_config_errors_naming_the_key(overrides, key):
    cfg = _tiny_cfg(*overrides)
    with pytest.raises(ConfigError, match=rf"^{key}:"):
        get_algorithm("alphazero").make_policy(cfg, env_spec_for(cfg))


def test_section_keys_are_checked_and_listed(capsys):
    cfg = _tiny_cfg("alphazero.q_normalization=tree", "alphazero.fpu_reduction=0.25")
    assert (cfg.alphazero.q_normalization, cfg.alphazero.fpu_reduction) == ("tree", 0.25)
    assert Config.from_dict(cfg.to_dict()).alphazero == cfg.alphazero
    with pytest.raises(ConfigError, match=r"^alphazero\.q_normalization\b"):
        _tiny_cfg("alphazero.q_normalization=minmax")
    with pytest.raises(ConfigError, match=r"^alphazero\.fpu_reduction: must be >= 0"):
        _tiny_cfg("alphazero.fpu_reduction=-1")
    with pytest.raises(ConfigError, match=r"did you mean 'alphazero\.fpu_reduction'"):
        _tiny_cfg("alphazero.fpu_reduce=1")
    code, out, err = run_cli(capsys, "config", ZOO)
    assert code == 0, err
    assert "[alphazero]" in out and "alphazero.q_normalization = 'game'" in out and "alphazero.fpu_reduction" in out
    # planes observations: model.kind=mlp flattens them
    planes = _tiny_cfg("env.openspiel_planes=True", "model.kind=mlp")
    assert env_spec_for(planes).observation_shape == (5, 3, 3)
    policy = get_algorithm("alphazero").make_policy(planes, env_spec_for(planes))
    assert type(policy.network).__name__ == "AlphaZeroMLPNetwork"
    env = make_env(planes, num_envs=2, seed=0, mode="collect")
    act = policy.act(env.reset(), mode="collect", temperature=1.0, rng=np.random.default_rng(0))
    assert act.action.shape == (2,)
    env.close()


@pytest.mark.parametrize("kind", ["conv", "auto"])
def test_board_planes_get_the_residual_tower_which_searches_and_learns(kind):
    """env.openspiel_planes=True with model.kind conv (or auto): AlphaZero's residual tower over
    [C, H, W]; it searches legal moves only and an update through the shared learner (BatchNorm
    in training mode) changes its weights and gives finite terms."""
    from lz_tune.pipeline.driver import Driver

    cfg = _tiny_cfg(
        "env.openspiel_planes=True",
        f"model.kind={kind}",
        "model.num_channels=8",
        "model.num_res_blocks=1",
        "max_env_step=200",
        "learner.train_start_after_envsteps=50",
    )
    spec = env_spec_for(cfg)
    policy = get_algorithm("alphazero").make_policy(cfg, spec)
    assert type(policy.network).__name__ == "AlphaZeroConvNetwork"
    policy_logits, value_logits = policy.network(torch.zeros(4, *spec.observation_shape))
    assert policy_logits.shape == (4, 9) and value_logits.shape == (4, 2 * cfg.model.value_support_size + 1)
    assert torch.all(value_logits == 0)  # zero-initialised value head: value 0 before training
    env, rng = make_env(cfg, num_envs=2, seed=0, mode="collect"), np.random.default_rng(0)
    batch = env.reset()
    for _ in range(3):
        act = policy.act(batch, mode="collect", temperature=1.0, rng=rng)
        assert batch.action_mask[np.arange(2), act.action].all()
        batch = env.step(act.action).batch
    env.close()
    driver = Driver(cfg, print_fn=None)
    try:
        before = {k: v.clone() for k, v in driver.learner.policy.network.state_dict().items()}
        driver.run()
        assert driver.train_iter > 0
        after = driver.learner.policy.network.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before if after[k].dtype.is_floating_point)
        assert np.isfinite(driver._last_logs["loss/total"])
    finally:
        driver.close()


def test_targets_are_the_outcome_for_the_player_to_move_and_one_update_learns():
    """x wins a scripted game: the learner's batch has value targets +1 / -1 by the player to move
    (td_steps 9, no discount) and the stored visit distributions; one update has finite policy
    and value terms and no reward or consistency term."""
    from tests.test_two_player_targets import X_WINS, play

    cfg = _tiny_cfg()
    learner = get_algorithm("alphazero").make_learner(cfg, env_spec_for(cfg))
    segment, _ = play(X_WINS)
    b = cfg.buffer
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=b.num_unroll_steps,
        td_steps=b.td_steps,
        discount=cfg.mcts.discount_factor,
        frame_stack=1,
        action_space_size=9,
        seed=0,
    )
    buffer.push([segment])
    index = SampledIndex(
        segment_ids=np.zeros(5, np.int64), positions=np.arange(5), weights=np.ones(5, np.float32), make_time=buffer.time
    )
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    assert batch.obs.shape[:2] == (5, 1)  # num_unroll_steps 0: one position per sample
    np.testing.assert_allclose(batch.target_value[:, 0], [1, -1, 1, -1, 1])
    np.testing.assert_allclose(batch.target_policy[:, 0], segment.policy_targets[:5])
    before = {k: v.clone() for k, v in learner.policy.network.state_dict().items()}
    logs, priorities = learner.learn(batch)
    assert logs["loss/reward"] == 0.0 and logs["loss/ssl"] == 0.0
    assert np.isfinite(logs["loss/policy"]) and logs["loss/value"] > 0 and priorities.shape == (5,)
    after = learner.policy.network.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert learner.train_iter == 1
    state = learner.state_dict()
    fresh = get_algorithm("alphazero").make_learner(cfg, env_spec_for(cfg))
    fresh.load_state_dict(state)
    for k, v in fresh.policy.network.state_dict().items():
        assert torch.equal(v, after[k])


def test_windows_longer_than_one_position_mask_the_steps_past_the_end():
    """num_unroll_steps > 0: each window position is a sample of its own, the ones past the end of
    the game weigh nothing."""
    cfg = _tiny_cfg("buffer.num_unroll_steps=3")
    learner = get_algorithm("alphazero").make_learner(cfg, env_spec_for(cfg))
    net = learner.policy.network
    torch.manual_seed(0)
    with torch.no_grad():  # (the value head starts at zero: uniform logits, the same CE for any target)
        net.value_head.weight.normal_()
    obs = torch.randn(2, 4, 29)
    value_t = torch.softmax(torch.randn(2, 4, 21), -1)
    policy_t = torch.softmax(torch.randn(2, 4, 9), -1)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    terms = learner.unroll_losses(net, obs, None, value_t, None, policy_t, mask)
    garbage, value_g, policy_g = obs.clone(), value_t.clone(), policy_t.clone()
    garbage[:, 2:] = 100.0
    value_g[:, 2:] = 1.0 / 21
    policy_g[:, 2:] = 1.0 / 9
    other = learner.unroll_losses(net, garbage, None, value_g, None, policy_g, mask)
    torch.testing.assert_close(terms.value[1], other.value[1])  # sample 1 ends after 2 positions
    torch.testing.assert_close(terms.policy[1], other.policy[1])
    assert not torch.allclose(terms.value[0], other.value[0])  # sample 0 has all 4
    assert not torch.allclose(terms.policy[0], other.policy[0])
    assert (terms.reward == 0).all() and (terms.ssl == 0).all()


@pytest.mark.slow
def test_tictactoe_trains_to_no_losses_against_minimax(tmp_path):
    """The zoo config, seed 0, until an evaluation of 100 games (50 per seat) against the perfect
    minimax bot loses none (evaluator.stop_loss_rate=0) and 1,000 more confirm it
    (evaluator.stop_confirm_episodes). Measured (2-core box, nothing beside it): 57 s, 10.8k env
    steps, 5.4k updates (docs/board_games.md)."""
    from lz_tune.pipeline import Driver

    cfg = load_config_module(os.path.join(REPO_ROOT, ZOO)).with_overrides(["max_env_step=60000"])
    driver = Driver(cfg, exp_dir=str(tmp_path / "run"), print_fn=None)
    start = time.perf_counter()
    try:
        metrics = driver.run()
    finally:
        driver.close()
    elapsed = time.perf_counter() - start
    last = driver.last_eval
    assert last is not None and last.num_episodes == 1100
    assert last.match["evaluation/env_runners/loss_rate"] == 0.0, (last.match, metrics, elapsed)
    print(f"no losses against minimax after {metrics['env_steps']} env steps, {elapsed:.0f} s")


# ---------------------------------------------------------------------------------- Gumbel root


def test_gumbel_scores_match_mctx_worked_values():
    """MCTX_NOTES E2: P = [.5, .3, .2], raw value .4, N = [2, 1, 0], Q = [.6, .2, -]:
    v_mix = .4375, Q~ = [1, 0, .59375], sigma = [5.2, 0, 3.0875]; the interior rule picks 0."""
    from lz_tune.mcts.rules_search import _gumbel_interior, gumbel_scores
    from lz_tune.mcts.strategies import Gumbel

    node = GameNode(position())
    node.actions, node.prior, node.raw_value = [0, 1, 2], [0.5, 0.3, 0.2], 0.4
    node.n, node.w = [2, 1, 0], [1.2, 0.2, 0.0]
    logits, sigma = gumbel_scores(node, Gumbel())
    np.testing.assert_allclose(sigma, [5.2, 0.0, 3.0875], atol=1e-9)
    np.testing.assert_allclose(np.exp(logits), [0.5, 0.3, 0.2])
    z = np.array(logits) + np.array(sigma)
    np.testing.assert_allclose(np.exp(z) / np.exp(z).sum(), [0.950856, 0.003147, 0.045997], atol=1e-6)
    assert _gumbel_interior(node, Gumbel()) == 0


class _OneMoveGame:
    """Two moves, each ends the game: move 1 wins (+1 for the mover), move 0 draws."""

    def __init__(self, moved=None):
        self.moved = moved

    def clone(self):
        return _OneMoveGame(self.moved)

    def apply_action(self, a):
        self.moved = int(a)

    def legal_actions(self):
        return [] if self.moved is not None else [0, 1]

    def current_player(self):
        return -4 if self.moved is not None else 0

    def is_terminal(self):
        return self.moved is not None

    def rewards(self):
        return [float(self.moved == 1), -float(self.moved == 1)]


def test_gumbel_root_sequential_halving_matches_mctx_worked_values():
    """MCTX_NOTES E3: A = 2, prior [.6, .4], root value 0, no Gumbel noise, m = 2, n = 4, move 1
    worth 1: the root visits 0, 1, 1, 0 -> N = [2, 2], Q = [0, 1], V = .4, sigma = [0, 5.2],
    action 1, improved policy [.008207, .991793]."""
    from lz_tune.mcts.strategies import Gumbel

    def evaluate(states):
        return np.log(np.array([[0.6, 0.4]] * len(states), np.float32)), np.zeros(len(states), np.float32)

    out = search_game_states(
        [_OneMoveGame()],
        evaluate=evaluate,
        num_actions=2,
        num_simulations=4,
        rule=RulesPUCT(),
        rng=np.random.default_rng(0),
        gumbel=Gumbel(max_num_considered_actions=2, gumbel_scale=0.0),
    )
    assert out.visit_counts.tolist() == [[2, 2]]
    np.testing.assert_allclose(out.root_q, [[0.0, 1.0]])
    assert out.root_value[0] == pytest.approx(0.4)
    assert out.action.tolist() == [1]
    np.testing.assert_allclose(out.improved_policy, [[0.008207, 0.991793]], atol=1e-6)


@pytest.mark.parametrize(
    "case,sims",
    [(WIN_IN_ONE, 16), (WIN_IN_TWO, 64), (BLOCK, 32)],
    ids=["win-in-one", "win-in-two", "block"],
)
def test_gumbel_root_finds_the_golden_moves(case, sims):
    """The golden positions with a uniform-prior, value-0 network and the Gumbel root: without
    Gumbel noise (evaluation's search) at the given budget, and with it (collection's; three
    seeds) at 4x the budget (with noise, sequential halving may drop the right move in its first
    round, where each move has one visit and a value-0 network cannot tell them apart): the
    search's action and the improved policy's arg-max are the one right move."""
    from lz_tune.mcts.strategies import Gumbel

    moves, best = case
    for seed, scale, budget in ((0, 0.0, sims), (0, 1.0, 4 * sims), (1, 1.0, 4 * sims), (2, 1.0, 4 * sims)):
        out = search_game_states(
            [position(*moves)],
            evaluate=uniform,
            num_actions=9,
            num_simulations=budget,
            rule=RulesPUCT(),
            rng=np.random.default_rng(seed),
            gumbel=Gumbel(gumbel_scale=scale),
        )
        assert out.action[0] == best, (seed, out.visit_counts)
        assert int(np.argmax(out.improved_policy[0])) == best
        legal = position(*moves).legal_actions()
        assert out.improved_policy[0, [a for a in range(9) if a not in legal]].sum() == 0


def test_alphazero_with_the_gumbel_root_acts_with_the_search_action_and_improved_policy():
    cfg = _tiny_cfg("alphazero.root_selection=gumbel", "mcts.num_simulations=8", "gumbel.max_num_considered_actions=4")
    policy = get_algorithm("alphazero").make_policy(cfg, env_spec_for(cfg))
    env, rng = make_env(cfg, num_envs=2, seed=0, mode="collect"), np.random.default_rng(0)
    batch = env.reset()
    act = policy.act(batch, mode="collect", temperature=1.0, rng=rng)
    assert batch.action_mask[np.arange(2), act.action].all()
    np.testing.assert_allclose(act.policy_target.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(act.policy_target[~batch.action_mask] == 0)
    env.close()
    with pytest.raises(ConfigError, match=r"^alphazero\.root_selection"):
        _tiny_cfg("alphazero.root_selection=sampled")
