"""``python -m lz_tune config CONFIG [key=value ...]``: every config field after the overrides and
flags, with its value, type, default and documentation, grouped by section.

    python -m lz_tune config zoo/classic_control/cartpole_muzero.py mcts.num_simulations=7
    python -m lz_tune config zoo/atari/pong_muzero.py --changed
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

from lz_tune.cli.common import CONFIG_HELP, POLICY_TYPE_HELP, config_from_args

__all__ = ["add_parser", "run", "describe_config"]


def add_parser(sub, *, epilog: str) -> argparse.ArgumentParser:
    """The ``config`` sub-command's parser (``epilog``: the zoo list)."""
    p = sub.add_parser(
        "config",
        help="print every config field: value, type, default and its documentation",
        description="Print every field of a zoo config (dotted key) after the overrides, with\nits "
        "type, its default and its documentation, grouped by section.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog,
    )
    p.add_argument("config", nargs="?", default=None, help=CONFIG_HELP)
    p.add_argument("--policy-type", default=None, metavar="TYPE", help=POLICY_TYPE_HELP)
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, e.g. mcts.num_simulations=7")
    p.add_argument(
        "--changed", action="store_true", help="only the fields whose value differs from the dataclass default"
    )
    from lz_tune.lightzero.flags import add_reference_flags

    add_reference_flags(p, seed_and_async=True)  # as train takes them
    return p


def _field_docs(cls: type) -> dict[str, str]:
    """The docstring below each field of a config dataclass (read from its source)."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source (frozen app, REPL class)
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for stmt, nxt in zip(body, body[1:]):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _type_text(tp: Any) -> str:
    import types
    import typing

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"tuple[{_type_text(args[0])}, ...]"
        return f"tuple[{', '.join(_type_text(a) for a in args)}]"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def describe_config(cfg: Any) -> list[dict[str, Any]]:
    """One dict per leaf field of ``cfg`` (a :class:`lz_tune.config.Config`), in the order of
    ``cfg.to_dict()``: ``section`` ("" for the top level), ``key`` (dotted), ``value``, ``type``
    (text), ``default`` (the dataclass default) and ``doc`` (the field's docstring). The policy
    types' own sections (``cfg.sections``) follow the shared ones and are described the same way."""
    import typing

    rows: list[dict[str, Any]] = []
    for section, obj, names in _sections(cfg):
        cls = type(obj)
        hints, docs = typing.get_type_hints(cls), _field_docs(cls)
        prefix = f"{section}." if section else ""
        for f in dataclasses.fields(obj):
            if f.name not in names:
                continue
            default = (
                f.default
                if f.default is not dataclasses.MISSING
                else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            )
            rows.append(
                {
                    "section": section,
                    "key": prefix + f.name,
                    "value": getattr(obj, f.name),
                    "type": _type_text(hints[f.name]),
                    "default": default,
                    "doc": docs.get(f.name, ""),
                }
            )
    return rows


def _sections(cfg: Any) -> list[tuple[str, Any, set[str]]]:
    """(section name, section object, its value keys): ("", cfg, top-level keys) first, then the
    sections in the order of ``cfg.to_dict()`` (the shared ones, then the policy types' own)."""
    data = cfg.to_dict()
    out = [("", cfg, {k for k, v in data.items() if not isinstance(v, dict)})]
    for name, value in data.items():
        if isinstance(value, dict):
            out.append((name, getattr(cfg, name), set(value)))
    return out


def _section_docs(cfg: Any) -> dict[str, str]:
    return {name: (type(obj).__doc__ or "").strip().splitlines()[0] for name, obj, _ in _sections(cfg) if name}


def run(args: argparse.Namespace) -> int:
    """``python -m lz_tune config CONFIG [key=value ...]``: every field, grouped by section."""
    cfg = config_from_args(args)
    rows = describe_config(cfg)
    try:
        _print_config(args, cfg, rows)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_config(args: argparse.Namespace, cfg: Any, rows: list[dict[str, Any]]) -> None:
    section_docs = _section_docs(cfg)
    shown = [r for r in rows if not args.changed or r["value"] != r["default"]]
    source = args.config if args.config is not None else f"derived from --env {args.env}"
    print(
        f"# {source}"
        + (f" with {' '.join(args.overrides)}" if args.overrides else "")
        + f": {len(shown)} of {len(rows)} fields"
        + (" (changed from the defaults)" if args.changed else "")
        + "; '*' marks a value that differs from the default"
    )
    current = None
    for r in shown:
        if r["section"] != current:
            current = r["section"]
            title = current or "top level"
            doc = section_docs.get(current, "") if current else (type(cfg).__doc__ or "").strip().splitlines()[0]
            print(f"\n[{title}]" + (f"  {doc}" if doc else ""))
        mark = "*" if r["value"] != r["default"] else " "
        print(f"{mark} {r['key']} = {r['value']!r}    ({r['type']}; default {r['default']!r})")
        for line in (r["doc"] or "(no documentation)").splitlines():
            print(f"      {line.strip()}")
