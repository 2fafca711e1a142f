"""Which self-play exploration does AlphaZero need on tic-tac-toe? An ablation of the zoo config
``zoo/board_games/tictactoe_alphazero.py`` (no epsilon-greedy schedule), each variant trained
until an evaluation of 100 games against the perfect minimax bot (50 per seat) loses none, or
the env-step budget runs out:

- ``both``: root Dirichlet noise and moves sampled from the visit counts at temperature 1 (the
  zoo config: alpha 0.3, weight 0.5; the published ablation ran on weight 0.25, AlphaZero's, given
  as the overrides ``mcts.root_noise_weight=0.25 evaluator.stop_confirm_episodes=None``);
- ``no_noise``: temperature 1 only;
- ``no_temperature``: Dirichlet noise only (temperature 0.01: the most visited move, ties at random);
- ``neither``: neither;
- ``gumbel``: the Gumbel root (``alphazero.root_selection=gumbel``: sampled root moves through
  Gumbel top-k, no Dirichlet noise, no temperature).

Each run is a real ``train`` in its own process; the table gives wall-clock seconds, env steps
and updates to the first loss-free evaluation per seed.

    python benchmarks/tictactoe_exploration.py --seeds 0 1 --max-env-step 60000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARIANTS: dict[str, list[str]] = {
    "both": [],
    "no_noise": ["mcts.root_noise_weight=0"],
    "no_temperature": ["collector.temperature=0.01"],
    "neither": ["mcts.root_noise_weight=0", "collector.temperature=0.01"],
    "gumbel": ["alphazero.root_selection=gumbel", "gumbel.max_num_considered_actions=9"],
}


_TRAIN = """
import json, sys
import lz_tune
folder, overrides = sys.argv[1], sys.argv[2:]
r = lz_tune.train("zoo/board_games/tictactoe_alphazero.py", overrides=overrides, exp_dir=folder)
summary = dict(solved=r.stop_value_reached, stop_reason=r.stop_reason, wall_time_s=r.wall_time_s,
               env_steps=r.env_steps, train_iter=r.train_iter)
open(folder + "/summary.json", "w").write(json.dumps(summary))
"""


def run_one(variant: str, seed: int, max_env_step: int, out: Path, extra: list[str]) -> dict:
    """One ``train`` of ``variant`` (its own process; skipped when its summary exists)."""
    folder = out / f"{variant}_seed{seed}"
    summary = folder / "summary.json"
    if not summary.is_file():
        overrides = [f"seed={seed}", f"max_env_step={max_env_step}", *VARIANTS[variant], *extra]
        with (out / f"{variant}_seed{seed}.log").open("w") as log:
            code = subprocess.run(
                [sys.executable, "-c", _TRAIN, str(folder), *overrides], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
            ).returncode
        if code != 0:
            raise SystemExit(f"{variant} seed {seed}: train exited {code} (see {log.name})")
    r = json.loads(summary.read_text())
    print(f"{variant} seed {seed}: solved={r['solved']} in {r['wall_time_s']:.0f} s", flush=True)
    return {"variant": variant, "seed": seed, **r, "wall_time_s": round(float(r["wall_time_s"]), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--max-env-step", type=int, default=60_000)
    parser.add_argument("--out", type=Path, default=Path("runs/tictactoe_exploration"))
    parser.add_argument("overrides", nargs="*", help="config changes for every run (key=value)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [run_one(v, s, args.max_env_step, args.out, args.overrides) for v in args.variants for s in args.seeds]
    print("| variant | seed | no loss in 100 vs minimax | wall-clock s | env steps | updates |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        solved = "yes" if r["solved"] else f"no ({r['stop_reason']})"
        cells = (r["variant"], r["seed"], solved, r["wall_time_s"], f"{r['env_steps']:,}", f"{r['train_iter']:,}")
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(json.dumps({"runs": rows, "max_env_step": args.max_env_step}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
