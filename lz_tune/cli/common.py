"""What the commands' parsers share: integer argument types and the zoo list of ``--help``.

Importing this module is cheap (no torch, no gymnasium): every parser is built from it before a
command runs; the commands import what they need when they run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

__all__ = [
    "ZOO_DIR",
    "int_at_least",
    "positive_int",
    "non_negative_int",
    "zoo_configs",
    "zoo_epilog",
    "CONFIG_HELP",
    "POLICY_TYPE_HELP",
    "config_from_args",
]


def _zoo_dir() -> Path:
    """The folder of the :mod:`lz_tune.zoo` package: the repository's ``zoo/`` in an editable
    install, ``site-packages/lz_tune/zoo`` in a wheel."""
    spec = importlib.util.find_spec("lz_tune.zoo")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]).resolve() if locations else Path(__file__).resolve().parents[2] / "zoo"


#: the zoo's folder, located through the lz_tune.zoo package
ZOO_DIR = _zoo_dir()

CONFIG_HELP = (
    "zoo config: a short name (cartpole_muzero), a .py file with make_config() or a dotted module name "
    "(lz_tune.zoo.classic_control.cartpole_muzero); or a LightZero config file (main_config / "
    "create_config; docs/coming_from_lightzero.md); leave it out and give --env ENV_ID to derive a "
    "config from the env"
)

POLICY_TYPE_HELP = (
    "policy_type (muzero, efficientzero, gumbel_muzero, sampled_muzero, ...); with --env and no "
    "config: which type the derived config is for"
)


def int_at_least(minimum: int):
    """argparse type: an integer >= ``minimum`` (a clear message otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum} (got {value})")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def _zoo_files() -> list[tuple[str, Path]]:
    """(short name, file) of each zoo config (the :mod:`lz_tune.zoo` package's ``*/*.py``)."""
    from lz_tune.config_loader import ZOO_PACKAGE, named_modules

    return [
        (m.name, m.path.resolve())
        for m in named_modules(ZOO_PACKAGE)
        if m.module.count(".") == ZOO_PACKAGE.count(".") + 2
    ]


def _usable_here(path: Path) -> str:
    """``path`` relative to the current folder when it is inside it, else absolute."""
    cwd = Path.cwd().resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def zoo_configs() -> list[str]:
    """The zoo config files (``zoo/*/*.py``), as paths usable on the command line here: relative
    to the current folder when the zoo is inside it, else absolute."""
    return [_usable_here(p) for _, p in _zoo_files()]


def zoo_epilog() -> str:
    """The ``--help`` epilog listing the zoo configs: each one's short name and file."""
    files = _zoo_files()
    if not files:
        return f"zoo configs: none found (looked in {ZOO_DIR})"
    width = max(len(name) for name, _ in files) + 2
    return (
        "zoo configs (CONFIG of train / config): the short name, the file, or the dotted module\n"
        "(lz_tune.zoo.classic_control.cartpole_muzero):\n"
        + "\n".join(f"  {name:<{width}}{_usable_here(path)}" for name, path in files)
    )


def config_from_args(args: argparse.Namespace):
    """The Config of ``train`` / ``config``: ``args.config`` (a zoo module or a LightZero file, its
    mapping report on stderr), the ``key=value`` overrides, then the flags (``--seed``, ``--env``,
    ``--async-pipeline``, ...). With no config file and ``--env ENV_ID``: the config derived from the
    env (:mod:`lz_tune.env_defaults`), its choices printed on stderr; with neither but ``--resume
    RUN``: the run's own ``config.json``."""
    from lz_tune.config import ConfigError
    from lz_tune.config_loader import build_config, build_config_for_env
    from lz_tune.lightzero.flags import given_flags

    report = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.config is not None and "=" in args.config and not Path(args.config).exists():
        args.overrides = [args.config, *args.overrides]  # `train --env X key=value`: no config file
        args.config = None
    policy_type = getattr(args, "policy_type", None)
    if args.config is None and not getattr(args, "env", None) and getattr(args, "resume", None):
        return _config_of_run(
            args.resume, args.overrides, given_flags(args), allow_imports=getattr(args, "allow_imports", False)
        )
    if args.config is None:
        if not getattr(args, "env", None):
            raise ConfigError("CONFIG: give a config file, or --env ENV_ID to derive a config from the env")
        return build_config_for_env(args.env, args.overrides, given_flags(args), policy_type=policy_type, report=report)
    overrides = list(args.overrides) + ([f"policy_type={policy_type!r}"] if policy_type else [])
    return build_config(args.config, overrides, given_flags(args), report=report)


def _config_of_run(resume: str, overrides, flags, *, allow_imports: bool = False):
    """``train --resume RUN`` with no config: the run's own ``config.json`` (what it was started
    with, however it was built), then the overrides and flags (:func:`lz_tune.api.config_of_run`)."""
    from lz_tune.api import config_of_run
    from lz_tune.lightzero.flags import flag_updates

    return config_of_run(resume, overrides, flag_updates(flags), allow_imports=allow_imports)
