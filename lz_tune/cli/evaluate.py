"""``python -m lz_tune evaluate PATH``: play a checkpoint again, print its returns next to the
checkpoint's own recorded evaluation, optionally write env 0's first episode as a GIF.

    python -m lz_tune evaluate runs/cartpole_muzero_seed0_... --episodes 5 --video cartpole.gif
    python -m lz_tune evaluate ~/lz_results/cp/MuZeroTrainable_7c65e_00000_0_... --episodes 10

Reads top to bottom: the video path checked first, the checkpoint file the path names
(:func:`lz_tune.analysis.resolve_checkpoint`), the replay (:func:`lz_tune.checkpoint_eval.evaluate_checkpoint`),
the printout, the GIF (:func:`lz_tune.envs.recording.write_gif`).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from lz_tune.cli.common import non_negative_int, positive_int

__all__ = ["add_parser", "run"]


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``evaluate`` sub-command's parser."""
    p = sub.add_parser(
        "evaluate",
        help="play a checkpoint again: return mean +- std, optional GIF of one episode",
        description="Evaluate exactly a checkpoint's weights with the project's Evaluator\n(greedy "
        "search, raw scores), print the returns next to the checkpoint's own\nrecorded "
        "evaluation, optionally record env 0's first episode as a GIF.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="PATH: a checkpoint file; a `train` run folder (its ckpt/ckpt_best.pt, else "
        "ckpt/ckpt_latest.pt);\n  a Tune checkpoint folder checkpoint_00000N/ (its evaluated "
        "snapshot lz_tune_checkpoint.pt,\n  else lz_tune_state.pt); a Tune trial folder (its "
        "best evaluated checkpoint); a Tune experiment\n  folder (the best evaluated checkpoint "
        "of all its trials).",
    )
    p.add_argument(
        "path", metavar="PATH", help="checkpoint file, train run folder, or Tune checkpoint / trial / experiment folder"
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config changes for the replay, e.g. env.evaluator_env_num=1 mcts.eval_num_simulations=50 "
        "(not the network's keys)",
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        metavar="N",
        help="episodes to play (default: the config's evaluator.n_evaluator_episode)",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=None,
        metavar="S",
        help="seed of evaluator env 0, env i gets S+i (default: the training evaluator's seed)",
    )
    p.add_argument(
        "--video",
        default=None,
        metavar="OUT.gif",
        help="write env 0's first episode as an animated GIF at the env's render size "
        "(Atari: the 210x160 RGB screen); classic control needs pygame",
    )
    p.add_argument(
        "--max-frames",
        type=positive_int,
        default=5000,
        metavar="N",
        help="at most N frames in the video (default 5000)",
    )
    p.add_argument("--device", default="cpu", help="torch device of the network (default cpu)")
    p.add_argument(
        "--allow-imports",
        action="store_true",
        help="let the checkpoint's config import the modules it names (module:name); only for files "
        "you trust (SECURITY.md)",
    )
    return p


def _check_video_path(video: str) -> Path:
    from lz_tune.config import ConfigError

    out = Path(video).expanduser()
    if out.suffix.lower() != ".gif":
        raise ConfigError(
            f"--video {video}: only animated GIF (.gif) is written (with Pillow, no other "
            "dependency); convert it afterwards if you need mp4, e.g. ffmpeg -i in.gif out.mp4"
        )
    if out.is_dir():
        raise ConfigError(f"--video {video}: is a folder")
    if importlib.util.find_spec("PIL") is None:
        from lz_tune.extras import install_hint

        raise ConfigError(f"--video: needs Pillow, which is not installed: {install_hint('analysis')}")
    return out


def _fmt(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def run(args: argparse.Namespace) -> int:
    """``python -m lz_tune evaluate PATH``: evaluate, print, optionally write the GIF."""
    video = _check_video_path(args.video) if args.video else None
    from lz_tune.analysis import resolve_checkpoint
    from lz_tune.checkpoint_eval import evaluate_checkpoint
    from lz_tune.envs.recording import write_gif

    file, source = resolve_checkpoint(args.path)  # again inside evaluate_checkpoint: cheap, and named first
    print(f"checkpoint: {file} - {source}", flush=True)
    run = evaluate_checkpoint(
        file,
        n_episodes=args.episodes,
        seed=args.seed,
        overrides=args.overrides,
        record_frames=False,
        render=video is not None,
        max_frames=args.max_frames,
        device=args.device,
        allow_imports=args.allow_imports,
    )
    cfg, r, rec, counters = run.config, run.eval, run.recorded or {}, run.counters
    print(
        f"policy {cfg.policy_type}, env {cfg.env.env_id}, train_iter {counters.get('train_iter', 'n/a')}, "
        f"env_steps {counters.get('env_steps', 'n/a')}"
    )
    if run.recorded:
        print(
            f"recorded evaluation: return {_fmt(rec.get('reward_mean'))} +- {_fmt(rec.get('reward_std'))} over "
            f"{rec.get('num_episodes', 'n/a')} episodes, train_iter {rec.get('train_iter', 'n/a')}"
        )
    else:
        print("recorded evaluation: none (a checkpoint saved before its first evaluation)")
    print(
        f"this evaluation: return {r.reward_mean:.1f} +- {r.reward_std:.1f} over {r.num_episodes} episodes "
        f"(min {r.reward_min:.1f}, max {r.reward_max:.1f}), mean episode length {r.episode_length_mean:.1f}, "
        f"train_iter {r.train_iter}, {cfg.env.evaluator_env_num} envs, seed {run.seed}, {r.eval_time_s:.1f}s"
    )
    if r.match:
        from lz_tune.workers.common import opponent_options
        from lz_tune.workers.match_stats import format_match

        print(f"against {opponent_options(cfg).describe()}: {format_match(r.match)}")
    if video is not None:
        if run.rendered is None:  # cannot happen: render=True records at least the reset frame
            raise RuntimeError("no frames were recorded")
        write_gif(run.rendered, video, fps=run.render_fps or 30.0)
        ep = run.rendered_episode
        t, h, w = run.rendered.shape[:3]
        what = (
            f"the reset + {ep['length']} steps of env 0's first episode (return {ep['return']:.1f})"
            if ep is not None and t == ep["length"] + 1
            else f"the first {t} frames of env 0's first episode (--max-frames {args.max_frames})"
        )
        print(f"video: {video}: {t} frames {w}x{h}, {what}, {run.render_fps or 30.0:g} fps")
    return 0
