"""Playing a checkpoint again: :func:`evaluate_checkpoint` loads a checkpoint's weights and config,
plays evaluation episodes with the project's :class:`lz_tune.workers.Evaluator` (greedy search,
raw scores) and, on request, records env 0's frames (:mod:`lz_tune.envs.recording`). Behind
``python -m lz_tune evaluate`` and the analysis notebook::

    from lz_tune.analysis import load_experiment
    from lz_tune.checkpoint_eval import evaluate_checkpoint
    exp = load_experiment("~/lz_results/cartpole_muzero")
    run = evaluate_checkpoint(exp.best_checkpoint(), n_episodes=5, render=True)
    run.eval.reward_mean, run.rendered.shape

Which file a path names (a run folder, a Tune checkpoint, trial or experiment folder) is
:func:`lz_tune.analysis.resolve_checkpoint`'s to say.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from lz_tune.analysis import resolve_checkpoint
from lz_tune.checkpoint import CheckpointError, load_checkpoint
from lz_tune.config import Config, ConfigError
from lz_tune.envs.recording import FrameRecorder, RenderError, screen_recorder
from lz_tune.pipeline.backends import EVALUATOR_SEED_OFFSET
from lz_tune.trusted_imports import refuse_untrusted_imports
from lz_tune.workers import Evaluator, WeightSnapshot, env_spec_for, make_env

__all__ = ["CheckpointEvaluation", "evaluate_checkpoint", "changed_keys"]


@dataclass(frozen=True)
class CheckpointEvaluation:
    """What :func:`evaluate_checkpoint` returns.

    ``path``: the checkpoint file played, ``source``: how it was picked from the path given (see
    :func:`resolve_checkpoint`); ``eval``: the :class:`lz_tune.workers.EvalResult` of the new
    episodes (``reward_mean``, ``returns``, ...); ``recorded``: the checkpoint's own evaluation dict
    (``reward_mean``, ``train_iter``, ...; None without one); ``counters``: env_steps / train_iter at
    the checkpoint; ``config``: the :class:`lz_tune.config.Config` played; ``seed``: the seed of
    evaluator env 0 (env i: seed + i); ``frames``: Atari only, uint8 ``[T, H, W]`` (grayscale) or
    ``[T, H, W, 3]`` network-input frames of env 0's first game (else None); ``rendered``: with
    ``render=True``, uint8 RGB ``[T, H, W, 3]`` frames of env 0's first episode as the env renders
    it (gymnasium's ``render_mode="rgb_array"``; Atari: ALE's full 210x160 RGB screen): the reset
    frame, then one per step up to and including the last one, so ``T = length + 1`` (at most
    ``max_frames``); ``rendered_episode``: ``{"return", "length"}`` of that episode; ``render_fps``:
    the env's playback speed (gymnasium's ``metadata["render_fps"]``, Atari 60 / frame_skip).
    """

    path: Path
    eval: Any
    recorded: Optional[dict[str, Any]]
    counters: dict[str, Any]
    config: Any
    frames: Optional[np.ndarray]
    rendered: Optional[np.ndarray] = None
    rendered_episode: Optional[dict[str, Any]] = None
    render_fps: Optional[float] = None
    source: str = ""
    seed: Optional[int] = None


def evaluate_checkpoint(
    path: str | Path,
    *,
    n_episodes: Optional[int] = None,
    seed: Optional[int] = None,
    overrides: Sequence[str] = (),
    record_frames: Optional[bool] = None,
    max_frames: int = 5000,
    device: str = "cpu",
    render: bool = False,
    allow_imports: bool = False,
) -> CheckpointEvaluation:
    """Play ``n_episodes`` (default: the config's ``evaluator.n_evaluator_episode``) evaluation
    episodes with the checkpoint's weights, with the project's :class:`lz_tune.workers.Evaluator`
    (greedy search, raw scores). ``path``: anything :func:`resolve_checkpoint` takes (a checkpoint
    file, a train run folder, a Tune checkpoint / trial / experiment folder). ``overrides``:
    CLI-style config changes for the replay (e.g. ``"env.evaluator_env_num=1"``,
    ``"mcts.eval_num_simulations=50"``); the network keys must not change. ``seed`` (of evaluator
    env 0) defaults to the seed the training evaluator used. ``record_frames`` (default: Atari
    only) keeps up to ``max_frames`` network-input frames of env 0's first game; ``render`` keeps
    up to ``max_frames`` RGB frames of env 0's first episode as the env renders them
    (``rendered``; classic control needs pygame, ``pip install "gymnasium[classic-control]"``).
    A config that names a module to import (``module:name``) is refused unless the module is
    imported already or ``allow_imports`` (:mod:`lz_tune.trusted_imports`: a checkpoint is data).
    Raises CheckpointError (no or a bad checkpoint) or ConfigError (bad override, an env that
    cannot render) before any episode is played."""
    path, source = resolve_checkpoint(path)
    ck = load_checkpoint(path)
    refuse_untrusted_imports(ck.get("config") or {}, source=str(path), allow=allow_imports)
    try:
        cfg = Config.from_dict(ck["config"])
    except ConfigError as e:
        raise CheckpointError(f"{path}: the checkpoint's config does not load ({e})") from None
    if overrides:
        changed = cfg.with_overrides(list(overrides))
        network = [
            k for k in changed_keys(cfg.to_dict(), changed.to_dict()) if k.split(".")[0] in ("model", "policy_type")
        ]
        if network:
            raise ConfigError(f"{network[0]}: cannot change the network of a checkpoint for its evaluation")
        cfg = changed
    seed = cfg.seed + EVALUATOR_SEED_OFFSET if seed is None else seed
    if record_frames is None:
        record_frames = env_spec_for(cfg).is_atari
    env = make_env(cfg, num_envs=cfg.env.evaluator_env_num, seed=seed, mode="eval")
    try:
        try:
            screen = screen_recorder(env, max_frames, seed) if render else None
        except RenderError as e:
            raise ConfigError(str(e)) from None
        recorder = FrameRecorder(screen or env, max_frames) if record_frames else None
        # (FrameRecorder: a duck-typed VectorEnv pass-through)
        evaluator = Evaluator(cfg, seed=seed, device=device, env=recorder or screen or env)  # type: ignore[arg-type]
    except BaseException:
        env.close()
        raise
    try:
        try:
            train_iter = int(ck["learner"].get("train_iter", ck["counters"].get("train_iter", 0)))
            snapshot = WeightSnapshot(version=train_iter, train_iter=train_iter, weights=ck["learner"]["network"])
            evaluator.policy.load_weights(snapshot.weights)
        except (RuntimeError, KeyError) as e:  # the overrides or the file do not fit the network
            raise CheckpointError(
                f"{path}: its weights do not fit the network of its config "
                f"({type(e).__name__}: {str(e).splitlines()[0]})"
            ) from None
        result = evaluator.evaluate(snapshot, n_episodes=n_episodes, confirm_stop=False)
    finally:
        evaluator.close()
    frames = np.stack(recorder.frames) if recorder is not None and recorder.frames else None
    rendered = np.stack(screen.frames) if screen is not None and screen.frames else None
    return CheckpointEvaluation(
        path=path,
        eval=result,
        recorded=ck.get("eval"),
        counters=dict(ck["counters"]),
        config=cfg,
        frames=frames,
        rendered=rendered,
        rendered_episode=screen.episode if screen is not None else None,
        render_fps=screen.fps if screen is not None else None,
        source=source,
        seed=seed,
    )


def changed_keys(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts of the same shape."""
    """Dotted keys whose values differ between two nested config dicts."""
    out = []
    for k in a:
        key = f"{prefix}{k}"
        if isinstance(a[k], dict):
            out += changed_keys(a[k], b[k], key + ".")
        elif a[k] != b[k]:
            out.append(key)
    return out
