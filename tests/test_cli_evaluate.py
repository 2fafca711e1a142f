"""``python -m lz_tune evaluate PATH [--episodes N] [--video OUT.gif] [--seed S] [key=value ...]`` and
the path resolution / rendering of :func:`lz_tune.checkpoint_eval.evaluate_checkpoint` behind it.

Checkpoints are built from an untrained tiny learner (no training run): what is tested is which
file is picked, that its weights are played by the Evaluator, and what the video holds."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from lz_tune.metrics import EVAL_RETURN
from tests.conftest import CARTPOLE_ZOO, REPO_ROOT, TINY_OVERRIDES, run_cli

PIL_Image = pytest.importorskip("PIL.Image")
TRIAL = "MuZeroTrainable_3f2a1_00000_0_learning_rate=0.0010"


def _main(capsys, *args: str) -> tuple[int, str, str]:
    """``python -m lz_tune ARGS`` in this process (from the repository root): (exit code, stdout, stderr)."""
    return run_cli(capsys, *args)


def _payload(cfg, learner, *, train_iter: int, reward_mean: float | None, kind: str = "evaluated") -> dict:
    ev = (
        None
        if reward_mean is None
        else {
            "train_iter": train_iter,
            "reward_mean": reward_mean,
            "reward_std": 0.5,
            "num_episodes": 2,
            "version": train_iter,
        }
    )
    state = dict(learner.state_dict(), train_iter=train_iter)  # as if trained that far
    return {
        "checkpoint_kind": kind,
        "policy_type": "muzero",
        "config": cfg.to_dict(),
        "learner": state,
        "counters": {"env_steps": 10 * train_iter, "train_iter": train_iter},
        "eval": ev,
    }


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """A train run folder (ckpt_best = eval 9.5, ckpt_latest = eval 7.0), a run folder with only
    ckpt_latest, and a Tune experiment with one trial folder: checkpoint_000000..2 evaluated
    (5.0, 12.0, 8.0) and checkpoint_000003 with only a state file (a "current" save)."""
    import torch

    from lz_tune.algos import get_algorithm
    from lz_tune.analysis import CHECKPOINT_FILE, STATE_FILE
    from lz_tune.checkpoint import save_checkpoint
    from lz_tune.config_loader import load_config_module
    from lz_tune.workers import env_spec_for

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("evaluate")
    cfg = load_config_module(os.path.join(REPO_ROOT, CARTPOLE_ZOO)).with_overrides(
        list(TINY_OVERRIDES) + ["env.max_episode_steps=40"]
    )
    learner = get_algorithm("muzero").make_learner(cfg, env_spec_for(cfg))
    save_checkpoint(root / "run/ckpt/ckpt_latest.pt", _payload(cfg, learner, train_iter=3, reward_mean=7.0))
    save_checkpoint(root / "run/ckpt/ckpt_best.pt", _payload(cfg, learner, train_iter=2, reward_mean=9.5))
    save_checkpoint(root / "latest_only/ckpt/ckpt_latest.pt", _payload(cfg, learner, train_iter=3, reward_mean=7.0))
    trial = root / "exp" / TRIAL
    for i, reward in enumerate([5.0, 12.0, 8.0]):
        d = trial / f"checkpoint_{i:06d}"
        save_checkpoint(d / CHECKPOINT_FILE, _payload(cfg, learner, train_iter=2 * i + 1, reward_mean=reward))
        save_checkpoint(d / STATE_FILE, _payload(cfg, learner, train_iter=2 * i + 2, reward_mean=reward))
    save_checkpoint(
        trial / "checkpoint_000003" / STATE_FILE, _payload(cfg, learner, train_iter=9, reward_mean=None, kind="current")
    )
    (trial / "params.json").write_text(json.dumps({"learner.learning_rate": 1e-3}))
    (trial / "result.json").write_text(
        "".join(
            json.dumps({"trial_id": "3f2a1_00000", "training_iteration": i + 1, EVAL_RETURN: r}) + "\n"
            for i, r in enumerate([5.0, 12.0, 8.0])
        )
    )
    return root


# ---------------------------------------------------------------------------------- the video


def test_video_is_env0_first_episode_at_render_size(layouts, tmp_path, capsys):
    pytest.importorskip("pygame", reason='CartPole renders with pygame: pip install "gymnasium[classic-control]"')
    import gymnasium

    out = tmp_path / "videos" / "cartpole.gif"
    code, stdout, err = _main(
        capsys, "evaluate", str(layouts / "run"), "--episodes", "1", "--video", str(out), "env.evaluator_env_num=1"
    )
    assert code == 0, err[-3000:]
    # the run folder's best checkpoint, named, next to its recorded evaluation
    assert f"checkpoint: {layouts / 'run/ckpt/ckpt_best.pt'}" in stdout and "the best evaluation" in stdout
    assert "recorded evaluation: return 9.5 +- 0.5 over 2 episodes, train_iter 2" in stdout
    m = re.search(
        r"this evaluation: return ([-\d.]+) \+- 0\.0 over 1 episodes \(min \1, max \1\), "
        r"mean episode length (\d+)\.0, train_iter 2, 1 envs, seed (\d+)",
        stdout,
    )
    assert m, stdout
    length, seed = int(m.group(2)), int(m.group(3))
    assert f"video: {out}: {length + 1} frames 600x400, the reset + {length} steps" in stdout
    with PIL_Image.open(out) as gif:
        assert gif.size == (600, 400) and gif.n_frames == length + 1  # the reset frame + one per step
        durations, frames = [], []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
            frames.append(np.asarray(gif.convert("RGB")))
    assert set(durations) == {20}  # CartPole's render_fps 50
    # frame 0 is CartPole's reset with the evaluator's seed, as gymnasium renders it
    env = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=seed)
    expected = env.render()
    env.close()
    assert frames[0].shape == expected.shape == (400, 600, 3)
    assert np.array_equal(frames[0], expected)


def test_rendered_frames_show_the_states_the_search_saw_and_change_no_score(layouts):
    """The recorded episode is the evaluated one: every rendered frame but the last draws the state
    that env 0 gave the network at that step; the last is the episode's end."""
    pytest.importorskip("pygame", reason='CartPole renders with pygame: pip install "gymnasium[classic-control]"')
    import gymnasium

    from lz_tune.checkpoint_eval import evaluate_checkpoint

    run = evaluate_checkpoint(
        layouts / "run", n_episodes=2, overrides=["env.evaluator_env_num=2"], render=True, record_frames=True
    )
    length = run.rendered_episode["length"]
    assert run.rendered.shape == (length + 1, 400, 600, 3) and run.rendered.dtype == np.uint8
    assert run.frames.shape == (length, 4)  # network inputs of env 0's first episode: reset + steps before the end
    assert run.render_fps == 50.0 and run.seed == run.config.seed + 100_000
    env = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    for t in range(length):
        env.unwrapped.state = run.frames[t].astype(np.float64)
        differing = np.mean(np.any(env.render() != run.rendered[t], axis=-1))
        assert differing < 1e-3, (t, differing)  # float32 observation vs float64 state: a stray pixel at most
    env.close()
    assert run.rendered_episode["return"] == length in run.eval.returns  # CartPole: +1 per step
    # recording changes nothing: the same scores without it, and from the Evaluator fed the file's weights
    assert (
        evaluate_checkpoint(layouts / "run", n_episodes=2, overrides=["env.evaluator_env_num=2"]).eval.returns
        == run.eval.returns
    )
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.workers import Evaluator, WeightSnapshot

    evaluator = Evaluator(run.config, seed=run.seed)
    try:
        weights = load_checkpoint(layouts / "run/ckpt/ckpt_best.pt")["learner"]["network"]
        direct = evaluator.evaluate(WeightSnapshot(version=2, train_iter=2, weights=weights), n_episodes=2)
    finally:
        evaluator.close()
    assert direct.returns == run.eval.returns


