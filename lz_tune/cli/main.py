"""``python -m lz_tune <command>``: the parser of every command, the dispatch, and the exit codes.

Commands, one module each (:mod:`lz_tune.cli.train`, :mod:`~lz_tune.cli.tune`,
:mod:`~lz_tune.cli.evaluate`, :mod:`~lz_tune.cli.config`). Exit codes: 0 done, 1 a Tune trial
errored, 2 a bad input (``error: ...`` on stderr: config, checkpoint, Ray cluster, Ray missing),
130 / 143 interrupted by Ctrl-C / SIGTERM (:mod:`lz_tune.cli.signals`).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from typing import Optional

from lz_tune.checkpoint import CheckpointError
from lz_tune.cli import config as config_command
from lz_tune.cli import evaluate as evaluate_command
from lz_tune.cli import export as export_command
from lz_tune.cli import train as train_command
from lz_tune.cli import tune as tune_command
from lz_tune.cli import verify as verify_command
from lz_tune.cli.common import zoo_epilog
from lz_tune.cli.signals import SIGNALS, flush_streams
from lz_tune.config import ConfigError
from lz_tune.extras import MissingExtraError
from lz_tune.pipeline.driver import DiskFullError, TrainingDivergedError
from lz_tune.ray_auth import RayJoinError
from lz_tune.run_folder import RunFolderInUseError

__all__ = ["main", "build_parser", "run_as_process"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m lz_tune``: train, tune, evaluate, config, verify, export; the zoo list in --help."""
    parser = argparse.ArgumentParser(
        prog="python -m lz_tune", description="Train MuZero-family agents (sync or async on Ray)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    epilog = zoo_epilog()
    for p in (parser, train_command.add_parser(sub)):
        p.epilog = epilog
        p.formatter_class = argparse.RawDescriptionHelpFormatter
    tune_command.add_parser(sub)
    evaluate_command.add_parser(sub)
    config_command.add_parser(sub, epilog=epilog)
    verify_command.add_parser(sub)
    export_command.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default: the command line) and run the command; returns the exit code."""
    parser = build_parser()
    # overrides may come before or after flags: collect stray key=value tokens too
    args, extra = parser.parse_known_args(argv)
    stray = [e for e in extra if e.startswith("-") or "=" not in e]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    commands = {
        "train": train_command,
        "tune": tune_command,
        "evaluate": evaluate_command,
        "config": config_command,
        "verify": verify_command,
        "export": export_command,
    }
    try:
        return commands[args.command].run(args)
    except KeyboardInterrupt:  # while starting (imports, env probe): nothing to close yet
        print("interrupted before training started; nothing was written", file=sys.stderr)
        train_command.shutdown_ray_if_started()
        return SIGNALS.exit_code
    except (ConfigError, CheckpointError, RayJoinError, RunFolderInUseError, MissingExtraError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingDivergedError as e:  # (the run's checkpoints so far stay: finite weights)
        print(f"error: training diverged: {e}", file=sys.stderr)
        return 1
    except DiskFullError as e:
        print(f"error: disk full: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        from lz_tune.pipeline.ray_backend import RAY_MISSING, UnsupportedRayError

        if str(e) != RAY_MISSING and not isinstance(e, UnsupportedRayError):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


def run_as_process() -> None:
    """``python -m lz_tune``: run :func:`main`, then end the process (never returns)."""
    SIGNALS.running_as_cli = True
    try:
        exit_code = main()
    except KeyboardInterrupt:  # a further signal while the command restored its handlers
        exit_code = SIGNALS.exit_code
    SIGNALS.exit_at_once_on_a_signal(exit_code)
    _end_process(exit_code)


def _end_process(code: int) -> None:
    """End the CLI process the way ``sys.exit`` would (non-daemon threads joined, ``atexit``
    handlers run: Ray, logging, tensorboard writers), then skip the interpreter's own teardown: it
    resets the signal handlers to the default first, so a SIGTERM during its slow part (freeing
    torch's and Ray's modules) would kill the process with a raw signal status after a clean close."""
    import atexit

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    flush_streams()
    os._exit(code)
