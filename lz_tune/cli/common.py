"""What the commands' parsers share: integer argument types and the zoo list of ``--help``.

Importing this module is cheap (no torch, no gymnasium): every parser is built from it before a
command runs; the commands import what they need when they run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["ZOO_DIR", "int_at_least", "positive_int", "non_negative_int", "zoo_configs", "zoo_epilog",
           "CONFIG_HELP", "POLICY_TYPE_HELP", "config_from_args"]

#: the zoo folder next to the package (a source checkout or an editable install)
ZOO_DIR = Path(__file__).resolve().parents[2] / "zoo"

CONFIG_HELP = ("zoo config: a .py file with make_config() or a dotted module name; or a LightZero config file "
               "(main_config / create_config; README: Coming from LightZero); leave it out and give --env ENV_ID "
               "to derive a config from the env")

POLICY_TYPE_HELP = ("policy_type (muzero, efficientzero, gumbel_muzero, sampled_muzero, ...); with --env and no "
                    "config: which type the derived config is for")


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


def zoo_configs() -> list[str]:
    """The zoo config files (``zoo/*/*.py``), as paths usable on the command line here: relative
    to the current folder when the zoo is inside it, else absolute."""
    files = sorted(p for p in ZOO_DIR.glob("*/*.py") if not p.name.startswith("_"))
    cwd = Path.cwd().resolve()
    return [str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p) for p in files]


def zoo_epilog() -> str:
    """The ``--help`` epilog listing the zoo configs."""
    configs = zoo_configs()
    if not configs:
        return f"zoo configs: none found (looked in {ZOO_DIR})"
    return ("zoo configs (CONFIG of train / config; a dotted module name such as "
            "zoo.classic_control.cartpole_muzero works too):\n" + "\n".join(f"  {c}" for c in configs))


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
        return _config_of_run(args.resume, args.overrides, given_flags(args),
                              allow_imports=getattr(args, "allow_imports", False))
    if args.config is None:
        if not getattr(args, "env", None):
            raise ConfigError("CONFIG: give a config file, or --env ENV_ID to derive a config from the env")
        return build_config_for_env(args.env, args.overrides, given_flags(args), policy_type=policy_type,
                                    report=report)
    overrides = list(args.overrides) + ([f"policy_type={policy_type!r}"] if policy_type else [])
    return build_config(args.config, overrides, given_flags(args), report=report)


def _config_of_run(resume: str, overrides, flags, *, allow_imports: bool = False):
    """``train --resume RUN`` with no config: the run's own ``config.json`` (what it was started
    with, however it was built), then the overrides and flags. Modules it names are imported only
    if already imported or ``allow_imports`` (:mod:`lz_tune.trusted_imports`)."""
    import json
    import os

    from lz_tune.config import Config, ConfigError
    from lz_tune.lightzero.flags import flag_updates
    from lz_tune.run_folder import CONFIG_FILE

    folder = resume if os.path.isdir(resume) else os.path.dirname(os.path.dirname(os.path.abspath(resume)))
    path = os.path.join(folder, CONFIG_FILE)
    from lz_tune.trusted_imports import refuse_untrusted_imports

    try:
        with open(path) as f:
            saved = json.load(f)
        refuse_untrusted_imports(saved if isinstance(saved, dict) else {}, source=path, allow=allow_imports)
        cfg = Config.from_dict(saved)
    except FileNotFoundError:
        raise ConfigError(f"--resume {resume}: no {CONFIG_FILE} in {folder}; give the run's CONFIG (or --env)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--resume {resume}: {path} is not a config ({e}); give the run's CONFIG (or --env)") from None
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    updates = flag_updates(flags)
    return cfg.with_updates(updates) if updates else cfg
