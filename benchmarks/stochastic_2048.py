"""Stochastic MuZero on 2048 against two baselines, in one run on one box.

For each chance mode (``learned``: the chance encoder's codes; ``true``: the env's true
(cell, tile) outcome) one real ``python -m lz_tune train zoo/board_games/game_2048_stochastic_muzero.py``
trains for a fixed wall-clock budget and is then stopped with SIGTERM (which keeps its
checkpoints). Its last checkpoint then plays ``--eval-games`` fresh games (greedy search,
``lz_tune.checkpoint_eval.evaluate_checkpoint``, one game per env, env i seeded ``--eval-seed + i``),
and a uniform-random policy and a greedy one-step-merge policy play the same number of games
from the same seeds. Modes run one after the other, so each has the whole box.

Prints a table and, as the LAST line, one JSON object.

    python benchmarks/stochastic_2048.py                          # 30 min per mode, both modes
    python benchmarks/stochastic_2048.py --budget-s 600 --modes true
    python benchmarks/stochastic_2048.py --keep DIR --skip-training   # evaluate the runs in DIR again
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ZOO = "zoo/board_games/game_2048_stochastic_muzero.py"
MODES = {"learned": ("stochastic.use_true_chance_label=false",), "true": ("stochastic.use_true_chance_label=true",)}
_PROGRESS = re.compile(r"train_iter=(\d+) env_steps=(\d+) eval_return=([-\d.]+)")


def play_baseline(name: str, games: int, seed: int) -> np.ndarray:
    """[games] scores of ``random`` or ``greedy`` play, one game per env (env i seeded seed + i)."""
    from lz_tune.envs.game_2048 import Game2048VectorEnv, greedy_actions, random_actions

    env = Game2048VectorEnv(num_envs=games, seed=seed)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    scores = np.full(games, np.nan)
    while np.isnan(scores).any():
        boards = env.boards
        actions = greedy_actions(boards) if name == "greedy" else random_actions(boards, rng)
        res = env.step(actions)
        ended = res.real_episode_end & np.isnan(scores)
        scores[ended] = res.episode_return[ended]
    env.close()
    return scores


def train_for(mode: str, budget_s: float, seed: int, exp_dir: str, extra: tuple[str, ...]) -> dict:
    """One training run of ``mode`` stopped after ``budget_s`` seconds; its last progress line."""
    cmd = [
        sys.executable,
        "-m",
        "lz_tune",
        "train",
        ZOO,
        *MODES[mode],
        *extra,
        "--seed",
        str(seed),
        "--exp-dir",
        exp_dir,
    ]
    start = time.perf_counter()
    with open(_log_path(exp_dir, mode), "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=ROOT)
        )
        try:
            proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 143, -signal.SIGTERM):
        text = open(_log_path(exp_dir, mode)).read()
        raise RuntimeError(f"{mode}: training failed ({proc.returncode}):\n{text[-3000:]}")
    return {"train_wall_s": round(wall, 1), **training_summary(exp_dir, mode, budget_s)}


def _log_path(exp_dir: str, mode: str) -> str:
    return os.path.join(os.path.dirname(exp_dir), f"{mode}.log")


def training_summary(exp_dir: str, mode: str, budget_s: float) -> dict:
    """Updates, env steps and the training evaluations of a finished run, from its log."""
    text = open(_log_path(exp_dir, mode)).read()
    progress = _PROGRESS.findall(text)
    if not progress:
        raise RuntimeError(f"{mode}: no evaluation within {budget_s:.0f} s:\n{text[-3000:]}")
    train_iter, env_steps, last_eval = progress[-1]
    return {
        "train_iter": int(train_iter),
        "env_steps": int(env_steps),
        "last_training_eval": float(last_eval),
        "training_evals": [float(p[2]) for p in progress],
    }


def evaluate(exp_dir: str, games: int, seed: int) -> np.ndarray:
    from lz_tune.checkpoint_eval import evaluate_checkpoint

    result = evaluate_checkpoint(
        os.path.join(exp_dir, "ckpt", "ckpt_latest.pt"),
        n_episodes=games,
        seed=seed,
        overrides=[f"env.evaluator_env_num={games}"],
    )
    return np.asarray(result.eval.returns, dtype=float)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=1800.0, help="training wall-clock per mode (seconds)")
    parser.add_argument("--modes", default="learned,true", help="comma-separated: learned, true")
    parser.add_argument("--eval-games", type=int, default=32)
    parser.add_argument("--eval-seed", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", default=None, help="folder to keep the runs in (default: a temporary one)")
    parser.add_argument(
        "--skip-training",
        action="store_true",
        help="evaluate the runs already in --keep (e.g. after an interrupted benchmark)",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides for the training runs")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown mode(s) {sorted(unknown)}; choose from {sorted(MODES)}")

    baselines = {name: play_baseline(name, args.eval_games, args.eval_seed) for name in ("random", "greedy")}
    rows = {
        name: {"mean": float(s.mean()), "std": float(s.std()), "median": float(np.median(s))}
        for name, s in baselines.items()
    }
    if args.skip_training and not args.keep:
        parser.error("--skip-training needs --keep DIR with the runs to evaluate")
    root = args.keep or tempfile.mkdtemp(prefix="stochastic_2048_")
    for mode in modes:
        exp_dir = os.path.join(root, mode, "exp")
        os.makedirs(os.path.dirname(exp_dir), exist_ok=True)
        if args.skip_training:
            train = training_summary(exp_dir, mode, args.budget_s)
        else:
            train = train_for(mode, args.budget_s, args.seed, exp_dir, tuple(args.overrides))
        scores = evaluate(exp_dir, args.eval_games, args.eval_seed)
        rows[f"stochastic_muzero ({mode} chance)"] = {
            "mean": float(scores.mean()),
            "std": float(scores.std()),
            "median": float(np.median(scores)),
            **train,
        }

    random_mean, greedy_mean = rows["random"]["mean"], rows["greedy"]["mean"]
    print(
        f"\n2048, {args.eval_games} games each from seeds {args.eval_seed}..{args.eval_seed + args.eval_games - 1}, "
        f"training budget {args.budget_s:.0f} s per mode"
    )
    print(
        f"{'player':34s} {'mean':>8s} {'std':>8s} {'median':>8s} {'x random':>9s} {'> greedy':>9s} "
        f"{'updates':>8s} {'env steps':>10s}"
    )
    for name, r in rows.items():
        print(
            f"{name:34s} {r['mean']:8.0f} {r['std']:8.0f} {r['median']:8.0f} {r['mean'] / random_mean:9.2f} "
            f"{str(r['mean'] > greedy_mean):>9s} {r.get('train_iter', ''):>8} {r.get('env_steps', ''):>10}"
        )
    summary = {
        "eval_games": args.eval_games,
        "budget_s": args.budget_s,
        "runs_in": root,
        **{name: {k: v for k, v in r.items() if k != "training_evals"} for name, r in rows.items()},
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
