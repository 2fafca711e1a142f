"""What the commands' parsers share: integer argument types and the zoo list of ``--help``.

Importing this module is cheap (no torch, no gymnasium): every parser is built from it before a
command runs; the commands import what they need when they run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["ZOO_DIR", "int_at_least", "positive_int", "non_negative_int", "zoo_configs", "zoo_epilog",
           "CONFIG_HELP", "config_from_args"]

#: the zoo folder next to the package (a source checkout or an editable install)
ZOO_DIR = Path(__file__).resolve().parents[2] / "zoo"

CONFIG_HELP = ("zoo config: a .py file with make_config() or a dotted module name; or a LightZero config file "
               "(main_config / create_config; README: Coming from LightZero)")


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
    ``--async-pipeline``, ...)."""
    from lz_tune.config_loader import build_config
    from lz_tune.lightzero.flags import given_flags

    return build_config(args.config, args.overrides, given_flags(args),
                        report=lambda line: print(line, file=sys.stderr, flush=True))
