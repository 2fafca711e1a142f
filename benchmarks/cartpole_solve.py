"""Time-to-solve per policy type: each (variant, seed) is one real ``python -m lz_tune train``
run of the variant's zoo config until the mean eval return reaches the config's stop value
(CartPole-v1: 195 over 8 episodes; Pendulum-v1: -200; Acrobot-v1: -100) or ``--max-env-step``
env steps. Variants are interleaved by seed so that box noise spreads over all of them. The
default variants are the CartPole ones; the sampled types' tasks are named explicitly.

Prints one row per run (solved, learner updates and env steps at the solving evaluation, driver
and process wall-clock), a per-variant median (an unsolved run counts as infinitely slow), and
as the LAST line one JSON object. A run that
exceeds ``--timeout`` is stopped with SIGTERM and reported as ``timeout`` with its last evaluation
and best eval return.

    python benchmarks/cartpole_solve.py                       # all variants, seeds 0 1 2
    python benchmarks/cartpole_solve.py --variants gumbel_muzero_4sims --seeds 0
    python benchmarks/cartpole_solve.py --variants pendulum_sampled_muzero,pendulum_sampled_efficientzero \
        --max-env-step 50000 --timeout 3600 --final-eval-episodes 64
    python benchmarks/cartpole_solve.py --variants tictactoe_muzero,tictactoe_gumbel_muzero \
        --max-env-step 300000 --timeout 14400 --final-eval-episodes 100
    python benchmarks/cartpole_solve.py --variants generic_cartpole,generic_acrobot,generic_lunarlander \
        --max-env-step 0 --timeout 7200     # the configs derived from the env ids, each at its budget

The ``generic_*`` variants have no config file: they run ``train --env ID``, the config lz_tune
derives from the env (``lz_tune/env_defaults.py``); ``--max-env-step 0`` holds each to its budget
in ``GENERIC_BUDGETS``.

``--final-eval-episodes N`` adds, per run, ``python -m lz_tune evaluate`` of the run's last
evaluated weights over N episodes from held-out starts (``--final-eval-seed``): on Pendulum
the training evaluation's 8 fixed starts give a mean with a standard error of ~45 (episode
returns spread from -2 to -500), so the bar is judged on 64 episodes. For two-player games it
also reports the win / draw / loss rates of those games against the config's evaluation bot.
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

#: variant -> (zoo config, overrides)
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "muzero": ("zoo/classic_control/cartpole_muzero.py", ()),
    "muzero_eager": ("zoo/classic_control/cartpole_muzero.py", ("learner.update_path=eager",)),
    # the CartPole config before the time-to-solve search (2026-12-01), on the eager update path
    "muzero_2026_12_01_eager": (
        "zoo/classic_control/cartpole_muzero.py",
        (
            "learner.batch_size=256",
            "learner.learning_rate=0.003",
            "learner.ssl_loss_weight=2.0",
            "mcts.num_simulations=25",
            "model.projection_dim=256",
            "model.projection_hidden_dim=256",
            "learner.update_path=eager",
        ),
    ),
    "efficientzero": ("zoo/classic_control/cartpole_efficientzero.py", ()),
    "gumbel_muzero": ("zoo/classic_control/cartpole_gumbel_muzero.py", ()),
    "gumbel_muzero_4sims": ("zoo/classic_control/cartpole_gumbel_muzero.py", ("mcts.num_simulations=4",)),
    "muzero_context": ("zoo/classic_control/cartpole_muzero_context.py", ()),
    "muzero_rnn_full_obs": ("zoo/classic_control/cartpole_muzero_rnn_full_obs.py", ()),
    "stochastic_muzero": ("zoo/classic_control/cartpole_stochastic_muzero.py", ()),
    "unizero": ("zoo/classic_control/cartpole_unizero.py", ()),
    "pendulum_sampled_muzero": ("zoo/classic_control/pendulum_sampled_muzero.py", ()),
    "pendulum_sampled_efficientzero": ("zoo/classic_control/pendulum_sampled_efficientzero.py", ()),
    "pendulum_sampled_unizero": ("zoo/classic_control/pendulum_sampled_unizero.py", ()),
    "acrobot_sampled_muzero": ("zoo/classic_control/acrobot_sampled_muzero.py", ()),
    # two-player games: solved = an evaluation (100 games against OpenSpiel's MCTS bot with 1,000
    # simulations, half as first player) without a lost game (evaluator.stop_loss_rate = 0)
    "tictactoe_muzero": ("zoo/board_games/tictactoe_muzero.py", ()),
    "tictactoe_gumbel_muzero": ("zoo/board_games/tictactoe_gumbel_muzero.py", ()),
    # no config file: the config lz_tune derives from the env (`train --env ID`, lz_tune/env_defaults.py),
    # judged at the bars (CartPole's own threshold is 475, MinAtar has none: DQN's 5M-frame score)
    "generic_cartpole": ("env:CartPole-v1", ("evaluator.stop_value=195.0",)),
    "generic_acrobot": ("env:Acrobot-v1", ()),
    "generic_lunarlander": ("env:LunarLander-v3", ()),
    "generic_minatar_breakout": ("env:MinAtar/Breakout-v1", ("evaluator.stop_value=10.0",)),
}
GENERIC_BUDGETS = {
    "generic_cartpole": 50_000,
    "generic_acrobot": 200_000,
    "generic_lunarlander": 300_000,
    "generic_minatar_breakout": 250_000,
}
"""The env-step budget each generic task is held to (``--max-env-step`` 0 takes it)."""
DEFAULT_VARIANTS = ("muzero", "efficientzero", "gumbel_muzero", "gumbel_muzero_4sims")

_PROGRESS = re.compile(r"train_iter=(\d+) env_steps=(\d+) eval_return=(-?[\d.]+)\S* .*?wall=([\d.]+)s")
_DONE = re.compile(
    r"done: (stop value reached|stop value NOT reached).*?env_steps=(\d+) train_iter=(\d+) "
    r"wall=([\d.]+)s"
)


_FINAL = re.compile(r"this evaluation: return (-?[\d.]+) \+- ([\d.]+) over (\d+) episodes")
_MATCH = re.compile(r"against (.+?): W/D/L ([\d.]+)/([\d.]+)/([\d.]+)")


def final_eval(run_dir: str, episodes: int, seed: int) -> dict:
    """``python -m lz_tune evaluate`` of the run's LAST evaluated weights (``ckpt_latest.pt``: no
    choice among evaluations, so no selection bias) over ``episodes`` episodes from held-out starts
    (evaluator env 0 seeded ``seed``, env i ``seed + i``)."""
    ckpt = os.path.join(run_dir, "ckpt", "ckpt_latest.pt")
    cmd = [sys.executable, "-m", "lz_tune", "evaluate", ckpt, "--episodes", str(episodes), "--seed", str(seed)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    match = _FINAL.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"evaluate {ckpt} failed ({out.returncode}): {out.stderr[-2000:]}")
    row = {
        "final_eval": float(match.group(1)),
        "final_eval_std": float(match.group(2)),
        "final_eval_episodes": int(match.group(3)),
    }
    rates = _MATCH.search(out.stdout)  # two-player games: the win / draw / loss rates against the bot
    if rates:
        row |= {
            "final_opponent": rates.group(1),
            "final_win_rate": float(rates.group(2)),
            "final_draw_rate": float(rates.group(3)),
            "final_loss_rate": float(rates.group(4)),
        }
    return row


def run_one(
    variant: str,
    seed: int,
    max_env_step: int,
    timeout: float,
    extra: tuple[str, ...] = (),
    *,
    final_episodes: int = 0,
    final_seed: int = 7,
) -> dict:
    zoo, overrides = VARIANTS[variant]
    overrides = (*overrides, *extra)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "exp")
        if max_env_step <= 0:
            max_env_step = GENERIC_BUDGETS.get(variant, 20_000)
        config = ["--env", zoo[len("env:") :]] if zoo.startswith("env:") else [zoo]
        cmd = [
            sys.executable,
            "-m",
            "lz_tune",
            "train",
            *config,
            *overrides,
            f"max_env_step={max_env_step}",
            "--seed",
            str(seed),
            "--exp-dir",
            run_dir,
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            process_s = time.perf_counter() - start
            match = _DONE.search(stdout)
            if proc.returncode != 0 or match is None:
                raise RuntimeError(f"{variant} seed {seed} failed ({proc.returncode}): {stderr[-2000:]}")
            row = {
                "variant": variant,
                "seed": seed,
                "solved": match.group(1) == "stop value reached",
                "env_steps": int(match.group(2)),
                "train_iter": int(match.group(3)),
                "driver_s": float(match.group(4)),
                "process_s": round(process_s, 1),
            }
        except subprocess.TimeoutExpired:  # stop it like a batch scheduler would; report where it got
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=300)
            evals = _PROGRESS.findall(stdout)
            if not evals:
                raise RuntimeError(f"{variant} seed {seed}: no evaluation before the {timeout:.0f} s timeout") from None
            best = max(float(e[2]) for e in evals)
            row = {
                "variant": variant,
                "seed": seed,
                "solved": False,
                "timed_out": True,
                "env_steps": int(evals[-1][1]),
                "train_iter": int(evals[-1][0]),
                "best_eval": best,
                "driver_s": float(evals[-1][3]),
                "process_s": round(time.perf_counter() - start, 1),
            }
        if final_episodes:
            row.update(final_eval(run_dir, final_episodes, final_seed))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--variants", default=",".join(DEFAULT_VARIANTS), help=f"comma-separated, from {list(VARIANTS)}"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--max-env-step",
        type=int,
        default=20_000,
        help="env-step budget per run (0: the generic variants' own budgets, GENERIC_BUDGETS)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides added to every variant (e.g. learner.update_path=eager)",
    )
    parser.add_argument(
        "--final-eval-episodes",
        type=int,
        default=0,
        metavar="N",
        help="after each run, evaluate its last evaluated weights over N episodes from "
        "held-out starts (python -m lz_tune evaluate; 0: off)",
    )
    parser.add_argument("--final-eval-seed", type=int, default=7, help="seed of those held-out starts")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    print(f"{'variant':<32}{'seed':>5}{'solved':>8}{'updates':>9}{'env steps':>11}{'driver s':>10}{'process s':>11}")
    rows = []
    for seed in args.seeds:
        for variant in variants:
            r = run_one(
                variant,
                seed,
                args.max_env_step,
                args.timeout,
                tuple(args.set),
                final_episodes=args.final_eval_episodes,
                final_seed=args.final_eval_seed,
            )
            rows.append(r)
            solved = "timeout" if r.get("timed_out") else str(r["solved"])
            print(
                f"{variant:<32}{seed:>5}{solved:>8}{r['train_iter']:>9}{r['env_steps']:>11}"
                f"{r['driver_s']:>10.1f}{r['process_s']:>11.1f}"
                + (f"   best eval {r['best_eval']:.1f}" if r.get("timed_out") else "")
                + (
                    f"   final eval {r['final_eval']:.1f} +- {r['final_eval_std']:.1f} over {r['final_eval_episodes']}"
                    if "final_eval" in r
                    else ""
                )
                + (
                    f" (W/D/L {r['final_win_rate']:.2f}/{r['final_draw_rate']:.2f}/{r['final_loss_rate']:.2f})"
                    if "final_loss_rate" in r
                    else ""
                ),
                flush=True,
            )
    summary = {}
    for variant in variants:
        mine = [r for r in rows if r["variant"] == variant]
        # an unsolved run counts as infinitely slow (a median over solved runs alone would flatter)
        med = {
            k: float(np.median([r[k] if r["solved"] else np.inf for r in mine]))
            for k in ("train_iter", "env_steps", "driver_s", "process_s")
        }
        solved = sum(r["solved"] for r in mine)
        print(
            f"{variant + ' median':<32}{'':>5}{f'{solved}/{len(mine)}':>8}{med['train_iter']:>9.0f}"
            f"{med['env_steps']:>11.0f}{med['driver_s']:>10.1f}{med['process_s']:>11.1f}"
        )
        summary[variant] = {
            "solved": solved,
            "runs": len(mine),  # null median: most runs unsolved
            **{f"median_{k}": v if np.isfinite(v) else None for k, v in med.items()},
        }
        if all("final_eval" in r for r in mine):
            finals = [r["final_eval"] for r in mine]
            summary[variant] |= {"final_evals": finals, "final_eval_min": min(finals)}
            print(
                f"{variant + ' final eval':<32}{'':>5} "
                + " / ".join(f"{v:.1f}" for v in finals)
                + f"  (min {min(finals):.1f}, {mine[0]['final_eval_episodes']} episodes each)"
            )
    print(json.dumps({"runs": rows, "summary": summary}))


if __name__ == "__main__":
    main()
