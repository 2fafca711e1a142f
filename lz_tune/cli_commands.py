"""The ``evaluate`` and ``config`` commands of ``python -m lz_tune``, and the zoo list of ``--help``.

    python -m lz_tune evaluate runs/cartpole_muzero_seed0_... --episodes 5 --video cartpole.gif
    python -m lz_tune evaluate ~/lz_results/cp/MuZeroTrainable_7c65e_00000_0_... --episodes 10
    python -m lz_tune config zoo/classic_control/cartpole_muzero.py mcts.num_simulations=7

Importing this module is cheap (no torch, no gymnasium): ``python -m lz_tune train`` imports it
to build its parser; the commands import what they need when they run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

#: the zoo folder next to the package (a source checkout or an editable install)
ZOO_DIR = Path(__file__).resolve().parent.parent / "zoo"


# ---------------------------------------------------------------------------------- parsers


def zoo_configs() -> list[str]:
    """The zoo config files (``zoo/*/*.py``), as paths usable on the command line here: relative
    to the current folder when the zoo is inside it, else absolute."""
    files = sorted(p for p in ZOO_DIR.glob("*/*.py") if not p.name.startswith("_"))
    cwd = Path.cwd().resolve()
    return [str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p) for p in files]


def zoo_epilog() -> str:
    configs = zoo_configs()
    if not configs:
        return f"zoo configs: none found (looked in {ZOO_DIR})"
    return ("zoo configs (CONFIG of train / config; a dotted module name such as "
            "zoo.classic_control.cartpole_muzero works too):\n" + "\n".join(f"  {c}" for c in configs))


def add_parsers(parser: argparse.ArgumentParser, sub: Any) -> None:
    """Add ``evaluate`` and ``config`` to ``sub`` and the zoo list to the ``--help`` of the main
    parser, ``train`` and ``config``."""
    epilog = zoo_epilog()
    for p in (parser, sub.choices.get("train")):
        if p is not None:
            p.epilog = epilog
            p.formatter_class = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("evaluate", help="play a checkpoint again: return mean +- std, optional GIF of one episode",
                       description="Evaluate exactly a checkpoint's weights with the project's Evaluator\n(greedy "
                                   "search, raw scores), print the returns next to the checkpoint's own\nrecorded "
                                   "evaluation, optionally record env 0's first episode as a GIF.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="PATH: a checkpoint file; a `train` run folder (its ckpt/ckpt_best.pt, else "
                              "ckpt/ckpt_latest.pt);\n  a Tune checkpoint folder checkpoint_00000N/ (its evaluated "
                              "snapshot lz_tune_checkpoint.pt,\n  else lz_tune_state.pt); a Tune trial folder (its "
                              "best evaluated checkpoint); a Tune experiment\n  folder (the best evaluated checkpoint "
                              "of all its trials).")
    p.add_argument("path", metavar="PATH", help="checkpoint file, train run folder, or Tune checkpoint / trial / "
                                                "experiment folder")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config changes for the replay, e.g. env.evaluator_env_num=1 mcts.eval_num_simulations=50 "
                        "(not the network's keys)")
    p.add_argument("--episodes", type=_positive_int, default=None, metavar="N",
                   help="episodes to play (default: the config's evaluator.n_evaluator_episode)")
    p.add_argument("--seed", type=_non_negative_int, default=None, metavar="S",
                   help="seed of evaluator env 0, env i gets S+i (default: the training evaluator's seed)")
    p.add_argument("--video", default=None, metavar="OUT.gif",
                   help="write env 0's first episode as an animated GIF at the env's render size "
                        "(Atari: the 210x160 RGB screen); classic control needs pygame")
    p.add_argument("--max-frames", type=_positive_int, default=5000, metavar="N",
                   help="at most N frames in the video (default 5000)")
    p.add_argument("--device", default="cpu", help="torch device of the network (default cpu)")

    p = sub.add_parser("config", help="print every config field: value, type, default and its documentation",
                       description="Print every field of a zoo config (dotted key) after the overrides, with\nits "
                                   "type, its default and its documentation, grouped by section.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    p.add_argument("config", help="zoo config: a .py file with make_config() or a dotted module name; or a "
                                  "LightZero config file (main_config / create_config; README: Coming from LightZero)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, e.g. mcts.num_simulations=7")
    p.add_argument("--changed", action="store_true",
                   help="only the fields whose value differs from the dataclass default")
    from lz_tune.lightzero.flags import add_reference_flags

    add_reference_flags(p, seed_and_async=True)  # as train takes them


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


