"""An evaluation ladder for a board-game run: its weights over wall-clock against OpenSpiel's MCTS
bot at several strengths (random rollouts; 100, 1,000, 10,000 simulations), half the games as
first player.

Three steps; the first two are apart so that the ladder's games do not slow the training they
measure:

1. ``snapshot``: while ``train`` runs, copy its latest checkpoint every ``--every-min`` minutes
   into ``--out`` as ``min<M>.pt`` (M = minutes since the snapshotter started, which starts with
   the run):

       python -m lz_tune train zoo/board_games/connect_four_alphazero.py --exp-dir runs/c4 &
       python benchmarks/board_game_ladder.py snapshot runs/c4 --out runs/c4_snaps --every-min 10

2. ``ladder``: play every snapshot against each bot strength (``lz_tune.evaluate``), write
   ``<snapshots>/ladder.json`` (resumable: finished entries are kept) and a plot of the win rate
   over wall-clock:

       python benchmarks/board_game_ladder.py ladder runs/c4_snaps --sims 100 1000 --games 100 \\
           --plot docs/img/connect_four_ladder.png

3. ``seeds``: one strength, several runs' ladders (seeds) in one plot, with the target line:

       python benchmarks/board_game_ladder.py seeds runs/c4_s0_snaps runs/c4_s1_snaps --sims 100 \\
           --labels "seed 0" "seed 1" --target 0.95 --plot docs/img/connect_four_seeds.png
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # (lz_tune from this checkout, installed or not)


def snapshot(run: Path, out: Path, every_min: float, stop_after_min: float, start_min: float = 0.0) -> None:
    """Copy ``run``'s ``ckpt/ckpt_latest.pt`` to ``out/min<M>.pt`` every ``every_min`` minutes.

    ``start_min``: minutes the run had trained before this snapshotter started (a run continued
    with ``train --resume``), added to M so that the ladder's wall-clock axis runs on."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    while (time.monotonic() - start) / 60 < stop_after_min:
        time.sleep(every_min * 60)
        latest = run / "ckpt" / "ckpt_latest.pt"
        if latest.is_file():
            minutes = int(round(start_min + (time.monotonic() - start) / 60))
            target = out / f"min{minutes}.pt"
            shutil.copyfile(latest, target.with_suffix(".tmp"))
            os.replace(target.with_suffix(".tmp"), target)
            print(f"snapshot {target}", flush=True)


def _minutes(path: Path) -> int:
    m = re.fullmatch(r"min(\d+)\.pt", path.name)
    return int(m.group(1)) if m else -1


def ladder(
    snapshots: Path,
    sims: list[int],
    games: int,
    env_num: int,
    plot: Path | None,
    last_only: set[int],
    title: str | None = None,
) -> dict:
    """Every snapshot against each strength in ``sims`` (``last_only``: only the newest snapshot
    plays those strengths); results in ``snapshots/ladder.json``."""
    import lz_tune

    results_path = snapshots / "ladder.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {"entries": []}
    done = {(e["minutes"], e["sims"]) for e in results["entries"]}
    files = sorted((p for p in snapshots.glob("min*.pt") if _minutes(p) >= 0), key=_minutes)
    for path in files:
        for s in sims:
            if s in last_only and path != files[-1]:
                continue
            if (_minutes(path), s) in done:
                continue
            start = time.perf_counter()
            r = lz_tune.evaluate(
                path,
                episodes=games,
                overrides=[
                    "evaluator.opponent=mcts",
                    f"evaluator.opponent_mcts_simulations={s}",
                    f"env.evaluator_env_num={env_num}",
                ],
            )
            entry = {
                "minutes": _minutes(path),
                "sims": s,
                "games": r.num_episodes,
                "train_iter": r.train_iter,
                "env_steps": r.env_steps,
                "win": r.match["evaluation/env_runners/win_rate"],
                "draw": r.match["evaluation/env_runners/draw_rate"],
                "loss": r.match["evaluation/env_runners/loss_rate"],
                "win_as_first": r.match["evaluation/env_runners/win_rate_as_first"],
                "win_as_second": r.match["evaluation/env_runners/win_rate_as_second"],
                "eval_seconds": round(time.perf_counter() - start, 1),
            }
            results["entries"].append(entry)
            results_path.write_text(json.dumps(results, indent=1))
            print(
                f"{path.name}: MCTS-{s}: W/D/L {entry['win']:.2f}/{entry['draw']:.2f}/{entry['loss']:.2f} "
                f"(first {entry['win_as_first']:.2f}, second {entry['win_as_second']:.2f}) "
                f"[{entry['games']} games, {entry['eval_seconds']} s]",
                flush=True,
            )
    if plot is not None:
        _plot(results["entries"], plot, title or snapshots.name)
    return results


