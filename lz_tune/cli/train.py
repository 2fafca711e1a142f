"""``python -m lz_tune train CONFIG [key=value ...]``: train one agent, sync or async.

    python -m lz_tune train zoo/classic_control/cartpole_muzero.py
    python -m lz_tune train zoo/atari/pong_muzero.py --async-pipeline
    python -m lz_tune train zoo/classic_control/cartpole_muzero.py --resume runs/cartpole_muzero_seed0_...

Reads top to bottom: the config (zoo module or LightZero file, overrides, flags), the run folder
(new, or the one a ``--resume`` continues), then the driver loop with a live progress line until
the run is done or a signal stops it (:mod:`lz_tune.cli.signals`), and a one-line verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Optional

from lz_tune.checkpoint import CheckpointError, find_latest_checkpoint
from lz_tune.cli.common import CONFIG_HELP, POLICY_TYPE_HELP, config_from_args
from lz_tune.cli.signals import SIGNALS
from lz_tune.config import ConfigError
from lz_tune.lightzero.flags import add_reference_flags
from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT

__all__ = ["add_parser", "run", "resolve_resume"]


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``train`` sub-command's parser."""
    p = sub.add_parser("train", help="train one agent (sync by default, --async-pipeline for Ray actors)",
                       description="Train one agent from a zoo config module.")
    p.add_argument("config", nargs="?", default=None, help=CONFIG_HELP)
    p.add_argument("--policy-type", default=None, metavar="TYPE", help=POLICY_TYPE_HELP)
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. learner.learning_rate=3e-3 mcts.num_simulations=25")
    p.add_argument("--exp-dir", default=None,
                   help="experiment folder (default: runs/<exp_name>_seed<seed>_<time>)")
    p.add_argument("--async-pipeline", action="store_true",
                   help="collectors / evaluators as Ray actors overlapping the learner")
    p.add_argument("--seed", type=int, default=None, help="override the config's seed")
    p.add_argument("--resume", default=None, metavar="PATH",
                   help="checkpoint file, or an experiment folder (uses its ckpt/ckpt_latest.pt)")
    p.add_argument("--allow-imports", action="store_true",
                   help="with --resume and no CONFIG: let the run's saved config import the modules it names "
                        "(module:name); only for run folders you trust (SECURITY.md)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--address", default=None, help="Ray cluster to run the async pipeline's actors on "
                                                   "(e.g. auto, or HEAD_IP:6379; default: $RAY_ADDRESS, else a local Ray)")
    add_reference_flags(p, seed_and_async=False)  # --env, --max-env-step, --num-collector-actors, ...
    return p


def resume_candidates(path: str) -> list[str]:
    """``--resume PATH``: a checkpoint file alone; an experiment folder: its ckpt_latest.pt, then
    its ckpt_best.pt (tried when the newer one or its replay buffer is damaged)."""
    if not os.path.isdir(path):
        return [path]
    ckpt = os.path.join(path, CKPT_DIR)
    found = [os.path.join(ckpt, name) for name in (LATEST_CHECKPOINT, BEST_CHECKPOINT)
             if os.path.isfile(os.path.join(ckpt, name))]
    if not found:
        raise CheckpointError(f"{path}: no ckpt/ckpt_latest.pt in this experiment folder")
    return found


def start_driver(make: Callable[..., Any], cfg: Any, *, exp_dir: str, candidates: list[str],
                 print_fn: Callable[[str], None]) -> Any:
    """The Driver resumed from the first candidate checkpoint that loads (a damaged newer one is
    passed over, said and counted in ``restore/fallbacks``); a new run without candidates."""
    if not candidates:
        return make(cfg, exp_dir=exp_dir, resume_from=None, print_fn=print_fn)
    for i, path in enumerate(candidates):
        try:
            driver = make(cfg, exp_dir=exp_dir, resume_from=path, print_fn=print_fn)
        except CheckpointError as e:
            if i + 1 == len(candidates):
                raise
            print(f"[{cfg.exp_name}] note: {path} does not restore ({e}); resuming from {candidates[i + 1]} instead",
                  file=sys.stderr, flush=True)
            continue
        driver.restore_report.fallbacks = i
        return driver
    raise AssertionError("unreachable")


