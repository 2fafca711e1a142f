"""Where the CPU search engines stop paying: the same search with ``mcts.inference=auto`` (the
engine) and ``torch`` over network widths, for the rule ``auto`` follows (README, "Tree search
speed").

Per policy type and width W: MLP types use ``model.hidden_sizes=(W,)``, ``model.latent_dim=W``
(EfficientZero: a W-wide LSTM); UniZero uses ``unizero.embed_dim=W`` (W / 32 heads of 32, a
window of 8 tokens); 601-bin heads, 25 simulations, batches 8 and 64, torch and BLAS on
``--threads`` threads. The two inferences are interleaved repeat by repeat; the figure is the
median over the repeats of torch seconds / engine seconds (> 1: the engine is faster).

    python benchmarks/inference_crossover.py [--types muzero,efficientzero,unizero]
        [--widths 64,256,1024] [--repeats 5] [--threads 1]

The LAST line is one JSON object: ``<type>_w<W>_b<B>_engine_speedup``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from lz_tune.algos import get_algorithm
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

NUM_SIMULATIONS = 25


def make_search(policy_type: str, width: int, batch: int, inference: str, num_actions: int = 6):
    cfg = Config().with_updates(
        {
            "policy_type": policy_type,
            "mcts.inference": inference,
            "model.kind": "mlp",
            "model.latent_dim": width,
            "model.hidden_sizes": (width,),
            "efficientzero.lstm_hidden_size": width,
            "unizero.embed_dim": width,
            "unizero.num_heads": max(1, width // 32),
            "unizero.infer_context_length": 4,
            "model.value_support_size": 300,
            "model.reward_support_size": 300,
        }
    )
    spec = EnvSpecInfo(
        observation_shape=(8,), frame_shape=(8,), frame_stack=1, action_space_size=num_actions, is_atari=False
    )
    torch.manual_seed(0)
    policy = get_algorithm(policy_type).make_policy(cfg, spec)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(batch, 8)).astype(np.float32)
    mask, to_play = np.ones((batch, num_actions), bool), -np.ones(batch, np.int64)

    def run() -> float:
        t = time.perf_counter()
        policy.search(obs, mask, to_play, num_simulations=NUM_SIMULATIONS, noise=True, rng=rng)
        return time.perf_counter() - t

    for _ in range(2):
        run()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", default="muzero,efficientzero,unizero")
    parser.add_argument("--widths", default="64,256,1024")
    parser.add_argument("--batches", default="8,64")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, float] = {}
    print(f"{'type':<16}{'width':>7}{'batch':>7}{'engine ms':>11}{'torch ms':>10}{'torch / engine':>16}")
    for policy_type in args.types.split(","):
        for width in (int(w) for w in args.widths.split(",")):
            for batch in (int(b) for b in args.batches.split(",")):
                engine, reference = (make_search(policy_type, width, batch, i) for i in ("auto", "torch"))
                times = np.array([(engine(), reference()) for _ in range(args.repeats)])
                speedup = float(np.median(times[:, 1] / times[:, 0]))
                results[f"{policy_type}_w{width}_b{batch}_engine_speedup"] = round(speedup, 3)
                print(
                    f"{policy_type:<16}{width:>7}{batch:>7}{np.median(times[:, 0]) * 1e3:>11.1f}"
                    f"{np.median(times[:, 1]) * 1e3:>10.1f}{speedup:>16.2f}"
                )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
