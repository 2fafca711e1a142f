"""LightZero's own experiment config files (copies in tests/data/lightzero_configs/) run here:
each of the ten policy types maps from one and trains a few updates; a key lz-tune does not know
or cannot run is one clear error; the reference's Atari async commands start the async pipeline;
``config`` shows the mapped config; the reference's flags work on any config. Slow: LightZero's
CartPole MuZero config solves CartPole through the CLI."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from lz_tune.config import ConfigError
from lz_tune.config_loader import build_config, load_config_module
from lz_tune.lightzero import LightZeroConfigWarning, is_lightzero_config
from lz_tune.lightzero.loader import read_lightzero_file
from lz_tune.lightzero.rules import LIGHTZERO_DEFAULTS, RULES
from lz_tune.pipeline import Driver
from tests.conftest import REPO_ROOT, TINY_OVERRIDES, run_cli

DATA = Path(REPO_ROOT) / "tests" / "data" / "lightzero_configs"
ATARI_FLAGS = {"env": "ALE/Pong-v5", "seed": 0, "async_pipeline": False}
#: overrides on top of TINY_OVERRIDES: the networks those do not size, one evaluation (at the end)
SMALL_NETS = (
    "efficientzero.lstm_hidden_size=8",
    "sampled.num_samples=3",
    "context.rnn_hidden_size=8",
    "unizero.embed_dim=16",
    "unizero.num_heads=2",
    "unizero.num_layers=1",
    "model.num_channels=8",
    "env.image_size=32",
    "max_env_step=40",
    "evaluator.eval_freq=1000",
)

#: policy type -> (LightZero file, flags its command line would give)
BY_TYPE = {
    "muzero": ("cartpole_muzero_config.py", {}),
    "efficientzero": ("cartpole_efficientzero_config.py", {}),
    "gumbel_muzero": ("cartpole_gumbel_muzero_config.py", {}),
    "stochastic_muzero": ("cartpole_stochastic_muzero_config.py", {}),
    "unizero": ("cartpole_unizero_config.py", {}),
    "sampled_muzero": ("pendulum_cont_sampled_muzero_config.py", {}),
    "sampled_efficientzero": ("pendulum_cont_sampled_efficientzero_config.py", {}),
    "sampled_unizero": ("pendulum_cont_sampled_unizero_config.py", {}),
    "muzero_context": ("atari_muzero_context_config.py", {}),
    "muzero_rnn_full_obs": ("atari_muzero_rnn_fullobs_config.py", {}),
}


def _quiet(path, overrides=(), flags=None):
    lines: list[str] = []
    return build_config(str(path), overrides, flags, report=lines.append), lines


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)


def test_test_data_names_its_source():
    for f in DATA.glob("*.py"):
        head = f.read_text().splitlines()[:4]
        assert "https://github.com/opendilab/LightZero" in head[1] and head[2].startswith("#   path: zoo/"), f
        assert re.fullmatch(r"#   commit: [0-9a-f]{40}", head[3]), f


@pytest.mark.parametrize("policy_type", sorted(BY_TYPE))
def test_each_type_maps_from_a_lightzero_file_and_trains(policy_type, tmp_path):
    name, flags = BY_TYPE[policy_type]
    cfg, report = _quiet(DATA / name, [*TINY_OVERRIDES, *SMALL_NETS], flags)
    assert cfg.policy_type == policy_type
    assert report and report[-1].startswith("note: ")  # no key passes without a word
    driver = Driver(cfg, exp_dir=str(tmp_path / "run"), print_fn=None)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["train_iter"] > 0 and metrics["env_steps"] >= 40


def test_cartpole_muzero_maps_lightzero_values_and_defaults():
    cfg, report = _quiet(DATA / "cartpole_muzero_config.py")
    # the file's values where our defaults differ
    assert (cfg.env.env_id, cfg.mcts.num_simulations, cfg.buffer.game_segment_length) == ("CartPole-v0", 25, 50)
    assert (cfg.learner.optim_type, cfg.learner.learning_rate, cfg.learner.update_per_collect) == ("adam", 0.003, 100)
    assert not cfg.learner.piecewise_decay_lr_scheduler and cfg.learner.ssl_loss_weight == 2.0
    assert (cfg.evaluator.eval_freq, cfg.evaluator.n_evaluator_episode, cfg.evaluator.stop_value) == (100, 3, 200.0)
    assert cfg.max_env_step == 100_000 and cfg.exp_name == "cartpole_muzero_ns25_upc100_rer0_seed0"
    # keys the file leaves out get LightZero's default, not ours
    assert cfg.buffer.use_priority is False and cfg.learner.policy_entropy_weight == 5e-3
    assert "note: " in report[-1] and "policy.use_wandb" in report[-1]
    assert any("policy.model.norm_type='BN'" in line for line in report)


def test_ssl_weight_is_off_without_the_ssl_model_flag(tmp_path):
    src = (DATA / "cartpole_muzero_config.py").read_text()
    f = tmp_path / "no_ssl_config.py"
    f.write_text(src.replace("self_supervised_learning_loss=True", "self_supervised_learning_loss=False"))
    assert _quiet(f)[0].learner.ssl_loss_weight == 0.0  # LightZero computes no SSL loss then


def test_unizero_gets_lightzeros_fixed_loss_weights_and_search_counts():
    cfg, report = _quiet(DATA / "cartpole_unizero_config.py")
    assert (cfg.learner.ssl_loss_weight, cfg.learner.value_loss_weight, cfg.learner.policy_loss_weight) == (10, 0.5, 1)
    # LightZero's UniZero collects with collect_num_simulations (25), evaluates with 50
    assert (cfg.mcts.num_simulations, cfg.mcts.eval_num_simulations) == (25, 50)
    assert (cfg.unizero.embed_dim, cfg.unizero.num_heads, cfg.unizero.infer_context_length) == (64, 2, 4)
    assert cfg.unizero.dropout == 0.1 and cfg.buffer.num_unroll_steps == 5
    assert cfg.unizero.label_smoothing_eps is None  # the type's default: LightZero's 0.1 value / reward smoothing


def test_an_unknown_or_unsupported_key_is_one_error_naming_each(tmp_path):
    src = (DATA / "cartpole_muzero_config.py").read_text()
    f = tmp_path / "bad_config.py"
    f.write_text(
        src.replace(
            "        use_wandb=False,",
            "        use_wandb=False,\n        learning_rte=0.1,\n        use_rnd_model=True,",
        ).replace("model_path=None", "model_path='ckpt.pth.tar'")
    )
    with pytest.raises(ConfigError) as e:
        build_config(str(f), report=lambda line: None)
    text = str(e.value)
    assert text.startswith(f"{f}: 3 LightZero setting(s) cannot run")
    assert "policy.learning_rte: unknown LightZero key; did you mean 'policy.learning_rate'?" in text
    assert "policy.use_rnd_model=True: no random-network-distillation bonus here" in text
    assert "policy.model_path='ckpt.pth.tar': LightZero checkpoints cannot be loaded" in text


def test_a_value_lz_tune_cannot_take_names_the_lightzero_key(tmp_path):
    src = (DATA / "cartpole_muzero_config.py").read_text()
    f = tmp_path / "bad_optim_config.py"
    f.write_text(src.replace("optim_type='Adam'", "optim_type='LAMB'"))
    with pytest.raises(ConfigError, match=r"policy.optim_type: 'LAMB' is not supported here"):
        build_config(str(f), report=lambda line: None)
    f.write_text(src.replace("batch_size = 256", "batch_size = 0"))
    with pytest.raises(ConfigError, match=r"learner.batch_size: must be > 0.*from LightZero's policy.batch_size"):
        build_config(str(f), report=lambda line: None)


def test_a_file_that_imports_lightzero_code_is_a_clear_error(tmp_path):
    f = tmp_path / "needs_lzero_config.py"
    f.write_text(
        "from easydict import EasyDict\nfrom lzero.policy import scalar_transform\n"
        "main_config = EasyDict(dict(env=dict(), policy=dict()))\ncreate_config = EasyDict(dict())\n"
    )
    with pytest.raises(ConfigError, match=r"imports lzero.policy, which lz-tune does not have"):
        build_config(str(f))
    f.write_text(
        "from easydict import EasyDict\nfrom zoo.box2d.lunarlander.config.helpers import x\n"
        "main_config = EasyDict(dict())\ncreate_config = EasyDict(dict())\n"
    )
    with pytest.raises(ConfigError, match=r"imports zoo.box2d.lunarlander.config.helpers.x, a LightZero module"):
        build_config(str(f))


def test_modules_are_put_back_after_reading(tmp_path):
    import sys

    import zoo

    read_lightzero_file(str(DATA / "atari_unizero_segment_async_config.py"), ATARI_FLAGS)
    assert sys.modules["zoo"] is zoo and "lzero" not in sys.modules and "lzero.entry" not in sys.modules
    assert load_config_module("zoo.classic_control.cartpole_muzero").policy_type == "muzero"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "name,policy_type",
    [("atari_muzero_segment_async_config.py", "muzero"), ("atari_unizero_segment_async_config.py", "unizero")],
)
def test_function_configs_get_the_reference_flags(name, policy_type, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # main() of the UniZero file makes run folders: not here, nor anywhere
    flags = {
        "env": "ALE/Breakout-v5",
        "seed": 3,
        "async_pipeline": True,
        "num_collector_actors": 2,
        "max_policy_lag": 5,
        "max_env_step": 1234,
    }
    f = read_lightzero_file(str(DATA / name), flags)
    assert f.entry == f"train_{policy_type}_segment_async" and f.seed == 3 and f.max_env_step == 1234
    assert f.main_config["policy"]["model"]["action_space_size"] == 4  # main() read the map for Breakout
    cfg, _ = _quiet(DATA / name, (), flags)
    assert cfg.policy_type == policy_type and cfg.env.env_id == "ALE/Breakout-v5" and cfg.seed == 3
    ap = cfg.async_pipeline
    assert ap.enabled and (ap.num_collector_actors, ap.max_collect_inflight, ap.max_policy_lag) == (2, 2, 5)
    assert cfg.max_env_step == 1234 and os.listdir(tmp_path) == []
    # without flags: the file's own command-line defaults (ALE/Pong-v5, seed 0, sync)
    default = _quiet(DATA / name)[0]
    assert (default.env.env_id, default.seed, default.async_pipeline.enabled) == ("ALE/Pong-v5", 0, False)
    with pytest.raises(ConfigError, match=r"main\(env_id='ALE/Nope-v5'.*failed: KeyError: .Unsupported Atari env_id"):
        build_config(str(DATA / name), (), {"env": "ALE/Nope-v5"})


def test_mujoco_config_maps_with_a_gymnasium_id():
    cfg, report = _quiet(DATA / "mujoco_sampled_efficientzero_config.py", (), {"env": "HalfCheetah-v5"})
    assert (cfg.policy_type, cfg.env.env_id, cfg.sampled.num_samples) == ("sampled_efficientzero", "HalfCheetah-v5", 20)
    assert (cfg.efficientzero.lstm_hidden_size, cfg.learner.grad_clip_value, cfg.learner.update_per_collect) == (
        256,
        0.5,
        200,
    )
    assert (cfg.learner.optim_type, cfg.buffer.use_priority, cfg.max_env_step) == ("adamw", True, 5_000_000)


def test_atari_muzero_maps_the_image_settings():
    cfg = _quiet(DATA / "atari_muzero_segment_async_config.py", (), ATARI_FLAGS)[0]
    assert (cfg.env.frame_stack, cfg.env.image_size, cfg.env.grayscale, cfg.model.kind) == (4, 64, True, "conv")
    assert (cfg.buffer.game_segment_length, cfg.collector.segments_per_collect) == (20, 8)
    assert cfg.learner.train_start_after_envsteps == 2000 and cfg.buffer.buffer_reanalyze_freq == 1e-4
    rgb = _quiet(DATA / "atari_unizero_segment_async_config.py", (), ATARI_FLAGS)[0]
    assert (rgb.env.frame_stack, rgb.env.image_size, rgb.env.grayscale) == (1, 64, False)


def test_load_config_module_and_tune_take_a_lightzero_file():
    from lz_tune.tune import config_from_tune

    path = str(DATA / "cartpole_efficientzero_config.py")
    assert is_lightzero_config(path) and not is_lightzero_config(os.path.join(REPO_ROOT, "zoo/atari/pong_muzero.py"))
    with pytest.warns(LightZeroConfigWarning, match="policy.n_episode=8"):
        assert load_config_module(path).policy_type == "efficientzero"
    with pytest.warns(LightZeroConfigWarning):
        cfg = config_from_tune({"config": path, "mcts.num_simulations": 7})
    assert cfg.policy_type == "efficientzero" and cfg.mcts.num_simulations == 7 and cfg.learner.learning_rate == 0.003
    from lz_tune.cli.tune import load_space_module  # `python -m lz_tune tune <LightZero file>`: trials of it

    assert load_space_module(path).space == {"config": os.path.abspath(path)}


def test_reference_flags_work_on_a_zoo_config_too(capsys):
    code, out, err = run_cli(
        capsys,
        "config",
        "zoo/classic_control/cartpole_muzero.py",
        "--env",
        "Acrobot-v1",
        "--async-pipeline",
        "--num-collector-actors",
        "3",
        "--seed",
        "4",
        "--changed",
    )
    assert code == 0, err
    assert "* env.env_id = 'Acrobot-v1'" in out and "* async_pipeline.num_collector_actors = 3" in out
    assert "* async_pipeline.enabled = True" in out and "* seed = 4" in out


def test_config_command_shows_the_mapped_config(capsys):
    code, out, err = run_cli(
        capsys, "config", str(DATA / "cartpole_muzero_config.py"), "mcts.num_simulations=9", "--changed"
    )
    assert code == 0, err
    assert "* env.env_id = 'CartPole-v0'" in out and "* mcts.num_simulations = 9" in out
    assert "* learner.learning_rate = 0.003" in out
    assert "warning: " in err and "note: " in err
    code, out, err = run_cli(capsys, "config", str(DATA / "atari_env_action_space_map.py"))
    assert code == 2 and "must define make_config()" in err


def test_docs_list_the_default_keys_and_the_commands():
    section = Path(REPO_ROOT, "docs", "coming_from_lightzero.md").read_text()
    for key in LIGHTZERO_DEFAULTS:
        assert f"`{key.split('policy.', 1)[-1]}`" in section, key
    assert "atari_muzero_segment_async_config.py --env ALE/Pong-v5 --seed 0 --async-pipeline" in section
    assert "atari_unizero_segment_async_config.py --env ALE/Pong-v5 --seed 0 --async-pipeline" in section


def test_every_table_target_is_a_config_key():
    from lz_tune.config import Config

    keys = set(Config().flat_dict())
    for lz_key, rule in RULES.items():
        if rule.kind == "to":
            assert rule.target in keys, (lz_key, rule.target)


# ------------------------------------------------------------------------------ the reference's commands


def _smoke_atari(capsys, tmp_path, name: str) -> str:
    tiny = [
        "env.collector_env_num=1",
        "env.evaluator_env_num=1",
        "evaluator.n_evaluator_episode=1",
        "mcts.num_simulations=2",
        "mcts.eval_num_simulations=2",
        "learner.batch_size=4",
        "learner.update_per_collect=1",
        "learner.train_start_after_envsteps=0",
        "buffer.game_segment_length=16",
        "buffer.num_unroll_steps=2",
        "buffer.td_steps=2",
        "model.num_channels=8",
        "model.num_res_blocks=1",
        "env.image_size=32",
        "unizero.embed_dim=16",
        "unizero.num_heads=2",
        "unizero.num_layers=1",
        "evaluator.eval_freq=2",
        "env.max_episode_steps=30",
        "collector.segments_per_collect=1",
        "async_pipeline.collector_num_cpus=0.5",
        "async_pipeline.evaluator_num_cpus=0.5",
    ]
    code, out, err = run_cli(
        capsys,
        "train",
        str(DATA / name),
        "--env",
        "ALE/Pong-v5",
        "--seed",
        "0",
        "--async-pipeline",
        "--max-env-step",
        "48",
        *tiny,
        "--exp-dir",
        str(tmp_path / "run"),
        cwd=str(tmp_path),
    )
    assert code == 0, err[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["atari_muzero_segment_async_config.py", "atari_unizero_segment_async_config.py"])
def test_the_reference_atari_async_commands_start_the_async_pipeline(name, capsys, tmp_path, ray_cluster):
    """``python -m lz_tune train <LightZero's Atari async config> --env ALE/Pong-v5 --seed 0
    --async-pipeline`` with a tiny max_env_step (and tiny nets), on the session's Ray cluster."""
    out = _smoke_atari(capsys, tmp_path, name)
    assert "] async pipeline, policy " in out and ", env ALE/Pong-v5, " in out
    m = re.search(r"done: .*env_steps=(\d+) train_iter=(\d+)", out)
    assert m and int(m.group(1)) >= 48 and int(m.group(2)) > 0, out
    assert (tmp_path / "run" / "ckpt" / "ckpt_latest.pt").is_file()


@pytest.mark.slow
def test_lightzero_cartpole_muzero_config_solves_cartpole(capsys, tmp_path):
    """LightZero's own cartpole_muzero_config.py, unchanged, through the CLI as benchmarks/README.md
    measured it (one learner thread, seed 0): CartPole-v0 reaches its stop value (200, every
    evaluation episode at the time limit)."""
    shutil.copy(DATA / "cartpole_muzero_config.py", tmp_path / "cartpole_muzero_config.py")
    code, out, err = run_cli(
        capsys, "train", "cartpole_muzero_config.py", "--exp-dir", str(tmp_path / "run"), cwd=str(tmp_path)
    )
    assert code == 0, err[-3000:]
    assert "done: stop value reached" in out.strip().splitlines()[-1], out[-3000:]
