"""Bad input, table-driven (issue 7): every row is something a user gets wrong. Each must fail
with the right error type and a message that names the offending key or file, before any
actor or env starts and without writing anything: an existing experiment folder keeps every
file byte-for-byte, a new one is not created, and the working directory stays empty.

Rows go through the real entry points: ``Config.from_dict`` / ``with_overrides`` /
``load_config_module``, ``load_checkpoint``, ``Driver(cfg, exp_dir=..., resume_from=...)``,
``lz_tune.tune.config_from_tune`` / ``check_cluster_resources`` and, end to end, the CLI
in-process (``lz_tune.cli.main.main``: exit code 2 and ``error: ...`` on stderr).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from conftest import CARTPOLE_ZOO, REPO_ROOT, TINY_OVERRIDES

from lz_tune.checkpoint import FORMAT, FORMAT_VERSION, CheckpointError, load_checkpoint, save_checkpoint
from lz_tune.config import Config, ConfigError
from lz_tune.config_loader import load_config_module

ZOO = os.path.join(REPO_ROOT, CARTPOLE_ZOO)
SPACE = os.path.join(REPO_ROOT, "search_spaces", "cartpole_muzero.py")
TINY = list(TINY_OVERRIDES)


# ------------------------------------------------------------------------------------- files


def _tiny_cfg(*extra: str) -> Config:
    return load_config_module(ZOO).with_overrides(TINY + list(extra))


def _payload(cfg: Config) -> dict[str, Any]:
    """What the driver writes as a checkpoint, for an untrained learner of ``cfg``."""
    from lz_tune.algos import get_algorithm
    from lz_tune.workers import env_spec_for

    learner = get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))
    return {
        "policy_type": cfg.policy_type,
        "config": cfg.to_dict(),
        "learner": learner.state_dict(),
        "counters": {"env_steps": 120, "train_iter": 7, "collects": 3},
        "eval": None,
        "best_eval_reward_mean": None,
        "rng": {},
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Checkpoints good and bad, zoo modules and a search space, made once for the module."""
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("bad_inputs")
    good = _payload(_tiny_cfg())
    paths = {"good": str(save_checkpoint(d / "good.pt", good))}
    paths["other_policy"] = str(save_checkpoint(d / "other_policy.pt", good | {"policy_type": "efficientzero"}))
    paths["wide"] = str(save_checkpoint(d / "wide.pt", _payload(_tiny_cfg("model.hidden_sizes=(32,)"))))
    paths["garbage_learner"] = str(save_checkpoint(d / "garbage_learner.pt", good | {"learner": {"network": {}}}))
    raw = Path(paths["good"]).read_bytes()
    (d / "truncated.pt").write_bytes(raw[: len(raw) // 2])
    paths["truncated"] = str(d / "truncated.pt")
    (d / "random.pt").write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    paths["random"] = str(d / "random.pt")
    torch.save(torch.arange(10), d / "tensor.pt")
    paths["tensor"] = str(d / "tensor.pt")
    torch.save({"format": FORMAT, "format_version": FORMAT_VERSION + 1, **good}, d / "future.pt")
    paths["future"] = str(d / "future.pt")
    paths["missing"] = str(d / "no_such_checkpoint.pt")
    (d / "no_make_config.py").write_text("from lz_tune.config import Config\nCFG = Config()\n")
    paths["no_make_config"] = str(d / "no_make_config.py")
    (d / "returns_dict.py").write_text("def make_config():\n    return {'seed': 1}\n")
    paths["returns_dict"] = str(d / "returns_dict.py")
    paths["missing_zoo"] = str(d / "cartpole_muzer.py")
    (d / "space_bad_key.py").write_text("space = {'config': %r, 'learner.learning_rte': 1e-3}\n" % ZOO)
    paths["space_bad_key"] = str(d / "space_bad_key.py")
    # a replay buffer manifest beside a checkpoint (read on resume with buffer.save_in_checkpoint=True):
    # a short run's own, then its manifest truncated; and a run with other td_steps
    from lz_tune.pipeline import Driver

    for name, td_steps in (("buffer_truncated", 3), ("buffer_other_td_steps", 2)):
        driver = Driver(
            _tiny_cfg("max_env_step=60", f"buffer.td_steps={td_steps}"), exp_dir=str(d / name), print_fn=None
        )
        driver.run()
        driver.close()
        paths[name] = str(d / name / "ckpt" / "ckpt_latest.pt")
        paths[name + "_manifest"] = str(d / name / "ckpt" / load_checkpoint(paths[name])["buffer_manifest"])
    raw = Path(paths["buffer_truncated_manifest"]).read_bytes()
    Path(paths["buffer_truncated_manifest"]).write_bytes(raw[: len(raw) // 3])
    return paths


@pytest.fixture
def existing(tmp_path, files) -> Path:
    """An experiment folder of an earlier run: config, a checkpoint that fits the tiny config, events."""
    exp = tmp_path / "existing_run"
    (exp / "ckpt").mkdir(parents=True)
    (exp / "tb").mkdir()
    (exp / "config.json").write_text(json.dumps(_tiny_cfg().to_dict(), indent=2))
    (exp / "ckpt" / "ckpt_latest.pt").write_bytes(Path(files["good"]).read_bytes())
    (exp / "tb" / "events.out.tfevents.1.host").write_bytes(b"\x00\x01events")
    return exp


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and folder below ``root``: bytes and mtime (ns)."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = (p.read_bytes() if p.is_file() else b"<dir>", p.stat().st_mtime_ns)
    return out


# ------------------------------------------------------------------------------------- guards


class Started(AssertionError):
    pass


@pytest.fixture
def guards(monkeypatch, tmp_path):
    """Anything that starts a worker, an env, a logger or Ray fails the row; runs in an empty cwd."""
    import lz_tune.pipeline.driver as driver_mod
    import lz_tune.workers.collector as collector_mod
    import lz_tune.workers.common as common_mod
    import lz_tune.workers.evaluator as evaluator_mod

    def forbid(what: str) -> Callable[..., Any]:
        def fail(*args, **kwargs):
            raise Started(f"{what} was started for a bad input")

        return fail

    for mod in (common_mod, collector_mod, evaluator_mod):
        monkeypatch.setattr(mod, "make_env", forbid("an env"))
    monkeypatch.setattr(driver_mod, "make_backend", forbid("a worker back-end"))
    monkeypatch.setattr(driver_mod, "ScalarLogger", forbid("the TensorBoard logger"))
    ray = sys.modules.get("ray")
    ray_was_up = ray is not None and ray.is_initialized()
    if ray is not None:
        monkeypatch.setattr(ray, "init", forbid("Ray"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.syspath_prepend(REPO_ROOT)  # dotted zoo names resolve from the repository root
    yield cwd
    ray = sys.modules.get("ray")
    if ray is not None and not ray_was_up:
        assert not ray.is_initialized(), "Ray was started for a bad input"


# ------------------------------------------------------------------------------------- entry points


def _cli(args: list[str], monkeypatch, capsys) -> BaseException:
    """``python -m lz_tune ARGS`` in-process; checks exit code 2 and ``error: ...``, returns the
    exception the command raised (recorded around cmd_train / cmd_tune)."""
    from lz_tune.cli import main as cli
    from lz_tune.cli import train, tune

    seen: list[BaseException] = []
    for command in (train, tune):
        orig = command.run

        def wrapped(a, _orig=orig):
            try:
                return _orig(a)
            except BaseException as e:
                seen.append(e)
                raise

        monkeypatch.setattr(command, "run", wrapped)
    capsys.readouterr()
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2, (code, err[-2000:])
    assert err.startswith("error: "), err
    assert len(seen) == 1, seen
    assert str(seen[0]) in err
    return seen[0]


def _driver(cfg: Config, exp_dir: Path, resume_from: str | None = None) -> None:
    from lz_tune.pipeline import Driver

    Driver(cfg, exp_dir=str(exp_dir), resume_from=resume_from, print_fn=None)


def _resources(space: dict[str, Any]) -> None:
    from lz_tune.tune import check_cluster_resources

    check_cluster_resources(space, available={"CPU": 2.0, "GPU": 0.0})


def _config_from_tune(space: dict[str, Any]) -> None:
    from lz_tune.tune import config_from_tune

    config_from_tune(space)


ASYNC = {
    "async_pipeline.enabled": True,
    "async_pipeline.num_collector_actors": 1,
    "async_pipeline.collector_num_cpus": 0.5,
    "async_pipeline.evaluator_num_cpus": 0.5,
}


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    act: Callable[..., Any]  # act(ctx) raises
    error: type
    names: tuple[str, ...]  # substrings the message must hold ("{key}" filled from files / folders)


def _row(id: str, act, error: type, *names: str) -> Any:
    return pytest.param(Row(id, act, error, names), id=id)


ROWS = [
    # --- config keys and values (Config.from_dict / with_overrides)
    _row(
        "unknown-top-level-key",
        lambda c: Config.from_dict({"max_env_steps": 10}),
        ConfigError,
        "max_env_steps",
        "did you mean 'max_env_step'",
    ),
    _row(
        "unknown-section-key",
        lambda c: Config.from_dict({"mcts": {"num_simulation": 5}}),
        ConfigError,
        "mcts.num_simulation",
        "did you mean 'num_simulations'",
    ),
    _row("unknown-override-key", lambda c: _tiny_cfg("buffer.replay_size=100"), ConfigError, "buffer.replay_size"),
    _row(
        "str-for-int",
        lambda c: _tiny_cfg("env.collector_env_num=eight"),
        ConfigError,
        "env.collector_env_num",
        "integer",
    ),
    _row(
        "float-for-bool",
        lambda c: Config.from_dict({"buffer": {"use_priority": 1.0}}),
        ConfigError,
        "buffer.use_priority",
        "true/false",
    ),
    _row(
        "fractional-float-for-int",
        lambda c: Config.from_dict({"mcts": {"num_simulations": 12.5}}),
        ConfigError,
        "mcts.num_simulations",
    ),
    _row(
        "str-for-tuple",
        lambda c: Config.from_dict({"model": {"hidden_sizes": "128,128"}}),
        ConfigError,
        "model.hidden_sizes",
        "tuple",
    ),
    _row(
        "float-item-in-tuple",
        lambda c: Config.from_dict({"model": {"hidden_sizes": [64, 32.5]}}),
        ConfigError,
        "model.hidden_sizes[1]",
    ),
    _row(
        "infinite-learning-rate",
        lambda c: _tiny_cfg("learner.learning_rate=1e999"),
        ConfigError,
        "learner.learning_rate",
        "finite",
    ),
    _row(
        "nan-learning-rate",
        lambda c: Config.from_dict({"learner": {"learning_rate": float("nan")}}),
        ConfigError,
        "learner.learning_rate",
        "finite",
    ),
    _row(
        "batch-not-smaller-than-buffer",
        lambda c: _tiny_cfg("learner.batch_size=4096", "buffer.replay_buffer_size=4096"),
        ConfigError,
        "buffer.replay_buffer_size",
        "learner.batch_size",
    ),
    _row(
        "negative-batch-size", lambda c: _tiny_cfg("learner.batch_size=-256"), ConfigError, "learner.batch_size", "> 0"
    ),
    _row(
        "zero-replay-buffer-size",
        lambda c: _tiny_cfg("buffer.replay_buffer_size=0"),
        ConfigError,
        "buffer.replay_buffer_size",
        "> 0",
    ),
    _row(
        "zero-collector-env-num", lambda c: _tiny_cfg("env.collector_env_num=0"), ConfigError, "env.collector_env_num"
    ),
    _row("zero-num-simulations", lambda c: _tiny_cfg("mcts.num_simulations=0"), ConfigError, "mcts.num_simulations"),
    _row(
        "unroll-longer-than-segment",
        lambda c: _tiny_cfg("buffer.game_segment_length=10", "buffer.num_unroll_steps=8", "buffer.td_steps=3"),
        ConfigError,
        "buffer.num_unroll_steps",
        "buffer.game_segment_length",
    ),
    _row(
        "td-steps-longer-than-segment",
        lambda c: _tiny_cfg("buffer.td_steps=10"),
        ConfigError,
        "buffer.td_steps",
        "buffer.game_segment_length",
    ),
    _row(
        "unknown-policy-type",
        lambda c: Config.from_dict({"policy_type": "alphago"}),
        ConfigError,
        "policy_type",
        "alphago",
    ),
    # --- per-type sections
    _row(
        "efficientzero-lstm-horizon-zero",
        lambda c: _tiny_cfg("policy_type=efficientzero", "efficientzero.lstm_horizon_len=0"),
        ConfigError,
        "efficientzero.lstm_horizon_len",
        "> 0",
    ),
    _row(
        "efficientzero-unknown-key",
        lambda c: _tiny_cfg("efficientzero.lstm_horizon=5"),
        ConfigError,
        "efficientzero.lstm_horizon",
        "did you mean",
    ),
    _row(
        "gumbel-zero-considered-actions",
        lambda c: _tiny_cfg("policy_type=gumbel_muzero", "gumbel.max_num_considered_actions=0"),
        ConfigError,
        "gumbel.max_num_considered_actions",
        "> 0",
    ),
    _row(
        "gumbel-negative-scale",
        lambda c: Config.from_dict({"gumbel": {"gumbel_scale": -1.0}}),
        ConfigError,
        "gumbel.gumbel_scale",
        ">= 0",
    ),
    # --- zoo config modules
    _row("missing-zoo-file", lambda c: load_config_module(c["missing_zoo"]), ConfigError, "{missing_zoo}", "not found"),
    _row(
        "missing-zoo-module-name",
        lambda c: load_config_module("zoo.classic_control.cartpole_muzer"),
        ConfigError,
        "zoo.classic_control.cartpole_muzer",
        "not found",
    ),
    _row(
        "missing-zoo-package-name",
        lambda c: load_config_module("zooo.cartpole"),
        ConfigError,
        "zooo.cartpole",
        "'zooo'",
    ),
    _row(
        "zoo-without-make-config",
        lambda c: load_config_module(c["no_make_config"]),
        ConfigError,
        "{no_make_config}",
        "make_config",
    ),
    _row(
        "zoo-make-config-returns-dict",
        lambda c: load_config_module(c["returns_dict"]),
        ConfigError,
        "{returns_dict}",
        "dict",
    ),
    # --- the driver validates env, policy type and checkpoint before it creates anything
    _row(
        "unknown-env-id",
        lambda c: _driver(_tiny_cfg("env.env_id=CartPol-v1"), c["exp"]),
        ConfigError,
        "env.env_id",
        "CartPol-v1",
    ),
    _row(
        "mlp-model-on-pixel-env",
        lambda c: _driver(_tiny_cfg("env.env_id=ALE/Pong-v5", "model.kind=mlp"), c["exp"]),
        ConfigError,
        "model.kind",
        "ALE/Pong-v5",
    ),
    _row(
        "conv-model-on-vector-env",
        lambda c: _driver(_tiny_cfg("model.kind=conv"), c["exp"]),
        ConfigError,
        "model.kind",
        "CartPole-v1",
    ),
    _row(
        "unizero-heads-do-not-split-the-width",
        lambda c: _driver(_tiny_cfg("policy_type=unizero", "unizero.embed_dim=64", "unizero.num_heads=3"), c["exp"]),
        ConfigError,
        "unizero.embed_dim",
        "unizero.num_heads=3",
    ),
    _row(
        "checkpoint-other-policy-type",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["other_policy"]),
        CheckpointError,
        "{other_policy}",
        "efficientzero",
    ),
    _row(
        "checkpoint-other-env-same-shapes",
        lambda c: _driver(_tiny_cfg("env.env_id=CartPole-v0"), c["exp"], c["good"]),
        CheckpointError,
        "{good}",
        "CartPole-v1",
        "CartPole-v0",
    ),
    _row(
        "checkpoint-other-network-shape",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["wide"]),
        CheckpointError,
        "{wide}",
        "does not fit",
    ),
    _row(
        "checkpoint-garbage-learner-state",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["garbage_learner"]),
        CheckpointError,
        "{garbage_learner}",
    ),
    _row(
        "checkpoint-truncated",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["truncated"]),
        CheckpointError,
        "{truncated}",
        "not a readable",
    ),
    _row("checkpoint-random-bytes", lambda c: _driver(_tiny_cfg(), c["exp"], c["random"]), CheckpointError, "{random}"),
    _row(
        "checkpoint-plain-tensor",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["tensor"]),
        CheckpointError,
        "{tensor}",
        "not an lz_tune checkpoint",
    ),
    _row(
        "checkpoint-missing",
        lambda c: _driver(_tiny_cfg(), c["exp"], c["missing"]),
        CheckpointError,
        "{missing}",
        "not found",
    ),
    _row(
        "replay-buffer-manifest-truncated",
        lambda c: _driver(_tiny_cfg("buffer.save_in_checkpoint=True"), c["exp"], c["buffer_truncated"]),
        CheckpointError,
        "{buffer_truncated_manifest}",
    ),
    _row(
        "replay-buffer-file-other-td-steps",
        lambda c: _driver(_tiny_cfg("buffer.save_in_checkpoint=True"), c["exp"], c["buffer_other_td_steps"]),
        CheckpointError,
        "{buffer_other_td_steps_manifest}",
        "td_steps",
    ),
    _row(
        "checkpoint-other-optimizer-type",
        lambda c: _driver(_tiny_cfg("learner.optim_type=sgd"), c["exp"], c["good"]),
        CheckpointError,
        "{good}",
        "optim_type",
    ),
    _row(
        "checkpoint-future-format-version",
        lambda c: load_checkpoint(c["future"]),
        CheckpointError,
        "{future}",
        "format version",
    ),
    # --- Tune: search spaces and resource requests
    _row("space-negative-step-seconds", lambda c: _config_from_tune({"step_seconds": -1}), ConfigError, "step_seconds"),
    _row("space-str-step-seconds", lambda c: _config_from_tune({"step_seconds": "ten"}), ConfigError, "step_seconds"),
    _row(
        "space-str-driver-cpus", lambda c: _config_from_tune({"driver_num_cpus": "two"}), ConfigError, "driver_num_cpus"
    ),
    _row(
        "space-unknown-key",
        lambda c: _config_from_tune({"learner.learning_rte": 1e-3}),
        ConfigError,
        "learner.learning_rte",
    ),
    _row("space-missing-zoo", lambda c: _config_from_tune({"config": c["missing_zoo"]}), ConfigError, "{missing_zoo}"),
    _row(
        "resources-driver-cpus",
        lambda c: _resources({"config": ZOO, "driver_num_cpus": 4}),
        ConfigError,
        "driver_num_cpus",
    ),
    _row(
        "resources-collector-cpus",
        lambda c: _resources(
            {"config": ZOO, **ASYNC, "async_pipeline.num_collector_actors": 3, "async_pipeline.collector_num_cpus": 1.0}
        ),
        ConfigError,
        "async_pipeline.collector_num_cpus",
    ),
    _row(
        "resources-collector-gpu-on-cpu-cluster",
        lambda c: _resources({"config": ZOO, **ASYNC, "async_pipeline.collector_num_gpus": 1.0}),
        ConfigError,
        "collector_num_gpus",
    ),
    # --- the command line, end to end, into an existing experiment folder
    _row(
        "cli-override-without-equals",
        lambda c: c["cli"](["train", ZOO, "learner.batch_size", "--exp-dir", str(c["exp"])]),
        ConfigError,
        "learner.batch_size",
        "key=value",
    ),
    _row(
        "cli-misspelt-key",
        lambda c: c["cli"](["train", ZOO, "learner.batch_sze=3", "--exp-dir", str(c["exp"])]),
        ConfigError,
        "learner.batch_sze",
        "did you mean 'learner.batch_size'",
    ),
    _row(
        "cli-missing-zoo-file",
        lambda c: c["cli"](["train", c["missing_zoo"], "--exp-dir", str(c["exp"])]),
        ConfigError,
        "{missing_zoo}",
    ),
    _row(
        "cli-missing-zoo-module-name",
        lambda c: c["cli"](["train", "zoo.atari.pong_muzer0", "--exp-dir", str(c["exp"])]),
        ConfigError,
        "zoo.atari.pong_muzer0",
        "not found",
    ),
    _row(
        "cli-resume-truncated-checkpoint",
        lambda c: c["cli"](["train", ZOO, *TINY, "--resume", c["truncated"], "--exp-dir", str(c["exp"])]),
        CheckpointError,
        "{truncated}",
    ),
    _row(
        "cli-resume-other-network-shape",
        lambda c: c["cli"](["train", ZOO, *TINY, "model.hidden_sizes=(32,)", "--resume", str(c["exp"])]),
        CheckpointError,
        "{exp}/ckpt/ckpt_latest.pt",
        "does not fit",
    ),
    _row(
        "cli-resume-unknown-env-id",
        lambda c: c["cli"](["train", ZOO, *TINY, "env.env_id=CartPole-v9", "--resume", str(c["exp"])]),
        ConfigError,
        "env.env_id",
        "CartPole-v9",
    ),
    _row(
        "cli-tune-space-unknown-key",
        lambda c: c["cli"](
            ["tune", c["space_bad_key"], "--storage-path", str(c["exp"].parent / "results"), "--name", "bad"]
        ),
        ConfigError,
        "learner.learning_rte",
    ),
    _row(
        "cli-tune-pbt-without-sampled-keys",
        lambda c: c["cli"](
            [
                "tune",
                SPACE,
                "learner.learning_rate=0.003",
                "learner.update_per_collect=50",
                "buffer.td_steps=5",
                "learner.target_update_freq=20",
                "mcts.num_simulations=16",
                "--scheduler",
                "pbt",
                "--storage-path",
                str(c["exp"].parent / "results"),
                "--name",
                "pbt",
            ]
        ),
        ConfigError,
        "--scheduler pbt",
    ),
]


@pytest.mark.parametrize("row", ROWS)
def test_bad_input(row: Row, files, existing, guards, monkeypatch, capsys):
    ctx: dict[str, Any] = dict(files)
    ctx["exp"] = existing
    ctx["cli"] = lambda args: _cli(args, monkeypatch, capsys)
    parent = existing.parent
    before = _snapshot(existing)
    around = sorted(p.name for p in parent.iterdir())

    if row.id.startswith("cli-"):
        err = row.act(ctx)  # the CLI returned 2; this is what its command raised
    else:
        with pytest.raises(Exception) as info:
            row.act(ctx)
        err = info.value
    assert type(err) is row.error, f"{type(err).__name__}: {err}"
    message = str(err)
    for name in row.names:
        name = name.format(**{k: v for k, v in ctx.items() if isinstance(v, (str, Path))})
        assert name in message, f"{name!r} not in: {message}"

    assert _snapshot(existing) == before, "the existing experiment folder was changed"
    assert sorted(p.name for p in parent.iterdir()) == around, "a folder was created beside it"
    assert list(guards.iterdir()) == [], "something was written into the working directory"


def test_table_is_big_enough():
    assert len(ROWS) >= 20
    assert len({p.id for p in ROWS}) == len(ROWS)


def test_guards_catch_a_good_input(files, existing, guards, tmp_path):
    """The harness is not vacuous: a good config gets past validation and trips a guard (the first
    thing the driver starts after writing config.json is the TensorBoard logger)."""
    from lz_tune.pipeline import Driver

    fresh = tmp_path / "fresh_run"
    with pytest.raises(Started):
        Driver(_tiny_cfg(), exp_dir=str(fresh), resume_from=files["good"], print_fn=None)
    assert (fresh / "config.json").is_file()


def test_env_whose_package_is_missing_is_a_config_error_naming_it(monkeypatch, tmp_path):
    """Box2D / MuJoCo ids without their package: a clear error naming the env id, not a traceback."""
    import gymnasium

    from lz_tune.workers.common import _probe

    def make(env_id, **kwargs):
        raise gymnasium.error.DependencyNotInstalled("Box2D is not installed, run `pip install swig ...`")

    _probe.cache_clear()
    monkeypatch.setattr(gymnasium, "make", make)
    with pytest.raises(ConfigError, match=r"env.env_id: LunarLander-v3: needs a package .*Box2D"):
        _driver(_tiny_cfg("env.env_id=LunarLander-v3"), tmp_path / "exp")
    assert not (tmp_path / "exp").exists()
    _probe.cache_clear()


@pytest.mark.parametrize("flag", ["--num-samples", "--stop-iters", "--num-cpus"])
def test_cli_tune_counts_must_be_positive(flag, tmp_path, capsys):
    from lz_tune.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["tune", SPACE, flag, "0", "--storage-path", str(tmp_path), "--name", "x"])
    assert exit_info.value.code == 2 and flag in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_an_atari_id_without_a_usable_ale_py_or_rom_is_a_config_error(monkeypatch, tmp_path):
    """An Atari id where ale-py does not import, or its ROM does not load: a ConfigError naming the
    env id and the fix, before anything is written (not a traceback)."""
    from lz_tune.envs import env_ids
    from lz_tune.workers.common import _probe

    _probe.cache_clear()
    monkeypatch.setattr(env_ids, "_ale_registered", False)
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py fails
    with pytest.raises(ConfigError, match=r"env.env_id: .*Atari ids need ale-py"):
        _driver(_tiny_cfg("env.env_id=ALE/Pong-v5", "model.kind=conv"), tmp_path / "exp")
    assert _tiny_cfg("env.env_id=CartPole-v1")  # other ids do not need it
    monkeypatch.undo()
    _probe.cache_clear()

    def no_rom(game, *, full_action_space):
        raise RuntimeError(f"Unable to find ROM {game}")

    monkeypatch.setattr("lz_tune.envs.factory.atari_action_space_size", no_rom)
    with pytest.raises(ConfigError, match=r"env.env_id: ALE/Pong-v5: the Atari ROM 'pong' does not load"):
        _driver(_tiny_cfg("env.env_id=ALE/Pong-v5", "model.kind=conv"), tmp_path / "exp")
    assert not (tmp_path / "exp").exists()
    _probe.cache_clear()
