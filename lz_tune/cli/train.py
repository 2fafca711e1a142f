"""``python -m lz_tune train CONFIG [key=value ...]``: train one agent, sync or async.

    python -m lz_tune train zoo/classic_control/cartpole_muzero.py
    python -m lz_tune train zoo/atari/pong_muzero.py --async-pipeline
    python -m lz_tune train zoo/classic_control/cartpole_muzero.py --resume runs/cartpole_muzero_seed0_...

Reads top to bottom: the config (zoo module or LightZero file, overrides, flags), then
:func:`lz_tune.api.train` (the run folder, new or the one a ``--resume`` continues, and the driver
loop) with a live progress line until the run is done or a signal stops it
(:mod:`lz_tune.cli.signals`), and a one-line verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

from lz_tune.api import resume_candidates, shutdown_ray_if_started, start_driver, train
from lz_tune.checkpoint import CheckpointError, find_latest_checkpoint
from lz_tune.cli.common import CONFIG_HELP, POLICY_TYPE_HELP, config_from_args
from lz_tune.cli.signals import SIGNALS
from lz_tune.lightzero.flags import add_reference_flags

__all__ = ["add_parser", "run", "resolve_resume", "resume_candidates", "shutdown_ray_if_started", "start_driver"]


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``train`` sub-command's parser."""
    p = sub.add_parser(
        "train",
        help="train one agent (sync by default, --async-pipeline for Ray actors)",
        description="Train one agent from a zoo config module.",
    )
    p.add_argument("config", nargs="?", default=None, help=CONFIG_HELP)
    p.add_argument("--policy-type", default=None, metavar="TYPE", help=POLICY_TYPE_HELP)
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides, e.g. learner.learning_rate=3e-3 mcts.num_simulations=25",
    )
    p.add_argument("--exp-dir", default=None, help="experiment folder (default: runs/<exp_name>_seed<seed>_<time>)")
    p.add_argument(
        "--async-pipeline", action="store_true", help="collectors / evaluators as Ray actors overlapping the learner"
    )
    p.add_argument("--seed", type=int, default=None, help="override the config's seed")
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="checkpoint file, or an experiment folder (uses its ckpt/ckpt_latest.pt)",
    )
    p.add_argument(
        "--allow-imports",
        action="store_true",
        help="with --resume and no CONFIG: let the run's saved config import the modules it names "
        "(module:name); only for run folders you trust (SECURITY.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--address",
        default=None,
        help="Ray cluster to run the async pipeline's actors on "
        "(e.g. auto, or HEAD_IP:6379; default: $RAY_ADDRESS, else a local Ray)",
    )
    add_reference_flags(p, seed_and_async=False)  # --env, --max-env-step, --num-collector-actors, ...
    return p


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


def run(args: argparse.Namespace) -> int:
    """Train through :func:`lz_tune.api.train` with a live progress line and the CLI's signal
    handling; returns the exit code (0 done, 130 / 143 interrupted by Ctrl-C / SIGTERM)."""
    cfg = config_from_args(args)
    if args.address:  # the Ray back-end connects to it (lz_tune.pipeline.ray_backend)
        os.environ["RAY_ADDRESS"] = args.address
    resolve_resume(args.resume)  # a folder without checkpoints is refused before anything starts
    from lz_tune.progress import ProgressLine, format_progress

    progress = None if args.quiet else ProgressLine(cfg.exp_name)
    printer = (lambda s: None) if progress is None else progress.print
    started: list[Any] = []

    with SIGNALS.during_command() as signals:

        def on_start(driver: Any) -> None:
            started.append(driver)
            signals.install()  # again: starting Ray may have installed its own handler
            signals.check()

        def on_step(driver: Any, m: dict[str, Any]) -> None:
            if progress is not None:
                progress.update(
                    format_progress(
                        m,
                        trainable=driver.trainable,
                        max_env_step=cfg.max_env_step,
                        train_start_after_envsteps=cfg.learner.train_start_after_envsteps,
                    )
                )
            signals.check()

        def closing(what: str):
            if progress is not None:
                progress.close()
            if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # said before the workers are shut down
                name = "SIGTERM" if signals.sigterm_seen else "Ctrl-C"
                where = f" (continue with --resume {started[0].exp_dir})" if started else ""
                print(
                    f"interrupted ({name}): shutting down workers; checkpoints written so far are kept{where}",
                    file=sys.stderr,
                    flush=True,
                )
            return signals.deferred_while(what)

        try:
            signals.check()  # one that arrived before the handlers, or was swallowed on the way
            # slices no longer than the progress line's interval, so the line moves on time
            result = train(
                cfg,
                exp_dir=args.exp_dir,
                resume=args.resume,
                print_fn=printer,
                on_start=on_start,
                on_step=on_step,
                closing=closing,
                step_seconds=1.0 if progress is None else min(1.0, progress.interval_s),
            )
        except KeyboardInterrupt:  # (said, and the workers closed, in closing())
            return signals.exit_code
    best = result.best_eval_return
    best_text = "n/a" if best is None else f"{best:.1f}"
    verdict = "stop value reached" if result.stop_value_reached else f"stop value NOT reached ({result.stop_reason})"
    print(
        f"[{cfg.exp_name}] done: {verdict}; best eval return {best_text}; env_steps={result.env_steps} "
        f"train_iter={result.train_iter} wall={result.wall_time_s:.1f}s "
        f"env_steps/s={result.metrics['env_steps_per_s']:.0f}",
        flush=True,
    )
    return 0
