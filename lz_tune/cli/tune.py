"""``python -m lz_tune tune SPACE [key=value ...]``: a Ray Tune search with MuZeroTrainable.

    python -m lz_tune tune search_spaces/cartpole_muzero.py --num-samples 8 --scheduler asha --name cp
    python -m lz_tune tune search_spaces/cartpole_muzero.py --name cp --resume

Reads top to bottom: the search space module (``space``, optional ``metric`` / ``mode`` / ``stop``
/ ``scheduler()`` / ``search_alg()``), one sampled config validated before anything starts, the
experiment folder (new, or the one ``--resume`` continues), Ray (local, or the cluster of
``--address``), the up-front check that a trial fits the cluster, then ``Tuner.fit`` and the best
trial.
"""

from __future__ import annotations

import argparse
import os

from lz_tune.cli.common import non_negative_int, positive_int
from lz_tune.config import ConfigError

__all__ = ["add_parser", "run", "load_space_module", "storage_root"]


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``tune`` sub-command's parser."""
    p = sub.add_parser(
        "tune",
        help="hyperparameter search with Ray Tune over a search_spaces/ module",
        description="Run (or resume) a Ray Tune search with MuZeroTrainable.",
    )
    p.add_argument(
        "space",
        help="search space: a short name (cartpole_muzero: a file of search_spaces/), a .py "
        "file or a dotted module defining `space` (and optionally `stop`, `scheduler()`)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="fixed values added to the space")
    p.add_argument("--num-samples", type=positive_int, default=4, help="trials to sample (default 4)")
    p.add_argument(
        "--scheduler",
        choices=["fifo", "asha", "pbt"],
        default=None,
        help="default: the space module's scheduler() if it has one, else fifo",
    )
    p.add_argument("--storage-path", default=os.path.expanduser("~/lz_results"), help="where experiments live")
    p.add_argument("--name", default=None, help="experiment name (default: the space module's name)")
    p.add_argument("--resume", action="store_true", help="continue the interrupted experiment NAME")
    p.add_argument("--stop-iters", type=positive_int, default=None, help="stop each trial after N Tune iterations")
    p.add_argument("--num-cpus", type=positive_int, default=None, help="CPUs Ray may use (default: all)")
    p.add_argument(
        "--address",
        default=None,
        help="existing Ray cluster to run on (e.g. auto, or HEAD_IP:6379; default: $RAY_ADDRESS, else a local Ray)",
    )
    p.add_argument(
        "--max-failures",
        type=non_negative_int,
        default=2,
        help="retries of a failed trial from its last checkpoint (Tune's FailureConfig; default 2)",
    )
    return p


def load_space_module(path: str):
    """A search space module (a .py file, a dotted name, or a short name: the file's name in
    :mod:`lz_tune.search_spaces`, the repository's ``search_spaces/``) checked for `space`,
    `metric`, `mode`; a LightZero config file becomes a space of that one config."""
    import importlib
    import importlib.util

    from lz_tune.config_loader import SEARCH_SPACES_PACKAGE, resolve_short_name

    if path.endswith(".py") or os.sep in path or "/" in path:
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
        name = resolve_short_name(path, SEARCH_SPACES_PACKAGE, what="search space") if path.isidentifier() else path
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
                raise  # the module exists but imports something missing: keep that error
            raise ConfigError(f"{path}: search space module not found (no module named {e.name!r})") from e
    if not isinstance(getattr(module, "space", None), dict):
        raise ConfigError(f"{path}: a search space module must define a dict named `space`")
    if not isinstance(getattr(module, "metric", ""), str) or getattr(module, "mode", "max") not in ("max", "min"):
        raise ConfigError(
            f"{path}: `metric` must be a result key (str) and `mode` 'max' or 'min' "
            f"(got {getattr(module, 'metric', None)!r}, {getattr(module, 'mode', None)!r})"
        )
    return module


def is_uri(path: str) -> bool:
    """A storage URI (``s3://``, ``gs://``, ``file://``), not a local path."""
    return "://" in path


def storage_root(storage_path: str) -> str:
    """``--storage-path`` as Tune gets it: a URI (``s3://bucket/dir``, ``gs://...``,
    ``file:///abs/dir``) unchanged but for a trailing slash, a local folder made absolute."""
    if is_uri(storage_path):
        return storage_path.rstrip("/")
    return os.path.abspath(os.path.expanduser(storage_path))


def run(args: argparse.Namespace) -> int:
    """Run or resume the search; returns the exit code (0: no trial errored)."""
    from lz_tune.pipeline.ray_backend import import_ray

    ray = import_ray()  # (a clear error for a missing or unsupported Ray)
    from ray import tune

    from lz_tune.config import parse_override
    from lz_tune.ray_auth import join_ray
    from lz_tune.tune import EVAL_RETURN, MuZeroTrainable, check_cluster_resources, config_from_tune

    module = load_space_module(args.space)
    # what the search ranks trials by: the module's `metric` / `mode` (default: eval return, max)
    metric, mode = getattr(module, "metric", EVAL_RETURN), getattr(module, "mode", "max")
    space = dict(module.space) | dict(parse_override(o) for o in args.overrides)
    # default name: the file's or the module's last name (cartpole_muzero for search_spaces/cartpole_muzero.py,
    # lz_tune.search_spaces.cartpole_muzero and the short name cartpole_muzero alike)
    name = args.name or (
        os.path.splitext(os.path.basename(args.space))[0]
        if args.space.endswith(".py")
        else args.space.rsplit(".", 1)[-1]
    )
    storage = storage_root(args.storage_path)
    path = f"{storage}/{name}" if is_uri(storage) else os.path.join(storage, name)
    # validate keys on one sample before anything starts or is written
    from ray.tune.search.sample import Domain

    config_from_tune(
        {k: (v.sample() if isinstance(v, Domain) else v) for k, v in space.items() if not isinstance(v, dict)}
    )
    if args.scheduler == "pbt" and not args.resume and not any(isinstance(v, Domain) for v in space.values()):
        raise ConfigError(
            "--scheduler pbt: the search space samples no key (all are fixed), so PBT has "
            "nothing to perturb; leave at least one tune.* domain in the space"
        )
    # can_restore BEFORE building a new Tuner on the same path (a new Tuner writes the experiment
    # state there, after which the old run no longer restores), and before Ray starts
    restorable = (is_uri(path) or os.path.exists(path)) and tune.Tuner.can_restore(path)
    if args.resume and not restorable:
        raise ConfigError(f"--resume: no experiment to resume at {path}")
    if not args.resume and restorable:
        raise ConfigError(
            f"--name {name}: an experiment already exists at {path}; add --resume to "
            "continue it or choose another --name"
        )
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
            scheduler = (
                module.scheduler()
                if choice == "module"
                else tune.schedulers.ASHAScheduler(time_attr="training_iteration")
                if choice == "asha"
                else tune.schedulers.PopulationBasedTraining(
                    time_attr="training_iteration",
                    perturbation_interval=5,
                    hyperparam_mutations={k: v for k, v in space.items() if isinstance(v, Domain)},
                )
                if choice == "pbt"
                else None
            )
            stop = dict(getattr(module, "stop", {}))
            if args.stop_iters:
                stop["training_iteration"] = args.stop_iters
            tuner = tune.Tuner(
                MuZeroTrainable,
                param_space=space,
                tune_config=tune.TuneConfig(
                    metric=metric,
                    mode=mode,
                    num_samples=args.num_samples,
                    scheduler=scheduler,
                    # the module's search_alg() if it has one (default: Tune's
                    # random / grid variant generator)
                    search_alg=module.search_alg() if hasattr(module, "search_alg") else None,
                    # PBT exploits keep the trial's actors via reset_config
                    reuse_actors=isinstance(scheduler, tune.schedulers.PopulationBasedTraining),
                ),
                run_config=tune.RunConfig(
                    storage_path=storage,
                    name=name,
                    stop=stop,
                    failure_config=tune.FailureConfig(max_failures=args.max_failures),
                    # every trial ends with a checkpoint of its current
                    # state, evaluated or not (lz_tune.tune.trainable)
                    checkpoint_config=tune.CheckpointConfig(
                        num_to_keep=3,
                        checkpoint_score_attribute=EVAL_RETURN,
                        checkpoint_score_order="max",
                        checkpoint_at_end=True,
                    ),
                ),
            )
        results = tuner.fit()
    finally:
        ray.shutdown()
    try:
        best = results.get_best_result(metric=metric, mode=mode, filter_nan_and_inf=True) if len(results) else None
    except RuntimeError:  # no trial has evaluated yet (e.g. interrupted early)
        best = None
    print(f"experiment: {path}")
    print(f"trials: {len(results)}, errors: {len(results.errors)}")
    if best is not None and best.metrics:
        print(f"best {metric}: {best.metrics.get(metric)} (trial {best.path})")
    return 0 if not results.errors else 1
