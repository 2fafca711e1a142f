"""Command line: ``python -m lz_tune train <config> [key=value ...]`` and ``python -m lz_tune tune <space>``.

    python -m lz_tune train zoo/classic_control/cartpole_muzero.py
    python -m lz_tune train zoo/atari/pong_muzero.py --async-pipeline
    python -m lz_tune train zoo/classic_control/cartpole_muzero.py learner.learning_rate=1e-3 --seed 3
    python -m lz_tune train zoo/classic_control/cartpole_muzero.py --resume runs/cartpole_muzero
    python -m lz_tune tune search_spaces/cartpole_muzero.py --num-samples 8 --scheduler asha --name cp
    python -m lz_tune tune search_spaces/cartpole_muzero.py --name cp --resume
    python -m lz_tune evaluate runs/cartpole_muzero --episodes 5 --video cartpole.gif
    python -m lz_tune config zoo/classic_control/cartpole_muzero.py mcts.num_simulations=7
    python -m lz_tune train path/to/lightzero_config.py --env ALE/Pong-v5 --seed 0 --async-pipeline
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from typing import Optional, Sequence


class _Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, containers, batch schedulers), handled like Ctrl-C."""


_SIGTERM_SEEN: list[int] = []
_SIGNALS_SEEN: list[int] = []
"""Every SIGINT / SIGTERM that arrived: the raise of the handler can be swallowed when the signal
lands inside a C callback (numba's compiler cache, via ctypes, prints "Exception ignored" and goes
on), so the training loop checks this list between steps too."""


def _raise_on_sigterm() -> None:
    """SIGTERM raises :class:`_Terminated`, SIGINT KeyboardInterrupt; both are recorded."""
    def on_term(signum, frame):
        _SIGTERM_SEEN.append(signum)
        _SIGNALS_SEEN.append(signum)
        raise _Terminated()

    def on_int(signum, frame):
        _SIGNALS_SEEN.append(signum)
        raise KeyboardInterrupt()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_int)
        if sys.unraisablehook is not _quiet_interrupts:
            _default_unraisablehook[:] = [sys.unraisablehook]
            sys.unraisablehook = _quiet_interrupts


_default_unraisablehook: list = []