def _save_win_plot(
    lines: list[tuple[str, list[dict]]],
    plot: Path,
    title: str,
    ylabel: str,
    target: float | None = None,
    x: str = "minutes",
) -> None:
    """Win rate over training minutes (``x="minutes"``) or learner updates (``"train_iter"``), one
    line per ``(label, entries)``, saved to ``plot``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, rows in lines:
        ax.plot([e[x] for e in rows], [e["win"] for e in rows], marker="o", markersize=4, label=label)
    if target is not None:
        ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target:.0%}")
    ax.set_xlabel("training wall-clock (minutes)" if x == "minutes" else "learner updates")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(plot, dpi=110)
    plt.close(fig)
    print(f"plot {plot}")


def _rows(entries: list[dict], sims: int) -> list[dict]:
    return sorted((e for e in entries if e["sims"] == sims), key=lambda e: e["minutes"])


def _plot(entries: list[dict], plot: Path, title: str) -> None:
    lines = []
    for s in sorted({e["sims"] for e in entries}):
        rows = _rows(entries, s)
        lines.append((f"MCTS-{s:,} ({rows[0]['games']} games each)", rows))
    _save_win_plot(lines, plot, title, "win rate (half as first player)")


def plot_seeds(
    folders: list[Path],
    labels: list[str],
    sims: int,
    plot: Path,
    target: float | None,
    title: str,
    x: str = "minutes",
) -> dict[str, list[dict]]:
    """The win rate against MCTS-``sims`` over wall-clock (or updates: ``x``), one line per folder's
    ``ladder.json`` (or per ladder.json file named directly); returns those rows per label
    (minutes, updates, env steps, win / draw / loss rates, games)."""
    table: dict[str, list[dict]] = {}
    for folder, label in zip(folders, labels):
        path = folder / "ladder.json" if folder.is_dir() else folder
        rows = _rows(json.loads(path.read_text())["entries"], sims)
        if not rows:
            raise SystemExit(f"{path} has no games against MCTS-{sims}")
        keys = ("minutes", "train_iter", "env_steps", "win", "draw", "loss", "games")
        table[label] = [{k: e[k] for k in keys} for e in rows]
    _save_win_plot(list(table.items()), plot, title, f"win rate against MCTS-{sims:,}", target, x)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("snapshot", help="copy a running train's latest checkpoint every few minutes")
    s.add_argument("run", type=Path, help="the train run folder (--exp-dir)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--every-min", type=float, default=10.0)
    s.add_argument("--stop-after-min", type=float, default=24 * 60.0)
    s.add_argument(
        "--start-min", type=float, default=0.0, help="minutes trained before (a run continued with --resume)"
    )
    lad = sub.add_parser("ladder", help="play every snapshot against the MCTS bot at several strengths")
    lad.add_argument("snapshots", type=Path)
    lad.add_argument("--sims", type=int, nargs="+", default=[100, 1000])
    lad.add_argument("--games", type=int, default=100, help="games per snapshot and strength (even)")
    lad.add_argument("--env-num", type=int, default=10, help="evaluator envs (games / env-num must be even)")
    lad.add_argument("--last-only", type=int, nargs="*", default=[], help="strengths played by the newest only")
    lad.add_argument("--plot", type=Path, default=None)
    lad.add_argument("--title", default=None, help="the plot's title (default: the snapshot folder's name)")
    sd = sub.add_parser("seeds", help="one strength, several runs' ladders in one plot")
    sd.add_argument("folders", type=Path, nargs="+", help="snapshot folders with a ladder.json each, or such files")
    sd.add_argument("--sims", type=int, default=100)
    sd.add_argument("--labels", nargs="*", default=None, help="one per folder (default: the folder names)")
    sd.add_argument("--target", type=float, default=None, help="a horizontal line at this win rate")
    sd.add_argument("--plot", type=Path, required=True)
    sd.add_argument("--title", default="")
    sd.add_argument(
        "--x", choices=["minutes", "updates"], default="minutes", help="the x axis: wall-clock or learner updates"
    )
    args = parser.parse_args(argv)
    if args.command == "seeds":
        labels = args.labels or [f.name for f in args.folders]
        if len(labels) != len(args.folders):
            parser.error("--labels needs one label per folder")
        x = "minutes" if args.x == "minutes" else "train_iter"
        table = plot_seeds(args.folders, labels, args.sims, args.plot, args.target, args.title, x)
        print(f"{'run':>12} {'minutes':>8} {'updates':>9} {'env steps':>10}  vs MCTS-{args.sims}: W / D / L")
        for label, rows in table.items():
            for r in rows:
                wdl = f"{r['win']:.2f} / {r['draw']:.2f} / {r['loss']:.2f}"
                print(f"{label:>12} {r['minutes']:>8} {r['train_iter']:>9,} {r['env_steps']:>10,}  {wdl}")
        print(json.dumps(table))
    elif args.command == "snapshot":
        snapshot(args.run, args.out, args.every_min, args.stop_after_min, args.start_min)
    else:
        if args.games % (2 * args.env_num):
            parser.error("--games must be a multiple of 2 x --env-num (half the games as first player)")
        results = ladder(
            args.snapshots, args.sims, args.games, args.env_num, args.plot, set(args.last_only), args.title
        )
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
