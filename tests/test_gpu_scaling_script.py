"""Smoke run of ``benchmarks/gpu_scaling.py`` on a tiny budget: both parts (learner updates/s
on the CPU, the async Pong driver with one collector actor on Ray) run as a user would run
them, and the last line is the promised JSON. On a machine without CUDA the GPU figures are
null; figures themselves are machine-dependent and not asserted beyond being positive."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO_ROOT

SMOKE = [
    "benchmarks/gpu_scaling.py",
    "--updates",
    "1",
    "--repeats",
    "1",
    "--batch-size",
    "4",
    "--fill",
    "100",
    "--collectors",
    "1",
    "--seconds",
    "5",
    "--warmup",
    "0",
    "env.collector_env_num=2",
    "mcts.num_simulations=2",
]


@pytest.mark.slow  # 40 s on the idle 2-core box (70-90 s when busy): Pong envs, a Ray actor, two parts
def test_gpu_scaling_smoke_prints_the_promised_json():
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    run = subprocess.run([sys.executable, *SMOKE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert any(line.startswith("| learner.device |") for line in lines), "part 1's markdown table"
    assert any(line.startswith("| collector actors |") for line in lines), "part 2's markdown table"
    out = json.loads(lines[-1])
    assert {"learner_updates_per_s_cpu", "learner_updates_per_s_gpu", "env_steps_per_s", "machine"} <= set(out)
    assert out["learner_updates_per_s_cpu"] > 0
    assert set(out["env_steps_per_s"]) == {"1"} and out["env_steps_per_s"]["1"] > 0
    assert out["machine"]["cpus"] == os.cpu_count()
    if not torch.cuda.is_available():
        assert out["learner_updates_per_s_gpu"] is None and out["machine"]["gpu"] is None
        assert "torch.cuda.is_available() is False" in run.stdout
    else:
        assert out["learner_updates_per_s_gpu"] > 0
