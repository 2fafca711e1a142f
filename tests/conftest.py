"""Shared fixtures: a tiny CartPole MuZero config that trains in seconds on one CPU core."""

from __future__ import annotations

import os
from typing import Callable

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(capsys, *args: str, cwd: str = REPO_ROOT) -> tuple[int, str, str]:
    """``python -m lz_tune ARGS`` in this process, run from ``cwd``: (exit code, stdout, stderr)."""
    from lz_tune.__main__ import main

    before = os.getcwd()
    os.chdir(cwd)
    try:
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse (--help, usage errors)
            code = e.code
    finally:
        os.chdir(before)
    out = capsys.readouterr()
    return code, out.out, out.err


CARTPOLE_ZOO = os.path.join("zoo", "classic_control", "cartpole_muzero.py")

#: overrides of the CartPole zoo config that make every stage tiny (CLI-style strings)
TINY_OVERRIDES: tuple[str, ...] = (
    "env.collector_env_num=2",
    "env.evaluator_env_num=2",
    "evaluator.n_evaluator_episode=2",
    "mcts.num_simulations=4",
    "learner.batch_size=16",
    "learner.update_per_collect=3",
    "buffer.game_segment_length=10",
    "buffer.num_unroll_steps=3",
    "buffer.td_steps=3",
    "model.latent_dim=16",
    "model.hidden_sizes=(16,)",
    "model.value_support_size=10",
    "model.reward_support_size=5",
    "model.projection_dim=16",
    "evaluator.eval_freq=3",
    "env.max_episode_steps=30",
    "learner.num_threads=1",
)


@pytest.fixture(scope="session")
def tiny_overrides() -> tuple[str, ...]:
    return TINY_OVERRIDES


@pytest.fixture(scope="session")
def zoo_config_path() -> str:
    """The CartPole zoo config, relative to the repository root (the CLI tests run there)."""
    return CARTPOLE_ZOO


@pytest.fixture(scope="session")
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_cfg() -> Callable[..., "object"]:
    """``tiny_cfg("key=value", ...)``: the tiny CartPole config with extra overrides on top."""
    import torch

    from lz_tune.config_loader import load_config_module

    torch.set_num_threads(1)
    base = load_config_module(os.path.join(REPO_ROOT, CARTPOLE_ZOO)).with_overrides(list(TINY_OVERRIDES))

    def make(*extra: str):
        return base.with_overrides(list(extra)) if extra else base

    return make


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (as a collector runs): the torch reference paths of the
    search-engine tests are ~10x slower with two OpenMP threads on a busy 2-core box."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def _ray_started_here():
    """Shuts down, at the end of the test session, the Ray cluster :func:`ray_cluster` started."""
    started: list[bool] = []
    yield started
    if started:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="module")
def ray_cluster(_ray_started_here):
    """A 2-CPU Ray cluster, started once for the whole test session (a start costs ~12 s on the
    2-core box) and reused by every module that asks for it; started again if a test shut it
    down (the notebook tests do: a notebook starts its own). Ray's token authentication stays
    as Ray sets it (on for this local cluster): tests run the way users do (lz_tune.ray_auth)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
        _ray_started_here.append(True)
    yield