def test_video_without_a_renderer_exits_2_and_writes_nothing(layouts, tmp_path, capsys, monkeypatch):
    """Without pygame (CartPole's renderer) --video stops before any episode, naming the package."""
    monkeypatch.setitem(__import__("sys").modules, "pygame", None)  # `import pygame` raises ImportError
    out = tmp_path / "cartpole.gif"
    code, stdout, err = _main(capsys, "evaluate", str(layouts / "run"), "--video", str(out))
    assert code == 2, (code, err[-2000:])
    assert (
        err.startswith("error: render: rendering CartPole-v1 needs a package that is not installed")
        and "pygame" in err
        and 'pip install "gymnasium[classic-control]"' in err
    ), err
    assert "this evaluation" not in stdout and not out.exists() and list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------- which checkpoint


@pytest.mark.parametrize(
    "where,picked,words",
    [
        ("run/ckpt/ckpt_latest.pt", "run/ckpt/ckpt_latest.pt", "checkpoint file"),
        ("run", "run/ckpt/ckpt_best.pt", "train run folder: ckpt/ckpt_best.pt"),
        ("latest_only", "latest_only/ckpt/ckpt_latest.pt", "no ckpt_best.pt"),
        (
            f"exp/{TRIAL}/checkpoint_000002",
            f"exp/{TRIAL}/checkpoint_000002/lz_tune_checkpoint.pt",
            "evaluated snapshot",
        ),
        (f"exp/{TRIAL}/checkpoint_000003", f"exp/{TRIAL}/checkpoint_000003/lz_tune_state.pt", "learner state"),
        (
            f"exp/{TRIAL}",
            f"exp/{TRIAL}/checkpoint_000001/lz_tune_checkpoint.pt",
            "evaluation/env_runners/episode_return_mean 12 at train_iter 3",
        ),
        (
            "exp",
            f"exp/{TRIAL}/checkpoint_000001/lz_tune_checkpoint.pt",
            "Tune experiment folder: trial 3f2a1_00000, checkpoint_000001",
        ),
    ],
)
def test_paths_resolve_to_the_documented_checkpoint(layouts, where, picked, words):
    from lz_tune.analysis import resolve_checkpoint

    path, source = resolve_checkpoint(layouts / where)
    assert path == layouts / picked
    assert words in source


