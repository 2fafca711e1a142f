"""The config derived from an env (``train --env ID`` with no config file): each rule on the env that
motivates it, the printed reasons, and the clear errors. Whether the derived configs LEARN is a
benchmark (``benchmarks/generic_config.py``; slow tests in tests/test_generic_config_learns.py)."""

from __future__ import annotations

import json
import math

import pytest

from lz_tune.config import ConfigError
from lz_tune.env_defaults import config_for_env, support_size_for, value_transform
from tests.conftest import run_cli


def test_value_transform_and_support_golden_values():
    # h(x) = sign(x)(sqrt(|x| + 1) - 1) + 0.001 x
    assert value_transform(0.0) == 0.0
    assert value_transform(3.0) == pytest.approx(1.003)
    assert value_transform(-99.0) == pytest.approx(-(math.sqrt(100.0) - 1.0) - 0.099)
    assert support_size_for(333.3) == 19  # h(333.3) = 17.59
    assert support_size_for(1.0) == 2
    assert support_size_for(100.0) == 11  # h(100) = 9.15


def test_cartpole_gets_the_vector_family_and_its_threshold():
    g = config_for_env("CartPole-v1")
    cfg = g.config
    assert cfg.policy_type == "muzero" and cfg.model.kind == "mlp" and cfg.model.layer_norm
    assert cfg.model.value_support_size == 19 and cfg.model.reward_support_size == 2
    assert cfg.evaluator.stop_value == 475.0 and cfg.exp_name == "cartpole_muzero"
    # +1 per step is no cost: no forced exploration, the consistency loss stays
    assert cfg.collector.eps_greedy_start == 0.0 and cfg.learner.ssl_loss_weight > 0 and cfg.env.action_repeat == 1
    assert not g.profile.step_cost and g.profile.time_limit == 500
    text = g.describe()
    assert "model.kind" in text and "1-D observations [4]" in text and "solved at 475" in text


def test_acrobot_a_cost_per_step_repeats_actions_explores_and_drops_the_consistency_loss():
    g = config_for_env("Acrobot-v1")
    assert g.profile.step_cost and g.profile.random_return_mean == -500.0  # random play never reaches the goal
    assert g.config.collector.eps_greedy_start == 1.0 and g.config.collector.eps_greedy_max_duration == 20
    assert g.config.learner.ssl_loss_weight == 0.0 and g.config.env.action_repeat == 3
    assert "a constant cost per step" in g.describe()


def test_lunar_lander_supports_from_its_shaped_rewards():
    pytest.importorskip("Box2D")
    cfg = config_for_env("LunarLander-v3").config
    assert cfg.model.reward_support_size == 11  # +-100 for a landing or a crash: h(100) ~ 9.15
    assert 25 <= cfg.model.value_support_size <= 40  # from the returns, not 100 x 333 per step


def test_minatar_gets_a_full_resolution_conv_stem_and_a_vector_latent():
    pytest.importorskip("minatar")
    g = config_for_env("MinAtar/Breakout-v1")
    m = g.config.model
    assert m.kind == "conv_mlp" and not m.downsample and m.num_channels == 16 and m.num_res_blocks == 0
    assert g.profile.spec.observation_shape == (4, 10, 10)
    assert "declared by the env (hwc)" in g.describe()
    # MinAtar registers no time limit: episodes are capped (CartPole keeps its own limit)
    assert (
        g.config.env.max_episode_steps == 10_000 and config_for_env("CartPole-v1").config.env.max_episode_steps is None
    )
    # the collection temperature follows the budget as the step size does
    c = g.config
    assert c.collector.manual_temperature_decay
    assert (
        c.collector.threshold_training_steps_for_final_temperature
        == c.learner.threshold_training_steps_for_final_lr
        == int(c.max_env_step * c.learner.replay_ratio)
    )
    # gumbel_muzero chooses its action by Gumbel sampling: the printed reason does not claim a
    # visit-count temperature it never uses
    gumbel = config_for_env("MinAtar/Breakout-v1", policy_type="gumbel_muzero", profile=g.profile).describe()
    line = next(x for x in gumbel.splitlines() if x.strip().startswith("collector.temperature"))
    assert "unused by gumbel_muzero" in line and "visit-count" not in line


