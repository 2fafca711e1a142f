"""The command line: ``python -m lz_tune train <config> [key=value ...] --exp-dir DIR [--resume PATH]``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import run_cli

TIMEOUT_S = 120


def load_checkpoint(path, **kwargs):
    # imported lazily: collecting this module should not pay for importing torch before the
    # training subprocess starts
    from lz_tune.checkpoint import load_checkpoint as load

    return load(path, **kwargs)


def _start(repo_root: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = repo_root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen(
        [sys.executable, "-m", "lz_tune", *args],
        cwd=repo_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _main(repo_root: str, capsys, *args: str) -> tuple[int, str, str]:
    """``python -m lz_tune ARGS`` in this process (from the repository root): (exit code, stdout, stderr)."""
    return run_cli(capsys, *args, cwd=repo_root)


def _final_counters(stdout: str) -> tuple[int, int]:
    """(env_steps, train_iter) of the final 'done' line."""
    last = stdout.strip().splitlines()[-1]
    m = re.search(r"env_steps=(\d+) train_iter=(\d+)", last)
    assert m, last
    return int(m.group(1)), int(m.group(2))


@pytest.fixture(scope="module")
def trained(repo_root, zoo_config_path, tiny_overrides, tmp_path_factory):
    """A real ``python -m lz_tune train`` subprocess (the in-process tests resume from its folder)."""
    exp_dir = tmp_path_factory.mktemp("cli") / "exp"
    proc = _start(repo_root, "train", zoo_config_path, *tiny_overrides, "max_env_step=200", "--exp-dir", str(exp_dir))
    try:
        # warm this process's lazy imports (torch._dynamo via the optimizer) while the subprocess trains
        import torch

        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return exp_dir, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_train_writes_run_folder(trained):
    exp_dir, proc = trained
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert "stop value" in lines[-1], lines[-1]
    assert "max_env_step reached" in lines[-1]
    env_steps, train_iter = _final_counters(proc.stdout)
    assert env_steps >= 200 and train_iter > 0
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(exp_dir / "tb"))
    assert (exp_dir / "ckpt" / "ckpt_latest.pt").is_file()
    assert (exp_dir / "ckpt" / "ckpt_best.pt").is_file()
    cfg = json.loads((exp_dir / "config.json").read_text())
    assert cfg["max_env_step"] == 200
    assert cfg["mcts"]["num_simulations"] == 4 and cfg["model"]["hidden_sizes"] == [16]
    ckpt = load_checkpoint(exp_dir / "ckpt" / "ckpt_latest.pt", policy_type="muzero")
    assert 0 < ckpt["counters"]["train_iter"] <= train_iter
    assert 0 < ckpt["counters"]["env_steps"] <= env_steps


def test_resume_from_exp_dir_continues(trained, repo_root, zoo_config_path, tiny_overrides, capsys):
    exp_dir, first = trained
    assert first.returncode == 0, first.stderr[-3000:]
    before = load_checkpoint(exp_dir / "ckpt" / "ckpt_latest.pt")["counters"]
    first_steps, first_iter = _final_counters(first.stdout)
    code, out, err = _main(
        repo_root, capsys, "train", zoo_config_path, *tiny_overrides, "max_env_step=260", "--resume", str(exp_dir)
    )
    assert code == 0, err[-3000:]
    assert "stop value" in out.strip().splitlines()[-1]
    env_steps, train_iter = _final_counters(out)
    assert env_steps >= 260 and env_steps > first_steps
    assert train_iter > first_iter
    # the folder of the resumed run is the same experiment folder
    after = load_checkpoint(exp_dir / "ckpt" / "ckpt_latest.pt")["counters"]
    assert after["train_iter"] > before["train_iter"]
    assert after["env_steps"] > before["env_steps"]
    assert json.loads((exp_dir / "config.json").read_text())["max_env_step"] == 260


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"]])
def test_help(repo_root, capsys, args):
    code, out, _ = _main(repo_root, capsys, *args)
    assert code == 0
    for word in (
        ["train"] if args == ["--help"] else ["--exp-dir", "--resume", "--seed", "--async-pipeline", "key=value"]
    ):
        assert word in out


def test_bad_override_exits_2_naming_the_key(repo_root, zoo_config_path, tmp_path, capsys):
    exp_dir = tmp_path / "exp"
    code, out, err = _main(
        repo_root, capsys, "train", zoo_config_path, "learner.learning_rte=1", "--exp-dir", str(exp_dir)
    )
    assert code == 2, (code, err[-3000:])
    assert "learner.learning_rte" in err
    assert "learning_rate" in err  # the suggestion
    assert not exp_dir.exists()


def test_bad_resume_path_exits_2_naming_it(repo_root, zoo_config_path, tiny_overrides, tmp_path, capsys):
    empty = tmp_path / "no_run_here"
    empty.mkdir()
    code, _, err = _main(
        repo_root,
        capsys,
        "train",
        zoo_config_path,
        *tiny_overrides,
        "--resume",
        str(empty),
        "--exp-dir",
        str(tmp_path / "exp"),
    )
    assert code == 2
    assert str(empty) in err
    assert not (tmp_path / "exp").exists()


def test_existing_run_folder_is_not_overwritten_without_resume(
    trained, repo_root, zoo_config_path, tiny_overrides, capsys
):
    exp_dir, _ = trained
    before = os.path.getmtime(exp_dir / "ckpt" / "ckpt_latest.pt")
    code, _, err = _main(repo_root, capsys, "train", zoo_config_path, *tiny_overrides, "--exp-dir", str(exp_dir))
    assert code == 2
    assert "--resume" in err and str(exp_dir) in err
    assert os.path.getmtime(exp_dir / "ckpt" / "ckpt_latest.pt") == before


@pytest.mark.parametrize(
    "overrides, message",
    [
        (("policy_type=mu_zero",), "policy_type: unknown policy type"),
        (("policy_type=unizero", "unizero.num_heads=3"), "unizero.embed_dim"),
    ],
)
def test_unknown_policy_type_or_bad_type_key_exits_2(
    repo_root, zoo_config_path, tiny_overrides, tmp_path, capsys, overrides, message
):
    code, _, err = _main(
        repo_root, capsys, "train", zoo_config_path, *tiny_overrides, *overrides, "--exp-dir", str(tmp_path / "exp")
    )
    assert code == 2
    assert message in err
    assert not (tmp_path / "exp").exists()


def test_missing_ray_exits_2_with_install_hint(
    repo_root, zoo_config_path, tiny_overrides, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "ray", None)
    code, _, err = _main(
        repo_root,
        capsys,
        "train",
        zoo_config_path,
        *tiny_overrides,
        "--async-pipeline",
        "--exp-dir",
        str(tmp_path / "exp"),
    )
    assert code == 2
    assert "needs Ray" in err and "pip install" in err
    assert not (tmp_path / "exp").exists()
