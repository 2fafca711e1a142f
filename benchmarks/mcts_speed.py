"""Tree-search speed: 50 simulations, batched over B trees, with small networks of every policy
type, on the default search inference (``mcts.inference=auto``: the CPU engines of
``lz_tune/models/*_inference.py``) and on the torch reference path (``--inference both``, the
default; keys ``..._torch[_<type>]``: for every type but MuZero's family the "before" figures of
the engines).

Model: one 64-wide hidden layer per network, latent 64, 601-bin value and reward heads (support
300), torch and numpy's BLAS on 1 thread. Discrete cases: (actions=2, batch=8) and (actions=18,
batch=64). Per type:

- ``muzero``: the MuZero MLP;
- ``gumbel_muzero`` (max_num_considered_actions 16), ``muzero_context``: MuZero's engine;
- ``efficientzero``: + a 64-wide value-prefix LSTM (per-node state latent, h, c, prefix, depth);
- ``stochastic_muzero``: afterstates and 32 chance codes (decision and chance nodes alternate);
- ``muzero_rnn_full_obs``: + a 64-wide GRU history read into prediction;
- ``unizero``: a 2-layer transformer, E = 64, 2 heads, window of 8 tokens, per-node key/value
  windows; ``unizero_uncached``: its uncached reference that recomputes every leaf's path of tokens
  from its root (``unizero.search_cache=False``, key suffix ``_unizero_uncached``; ~10 s a search
  at B=64);
- ``sampled_*`` (continuous actions: tanh-Gaussian policy, K = 5 and 20 samples per expansion,
  action dims 1 and 6, batch 8; keys ``d{D}_k{K}_b8...``), compared with MuZero at A=2, B=8.

The repeats of all cases of one (A, B) are interleaved (one search of each case per round), so
box noise hits every type alike; ``_over_muzero`` keys are the medians of the per-round ratios to
MuZero's engine. Prints sims/s (batch x simulations / MEDIAN seconds of one search, root inference
included; ``best``: the fastest repeat) and the share of search time outside the model calls
(tree kernels, numpy glue, state gathering, the sampled types' sampling). The LAST line is one
JSON object with the figures.

    python benchmarks/mcts_speed.py [--repeats 30] [--inference auto|torch|both]
        [--types muzero,gumbel_muzero,efficientzero,stochastic_muzero,muzero_rnn_full_obs,unizero,sampled_muzero,...]
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from typing import Callable

import numpy as np
import torch

from lz_tune.algos import get_algorithm
from lz_tune.algos.sampled_muzero import SampledActing
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

NUM_SIMULATIONS = 50
ALL_TYPES = (
    "muzero,gumbel_muzero,muzero_context,efficientzero,stochastic_muzero,muzero_rnn_full_obs,unizero,"
    "unizero_uncached,sampled_muzero,sampled_efficientzero,sampled_unizero"
)


def make_case(
    num_actions: int,
    batch: int,
    inference: str,
    obs_dim: int = 4,
    policy_type: str = "muzero",
    action_dim: int = 0,
    num_samples: int = 5,
) -> Callable[[], tuple[float, float]]:
    """A search of ``policy_type`` on fixed observations: returns a function that runs it once
    and returns (seconds, seconds inside the model calls). action_dim > 0: a continuous action
    space of that many dims (``num_actions`` unused), searched with ``num_samples`` samples per
    expansion. inference ``uncached``: UniZero's uncached reference."""
    cfg = Config().with_updates(
        {
            "policy_type": policy_type,
            "mcts.inference": "auto" if inference == "uncached" else inference,
            "model.kind": "mlp",
            "unizero.embed_dim": 64,
            "unizero.num_heads": 2,
            "unizero.infer_context_length": 4,
            "unizero.search_cache": inference != "uncached",
            "model.latent_dim": 64,
            "model.hidden_sizes": (64,),
            "model.value_support_size": 300,
            "model.reward_support_size": 300,
            "mcts.num_simulations": NUM_SIMULATIONS,
            "efficientzero.lstm_hidden_size": 64,
            "context.rnn_hidden_size": 64,
            "stochastic.chance_space_size": 32,
            "sampled.num_samples": num_samples,
        }
    )
    spec = EnvSpecInfo(
        observation_shape=(obs_dim,),
        frame_shape=(obs_dim,),
        frame_stack=1,
        action_space_size=1 if action_dim else num_actions,
        is_atari=False,
        action_dim=action_dim,
        action_low=(-1.0,) * action_dim,
        action_high=(1.0,) * action_dim,
    )
    torch.manual_seed(0)
    policy = get_algorithm(policy_type).make_policy(cfg, spec)
    search = partial(policy.acting.search, policy) if isinstance(policy.acting, SampledActing) else policy.search
    num_actions = spec.action_space_size
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(batch, obs_dim)).astype(np.float32)
    mask = np.ones((batch, num_actions), bool)
    to_play = -np.ones(batch, np.int64)

    model_time = [0.0]
    backend = policy.search_backend

    def timed_backend(obs, *args, **kwargs):
        roots = backend(obs, *args, **kwargs)
        inner = roots.recurrent_fn

        def timed_recurrent(latent, action):
            t = time.perf_counter()
            out = inner(latent, action)
            model_time[0] += time.perf_counter() - t
            return out

        return roots._replace(recurrent_fn=timed_recurrent)

    policy.search_backend = timed_backend  # type: ignore[method-assign]

    def run() -> tuple[float, float]:
        model_time[0] = 0.0
        t = time.perf_counter()
        search(obs, mask, to_play, num_simulations=NUM_SIMULATIONS, noise=True, rng=rng)
        return time.perf_counter() - t, model_time[0]

    for _ in range(3):  # warm-up (numba compile / cache load, allocator)
        run()
    return run