def test_trial_and_tune_checkpoint_folders_evaluate(layouts, capsys):
    trial = layouts / "exp" / TRIAL
    code, out, err = _main(capsys, "evaluate", str(trial), "--episodes", "1", "env.evaluator_env_num=1", "--seed", "7")
    assert code == 0, err[-3000:]
    assert f"checkpoint: {trial / 'checkpoint_000001/lz_tune_checkpoint.pt'} - Tune trial folder" in out
    assert "recorded evaluation: return 12.0 +- 0.5 over 2 episodes, train_iter 3" in out
    assert "over 1 episodes" in out and "seed 7" in out
    code, out, err = _main(
        capsys, "evaluate", str(trial / "checkpoint_000000"), "--episodes", "1", "env.evaluator_env_num=1"
    )
    assert code == 0, err[-3000:]
    assert "recorded evaluation: return 5.0 +- 0.5 over 2 episodes, train_iter 1" in out


# ---------------------------------------------------------------------------------- bad inputs


def _corrupt(root: Path) -> dict[str, Path]:
    (root / "empty").mkdir(parents=True)
    (root / "garbage.pt").write_bytes(os.urandom(512))
    (root / "tune_ckpt").mkdir()
    (root / "tune_ckpt" / "lz_tune_checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    (root / "trial_without_checkpoints").mkdir()
    (root / "trial_without_checkpoints" / "params.json").write_text("{}")
    return {
        "missing": root / "nope",
        "empty": root / "empty",
        "garbage": root / "garbage.pt",
        "tune_ckpt": root / "tune_ckpt",
        "trial": root / "trial_without_checkpoints",
    }


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing", "no such file or folder"),
        ("empty", "no checkpoint in this folder"),
        ("garbage", "not a readable lz_tune checkpoint"),
        ("tune_ckpt", "not a readable lz_tune checkpoint"),
        ("trial", "Tune trial folder without a readable checkpoint"),
    ],
)
def test_bad_paths_exit_2_naming_them_and_write_nothing(tmp_path, capsys, case, message):
    paths = _corrupt(tmp_path / "in")
    out = tmp_path / "out" / "video.gif"
    code, stdout, err = _main(capsys, "evaluate", str(paths[case]), "--video", str(out))
    assert code == 2, (code, err[-2000:])
    assert err.startswith("error: ") and str(paths[case]) in err and message in err, err
    assert "Traceback" not in err and "this evaluation" not in stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--video", "{tmp}/video.mp4"], "--video {tmp}/video.mp4: only animated GIF"),
        (["model.latent_dim=8"], "model.latent_dim: cannot change the network"),
        (["mcts.num_simulatons=3"], "mcts.num_simulatons: unknown config key"),
    ],
)
def test_bad_options_exit_2_before_playing(layouts, tmp_path, capsys, extra, message):
    extra = [e.format(tmp=tmp_path) for e in extra]
    code, stdout, err = _main(capsys, "evaluate", str(layouts / "run"), *extra)
    assert code == 2, (code, err[-2000:])
    assert err.startswith("error: ") and message.format(tmp=tmp_path) in err, err
    assert "this evaluation" not in stdout and list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------- Atari