def test_atari_sized_images_get_the_conv_network():
    cfg = config_for_env("ALE/Pong-v5").config
    assert cfg.model.kind == "conv" and cfg.model.downsample and cfg.env.frame_stack == 4


def test_continuous_actions_get_a_sampled_type_and_others_a_clear_error():
    g = config_for_env("Pendulum-v1")
    assert g.config.policy_type == "sampled_muzero" and g.config.sampled.num_samples == 8
    with pytest.raises(ConfigError, match="policy_type: 'muzero' plans over discrete actions.*sampled_muzero"):
        config_for_env("Pendulum-v1", policy_type="muzero")
    assert (
        config_for_env("Pendulum-v1", policy_type="sampled_efficientzero").config.policy_type == "sampled_efficientzero"
    )


def test_two_player_games_get_self_play_settings():
    pytest.importorskip("pyspiel")
    cfg = config_for_env("openspiel:tic_tac_toe").config
    assert cfg.mcts.discount_factor == 1.0 and cfg.buffer.td_steps == 9
    assert cfg.evaluator.opponent == "mcts" and cfg.collector.temperature == 1.0
    # the rules are known: true-rules search, no unroll, no epsilon-greedy schedule
    assert cfg.policy_type == "alphazero" and cfg.buffer.num_unroll_steps == 0
    assert cfg.collector.eps_greedy_start == 0.0 and not cfg.collector.manual_temperature_decay
    # simulations and root noise from the branching factor: ~5 legal moves in tic-tac-toe, ~24 in Hex 5x5
    assert cfg.mcts.num_simulations == 25 and cfg.mcts.root_dirichlet_alpha == pytest.approx(10 / 5.4, abs=0.9)
    hex5 = config_for_env("openspiel:hex(board_size=5)")
    assert hex5.profile.mean_legal_actions > 12
    assert hex5.config.mcts.num_simulations > 50 and hex5.config.mcts.root_dirichlet_alpha < 0.9
    # a learned-model type asked for by name keeps the self-play schedule it needs
    mz = config_for_env("openspiel:tic_tac_toe", policy_type="muzero").config
    assert mz.buffer.num_unroll_steps == 3 and mz.collector.eps_greedy_start == 0.25
    with pytest.raises(ConfigError, match="model.kind: stochastic_muzero has an MLP network only"):
        config_for_env("MinAtar/Breakout-v1", policy_type="stochastic_muzero")


def test_an_unknown_env_is_an_error_naming_it():
    with pytest.raises(ValueError, match="unknown env id 'CartPol-v1'.*CartPole-v1"):
        config_for_env("CartPol-v1")


def test_cli_config_env_prints_the_choices_and_the_fields(repo_root, capsys):
    code, out, err = run_cli(
        capsys, "config", "--env", "Acrobot-v1", "--changed", "learner.learning_rate=1e-3", cwd=repo_root
    )
    assert code == 0, err
    assert "config derived from env Acrobot-v1" in err and "collector.eps_greedy_start" in err
    assert "# derived from --env Acrobot-v1 with learner.learning_rate=1e-3" in out
    assert "* learner.learning_rate = 0.001" in out  # the override wins over the derived value


def test_cli_without_config_or_env_is_a_clear_error(repo_root, capsys):
    code, _, err = run_cli(capsys, "train", "learner.learning_rate=1e-3", cwd=repo_root)
    assert code == 2 and "--env ENV_ID" in err


def test_cli_train_env_runs_the_derived_config(repo_root, tmp_path, capsys):
    exp_dir = tmp_path / "exp"
    code, out, err = run_cli(
        capsys,
        "train",
        "--env",
        "CartPole-v1",
        "--policy-type",
        "efficientzero",
        "max_env_step=120",
        "mcts.num_simulations=4",
        "learner.batch_size=16",
        "env.collector_env_num=2",
        "evaluator.n_evaluator_episode=2",
        "evaluator.eval_freq=20",
        "learner.num_threads=1",
        "--exp-dir",
        str(exp_dir),
        cwd=repo_root,
    )
    assert code == 0, err[-3000:]
    assert "config derived from env CartPole-v1" in err
    saved = json.loads((exp_dir / "config.json").read_text())
    assert saved["policy_type"] == "efficientzero" and saved["model"]["value_support_size"] == 19
    assert "done:" in out.splitlines()[-1]