def time_interleaved(cases: dict[str, Callable], repeats: int) -> dict[str, np.ndarray]:
    """``{key: [repeats, 2]}`` (seconds, model seconds) with one search of every case per round."""
    times = {key: [] for key in cases}
    for _ in range(repeats):
        for key, run in cases.items():
            times[key].append(run())
    return {key: np.array(t) for key, t in times.items()}


def summarize(times: np.ndarray, batch: int) -> dict[str, float]:
    seconds, model = times[:, 0], times[:, 1]
    median = float(np.median(seconds))
    return {
        "sims_per_s": batch * NUM_SIMULATIONS / median,
        "search_ms": median * 1e3,
        "sims_per_s_best": batch * NUM_SIMULATIONS / float(seconds.min()),
        "share_outside_model": 1.0 - float(np.median(model / seconds)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--inference",
        choices=["auto", "torch", "both"],
        default="both",
        help="mcts.inference: auto (the CPU engines), torch, or both (default; the headline keys "
        "are auto's, torch's get a _torch suffix before the type's)",
    )
    parser.add_argument(
        "--types",
        default="muzero,gumbel_muzero,efficientzero",
        help=f"comma-separated policy types (all: {ALL_TYPES}); keys of a type other than muzero get a _<type> suffix",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    engines = ["auto", "torch"] if args.inference == "both" else [args.inference]
    types = args.types.split(",")
    discrete = [(t, e) for t in types if t != "unizero_uncached" and not t.startswith("sampled_") for e in engines] + [
        ("unizero", "uncached") for t in types if t == "unizero_uncached"
    ]
    results: dict[str, float] = {}
    print(
        f"{'case':<17}{'type':<23}{'inference':<11}{'sims/s':>10}{'best sims/s':>13}{'ms/search':>11}"
        f"{'outside model':>15}{'x muzero':>10}"
    )

    def report(case: str, key: str, policy_type: str, inference: str, r: dict, ratio: float) -> None:
        suffix = (
            ("_torch" if inference == "torch" and args.inference == "both" else "")
            + ("" if policy_type == "muzero" else f"_{policy_type}")
            + ("_uncached" if inference == "uncached" else "")
        )
        for name in ("sims_per_s", "sims_per_s_best", "search_ms", "share_outside_model"):
            results[f"{key}_{name}{suffix}"] = round(r[name], 3 if name in ("search_ms", "share_outside_model") else 1)
        if not (policy_type == "muzero" and inference == "auto"):
            results[f"{key}_over_muzero{suffix}"] = round(ratio, 3)
        print(
            f"{case:<17}{policy_type:<23}{inference:<11}{r['sims_per_s']:>10.0f}{r['sims_per_s_best']:>13.0f}"
            f"{r['search_ms']:>11.2f}{r['share_outside_model']:>14.1%}{ratio:>10.2f}"
        )

    sampled = [t for t in types if t.startswith("sampled_")]
    for a, b in [(2, 8), (18, 64)]:
        cases = {run: make_case(a, b, run[1], policy_type=run[0]) for run in discrete}
        if ("muzero", "auto") not in cases:
            cases[("muzero", "auto")] = make_case(a, b, "auto")
        if b == 8:  # the sampled types at batch 8, against MuZero's engine in the same rounds
            cases.update(
                {
                    (t, e, d, k): make_case(0, 8, e, policy_type=t, action_dim=d, num_samples=k)
                    for t in sampled
                    for e in engines
                    for d in (1, 6)
                    for k in (5, 20)
                }
            )
        times = time_interleaved(cases, args.repeats)
        base = times[("muzero", "auto")][:, 0]
        for run, t in times.items():
            if run == ("muzero", "auto") and "auto" not in engines:
                continue
            ratio = float(np.median(base / t[:, 0]))
            if len(run) == 2:
                report(f"A={a} B={b}", f"a{a}_b{b}", run[0], run[1], summarize(t, b), ratio)
            else:
                policy_type, inference, d, k = run
                report(f"D={d} K={k} B=8", f"d{d}_k{k}_b8", policy_type, inference, summarize(t, b), ratio)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
