"""The MinAtar table: MuZero-family agents on MinAtar's five games with the config lz_tune derives
from the env id (``python -m lz_tune train --env MinAtar/<Game>-v1 --policy-type T``), against a
uniformly random policy and the published 5M-frame DQN / actor-critic scores.

Each (game, policy type, seed) is one real ``train`` run in its own folder under ``--out``; a run
whose folder already holds a finished run is read, not run again, and an unfinished one is
continued with ``--resume`` (so the table survives a stopped session: run the same command again).
Then, per run, its last evaluated weights are played over ``--final-episodes`` held-out episodes
(``python -m lz_tune evaluate``), and the script prints the table (Markdown), writes
``<out>/minatar_table.json`` and one PNG of per-seed curves per game (``--plots``).

    pip install -c constraints.txt -e ".[minatar]"
    python benchmarks/minatar_table.py                                   # 5 games x muzero, efficientzero x seeds 0-2
    python benchmarks/minatar_table.py --games Breakout --policy-types muzero --seeds 0 --max-env-step 50000
    python benchmarks/minatar_table.py --report-only                     # the table from the runs so far

The published figures (MinAtar paper, Young & Tian 2019, read from its curves at 5M frames; approximate):
DQN with replay and target network, and online actor-critic.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # (lz_tune from this checkout, installed or not)
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
#: approximate 5M-frame returns read from the MinAtar paper's curves (Young & Tian 2019)
PUBLISHED_DQN = {"Asterix": 17.0, "Breakout": 10.0, "Freeway": 50.0, "Seaquest": 20.0, "SpaceInvaders": 43.0}
PUBLISHED_AC = {"Asterix": 19.0, "Breakout": 17.5, "Freeway": 47.0, "Seaquest": 15.0, "SpaceInvaders": 185.0}

_FINAL = re.compile(r"this evaluation: return (-?[\d.]+) \+- ([\d.]+) over (\d+) episodes")
_ENV = dict(os.environ, PYTHONPATH=ROOT)


def env_id(game: str) -> str:
    return f"MinAtar/{game}-v1"


def run_dir(out: Path, game: str, policy_type: str, seed: int) -> Path:
    return out / "runs" / f"{game.lower()}_{policy_type}_seed{seed}"


def read_evals(folder: Path) -> list[dict]:
    """The run's evaluations, in order: env steps, train_iter, mean and std of the eval return."""
    path = folder / "result.json"
    rows = []
    if not path.exists():
        return rows
    seen = set()
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        n = r.get("evaluation/num_evaluations_lifetime")
        ret = r.get("evaluation/env_runners/episode_return_mean")
        if ret is None or n in seen:
            continue
        seen.add(n)
        rows.append(
            {
                "env_steps": int(
                    r.get("evaluation/num_env_steps_sampled_lifetime", r["num_env_steps_sampled_lifetime"])
                ),
                "train_iter": int(r.get("evaluation/train_iter", r["train_iter"])),
                "return": float(ret),
                "std": float(r.get("evaluation/env_runners/episode_return_std", 0.0)),
                "wall_s": float(r.get("wall_time_s", 0.0)),
                "done": bool(r.get("done", False)),
            }
        )
    return rows


def train(
    game: str, policy_type: str, seed: int, max_env_step: int, out: Path, extra: list[str], timeout: float
) -> None:
    folder = run_dir(out, game, policy_type, seed)
    evals = read_evals(folder)
    if evals and (evals[-1]["done"] or evals[-1]["env_steps"] >= max_env_step):
        return
    cmd = [
        sys.executable,
        "-m",
        "lz_tune",
        "train",
        "--env",
        env_id(game),
        "--policy-type",
        policy_type,
        "--seed",
        str(seed),
        f"max_env_step={max_env_step}",
        *extra,
        "--quiet",
    ]
    cmd += ["--resume", str(folder)] if (folder / "ckpt" / "ckpt_latest.pt").exists() else ["--exp-dir", str(folder)]
    print(f"# {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, cwd=ROOT, env=_ENV, check=True, timeout=timeout)


def final_eval(folder: Path, episodes: int, seed: int) -> dict:
    ckpt = folder / "ckpt" / "ckpt_latest.pt"
    cache = folder / f"final_eval_{episodes}_seed{seed}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    cmd = [sys.executable, "-m", "lz_tune", "evaluate", str(ckpt), "--episodes", str(episodes), "--seed", str(seed)]
    out = subprocess.run(cmd, cwd=ROOT, env=_ENV, capture_output=True, text=True)
    match = _FINAL.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"evaluate {ckpt} failed ({out.returncode}): {out.stderr[-2000:]}")
    row = {"final": float(match.group(1)), "final_std": float(match.group(2)), "episodes": int(match.group(3))}
    cache.write_text(json.dumps(row))
    return row


