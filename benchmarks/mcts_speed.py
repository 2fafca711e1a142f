"""Tree-search speed: 50 simulations, batched over B trees, with a small MuZero MLP, for the
MuZero (pUCT), Gumbel MuZero and EfficientZero searches.

Model: one 64-wide hidden layer per network, latent 64, 601-bin value and reward heads
(support 300), torch on 1 thread. Cases: (actions=2, batch=8) and (actions=18, batch=64).
Each case is timed with the default search inference (``mcts.inference=auto``: this MLP runs
through :class:`lz_tune.models.mlp_inference.MLPSearchInference`, numpy's BLAS limited to
torch's 1 thread) and with ``mcts.inference=torch`` (the reference path), same weights.
Then the same case with the Gumbel search (``gumbel_muzero``: same network and engine,
max_num_considered_actions 16) and the EfficientZero search (``efficientzero``: the same MLP
plus a 64-wide value-prefix LSTM; torch path, per-node state (latent, h, c, prefix, depth)).
With ``unizero`` in ``--types``: UniZero's search (a 2-layer transformer, E = 64, 2 heads, window
of 8 tokens, the same 601-bin heads) with its per-node key/value windows (``inference`` auto) and
with the uncached reference that recomputes every leaf's path of tokens from its root
(``unizero.search_cache=False``, key suffix ``_unizero_uncached``).
With ``sampled_muzero`` in ``--types``: the sampled search on continuous actions (tanh-Gaussian
policy, K = 5 and 20 samples per expansion, action dims 1 and 6, batch 8; torch path, K
actions per node in the state store).

Prints sims/s (batch x simulations / MEDIAN seconds of one search over the repeats, root
inference included; ``best``: the fastest repeat, i.e. the code's speed without interference) and
the share of search time spent outside the model calls (tree kernels, numpy glue, latent
gathering). The LAST line is one JSON object with the figures.

    python benchmarks/mcts_speed.py [--repeats 30] [--types muzero,gumbel_muzero,efficientzero,sampled_muzero,unizero]
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

NUM_SIMULATIONS = 50


def bench_case(num_actions: int, batch: int, repeats: int, inference: str, obs_dim: int = 4,
               policy_type: str = "muzero", action_dim: int = 0, num_samples: int = 5) -> dict[str, float]:
    """action_dim > 0: a continuous action space of that many dims (``num_actions`` unused),
    searched by a sampled type with ``num_samples`` samples per expansion."""
    cfg = Config().with_updates({"policy_type": policy_type, "mcts.inference": "auto" if inference == "uncached"
                                 else inference, "model.kind": "mlp",
                                 "unizero.embed_dim": 64, "unizero.num_heads": 2, "unizero.infer_context_length": 4,
                                 "unizero.search_cache": inference != "uncached",
                                 "model.latent_dim": 64, "model.hidden_sizes": (64,),
                                 "model.value_support_size": 300, "model.reward_support_size": 300,
                                 "mcts.num_simulations": NUM_SIMULATIONS, "efficientzero.lstm_hidden_size": 64,
                                 "sampled.num_samples": num_samples})
    spec = EnvSpecInfo(observation_shape=(obs_dim,), frame_shape=(obs_dim,), frame_stack=1,
                       action_space_size=1 if action_dim else num_actions, is_atari=False, action_dim=action_dim,
                       action_low=(-1.0,) * action_dim, action_high=(1.0,) * action_dim)
    torch.manual_seed(0)
    policy = get_algorithm(policy_type).make_policy(cfg, spec)
    search = policy.sampled_search if hasattr(policy, "sampled_search") else policy.search
    num_actions = spec.action_space_size
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(batch, obs_dim)).astype(np.float32)
    mask = np.ones((batch, num_actions), bool)
    to_play = -np.ones(batch, np.int64)

    model_time = [0.0]
    backend = policy.search_backend

    def timed_backend(obs):
        *root, inner = backend(obs)

        def timed_recurrent(latent, action):
            t = time.perf_counter()
            out = inner(latent, action)
            model_time[0] += time.perf_counter() - t
            return out

        return (*root, timed_recurrent)

    policy.search_backend = timed_backend  # type: ignore[method-assign]
    for _ in range(3):  # warm-up (numba compile / cache load, allocator)
        search(obs, mask, to_play, num_simulations=NUM_SIMULATIONS, noise=True, rng=rng)
    times = []
    model_shares = []
    for _ in range(repeats):
        model_time[0] = 0.0
        t = time.perf_counter()
        search(obs, mask, to_play, num_simulations=NUM_SIMULATIONS, noise=True, rng=rng)
        dt = time.perf_counter() - t
        times.append(dt)
        model_shares.append(model_time[0] / dt)
    median = float(np.median(times))
    return {"sims_per_s": batch * NUM_SIMULATIONS / median, "search_ms": median * 1e3,
            "sims_per_s_best": batch * NUM_SIMULATIONS / float(np.min(times)),
            "share_outside_model": 1.0 - float(np.median(model_shares))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--inference", choices=["auto", "torch", "both"], default="both",
                        help="mcts.inference to time: auto (the default engine: numpy for this MLP), torch, "
                             "or both (default; the headline keys are auto's, torch's get a _torch suffix)")
    parser.add_argument("--types", default="muzero,gumbel_muzero,efficientzero",
                        help="comma-separated policy types; muzero is timed with each --inference, the others "
                             "with the default inference only (keys get a _<type> suffix)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    engines = ["auto", "torch"] if args.inference == "both" else [args.inference]
    types = args.types.split(",")
    runs = [("muzero", e) for e in engines if "muzero" in types] + \
        [(t, "auto") for t in types if t != "muzero" and not t.startswith("sampled_")] + \
        [("unizero", "uncached") for t in types if t == "unizero"]
    results = {}
    print(f"{'case':<14}{'type':<15}{'inference':<11}{'sims/s':>10}{'best sims/s':>13}{'ms/search':>12}"
          f"{'outside model':>16}")
    for a, b in [(2, 8), (18, 64)]:
        for policy_type, inference in runs:
            r = bench_case(a, b, args.repeats, inference, policy_type=policy_type)
            key = f"a{a}_b{b}"
            suffix = ("_torch" if inference == "torch" and args.inference == "both" else "") + \
                ("" if policy_type == "muzero" else f"_{policy_type}") + ("_uncached" if inference == "uncached" else "")
            results[f"{key}_sims_per_s{suffix}"] = round(r["sims_per_s"], 1)
            results[f"{key}_sims_per_s_best{suffix}"] = round(r["sims_per_s_best"], 1)
            results[f"{key}_search_ms{suffix}"] = round(r["search_ms"], 3)
            results[f"{key}_share_outside_model{suffix}"] = round(r["share_outside_model"], 3)
            print(f"A={a:<3} B={b:<6}{policy_type:<15}{inference:<11}{r['sims_per_s']:>10.0f}{r['sims_per_s_best']:>13.0f}"
                  f"{r['search_ms']:>12.2f}{r['share_outside_model']:>15.1%}")
    for policy_type in [t for t in types if t.startswith("sampled_")]:
        for action_dim in (1, 6):
            for k in (5, 20):
                r = bench_case(0, 8, args.repeats, "auto", policy_type=policy_type, action_dim=action_dim,
                               num_samples=k)
                key = f"d{action_dim}_k{k}_b8"
                suffix = "" if policy_type == "sampled_muzero" else f"_{policy_type}"
                results[f"{key}_sims_per_s{suffix}"] = round(r["sims_per_s"], 1)
                results[f"{key}_sims_per_s_best{suffix}"] = round(r["sims_per_s_best"], 1)
                results[f"{key}_share_outside_model{suffix}"] = round(r["share_outside_model"], 3)
                print(f"D={action_dim} K={k:<3} B=8   {policy_type:<22}{'auto':<4}{r['sims_per_s']:>10.0f}"
                      f"{r['sims_per_s_best']:>13.0f}{r['search_ms']:>12.2f}{r['share_outside_model']:>15.1%}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