def test_atari_video_is_the_full_rgb_screen(tmp_path):
    """Atari: the rendered frames are ALE's 210x160 RGB screen, not the 64x64 gray network input
    (which ``frames`` still returns, as before)."""
    import torch

    from lz_tune.algos import get_algorithm
    from lz_tune.analysis import CHECKPOINT_FILE
    from lz_tune.checkpoint import save_checkpoint
    from lz_tune.checkpoint_eval import evaluate_checkpoint
    from lz_tune.config_loader import load_config_module
    from lz_tune.envs.recording import write_gif
    from lz_tune.workers import env_spec_for

    torch.set_num_threads(1)
    cfg = load_config_module(os.path.join(REPO_ROOT, "zoo/atari/pong_muzero.py")).with_overrides(
        [
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=12",
            "mcts.num_simulations=2",
            "model.num_channels=8",
            "model.value_support_size=5",
            "model.reward_support_size=5",
            "model.projection_dim=8",
            "learner.num_threads=1",
        ]
    )
    learner = get_algorithm("muzero").make_learner(cfg, env_spec_for(cfg))
    save_checkpoint(
        tmp_path / CHECKPOINT_FILE,
        {
            "policy_type": "muzero",
            "config": cfg.to_dict(),
            "learner": learner.state_dict(),
            "counters": {"env_steps": 0, "train_iter": 0},
            "eval": None,
        },
    )
    run = evaluate_checkpoint(tmp_path, n_episodes=1, render=True)
    assert run.eval.episode_length_mean == 12 and run.rendered_episode == {"return": 0.0, "length": 12}
    assert run.frames.shape == (12, 64, 64)  # the network input, unchanged
    assert run.rendered.shape == (13, 210, 160, 3) and run.rendered.dtype == np.uint8
    assert run.render_fps == 15.0  # 60 Hz / frame_skip 4
    assert len(np.unique(run.rendered[-1].reshape(-1, 3), axis=0)) > 2  # colour, not gray
    gif = write_gif(run.rendered, tmp_path / "pong.gif", fps=run.render_fps)
    with PIL_Image.open(gif) as im:
        assert im.size == (160, 210) and im.n_frames == 13 and im.info["duration"] == 70


def test_atari_mirror_plays_env0_game_frame_for_frame():
    """The mirror that renders Atari (ALE serves only preprocessed frames) plays env 0's very game:
    with the same preprocessing its frames equal env 0's bit for bit, under sticky actions, random
    no-op starts and a game end with its same-step restart."""
    from lz_tune.envs import AtariOptions, AtariVectorEnv
    from lz_tune.envs.atari_vector import make_ale_vector_env

    options = AtariOptions(repeat_action_probability=0.25, noop_max=30, max_episode_steps=240)
    env = AtariVectorEnv(env_id="ALE/Pong-v5", num_envs=2, mode="eval", options=options, seed=5)
    mirror = make_ale_vector_env(env.env_id, 1, env.options, num_threads=1, screen=False)
    try:
        batch = env.reset(seed=5)
        obs, _ = mirror.reset(seed=5)
        assert np.array_equal(obs[0, -1], batch.frame[0, -1])
        rng, ends = np.random.default_rng(0), 0
        for step in range(90):
            actions = rng.integers(0, env.action_space_size, size=2)
            res = env.step(actions)
            obs, reward, terminated, truncated, _ = mirror.step(actions[:1])
            assert np.array_equal(obs[0, -1], res.batch.frame[0, -1]), step
            assert reward[0] == res.reward[0] and bool(terminated[0] or truncated[0]) == res.real_episode_end[0]
            ends += int(res.real_episode_end[0])
        assert ends == 1  # 240 frames = 60 steps: the restart was mirrored too
    finally:
        mirror.close()
        env.close()