def _quiet_interrupts(unraisable) -> None:
    """A signal's KeyboardInterrupt swallowed inside a C callback: no traceback (the signal is
    recorded and :func:`_check_signals` raises it); anything else as Python reports it."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    (_default_unraisablehook[0] if _default_unraisablehook else sys.__unraisablehook__)(unraisable)


def _check_signals() -> None:
    """Raise now for a signal whose exception was swallowed where it landed."""
    if _SIGNALS_SEEN:
        raise _Terminated() if _SIGTERM_SEEN else KeyboardInterrupt()


if __name__ == "__main__":  # a signal while torch & co load: one line, no traceback
    _raise_on_sigterm()
try:
    from lz_tune import cli_commands
    from lz_tune.checkpoint import CheckpointError, find_latest_checkpoint
    from lz_tune.config import Config, ConfigError
    from lz_tune.config_loader import load_config_module
    from lz_tune.lightzero.flags import add_reference_flags, given_flags
    from lz_tune.ray_auth import RayJoinError
except KeyboardInterrupt:
    print("interrupted before training started; nothing was written", file=sys.stderr)
    sys.exit(143 if _SIGTERM_SEEN else 130)


def _train_parser(sub) -> None:
    p = sub.add_parser("train", help="train one agent (sync by default, --async-pipeline for Ray actors)",
                       description="Train one agent from a zoo config module.")
    p.add_argument("config", help="zoo config: a .py file with make_config() or a dotted module name; or a "
                                  "LightZero config file (main_config / create_config; README: Coming from LightZero)")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. learner.learning_rate=3e-3 mcts.num_simulations=25")
    p.add_argument("--exp-dir", default=None,
                   help="experiment folder (default: runs/<exp_name>_seed<seed>_<time>)")
    p.add_argument("--async-pipeline", action="store_true",
                   help="collectors / evaluators as Ray actors overlapping the learner")
    p.add_argument("--seed", type=int, default=None, help="override the config's seed")
    p.add_argument("--resume", default=None, metavar="PATH",
                   help="checkpoint file, or an experiment folder (uses its ckpt/ckpt_latest.pt)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--address", default=None, help="Ray cluster to run the async pipeline's actors on "
                                                   "(e.g. auto, or HEAD_IP:6379; default: $RAY_ADDRESS, else a local Ray)")
    add_reference_flags(p, seed_and_async=False)  # --env, --max-env-step, --num-collector-actors, ...


def _tune_parser(sub) -> None:
    p = sub.add_parser("tune", help="hyperparameter search with Ray Tune over a search_spaces/ module",
                       description="Run (or resume) a Ray Tune search with MuZeroTrainable.")
    p.add_argument("space", help="search space: a .py file or dotted module defining `space` (and optionally "
                                 "`stop`, `scheduler()`)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="fixed values added to the space")
    p.add_argument("--num-samples", type=_positive_int, default=4, help="trials to sample (default 4)")
    p.add_argument("--scheduler", choices=["fifo", "asha", "pbt"], default=None,
                   help="default: the space module's scheduler() if it has one, else fifo")
    p.add_argument("--storage-path", default=os.path.expanduser("~/lz_results"), help="where experiments live")
    p.add_argument("--name", default=None, help="experiment name (default: the space module's name)")
    p.add_argument("--resume", action="store_true", help="continue the interrupted experiment NAME")
    p.add_argument("--stop-iters", type=_positive_int, default=None, help="stop each trial after N Tune iterations")
    p.add_argument("--num-cpus", type=_positive_int, default=None, help="CPUs Ray may use (default: all)")
    p.add_argument("--address", default=None, help="existing Ray cluster to run on (e.g. auto, or HEAD_IP:6379; "
                                                   "default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--max-failures", type=_non_negative_int, default=2,
                   help="retries of a failed trial from its last checkpoint (Tune's FailureConfig; default 2)")


_positive_int = cli_commands.int_at_least(1)
_non_negative_int = cli_commands.int_at_least(0)


def _load_space_module(path: str):
    import importlib
    import importlib.util

    if path.endswith(".py") or os.sep in path:
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: search space file not found")
        from lz_tune.lightzero import is_lightzero_config

        if is_lightzero_config(path):  # a LightZero config: trials of it as it is (key=value fixes more)
            return argparse.Namespace(space={"config": os.path.abspath(path)})
        spec = importlib.util.spec_from_file_location("_lz_space_" + os.path.basename(path)[:-3], path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(path)
    if not isinstance(getattr(module, "space", None), dict):
        raise ConfigError(f"{path}: a search space module must define a dict named `space`")
    if not isinstance(getattr(module, "metric", ""), str) or getattr(module, "mode", "max") not in ("max", "min"):
        raise ConfigError(f"{path}: `metric` must be a result key (str) and `mode` 'max' or 'min' "
                          f"(got {getattr(module, 'metric', None)!r}, {getattr(module, 'mode', None)!r})")
    return module


def _is_uri(path: str) -> bool:
    return "://" in path


def _storage_root(storage_path: str) -> str:
    """``--storage-path`` as Tune gets it: a URI (``s3://bucket/dir``, ``gs://...``,
    ``file:///abs/dir``) unchanged but for a trailing slash, a local folder made absolute."""
    if _is_uri(storage_path):
        return storage_path.rstrip("/")
    return os.path.abspath(os.path.expanduser(storage_path))


def cmd_tune(args: argparse.Namespace) -> int:
    import ray
    from ray import tune

    from lz_tune.config import parse_override
    from lz_tune.tune import EVAL_RETURN, MuZeroTrainable, check_cluster_resources, config_from_tune
    from lz_tune.ray_auth import join_ray

    module = _load_space_module(args.space)
    # what the search ranks trials by: the module's `metric` / `mode` (default: eval return, max)
    metric, mode = getattr(module, "metric", EVAL_RETURN), getattr(module, "mode", "max")
    space = dict(module.space) | dict(parse_override(o) for o in args.overrides)
    name = args.name or os.path.splitext(os.path.basename(args.space))[0].split(".")[-1]
    storage = _storage_root(args.storage_path)
    path = f"{storage}/{name}" if _is_uri(storage) else os.path.join(storage, name)
    # validate keys on one sample before anything starts or is written
    from ray.tune.search.sample import Domain

    config_from_tune({k: (v.sample() if isinstance(v, Domain) else v) for k, v in space.items()
                      if not isinstance(v, dict)})
    if args.scheduler == "pbt" and not args.resume and not any(isinstance(v, Domain) for v in space.values()):
        raise ConfigError("--scheduler pbt: the search space samples no key (all are fixed), so PBT has "
                          "nothing to perturb; leave at least one tune.* domain in the space")
    # can_restore BEFORE building a new Tuner on the same path (RAY_NOTES), and before Ray starts
    restorable = (_is_uri(path) or os.path.exists(path)) and tune.Tuner.can_restore(path)
    if args.resume and not restorable:
        raise ConfigError(f"--resume: no experiment to resume at {path}")
    if not args.resume and restorable:
        raise ConfigError(f"--name {name}: an experiment already exists at {path}; add --resume to "
                          "continue it or choose another --name")
    # Ray's token authentication stays as Ray sets it (on for the local cluster started here;
    # RAY_AUTH_MODE is the user's to change): lz_tune.ray_auth
    address = args.address or os.environ.get("RAY_ADDRESS")
    if address:  # an existing cluster: its nodes and resources (Tune's storage must be reachable from all)
        if args.num_cpus is not None:
            raise ConfigError("--num-cpus: not with --address / RAY_ADDRESS (the cluster has its own resources)")
        join_ray(address)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, configure_logging=False)
    try:
        check_cluster_resources(space)  # a trial that cannot be placed fails now, not PENDING forever
        if args.resume:
            tuner = tune.Tuner.restore(path, trainable=MuZeroTrainable, resume_errored=True)
        else:
            choice = args.scheduler or ("module" if hasattr(module, "scheduler") else "fifo")
            scheduler = (module.scheduler() if choice == "module" else
                         tune.schedulers.ASHAScheduler(time_attr="training_iteration") if choice == "asha" else
                         tune.schedulers.PopulationBasedTraining(
                             time_attr="training_iteration", perturbation_interval=5,
                             hyperparam_mutations={k: v for k, v in space.items() if isinstance(v, Domain)})
                         if choice == "pbt" else None)
            stop = dict(getattr(module, "stop", {}))
            if args.stop_iters:
                stop["training_iteration"] = args.stop_iters
            tuner = tune.Tuner(
                MuZeroTrainable, param_space=space,
                tune_config=tune.TuneConfig(metric=metric, mode=mode, num_samples=args.num_samples,
                                            scheduler=scheduler,
                                            # the module's search_alg() if it has one (default: Tune's
                                            # random / grid variant generator)
                                            search_alg=module.search_alg() if hasattr(module, "search_alg") else None,
                                            # PBT exploits keep the trial's actors via reset_config
                                            reuse_actors=isinstance(scheduler,
                                                                    tune.schedulers.PopulationBasedTraining)),
                run_config=tune.RunConfig(storage_path=storage, name=name, stop=stop,
                                          failure_config=tune.FailureConfig(max_failures=args.max_failures),
                                          # every trial ends with a checkpoint of its current
                                          # state, evaluated or not (lz_tune.tune.trainable)
                                          checkpoint_config=tune.CheckpointConfig(
                                              num_to_keep=3, checkpoint_score_attribute=EVAL_RETURN,
                                              checkpoint_score_order="max", checkpoint_at_end=True)))
        results = tuner.fit()
    finally:
        ray.shutdown()
    try:
        best = results.get_best_result(metric=metric, mode=mode, filter_nan_and_inf=True) \
            if len(results) else None
    except RuntimeError:  # no trial has evaluated yet (e.g. interrupted early)
        best = None
    print(f"experiment: {path}")
    print(f"trials: {len(results)}, errors: {len(results.errors)}")
    if best is not None and best.metrics:
        print(f"best {metric}: {best.metrics.get(metric)} (trial {best.path})")
    return 0 if not results.errors else 1


