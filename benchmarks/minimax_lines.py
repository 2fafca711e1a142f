"""Does an ``alphazero`` checkpoint ever lose to the perfect minimax bot? Plays its greedy agent
(the evaluator's search: no noise, the most visited move) against EVERY line of the minimax bot,
from both seats: at each of the bot's turns, every one of its equally good moves (the moves it
draws at random among in evaluation) is followed. The agent is deterministic, so these lines are
all the games the evaluation can produce; sampled evaluations only estimate the loss rate, this
counts the lost lines exactly.

For games small enough to enumerate (tic-tac-toe: ~100-130 lines per checkpoint, a few seconds).
Prints every lost line (``M`` = minimax's move, ``A`` = the agent's), then one JSON line.

    python benchmarks/minimax_lines.py runs/ttt_s0/ckpt/ckpt_best.pt
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # (lz_tune from this checkout, installed or not)


def count_lines(policy: Any, game: Any, *, num_simulations: int) -> tuple[int, list[tuple[int, list[str]]]]:
    """(lines played, [(agent seat, moves of a lost line)]) of ``policy`` (an alphazero policy)
    against every line of the full-depth minimax bot, from both seats."""
    from lz_tune.envs.openspiel_bots import MinimaxOpponent

    minimax = MinimaxOpponent(game)
    rng = np.random.default_rng(0)  # unused without noise; the search asks for one
    lost: list[tuple[int, list[str]]] = []
    played = 0

    def agent_move(state: Any) -> int:
        out = policy.search([state], num_simulations=num_simulations, noise=False, rng=rng)
        return int(np.asarray(out.visit_counts)[0].argmax())

    def play(state: Any, seat: int, moves: list[str]) -> None:
        nonlocal played
        if state.is_terminal():
            played += 1
            if state.returns()[seat] < 0:
                lost.append((seat, moves))
            return
        if state.current_player() == seat:
            choices, tag = [agent_move(state)], "A"
        else:
            choices, tag = list(minimax.best_moves(state)), "M"
        for action in choices:
            child = state.clone()
            child.apply_action(action)
            play(child, seat, [*moves, f"{tag}{action}"])

    for seat in (0, 1):
        play(game.new_initial_state(), seat, [])
    return played, lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="an alphazero checkpoint file (ckpt_best.pt, ckpt_latest.pt)")
    args = parser.parse_args(argv)

    from lz_tune.algos.parts import simulations_per_search
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.config import Config
    from lz_tune.envs.openspiel_game import is_openspiel_id, load_openspiel_game
    from lz_tune.workers import Evaluator

    ck = load_checkpoint(args.checkpoint)
    cfg = Config.from_dict(ck["config"])
    if cfg.policy_type != "alphazero" or not is_openspiel_id(cfg.env.env_id):
        raise SystemExit(f"{args.checkpoint}: an alphazero checkpoint of an openspiel:<game> env is needed")
    evaluator = Evaluator(cfg, seed=0)
    try:
        evaluator.policy.load_weights(ck["learner"]["network"])
        game = load_openspiel_game(cfg.env.env_id).game
        sims = simulations_per_search(cfg, collect=False)
        played, lost = count_lines(evaluator.policy, game, num_simulations=sims)
    finally:
        evaluator.close()
    for seat, moves in lost:
        print(f"lost as {'first' if seat == 0 else 'second'} player: {' '.join(moves)}")
    print(f"{played} lines against minimax from both seats, {len(lost)} lost")
    print(json.dumps({"lines": played, "lost": len(lost), "lost_lines": [" ".join(m) for _, m in lost]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