_positive_int = int_at_least(1)
_non_negative_int = int_at_least(0)


# ---------------------------------------------------------------------------------- evaluate


def _check_video_path(video: str) -> Path:
    from lz_tune.config import ConfigError

    out = Path(video).expanduser()
    if out.suffix.lower() != ".gif":
        raise ConfigError(f"--video {video}: only animated GIF (.gif) is written (with Pillow, no other "
                          "dependency); convert it afterwards if you need mp4, e.g. ffmpeg -i in.gif out.mp4")
    if out.is_dir():
        raise ConfigError(f"--video {video}: is a folder")
    if importlib.util.find_spec("PIL") is None:
        raise ConfigError("--video: needs Pillow (pip install pillow)")
    return out


def write_gif(frames: Any, path: str | os.PathLike, *, fps: float) -> Path:
    """Write uint8 ``[T, H, W, 3]`` RGB frames as a looping GIF of exactly T frames, atomically (a
    temporary file in the same folder, then a rename). Each frame has its own palette: exact when
    it has at most 256 colours (classic control, Atari), else Pillow's median cut. Delays are whole
    centiseconds, at least 2 (the shortest browsers play), so the speed is ``fps`` rounded to that.

    Pillow's ``save(save_all=True)`` would fold a frame identical to the previous one into a longer
    delay (CartPole's first steps often move the cart less than a pixel), so frame i would no longer
    be step i; the frames are written one by one with Pillow's GIF encoder instead."""
    import numpy as np
    from PIL import GifImagePlugin, Image

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"write_gif: expected uint8 [T, H, W, 3] frames, got {frames.dtype} {frames.shape}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    delay_ms = max(20, int(round(100.0 / fps)) * 10)

    def paletted(frame: Any) -> Any:
        image = Image.fromarray(frame)
        colors = image.getcolors(256)
        if colors is None:  # more than 256 colours (e.g. MuJoCo): Pillow's median cut
            return image.convert("P", palette=Image.Palette.ADAPTIVE, colors=256)
        # few colours (classic control, Atari): an exact palette, each pixel its own colour
        keys = np.sort(np.array([(r << 16) | (g << 8) | b for _, (r, g, b) in colors], np.uint32))
        packed = (frame[..., 0].astype(np.uint32) << 16) | (frame[..., 1].astype(np.uint32) << 8) | frame[..., 2]
        out = Image.frombytes("P", image.size, np.searchsorted(keys, packed).astype(np.uint8).tobytes())
        out.putpalette(np.stack([keys >> 16, (keys >> 8) & 255, keys & 255], axis=1).astype(np.uint8).tobytes())
        return out

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            header, _ = GifImagePlugin.getheader(paletted(frames[0]), info={"loop": 0})
            f.write(b"".join(header))
            for frame in frames:
                f.write(b"".join(GifImagePlugin.getdata(paletted(frame), duration=delay_ms,
                                                         include_color_table=True)))
            f.write(b";")  # GIF trailer
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _fmt(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``python -m lz_tune evaluate PATH``: evaluate, print, optionally write the GIF."""
    video = _check_video_path(args.video) if args.video else None
    from lz_tune.analysis import evaluate_checkpoint, resolve_checkpoint

    file, source = resolve_checkpoint(args.path)  # again inside evaluate_checkpoint: cheap, and named first
    print(f"checkpoint: {file} - {source}", flush=True)
    run = evaluate_checkpoint(file, n_episodes=args.episodes, seed=args.seed, overrides=args.overrides,
                              record_frames=False, render=video is not None, max_frames=args.max_frames,
                              device=args.device)
    cfg, r, rec, counters = run.config, run.eval, run.recorded or {}, run.counters
    print(f"policy {cfg.policy_type}, env {cfg.env.env_id}, train_iter {counters.get('train_iter', 'n/a')}, "
          f"env_steps {counters.get('env_steps', 'n/a')}")
    if run.recorded:
        print(f"recorded evaluation: return {_fmt(rec.get('reward_mean'))} +- {_fmt(rec.get('reward_std'))} over "
              f"{rec.get('num_episodes', 'n/a')} episodes, train_iter {rec.get('train_iter', 'n/a')}")
    else:
        print("recorded evaluation: none (a checkpoint saved before its first evaluation)")
    print(f"this evaluation: return {r.reward_mean:.1f} +- {r.reward_std:.1f} over {r.num_episodes} episodes "
          f"(min {r.reward_min:.1f}, max {r.reward_max:.1f}), mean episode length {r.episode_length_mean:.1f}, "
          f"train_iter {r.train_iter}, {cfg.env.evaluator_env_num} envs, seed {run.seed}, {r.eval_time_s:.1f}s")
    if r.match:
        from lz_tune.workers.match_stats import format_match
        from lz_tune.workers.common import opponent_options

        print(f"against {opponent_options(cfg).describe()}: {format_match(r.match)}")
    if video is not None:
        if run.rendered is None:  # cannot happen: render=True records at least the reset frame
            raise RuntimeError("no frames were recorded")
        write_gif(run.rendered, video, fps=run.render_fps or 30.0)
        ep = run.rendered_episode
        t, h, w = run.rendered.shape[:3]
        what = (f"the reset + {ep['length']} steps of env 0's first episode (return {ep['return']:.1f})"
                if ep is not None and t == ep["length"] + 1 else
                f"the first {t} frames of env 0's first episode (--max-frames {args.max_frames})")
        print(f"video: {video}: {t} frames {w}x{h}, {what}, {run.render_fps or 30.0:g} fps")
    return 0


# ---------------------------------------------------------------------------------- config


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
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr) \
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
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
    """One dict per leaf field of ``cfg`` (a :class:`lz_tune.config.Config`), in declaration order:
    ``section`` ("" for the top level), ``key`` (dotted), ``value``, ``type`` (text), ``default``
    (the dataclass default) and ``doc`` (the field's docstring)."""
    import dataclasses
    import typing

    rows: list[dict[str, Any]] = []

    def walk(obj: Any, prefix: str, section: str) -> None:
        cls = type(obj)
        hints, docs = typing.get_type_hints(cls), _field_docs(cls)
        nested = []
        for f in dataclasses.fields(obj):
            if f.name.startswith("_"):
                continue
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                nested.append((f.name, value))
                continue
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
            rows.append({"section": section, "key": prefix + f.name, "value": value,
                         "type": _type_text(hints[f.name]), "default": default, "doc": docs.get(f.name, "")})
        for name, value in nested:  # sections after the top-level values
            walk(value, f"{prefix}{name}.", f"{prefix}{name}")

    walk(cfg, "", "")
    return rows


def _section_docs(cfg: Any) -> dict[str, str]:
    import dataclasses

    return {f.name: (type(getattr(cfg, f.name)).__doc__ or "").strip().splitlines()[0]
            for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(getattr(cfg, f.name))}


def cmd_config(args: argparse.Namespace) -> int:
    """``python -m lz_tune config CONFIG [key=value ...]``: every field, grouped by section."""
    from lz_tune.config_loader import build_config
    from lz_tune.lightzero.flags import given_flags

    cfg = build_config(args.config, args.overrides, given_flags(args),
                       report=lambda line: print(line, file=sys.stderr, flush=True))
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
    print(f"# {args.config}" + (f" with {' '.join(args.overrides)}" if args.overrides else "")
          + f": {len(shown)} of {len(rows)} fields" + (" (changed from the defaults)" if args.changed else "")
          + "; '*' marks a value that differs from the default")
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