def random_return(game: str, episodes: int = 100, seed: int = 12345) -> float:
    """Mean return of uniformly random actions over ``episodes`` episodes (MinAtar's sticky actions on)."""
    import gymnasium

    from lz_tune.envs import resolve_env_id

    resolve_env_id(env_id(game))
    env = gymnasium.make(env_id(game))
    rng = np.random.default_rng(seed)
    total = []
    for i in range(episodes):
        env.reset(seed=seed + i)
        ret, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            ret += float(r)
            done = term or trunc
        total.append(ret)
    env.close()
    return float(np.mean(total))


def plot_game(game: str, curves: dict[str, dict[int, list[dict]]], path: Path, random_score: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    colors = {"muzero": "tab:blue", "efficientzero": "tab:orange", "gumbel_muzero": "tab:green"}
    for policy_type, seeds in curves.items():
        for seed, evals in sorted(seeds.items()):
            if not evals:
                continue
            ax.plot(
                [e["env_steps"] for e in evals],
                [e["return"] for e in evals],
                lw=1.2,
                color=colors.get(policy_type),
                alpha=0.85,
                label=f"{policy_type}" if seed == min(seeds) else None,
            )
    ax.axhline(PUBLISHED_DQN[game], ls="--", color="gray", lw=1, label="DQN, 5M frames (approx.)")
    ax.axhline(random_score, ls=":", color="black", lw=1, label="random")
    ax.set_title(f"MinAtar {game}-v1 (one line per seed)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (8 episodes)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=GAMES)
    parser.add_argument("--policy-types", nargs="+", default=["muzero", "efficientzero"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-env-step", type=int, default=250_000)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "minatar"))
    parser.add_argument(
        "--plots", default=os.path.join(ROOT, "docs", "img", "minatar"), help="folder for the per-game curve PNGs"
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides added to every run")
    parser.add_argument("--final-episodes", type=int, default=32, help="held-out episodes of the last weights")
    parser.add_argument("--final-seed", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds per run")
    parser.add_argument("--report-only", action="store_true", help="no training: the table from the runs so far")
    args = parser.parse_args()
    out = Path(args.out)
    start = time.strftime("%Y-%m-%d")
    if not args.report_only:
        for seed in args.seeds:  # seeds outermost: a stopped session leaves whole rows of the table
            for game in args.games:
                for policy_type in args.policy_types:
                    train(game, policy_type, seed, args.max_env_step, out, args.set, args.timeout)
    table = {}
    for game in args.games:
        rnd = random_return(game)
        curves: dict[str, dict[int, list[dict]]] = {}
        for policy_type in args.policy_types:
            curves[policy_type] = {}
            for seed in args.seeds:
                folder = run_dir(out, game, policy_type, seed)
                evals = read_evals(folder)
                curves[policy_type][seed] = evals
                if not evals:
                    continue
                row = {
                    "game": game,
                    "policy_type": policy_type,
                    "seed": seed,
                    "env_steps": evals[-1]["env_steps"],
                    "train_iter": evals[-1]["train_iter"],
                    "last_eval": evals[-1]["return"],
                    "best_eval": max(e["return"] for e in evals),
                    "wall_s": evals[-1]["wall_s"],
                }
                if args.final_episodes and (folder / "ckpt" / "ckpt_latest.pt").exists():
                    row |= final_eval(folder, args.final_episodes, args.final_seed)
                table.setdefault(game, {"random": rnd, "runs": []})["runs"].append(row)
        plot_game(game, curves, Path(args.plots) / f"{game.lower()}.png", rnd)
    measure = (
        f"last weights, {args.final_episodes} held-out episodes"
        if args.final_episodes
        else "last training evaluation, 8 episodes"
    )
    print(
        f"\n| game | type | seeds | env steps | return per seed ({measure}) | mean | random | DQN 5M | AC 5M |"
        f"\n|---|---|---|---|---|---|---|---|---|"
    )
    for game, entry in table.items():
        for policy_type in args.policy_types:
            runs = [r for r in entry["runs"] if r["policy_type"] == policy_type]
            if not runs:
                continue
            key = "final" if all("final" in r for r in runs) else "last_eval"
            values = [r[key] for r in runs]
            steps = sorted({r["env_steps"] for r in runs})
            print(
                f"| {game} | {policy_type} | {','.join(str(r['seed']) for r in runs)} | "
                f"{steps[0]:,}"
                + (f"-{steps[-1]:,}" if len(steps) > 1 else "")
                + " | "
                + " / ".join(f"{v:.1f}" for v in values)
                + f" | {np.mean(values):.1f} | {entry['random']:.2f} | "
                f"{PUBLISHED_DQN[game]:g} | {PUBLISHED_AC[game]:g} |"
            )
    out.mkdir(parents=True, exist_ok=True)
    (out / "minatar_table.json").write_text(
        json.dumps({"date": start, "max_env_step": args.max_env_step, "overrides": args.set, "table": table}, indent=1)
    )


if __name__ == "__main__":
    main()