def build_config(config_path: str, overrides: Sequence[str], *, seed: Optional[int] = None,
                 async_pipeline: bool = False, flags: Optional[dict] = None) -> Config:
    """The config of ``train``: a zoo module or a LightZero file (its mapping report on stderr),
    the ``key=value`` overrides, then the flags (``--seed``, ``--async-pipeline``, ``--env``, ...)."""
    from lz_tune.config_loader import build_config as build

    flags = dict(flags or {})
    if seed is not None:
        flags["seed"] = seed
    if async_pipeline:
        flags["async_pipeline"] = True
    return build(config_path, overrides, flags, report=lambda line: print(line, file=sys.stderr, flush=True))


def _resolve_resume(path: Optional[str]) -> Optional[str]:
    if path is None:
        return None
    if os.path.isdir(path):
        found = find_latest_checkpoint(path)
        if found is None:
            raise CheckpointError(f"{path}: no ckpt/ckpt_latest.pt in this experiment folder")
        return str(found)
    return path


def _shutdown_ray_if_started() -> None:
    """After an interrupt while the driver was starting: stop what ray.init started."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """While training, SIGTERM raises KeyboardInterrupt (so the run closes its workers and exits
    with a clear line, keeping what is written), and so does SIGINT; yields a list that is
    non-empty once a SIGTERM arrived. The previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    _SIGTERM_SEEN.clear()
    _SIGNALS_SEEN.clear()
    _raise_on_sigterm()
    try:
        yield _SIGTERM_SEEN
    finally:
        if _RUNNING_AS_CLI:  # the process ends after this command: no handler to give back
            _exit_at_once_on_a_signal(143 if _SIGTERM_SEEN else 130 if _SIGNALS_SEEN else 0)
        else:
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGINT, previous[1])


