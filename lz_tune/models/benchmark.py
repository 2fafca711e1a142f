"""Microbenchmark of ``recurrent_inference`` on the tree-search hot path.

Usage::

    python -m lz_tune.models.benchmark [--batch 8 64] [--actions 2 18] [--latent-dim 64]
        [--hidden 64] [--support 300] [--rounds 30] [--calls 300]

Runs single-threaded under ``torch.inference_mode()`` on an eval-mode
:class:`~lz_tune.models.mlp.MuZeroMLPNetwork` and prints microseconds per call (minimum
and median over ``rounds`` timed rounds of ``calls`` calls; the minimum is the least
disturbed by other processes on a shared machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from lz_tune.models.mlp import MuZeroMLPNetwork

__all__ = ["time_recurrent_inference", "main"]


def time_recurrent_inference(
    net: MuZeroMLPNetwork, *, batch: int, rounds: int = 30, calls: int = 300
) -> tuple[float, float]:
    """Return ``(min, median)`` microseconds per ``net.recurrent_inference`` call at ``batch``."""
    latent = torch.rand(batch, net.latent_dim)
    action = torch.randint(0, net.action_space_size, (batch,))
    samples = []
    with torch.inference_mode():
        for _ in range(calls):
            net.recurrent_inference(latent, action)
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                net.recurrent_inference(latent, action)
            samples.append((time.perf_counter() - start) / calls * 1e6)
    return min(samples), statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--actions", type=int, nargs="+", default=[2, 18])
    parser.add_argument("--latent-dim", type=int, default=64)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64])
    parser.add_argument("--support", type=int, default=300)
    parser.add_argument("--layer-norm", action="store_true")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, threads={torch.get_num_threads()}, latent_dim={args.latent_dim}, "
        f"hidden={tuple(args.hidden)}, bins={2 * args.support + 1}, layer_norm={args.layer_norm}"
    )
    for actions in args.actions:
        net = MuZeroMLPNetwork(
            observation_dim=4,
            action_space_size=actions,
            latent_dim=args.latent_dim,
            hidden_sizes=tuple(args.hidden),
            value_support_size=args.support,
            reward_support_size=args.support,
            layer_norm=args.layer_norm,
        ).eval()
        for batch in args.batch:
            best, median = time_recurrent_inference(net, batch=batch, rounds=args.rounds, calls=args.calls)
            print(f"A={actions:<3d} B={batch:<4d} recurrent_inference: min {best:7.1f} us  median {median:7.1f} us")


if __name__ == "__main__":
    main()