def resolve_resume(path: Optional[str]) -> Optional[str]:
    """``--resume PATH``: a checkpoint file as it is; an experiment folder: its latest checkpoint."""
    if path is None:
        return None
    if os.path.isdir(path):
        found = find_latest_checkpoint(path)
        if found is None:
            raise CheckpointError(f"{path}: no ckpt/ckpt_latest.pt in this experiment folder")
        return str(found)
    return path


def shutdown_ray_if_started() -> None:
    """After an interrupt while the driver was starting: stop what ray.init started."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()


def run(args: argparse.Namespace) -> int:
    """Train; returns the exit code (0 done, 130 / 143 interrupted by Ctrl-C / SIGTERM)."""
    cfg = config_from_args(args)
    if args.address:  # the Ray back-end connects to it (lz_tune.pipeline.ray_backend)
        os.environ["RAY_ADDRESS"] = args.address
    resume = resolve_resume(args.resume)
    exp_dir = args.exp_dir or (os.path.dirname(os.path.dirname(resume)) if resume and args.resume and
                               os.path.isdir(args.resume) else None)
    if exp_dir is None:
        exp_dir = os.path.join("runs", f"{cfg.exp_name}_seed{cfg.seed}_{time.strftime('%Y%m%d-%H%M%S')}")
    if resume is None and os.path.isdir(exp_dir) and find_latest_checkpoint(exp_dir) is not None:
        raise ConfigError(f"--exp-dir {exp_dir}: holds checkpoints of an earlier run; continue it with "
                          f"--resume {exp_dir}, or choose another --exp-dir")
    from lz_tune.pipeline import Driver
    from lz_tune.progress import ProgressLine, format_progress

    progress = None if args.quiet else ProgressLine(cfg.exp_name)
    printer = (lambda s: None) if progress is None else progress.print
    driver = None
    with SIGNALS.during_command() as signals:
        try:
            signals.check()  # one that arrived before the handlers, or was swallowed on the way
            driver = start_driver(Driver, cfg, exp_dir=exp_dir, print_fn=printer,
                                  candidates=resume_candidates(args.resume) if args.resume else [])
            signals.install()  # again: starting Ray may have installed its own handler
            signals.check()
            mode = "async" if cfg.async_pipeline.enabled else "sync"
            printer(f"[{cfg.exp_name}] {mode} pipeline, policy {cfg.policy_type}, env {cfg.env.env_id}, "
                    f"exp dir {exp_dir}")
            while not driver.done:
                # a slice no longer than the progress line's interval, so the line moves on time
                m = driver.step(max_seconds=1.0 if progress is None else min(1.0, progress.interval_s))
                if progress is not None:
                    progress.update(format_progress(m, trainable=driver.trainable,
                                                    train_start_after_envsteps=cfg.learner.train_start_after_envsteps))
                signals.check()
            if progress is not None:
                progress.close()
            with signals.deferred_while("closing the run"):
                driver.close()  # consumes finished work first: the final counters include it
        except KeyboardInterrupt:
            with signals.deferred_while("shutting down workers"):
                if progress is not None:
                    progress.close()
                name = "SIGTERM" if signals.sigterm_seen else "Ctrl-C"
                print(f"interrupted ({name}): shutting down workers; checkpoints written so far are kept"
                      + (f" (continue with --resume {exp_dir})" if driver is not None else ""), file=sys.stderr,
                      flush=True)
                if driver is not None:
                    driver.close()
                else:
                    shutdown_ray_if_started()
            return signals.exit_code
        except Exception:  # a run that stops with an error (diverged, disk full, ...) still closes its workers
            with signals.deferred_while("shutting down workers"):
                if progress is not None:
                    progress.close()
                if driver is not None:
                    try:
                        driver.close()
                    except Exception as e:
                        print(f"closing after the error: {type(e).__name__}: {e}", file=sys.stderr)
                else:
                    shutdown_ray_if_started()
            raise
    m = driver.metrics()
    best = m.get("eval_reward_mean_best")
    best_text = "n/a" if best is None else f"{best:.1f}"
    verdict = ("stop value reached" if m["stop_value_reached"] else
               f"stop value NOT reached ({driver.stop.describe()})")
    print(f"[{cfg.exp_name}] done: {verdict}; best eval return {best_text}; env_steps={m['env_steps']} "
          f"train_iter={m['train_iter']} wall={m['wall_time_s']:.1f}s env_steps/s={m['env_steps_per_s']:.0f}",
          flush=True)
    return 0