_RUNNING_AS_CLI = False
"""True in ``python -m lz_tune``: once a command is over, a further signal ends the process at once
(the run's frames and workers are torn down after the command returned, which can take a while)."""


def _exit_at_once_on_a_signal(code: int) -> None:
    """After the command's close: a SIGTERM / Ctrl-C during the teardown that follows ends the
    process at once with ``code`` (or 143 / 130 after a clean run), rather than with the default
    handler's raw signal status or a traceback from a half-torn-down interpreter."""
    def exit_now(signum, frame):
        _flush_streams()
        os._exit(code if code else (143 if signum == signal.SIGTERM else 130))

    signal.signal(signal.SIGTERM, exit_now)
    signal.signal(signal.SIGINT, exit_now)


@contextlib.contextmanager
def _signals_deferred_while(what: str):
    """While the run closes (workers, Ray, logs: bounded by ``async_pipeline.shutdown_timeout_s``),
    a further SIGTERM / Ctrl-C (``timeout`` forwarding its own, a second Ctrl-C) prints a notice
    instead of raising: an exception there would cut the close short, skip the log and Ray
    shutdown, and could leave the process waiting on a thread that was never stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

    def notice(signum, frame):
        print(f"still {what}; it ends by itself (SIGKILL stops it at once)", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, notice)
    signal.signal(signal.SIGINT, notice)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def cmd_train(args: argparse.Namespace) -> int:
    cfg = build_config(args.config, args.overrides, flags=given_flags(args))
    if args.address:  # the Ray back-end connects to it (lz_tune.pipeline.ray_backend)
        os.environ["RAY_ADDRESS"] = args.address
    resume = _resolve_resume(args.resume)
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
    with _sigterm_as_interrupt() as received:
        try:
            _check_signals()  # one that arrived before the handlers, or was swallowed on the way
            driver = Driver(cfg, exp_dir=exp_dir, resume_from=resume, print_fn=printer)
            _raise_on_sigterm()  # again: starting Ray may have installed its own handler
            _check_signals()
            mode = "async" if cfg.async_pipeline.enabled else "sync"
            printer(f"[{cfg.exp_name}] {mode} pipeline, policy {cfg.policy_type}, env {cfg.env.env_id}, "
                    f"exp dir {exp_dir}")
            while not driver.done:
                # a slice no longer than the progress line's interval, so the line moves on time
                m = driver.step(max_seconds=1.0 if progress is None else min(1.0, progress.interval_s))
                if progress is not None:
                    progress.update(format_progress(m, trainable=driver.trainable,
                                                    train_start_after_envsteps=cfg.learner.train_start_after_envsteps))
                _check_signals()
            if progress is not None:
                progress.close()
            with _signals_deferred_while("closing the run"):
                driver.close()  # consumes finished work first: the final counters include it
        except KeyboardInterrupt:
            with _signals_deferred_while("shutting down workers"):
                if progress is not None:
                    progress.close()
                name = "SIGTERM" if received else "Ctrl-C"
                print(f"interrupted ({name}): shutting down workers; checkpoints written so far are kept"
                      + (f" (continue with --resume {exp_dir})" if driver is not None else ""), file=sys.stderr,
                      flush=True)
                if driver is not None:
                    driver.close()
                else:
                    _shutdown_ray_if_started()
            return 143 if received else 130
    m = driver.metrics()
    best = m.get("eval_reward_mean_best")
    best_text = "n/a" if best is None else f"{best:.1f}"
    verdict = ("stop value reached" if m["stop_value_reached"] else
               f"stop value NOT reached ({driver.stop.describe()})")
    print(f"[{cfg.exp_name}] done: {verdict}; best eval return {best_text}; env_steps={m['env_steps']} "
          f"train_iter={m['train_iter']} wall={m['wall_time_s']:.1f}s env_steps/s={m['env_steps_per_s']:.0f}",
          flush=True)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lz_tune",
                                     description="Train MuZero-family agents (sync or async on Ray).")
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _tune_parser(sub)
    cli_commands.add_parsers(parser, sub)  # evaluate, config; the zoo list in --help
    # overrides may come before or after flags: collect stray key=value tokens too
    args, extra = parser.parse_known_args(argv)
    stray = [e for e in extra if e.startswith("-") or "=" not in e]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "tune":
            return cmd_tune(args)
        if args.command == "evaluate":
            return cli_commands.cmd_evaluate(args)
        if args.command == "config":
            return cli_commands.cmd_config(args)
    except KeyboardInterrupt:  # while starting (imports, env probe): nothing to close yet
        print("interrupted before training started; nothing was written", file=sys.stderr)
        _shutdown_ray_if_started()
        return 143 if _SIGTERM_SEEN else 130
    except (ConfigError, CheckpointError, RayJoinError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        from lz_tune.pipeline.ray_backend import RAY_MISSING

        if str(e) != RAY_MISSING:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1


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
    _flush_streams()
    os._exit(code)


def _flush_streams() -> None:
    """Flush stdout and stderr before ``os._exit``; a closed or broken pipe, or a reentrant flush
    (a signal that landed inside a write), is skipped."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


if __name__ == "__main__":
    _RUNNING_AS_CLI = True
    try:
        exit_code = main()
    except KeyboardInterrupt:  # a further signal while the command restored its handlers
        exit_code = 143 if _SIGTERM_SEEN else 130
    _exit_at_once_on_a_signal(exit_code)
    _end_process(exit_code)
