"""The Python API: train, evaluate and load configs from a script or a notebook.

    import lz_tune

    cfg = lz_tune.load_config("cartpole_muzero", overrides=["evaluator.stop_value=195"])
    result = lz_tune.train(cfg, exp_dir="runs/quickstart")       # blocks until the stop value or the budget
    print(result.stop_value_reached, result.best_eval_return, result.env_steps)
    ev = lz_tune.evaluate(result.checkpoint, episodes=10, seed=0)
    print(ev.mean, ev.std, ev.returns)

``python -m lz_tune train`` and ``evaluate`` are thin callers of :func:`train` and
:func:`evaluate`: the same run folder, checkpoints, resume rules and errors. For the loop itself,
:class:`lz_tune.pipeline.Driver` is a context manager (``with Driver(cfg) as d: ...``) that
closes its actors and the Ray instance it started on any exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Optional, Sequence, Union

from lz_tune.config import Config, ConfigError

if TYPE_CHECKING:
    from lz_tune.pipeline.driver import Driver

__all__ = [
    "EvalResult",
    "RunResult",
    "config_of_run",
    "evaluate",
    "load_config",
    "resume_candidates",
    "shutdown_ray_if_started",
    "start_driver",
    "train",
]

PathLike = Union[str, "os.PathLike[str]"]


def load_config(
    source: Optional[PathLike] = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    env: Optional[str] = None,
    policy_type: Optional[str] = None,
    report: Optional[Callable[[str], None]] = None,
) -> Config:
    """A :class:`~lz_tune.config.Config` from a config source, then ``overrides``.

    ``source``: a zoo config's short name (``"cartpole_muzero"``), a ``.py`` file with
    ``make_config()``, a dotted module name (``"lz_tune.zoo.classic_control.cartpole_muzero"``), or
    a LightZero experiment config file. Without ``source``, ``env`` (a gymnasium / ALE / MinAtar /
    ``openspiel:`` id) gives the config derived from the env (:mod:`lz_tune.env_defaults`), as
    ``python -m lz_tune train --env ID`` does; ``policy_type`` picks the type there (with a
    ``source`` it is an override like any other). ``overrides``: ``["key=value", ...]`` strings as
    on the command line, or a mapping of dotted keys (``{"mcts.num_simulations": 25}``).
    ``report`` receives the lines that say what was derived or mapped (default: dropped).

    Raises :class:`~lz_tune.config.ConfigError` naming the key or the file on any bad input.
    """
    from lz_tune.config_loader import build_config, build_config_for_env

    strings = _override_strings(overrides)
    if source is None:
        if env is None:
            raise ConfigError("load_config: give a config source, or env=ENV_ID to derive one from the env")
        return build_config_for_env(env, strings, policy_type=policy_type, report=report)
    if policy_type is not None:
        strings.append(f"policy_type={policy_type!r}")
    cfg = build_config(os.fspath(source), strings, report=report)
    if env is not None:
        cfg = cfg.with_updates({"env.env_id": env})
    return cfg


def _override_strings(overrides: Sequence[str] | Mapping[str, Any]) -> list[str]:
    if isinstance(overrides, str):
        raise ConfigError(f"overrides: a list of key=value strings or a mapping, not the string {overrides!r}")
    if isinstance(overrides, Mapping):
        return [f"{k}={v!r}" for k, v in overrides.items()]
    return list(overrides)


@dataclass(frozen=True)
class RunResult:
    """What :func:`train` returns once the run is over (stop value, budget, or ``max_train_iter``)."""

    run_dir: Path
    """The run folder: ``config.json``, ``result.json``, ``tb/`` (TensorBoard), ``ckpt/``."""
    stop_value_reached: bool
    """An evaluation reached ``evaluator.stop_value`` (or the board games' ``stop_loss_rate``)."""
    stop_reason: str
    """Why training stopped, in words (``"stop value reached"``, ``"max_env_step reached"``, ...)."""
    best_eval_return: Optional[float]
    """Best mean return of an evaluation (None: no evaluation ran)."""
    last_eval_return: Optional[float]
    """Mean return of the last evaluation (None: no evaluation ran)."""
    env_steps: int
    """Training env steps collected (evaluation steps not counted)."""
    train_iter: int
    """Learner updates made."""
    wall_time_s: float
    """Seconds from the driver's start to the end of the run."""
    checkpoint: Optional[Path]
    """``ckpt/ckpt_latest.pt`` (weights, optimizer, counters; the replay buffer beside it), if written."""
    best_checkpoint: Optional[Path]
    """``ckpt/ckpt_best.pt``: the weights of the best evaluation, if written."""
    metrics: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The driver's final metrics (``Driver.metrics()``: every key the progress line and Tune see)."""


@dataclass(frozen=True)
class EvalResult:
    """What :func:`evaluate` returns: the returns of new greedy episodes with a checkpoint's weights
    (raw scores: no reward clipping, no episodic life)."""

    mean: float
    """Mean return over the episodes."""
    std: float
    """Standard deviation of the returns (population, as the training evaluator logs it)."""
    returns: tuple[float, ...]
    """Return of each episode, in the order the episodes ended."""
    episode_length_mean: float
    """Mean episode length (agent steps)."""
    num_episodes: int
    checkpoint: Path
    """The checkpoint file that was played."""
    train_iter: int
    """Learner updates behind the checkpoint's weights."""
    env_steps: Optional[int]
    """Training env steps at the checkpoint (None if it does not record them)."""
    match: Mapping[str, float] = field(default_factory=dict)
    """Two-player games: win / draw / loss rates against the configured opponent; else empty."""


def train(
    config: Union[Config, PathLike, None] = None,
    *,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    exp_dir: Optional[PathLike] = None,
    resume: Optional[PathLike] = None,
    async_pipeline: Optional[bool] = None,
    quiet: bool = True,
    allow_imports: bool = False,
    on_start: Optional[Callable[["Driver"], None]] = None,
    on_step: Optional[Callable[["Driver", dict[str, Any]], None]] = None,
    closing: Callable[[str], ContextManager[Any]] = lambda what: contextlib.nullcontext(),
    print_fn: Optional[Callable[[str], None]] = None,
    step_seconds: float = 1.0,
) -> RunResult:
    """Train one agent to its stop criterion and return a :class:`RunResult`.

    ``config``: a :class:`~lz_tune.config.Config`, or anything :func:`load_config` takes as its
    source; None with ``resume``: the run's own ``config.json``. ``overrides`` are applied on top
    (``["key=value"]`` or a mapping). ``exp_dir``: the run folder (default
    ``runs/<exp_name>_seed<seed>_<time>``; a folder that already holds checkpoints is refused unless
    ``resume`` names it). ``resume``: a run folder (its ``ckpt_latest.pt``, falling back to
    ``ckpt_best.pt`` when the newer one does not load) or a checkpoint file; the replay buffer is
    restored with it. ``async_pipeline``: True runs collectors and evaluators as Ray actors
    (``async_pipeline.enabled``); None keeps the config's setting. ``quiet=False`` prints the
    driver's lines (start, evaluations, notes). ``allow_imports``: with ``resume`` and no
    ``config``, let the run's saved config import the modules it names (only for run folders you
    trust; SECURITY.md).

    Hooks, for callers that drive a display (the CLI): ``on_start(driver)`` once the driver is up,
    ``on_step(driver, metrics)`` after each slice of about ``step_seconds`` (an exception raised there,
    e.g. KeyboardInterrupt, stops the run), ``closing(what)`` a context manager wrapped around
    closing the workers (the CLI defers signals there). ``print_fn`` replaces the printing of the
    driver's lines.

    Any exception (a diverged run, a full disk, Ctrl-C) closes the workers and the Ray instance the
    run started before it propagates; checkpoints written so far are kept.
    """
    from lz_tune.pipeline import Driver

    resume_path = None if resume is None else os.fspath(resume)
    cfg = _config_for_run(config, overrides, resume_path, allow_imports=allow_imports)
    if async_pipeline is not None:
        cfg = cfg.with_updates({"async_pipeline.enabled": bool(async_pipeline)})
    run_dir = _run_dir(cfg, exp_dir, resume_path)
    if print_fn is None:
        print_fn = (lambda s: None) if quiet else (lambda s: print(s, flush=True))
    candidates = resume_candidates(resume_path) if resume_path else []
    ray_was_up = _ray_is_up()  # a Ray instance the caller started is the caller's to shut down
    driver = None
    try:
        driver = start_driver(Driver, cfg, exp_dir=run_dir, candidates=candidates, print_fn=print_fn)
        if on_start is not None:
            on_start(driver)
        mode = "async" if cfg.async_pipeline.enabled else "sync"
        print_fn(f"[{cfg.exp_name}] {mode} pipeline, policy {cfg.policy_type}, env {cfg.env.env_id}, exp dir {run_dir}")
        while not driver.done:
            m = driver.step(max_seconds=step_seconds)
            if on_step is not None:
                on_step(driver, m)
        with closing("closing the run"):
            driver.close()  # consumes finished work first: the final counters include it
    except BaseException:
        with closing("shutting down workers"):
            if driver is not None:
                try:
                    driver.close()
                except Exception as e:  # the first error is the one to see
                    print(f"closing after the error: {type(e).__name__}: {e}", file=sys.stderr)
            elif not ray_was_up:
                shutdown_ray_if_started()
        raise
    return _run_result(driver, run_dir)


def _config_for_run(
    config: Union[Config, PathLike, None],
    overrides: Sequence[str] | Mapping[str, Any],
    resume: Optional[str],
    *,
    allow_imports: bool,
) -> Config:
    strings = _override_strings(overrides)
    if isinstance(config, Config):
        return config.with_overrides(strings) if strings else config
    if config is not None:
        return load_config(config, strings)
    if resume is None:
        raise ConfigError("train: give a config (a Config, a zoo name or a file), or resume=RUN_DIR")
    return config_of_run(resume, strings, allow_imports=allow_imports)


def config_of_run(
    resume: str,
    overrides: Sequence[str] = (),
    updates: Optional[Mapping[str, Any]] = None,
    *,
    allow_imports: bool = False,
) -> Config:
    """The config a run was started with (its ``config.json``, however it was built), then the
    ``key=value`` overrides, then ``updates`` (dotted keys). ``resume``: the run folder or a
    checkpoint file inside its ``ckpt/``. Modules the config names are imported only if already
    imported or ``allow_imports`` (:mod:`lz_tune.trusted_imports`)."""
    import json

    from lz_tune.run_folder import CONFIG_FILE
    from lz_tune.trusted_imports import refuse_untrusted_imports

    folder = resume if os.path.isdir(resume) else os.path.dirname(os.path.dirname(os.path.abspath(resume)))
    path = os.path.join(folder, CONFIG_FILE)
    try:
        with open(path) as f:
            saved = json.load(f)
        refuse_untrusted_imports(saved if isinstance(saved, dict) else {}, source=path, allow=allow_imports)
        cfg = Config.from_dict(saved)
    except FileNotFoundError:
        raise ConfigError(
            f"--resume {resume}: no {CONFIG_FILE} in {folder}; give the run's CONFIG (or --env)"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"--resume {resume}: {path} is not a config ({e}); give the run's CONFIG (or --env)"
        ) from None
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    return cfg.with_updates(dict(updates)) if updates else cfg


def _run_dir(cfg: Config, exp_dir: Optional[PathLike], resume: Optional[str]) -> str:
    """The run folder: ``exp_dir``; else the run folder ``resume`` names; else (a new run, or
    ``resume`` names a checkpoint file) a new ``runs/<exp_name>_seed<seed>_<time>``."""
    from lz_tune.checkpoint import find_latest_checkpoint

    if exp_dir is not None:
        run_dir = os.fspath(exp_dir)
    elif resume is not None and os.path.isdir(resume):
        run_dir = resume  # the run goes on in its own folder
    else:  # a new run, or a branch from a checkpoint file: a new folder
        run_dir = os.path.join("runs", f"{cfg.exp_name}_seed{cfg.seed}_{time.strftime('%Y%m%d-%H%M%S')}")
    if resume is None and os.path.isdir(run_dir) and find_latest_checkpoint(run_dir) is not None:
        raise ConfigError(
            f"exp_dir {run_dir}: holds checkpoints of an earlier run; continue it with "
            f"resume={run_dir!r} (--resume {run_dir}), or choose another exp_dir"
        )
    return run_dir


def resume_candidates(path: str) -> list[str]:
    """``resume=PATH``: a checkpoint file alone; a run folder: its ckpt_latest.pt, then its
    ckpt_best.pt (tried when the newer one or its replay buffer is damaged)."""
    from lz_tune.checkpoint import CheckpointError
    from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT

    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise CheckpointError(f"{path}: no such checkpoint file or run folder")
        return [path]
    ckpt = os.path.join(path, CKPT_DIR)
    found = [
        os.path.join(ckpt, name)
        for name in (LATEST_CHECKPOINT, BEST_CHECKPOINT)
        if os.path.isfile(os.path.join(ckpt, name))
    ]
    if not found:
        raise CheckpointError(f"{path}: no ckpt/ckpt_latest.pt in this experiment folder")
    return found


def start_driver(
    make: Callable[..., Any], cfg: Config, *, exp_dir: str, candidates: list[str], print_fn: Callable[[str], None]
) -> Any:
    """The Driver resumed from the first candidate checkpoint that loads (a damaged newer one is
    passed over, said and counted in ``restore/fallbacks``); a new run without candidates."""
    from lz_tune.checkpoint import CheckpointError

    if not candidates:
        return make(cfg, exp_dir=exp_dir, resume_from=None, print_fn=print_fn)
    for i, path in enumerate(candidates):
        try:
            driver = make(cfg, exp_dir=exp_dir, resume_from=path, print_fn=print_fn)
        except CheckpointError as e:
            if i + 1 == len(candidates):
                raise
            print(
                f"[{cfg.exp_name}] note: {path} does not restore ({e}); resuming from {candidates[i + 1]} instead",
                file=sys.stderr,
                flush=True,
            )
            continue
        driver.restore_report.fallbacks = i
        return driver
    raise AssertionError("unreachable")


def _ray_is_up() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and getattr(ray, "is_initialized", lambda: False)())