def test_atari_mirror_that_leaves_env0_game_is_an_error():
    """The mirror's reward and game end are checked at every step: a mirror whose game is capped
    earlier than env 0's stops the recording with an error, not a wrong video."""
    import dataclasses

    from lz_tune.envs import AtariOptions, AtariVectorEnv
    from lz_tune.envs.atari_vector import make_ale_vector_env
    from lz_tune.envs.recording import AtariScreenRecorder

    env = AtariVectorEnv(
        env_id="ALE/Pong-v5", num_envs=1, mode="eval", seed=5, options=AtariOptions(noop_max=0, max_episode_steps=240)
    )
    capped = dataclasses.replace(env.options, max_episode_steps=200)  # the mirror's game ends first
    recorder = AtariScreenRecorder(
        env, max_frames=1000, make_mirror=lambda e: make_ale_vector_env(e.env_id, 1, capped, num_threads=1, screen=True)
    )
    try:
        recorder.reset(seed=5)
        with pytest.raises(RuntimeError, match="the mirrored game of ALE/Pong-v5 left env 0's game at step"):
            for _ in range(70):
                recorder.step(np.zeros(1, np.int64))
    finally:
        recorder.close()


def test_a_checkpoint_cannot_import_code(layouts, tmp_path, monkeypatch, capsys):
    """A checkpoint whose config names policy_type "evil_mod:muzero" would import evil_mod from the
    current folder when evaluated: refused (exit 2, naming the module and the flag), and the module
    never ran; the same for `train --resume RUN` reading the run's config.json. A module that is
    imported already is fine (nothing new runs)."""
    import json
    import sys

    from lz_tune.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
    from lz_tune.checkpoint_eval import evaluate_checkpoint
    from lz_tune.cli.main import main
    from lz_tune.trusted_imports import imports_of_config, refuse_untrusted_imports

    marker = tmp_path / "ran"
    (tmp_path / "evil_mod.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    payload = load_checkpoint(layouts / "run/ckpt/ckpt_latest.pt")
    payload["config"]["policy_type"] = "evil_mod:muzero"
    bad = save_checkpoint(tmp_path / "bad.pt", payload)
    code = main(["evaluate", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "'evil_mod'" in err and "--allow-imports" in err
    with pytest.raises(CheckpointError, match="evil_mod"):
        evaluate_checkpoint(bad)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(
        json.dumps(
            payload["config"]
            | {"env": {**payload["config"]["env"], "import_modules": ["evil_mod:register"]}, "policy_type": "muzero"}
        )
    )
    assert main(["train", "--resume", str(run), "--quiet"]) == 2
    assert "env.import_modules imports module 'evil_mod'" in capsys.readouterr().err
    assert not marker.exists() and "evil_mod" not in sys.modules
    # what the guard reads, and what it lets through
    assert imports_of_config({"policy_type": "a.b:t", "env": {"env_id": "c:Env-v0", "import_modules": ["d.e:f"]}}) == [
        ("policy_type", "a.b"),
        ("env.env_id", "c"),
        ("env.import_modules", "d.e"),
    ]
    assert imports_of_config({"env": {"env_id": "openspiel:tic_tac_toe"}}) == []
    refuse_untrusted_imports({"policy_type": "json:x"}, source="s")  # json is imported: nothing new runs
    refuse_untrusted_imports({"policy_type": "evil_mod:x"}, source="s", allow=True)
