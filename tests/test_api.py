"""The Python API (``lz_tune.train`` / ``evaluate`` / ``load_config``), the Driver as a context
manager, TensorBoard's two step axes and the progress line's ETA."""

from __future__ import annotations

import json
import os
import sys

import pytest

import lz_tune
from lz_tune.checkpoint import CheckpointError
from lz_tune.config import Config, ConfigError
from lz_tune.progress import format_progress
from tests.conftest import CARTPOLE_ZOO, REPO_ROOT, TINY_OVERRIDES
from tests.tb_events import read_scalars

ZOO_FILE = os.path.join(REPO_ROOT, CARTPOLE_ZOO)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny CartPole run through lz_tune.train (sync)."""
    exp_dir = tmp_path_factory.mktemp("api") / "run"
    cfg = lz_tune.load_config(ZOO_FILE, list(TINY_OVERRIDES) + ["max_env_step=200"])
    return cfg, exp_dir, lz_tune.train(cfg, exp_dir=exp_dir)


def test_train_returns_what_the_run_folder_holds(trained):
    cfg, exp_dir, result = trained
    assert result.run_dir == exp_dir and result.checkpoint == exp_dir / "ckpt" / "ckpt_latest.pt"
    assert result.checkpoint.is_file() and result.best_checkpoint is not None and result.best_checkpoint.is_file()
    assert result.env_steps >= 200 and result.train_iter > 0 and result.wall_time_s > 0
    assert not result.stop_value_reached and result.stop_reason.startswith("max_env_step")
    rows = [json.loads(line) for line in (exp_dir / "result.json").read_text().splitlines()]
    assert rows[-1]["num_env_steps_sampled_lifetime"] == result.env_steps
    assert result.last_eval_return == rows[-1]["evaluation/env_runners/episode_return_mean"]
    assert result.best_eval_return == max(r["evaluation/env_runners/episode_return_mean"] for r in rows)
    assert result.metrics["train_iter"] == result.train_iter


def test_tensorboard_has_an_env_step_view_and_an_update_view(trained):
    cfg, exp_dir, result = trained
    by_env = read_scalars(str(exp_dir / "tb"))
    by_iter = read_scalars(str(exp_dir / "tb_train_iter"))
    assert set(by_env) == set(by_iter) and "evaluation/env_runners/episode_return_mean" in by_env
    rows = [json.loads(line) for line in (exp_dir / "result.json").read_text().splitlines()]
    evals = by_env["evaluation/env_runners/episode_return_mean"]
    # each evaluation at the env steps and the updates behind the snapshot it evaluated
    assert [s for s, _ in evals] == [r["evaluation/num_env_steps_sampled_lifetime"] for r in rows]
    assert [s for s, _ in by_iter["evaluation/env_runners/episode_return_mean"]] == [
        r["evaluation/train_iter"] for r in rows
    ]
    assert [v for _, v in evals] == pytest.approx([r["evaluation/env_runners/episode_return_mean"] for r in rows])
    # the learner's losses: x = env steps differs from x = updates (replay ratio != 1)
    loss = "learners/muzero/total_loss"
    assert [s for s, _ in by_env[loss]] != [s for s, _ in by_iter[loss]]
    assert max(s for s, _ in by_env[loss]) <= result.env_steps and max(s for s, _ in by_iter[loss]) <= result.train_iter


def test_evaluate_plays_the_checkpoint_again(trained):
    _, _, result = trained
    ev = lz_tune.evaluate(result.checkpoint, episodes=3, seed=5)
    again = lz_tune.evaluate(result.checkpoint, episodes=3, seed=5)
    assert ev.num_episodes == 3 and len(ev.returns) == 3 and ev.returns == again.returns  # seeded: the same games
    assert ev.mean == pytest.approx(sum(ev.returns) / 3) and ev.checkpoint == result.checkpoint
    assert ev.train_iter > 0 and ev.env_steps is not None and ev.env_steps > 0
    with pytest.raises(CheckpointError):
        lz_tune.evaluate(result.run_dir / "nothing_here.pt")


def test_train_resumes_a_run_and_refuses_a_used_folder(trained, tmp_path):
    cfg, exp_dir, result = trained
    with pytest.raises(ConfigError, match="holds checkpoints of an earlier run"):
        lz_tune.train(cfg, exp_dir=exp_dir)
    more = lz_tune.train(None, resume=exp_dir, overrides={"max_env_step": result.env_steps + 100})
    assert more.run_dir == exp_dir and more.env_steps >= result.env_steps + 100
    assert more.train_iter > result.train_iter


def test_load_config_sources_and_errors():
    cfg = lz_tune.load_config(ZOO_FILE, {"mcts.num_simulations": 7})
    assert isinstance(cfg, Config) and cfg.mcts.num_simulations == 7
    derived = lz_tune.load_config(env="CartPole-v1", overrides=["seed=3"])
    assert derived.env.env_id == "CartPole-v1" and derived.seed == 3
    with pytest.raises(ConfigError, match="env=ENV_ID"):
        lz_tune.load_config()
    with pytest.raises(ConfigError, match="mcts.num_simulation"):
        lz_tune.load_config(ZOO_FILE, ["mcts.num_simulation=7"])
    with pytest.raises(ConfigError, match="not the string"):
        lz_tune.load_config(ZOO_FILE, "mcts.num_simulations=7")


def test_driver_is_a_context_manager_that_closes_on_any_exit(tiny_cfg, tmp_path):
    from lz_tune.pipeline import Driver
    from lz_tune.run_folder import RunFolder

    with pytest.raises(RuntimeError, match="boom"):
        with Driver(tiny_cfg(), exp_dir=str(tmp_path / "a"), print_fn=None) as driver:
            driver.step(max_seconds=0.1)
            raise RuntimeError("boom")
    assert driver._closed
    folder = RunFolder(str(tmp_path / "a"))
    folder.lock()  # the lock was released: another writer may take the folder now
    folder.unlock()
    driver.close()  # a second close does nothing


def test_train_closes_ray_when_an_async_run_fails_to_start(tiny_cfg, tmp_path, monkeypatch):
    """An error while the driver starts (after ray.init) leaves no Ray instance behind; a Ray
    instance the caller had started before is left alone."""
    import ray

    from lz_tune.pipeline import driver as driver_module

    if ray.is_initialized():  # the session's shared cluster (tests/conftest.py starts it again)
        ray.shutdown()

    calls = []

    def failing_init(self, *a, **kw):
        import ray

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        calls.append(ray.is_initialized())
        raise RuntimeError("failed after ray.init")

    monkeypatch.setattr(driver_module.Driver, "__init__", failing_init)
    with pytest.raises(RuntimeError, match="after ray.init"):
        lz_tune.train(tiny_cfg(), exp_dir=tmp_path / "b")
    assert calls == [True] and not ray.is_initialized()

    def failing(self, *a, **kw):
        raise RuntimeError("failed while starting")

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)  # the caller's own
    try:
        monkeypatch.setattr(driver_module.Driver, "__init__", failing)
        with pytest.raises(RuntimeError, match="while starting"):
            lz_tune.train(tiny_cfg(), exp_dir=tmp_path / "c")
        assert ray.is_initialized()
    finally:
        ray.shutdown()


def test_progress_line_shows_share_of_budget_and_eta():
    m = {
        "wall_time_s": 60.0,
        "env_steps": 2500,
        "env_steps_per_s": 50.0,
        "train_iter": 10,
        "updates_per_s": 1.0,
        "buffer_transitions": 2500,
        "collect_return_mean": float("nan"),
    }
    line = format_progress(m, train_start_after_envsteps=0, trainable=True, max_env_step=10_000)
    assert "env steps 2,500/10,000 (25.0%, 50/s, ETA 0:02:30)" in line  # 7,500 steps left at 50/s
    stalled = format_progress(
        {**m, "env_steps_per_s": 0.0}, train_start_after_envsteps=0, trainable=True, max_env_step=10_000
    )
    assert "ETA n/a" in stalled
    assert "ETA" not in format_progress(m, train_start_after_envsteps=0, trainable=True)


def test_the_cli_train_is_a_caller_of_the_api(monkeypatch, tmp_path, capsys):
    """``python -m lz_tune train`` goes through lz_tune.api.train (one code path)."""
    from lz_tune.cli import main as cli
    from lz_tune.cli import train as train_command

    seen = {}
    real = train_command.train

    def spy(cfg, **kw):
        seen["cfg"] = cfg
        return real(cfg, **kw)

    monkeypatch.setattr(train_command, "train", spy)
    code = cli.main(
        ["train", ZOO_FILE, *TINY_OVERRIDES, "max_env_step=60", "--exp-dir", str(tmp_path / "cli"), "--quiet"]
    )
    assert code == 0 and seen["cfg"].max_env_step == 60
    assert "done: stop value NOT reached" in capsys.readouterr().out


def test_lazy_top_level_names():
    assert set(lz_tune.__all__) >= {"train", "evaluate", "load_config", "RunResult", "EvalResult", "Driver", "Config"}
    assert lz_tune.Driver is sys.modules["lz_tune.pipeline.driver"].Driver or lz_tune.Driver.__name__ == "Driver"
    with pytest.raises(AttributeError):
        lz_tune.no_such_name  # noqa: B018