def shutdown_ray_if_started() -> None:
    """After an error or an interrupt while the driver was starting: stop what ray.init started."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()


def _run_result(driver: "Driver", run_dir: str) -> RunResult:
    from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT

    m = driver.metrics()
    last = driver.last_eval
    ckpt = Path(run_dir) / CKPT_DIR
    latest, best = ckpt / LATEST_CHECKPOINT, ckpt / BEST_CHECKPOINT
    best_return = m.get("eval_reward_mean_best")
    return RunResult(
        run_dir=Path(run_dir),
        stop_value_reached=bool(m["stop_value_reached"]),
        stop_reason="stop value reached" if m["stop_value_reached"] else driver.stop.describe(),
        best_eval_return=None if best_return is None else float(best_return),
        last_eval_return=None if last is None else float(last.reward_mean),
        env_steps=int(m["env_steps"]),
        train_iter=int(m["train_iter"]),
        wall_time_s=float(m["wall_time_s"]),
        checkpoint=latest if latest.is_file() else None,
        best_checkpoint=best if best.is_file() else None,
        metrics=dict(m),
    )


def evaluate(
    checkpoint: PathLike,
    *,
    episodes: Optional[int] = None,
    seed: Optional[int] = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    device: str = "cpu",
    allow_imports: bool = False,
) -> EvalResult:
    """Play ``episodes`` greedy evaluation episodes (default: the config's
    ``evaluator.n_evaluator_episode``) with a checkpoint's weights, as the training evaluator does.

    ``checkpoint``: a checkpoint file, a ``train`` run folder (its ``ckpt_best.pt``, else
    ``ckpt_latest.pt``), or a Tune checkpoint / trial / experiment folder (the best evaluated
    checkpoint). ``seed``: of evaluator env 0 (env i gets ``seed + i``; default: the training
    evaluator's seed). ``overrides``: config changes for the replay (``"mcts.eval_num_simulations=50"``,
    ``"env.evaluator_env_num=1"``; not the network's keys). ``allow_imports``: let the
    checkpoint's config import the modules it names (only for files you trust; SECURITY.md).

    Raises :class:`~lz_tune.checkpoint.CheckpointError` (no or a damaged checkpoint) or
    :class:`~lz_tune.config.ConfigError` (a bad override) before any episode is played.
    """
    from lz_tune.checkpoint_eval import evaluate_checkpoint

    run = evaluate_checkpoint(
        os.fspath(checkpoint),
        n_episodes=episodes,
        seed=seed,
        overrides=_override_strings(overrides),
        record_frames=False,
        device=device,
        allow_imports=allow_imports,
    )
    r = run.eval
    env_steps = run.counters.get("env_steps")
    return EvalResult(
        mean=float(r.reward_mean),
        std=float(r.reward_std),
        returns=tuple(float(x) for x in r.returns),
        episode_length_mean=float(r.episode_length_mean),
        num_episodes=int(r.num_episodes),
        checkpoint=Path(run.path),
        train_iter=int(r.train_iter),
        env_steps=None if env_steps is None else int(env_steps),
        match=dict(r.match),
    )
