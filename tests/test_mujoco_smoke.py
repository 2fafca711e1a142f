"""The MuJoCo config (gymnasium's HalfCheetah-v5, 6-D continuous torque) on Ray actors for a few
thousand env steps, and its checkpoint replayed by ``evaluate_checkpoint``. Needs the optional
extra (``pip install -e ".[mujoco]"``); skipped without it."""

from __future__ import annotations

import os

import pytest

from lz_tune.checkpoint import load_checkpoint
from lz_tune.checkpoint_eval import evaluate_checkpoint
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver

pytest.importorskip("mujoco")
pytest.importorskip("imageio")


@pytest.mark.slow
def test_halfcheetah_sampled_efficientzero_runs_async_and_its_checkpoint_evaluates(tmp_path, ray_cluster):
    cfg = load_config_module("zoo/mujoco/halfcheetah_sampled_efficientzero.py").with_overrides(
        [
            "env.collector_env_num=4",
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=200",
            "mcts.num_simulations=8",
            "sampled.num_samples=5",
            "model.latent_dim=64",
            "model.hidden_sizes=(64,)",
            "efficientzero.lstm_hidden_size=32",
            "buffer.game_segment_length=50",
            "learner.batch_size=32",
            "learner.update_per_collect=10",
            "evaluator.eval_freq=40",
            "max_env_step=3000",
            "async_pipeline.enabled=True",
            "async_pipeline.num_collector_actors=1",
            "async_pipeline.collector_num_cpus=0.5",
            "async_pipeline.evaluator_num_cpus=0.5",
        ]
    )
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    try:
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 3000 and m["train_iter"] > 0 and m["evaluations"] >= 1
    driver.buffer.check_invariants()
    path = os.path.join(tmp_path, "ckpt", "ckpt_latest.pt")
    ckpt = load_checkpoint(path, policy_type="sampled_efficientzero")
    replay = evaluate_checkpoint(path, n_episodes=1)
    assert len(replay.eval.returns) == 1 and replay.counters["train_iter"] == ckpt["counters"]["train_iter"]
