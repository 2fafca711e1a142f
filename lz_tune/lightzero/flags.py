"""LightZero's command-line flags on lz-tune's ``train`` and ``config`` commands.

LightZero's Atari segment / async config scripts take ``--env``, ``--seed``, ``--max-env-step``,
``--async-pipeline`` and the async keys as flags (``--num-collector-actors``,
``--max-policy-lag``, ...). lz-tune takes the same flags, plus one for every other
``async_pipeline.*`` key, for any config (a zoo module or a LightZero file): each is a shorthand
for an override (``--env X`` is ``env.env_id=X``), applied after the ``key=value`` overrides. A
LightZero file whose ``main()`` takes such a flag gets it there too (as its own command line
would pass it), so everything ``main()`` derives from it (the action count of an Atari game, the
experiment name) follows.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Mapping

from lz_tune.config import AsyncPipelineConfig

__all__ = ["add_reference_flags", "given_flags", "flag_updates", "ASYNC_FLAG_KEYS"]

#: async_pipeline keys that are flags (``enabled`` is ``--async-pipeline``)
ASYNC_FLAG_KEYS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(AsyncPipelineConfig) if f.name != "enabled" and not f.name.startswith("_")
)
_TOP_LEVEL = {
    "env": "env.env_id",
    "seed": "seed",
    "max_env_step": "max_env_step",
    "async_pipeline": "async_pipeline.enabled",
}


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _arg_type(annotation: Any) -> dict[str, Any]:
    """argparse keywords for an AsyncPipelineConfig field's annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return {"choices": list(typing.get_args(annotation))}
    base = args[0] if args else annotation
    return {"type": _bool if base is bool else base, "metavar": {bool: "BOOL", int: "N", float: "X"}.get(base, "V")}


def add_reference_flags(parser: argparse.ArgumentParser, *, seed_and_async: bool) -> None:
    """Add the flags to ``parser`` (``seed_and_async``: also ``--seed`` and ``--async-pipeline``,
    for a parser that does not have them yet)."""
    group = parser.add_argument_group(
        "LightZero's flags",
        "as LightZero's Atari async configs take them; each is a shorthand for an override "
        "(--env X is env.env_id=X, --num-collector-actors N is "
        "async_pipeline.num_collector_actors=N)",
    )
    group.add_argument("--env", default=None, metavar="ENV_ID", help="env.env_id (e.g. ALE/Pong-v5)")
    group.add_argument("--max-env-step", type=int, default=None, metavar="N", help="max_env_step")
    if seed_and_async:
        group.add_argument("--seed", type=int, default=None, help="seed")
        group.add_argument("--async-pipeline", action="store_true", help="async_pipeline.enabled=True")
    hints = typing.get_type_hints(AsyncPipelineConfig)
    for name in ASYNC_FLAG_KEYS:
        group.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            default=None,
            help=f"async_pipeline.{name}",
            **_arg_type(hints[name]),
        )


def given_flags(args: argparse.Namespace) -> dict[str, Any]:
    """LightZero flags the command line gave, by argparse dest name (``--async-pipeline``
    only when given)."""
    names = (*_TOP_LEVEL, *ASYNC_FLAG_KEYS)
    flags = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if not flags.get("async_pipeline"):
        flags.pop("async_pipeline", None)
    return flags


def flag_updates(flags: Mapping[str, Any]) -> dict[str, Any]:
    """``{dotted config key: value}`` for the given flags."""
    return {_TOP_LEVEL.get(name, f"async_pipeline.{name}"): value for name, value in flags.items()}