def test_the_step_size_schedule_follows_the_budget():
    from lz_tune.config_loader import build_config_for_env

    cfg = build_config_for_env("CartPole-v1", ["learner.replay_ratio=0.5"], {"max_env_step": 10_000})
    assert cfg.learner.piecewise_decay_lr_scheduler and cfg.learner.threshold_training_steps_for_final_lr == 5_000
    cfg = build_config_for_env("CartPole-v1", ["learner.threshold_training_steps_for_final_lr=7"])
    assert cfg.learner.threshold_training_steps_for_final_lr == 7  # the user's own value stays
    cfg = build_config_for_env(
        "CartPole-v1", ["learner.update_per_collect=100", "buffer.game_segment_length=50"], {"max_env_step": 40_000}
    )
    assert cfg.learner.threshold_training_steps_for_final_lr == 10_000  # 100 updates per 8 x 50 steps


def test_cli_env_errors_exit_2_naming_the_key(repo_root, capsys):
    code, _, err = run_cli(capsys, "train", "--env", "CartPol-v1", cwd=repo_root)
    assert code == 2 and "error: env.env_id: unknown env id 'CartPol-v1'" in err and "Traceback" not in err
    code, _, err = run_cli(
        capsys, "config", "--env", "CartPole-v1", "env.import_modules=('no_such_pkg_xyz',)", cwd=repo_root
    )
    assert code == 2 and "error: env.import_modules[0]: cannot import 'no_such_pkg_xyz'" in err


def test_resume_without_a_config_continues_the_runs_own(repo_root, tmp_path, capsys):
    exp_dir = tmp_path / "exp"
    tiny = (
        "mcts.num_simulations=4",
        "learner.batch_size=16",
        "env.collector_env_num=2",
        "evaluator.n_evaluator_episode=2",
        "evaluator.eval_freq=20",
        "learner.num_threads=1",
    )
    code, _, err = run_cli(
        capsys, "train", "--env", "CartPole-v1", "max_env_step=100", *tiny, "--exp-dir", str(exp_dir), cwd=repo_root
    )
    assert code == 0, err[-3000:]
    code, out, err = run_cli(capsys, "train", "--resume", str(exp_dir), "max_env_step=200", cwd=repo_root)
    assert code == 0, err[-3000:]
    assert "config derived" not in err  # nothing re-derived: the run's config.json
    saved = json.loads((exp_dir / "config.json").read_text())
    assert saved["max_env_step"] == 200 and saved["mcts"]["num_simulations"] == 4
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "nothing"), cwd=repo_root)
    assert code == 2 and "error:" in err


def test_image_configs_use_adam_without_an_l2_term():
    """Adam scales an L2 term like a gradient: a weight whose loss gradient is small shrinks at the
    full step size. On MinAtar that zeroed most of the conv stem (BatchNorm scale -> 0: one action
    for every state, Asterix 0.375 at every evaluation); images get no L2 term, vectors keep 1e-4."""
    for env_id in ("MinAtar/Breakout-v1", "MinAtar/Asterix-v1"):
        g = config_for_env(env_id)
        assert g.config.learner.optim_type == "adam" and g.config.learner.weight_decay == 0.0
        assert any(c.key == "learner.weight_decay" and "conv stem" in c.why for c in g.choices)
    assert config_for_env("CartPole-v1").config.learner.weight_decay == 1e-4


def test_long_board_games_get_bounded_segments_and_large_action_spaces_a_bounded_buffer():
    """Checkers (games up to 1,000 moves, 512 actions) and chess (4,674 actions): n-step targets and
    segments of at most 200 moves; the buffer sized so its stored policy targets fit in ~1 GiB."""
    pytest.importorskip("pyspiel")
    from lz_tune.env_defaults import BOARD_MONTE_CARLO_CAP, POLICY_TARGET_BUDGET_BYTES

    checkers = config_for_env("openspiel:checkers").config
    assert checkers.buffer.td_steps == BOARD_MONTE_CARLO_CAP == checkers.buffer.game_segment_length
    chess = config_for_env("openspiel:chess").config
    assert chess.buffer.replay_buffer_size * 4 * 4674 <= POLICY_TARGET_BUDGET_BYTES
    assert chess.buffer.replay_buffer_size >= 10_000
    ttt = config_for_env("openspiel:tic_tac_toe").config  # short games keep one game per segment
    assert ttt.buffer.td_steps == 9 and ttt.buffer.game_segment_length == 12
