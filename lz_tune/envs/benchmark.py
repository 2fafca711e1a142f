"""Measure env steps per second of a vector env with uniformly random actions.

Usage::

    python -m lz_tune.envs.benchmark --env-id ALE/Pong-v5 --num-envs 8 --num-threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lz_tune.envs.factory import make_vector_env
from lz_tune.envs.options import AtariOptions, Mode


def measure_steps_per_second(
    *,
    env_id: str,
    num_envs: int,
    steps: int,
    mode: Mode = "collect",
    atari: AtariOptions | None = None,
    seed: int = 0,
) -> float:
    """Env steps per second (``num_envs * steps / seconds``) of ``steps`` batched steps.

    Construction and the first reset are not timed.
    """
    with make_vector_env(env_id=env_id, num_envs=num_envs, seed=seed, mode=mode, atari=atari) as env:
        env.reset()
        rng = np.random.default_rng(seed)
        actions = rng.integers(0, env.action_space_size, size=(steps, num_envs))
        start = time.perf_counter()
        for t in range(steps):
            env.step(actions[t])
        elapsed = time.perf_counter() - start
    return num_envs * steps / elapsed


def main(argv: list[str] | None = None) -> None:
    """Command line entry point; prints env steps/s and batched steps/s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-threads", type=int, default=1, help="ALE threads (Atari only)")
    parser.add_argument("--steps", type=int, default=2000, help="batched steps to time")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--rgb", action="store_true", help="RGB frames instead of grayscale")
    parser.add_argument("--mode", choices=("collect", "eval"), default="collect")
    args = parser.parse_args(argv)
    atari = AtariOptions(num_threads=args.num_threads, image_size=args.image_size, grayscale=not args.rgb)
    rate = measure_steps_per_second(
        env_id=args.env_id, num_envs=args.num_envs, steps=args.steps, mode=args.mode, atari=atari
    )
    print(
        f"{args.env_id}: {args.num_envs} envs, {args.num_threads} thread(s): "
        f"{rate:,.0f} env steps/s ({rate / args.num_envs:,.1f} batched steps/s)"
    )


if __name__ == "__main__":
    main()
