"""The Pong configs run end to end on a tiny budget: collect, train, evaluate, checkpoint."""

import os

import pytest

from lz_tune.checkpoint import load_checkpoint
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver


def test_pong_config_runs_a_few_hundred_env_steps(tmp_path):
    cfg = load_config_module("zoo/atari/pong_muzero.py").with_overrides(
        [
            "env.collector_env_num=4",
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=60",  # cap games so the smoke eval is short
            "mcts.num_simulations=4",
            "model.num_channels=16",
            "model.value_support_size=20",
            "model.reward_support_size=5",
            "model.projection_dim=32",
            "learner.batch_size=8",
            "learner.train_start_after_envsteps=100",
            "learner.update_per_collect=2",
            "evaluator.eval_freq=4",
            "max_env_step=300",
        ]
    )
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    try:
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 300
    assert m["train_iter"] > 0
    assert m["evaluations"] >= 1
    assert driver.buffer.obs_shape == (4, 64, 64)
    ckpt = load_checkpoint(os.path.join(tmp_path, "ckpt", "ckpt_latest.pt"), policy_type="muzero")
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]


@pytest.mark.slow
def test_pong_efficientzero_runs_async_for_a_few_hundred_env_steps(tmp_path, ray_cluster):
    """The EfficientZero Pong config (conv network + value-prefix LSTM) on Ray actors."""
    cfg = load_config_module("zoo/atari/pong_efficientzero.py").with_overrides(
        [
            "env.collector_env_num=4",
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=60",
            "mcts.num_simulations=4",
            "model.num_channels=16",
            "model.value_support_size=20",
            "model.reward_support_size=5",
            "model.projection_dim=32",
            "efficientzero.lstm_hidden_size=32",
            "learner.batch_size=8",
            "learner.train_start_after_envsteps=100",
            "learner.update_per_collect=2",
            "evaluator.eval_freq=4",
            "max_env_step=300",
            "async_pipeline.enabled=True",
            "async_pipeline.collector_num_cpus=0.5",
            "async_pipeline.evaluator_num_cpus=0.5",
        ]
    )
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    try:
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 300 and m["train_iter"] > 0 and m["evaluations"] >= 1
    ckpt = load_checkpoint(os.path.join(tmp_path, "ckpt", "ckpt_latest.pt"), policy_type="efficientzero")
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]


@pytest.mark.slow
@pytest.mark.parametrize("policy_type", ["muzero_context", "muzero_rnn_full_obs", "unizero"])
def test_pong_history_conditioned_types_run_async(tmp_path, ray_cluster, policy_type):
    """The history-conditioned Pong configs (conv network / UniZero's conv encoder + transformer,
    per-env carried state or KV caches) on Ray actors."""
    cfg = load_config_module(f"zoo/atari/pong_{policy_type}.py").with_overrides(
        [
            "env.collector_env_num=4",
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=60",
            "mcts.num_simulations=4",
            "model.num_channels=16",
            "model.value_support_size=20",
            "model.reward_support_size=5",
            "model.projection_dim=32",
            "context.rnn_hidden_size=32",
            "unizero.embed_dim=32",
            "learner.batch_size=8",
            "learner.train_start_after_envsteps=100",
            "learner.update_per_collect=2",
            "evaluator.eval_freq=4",
            "max_env_step=300",
            "async_pipeline.enabled=True",
            "async_pipeline.collector_num_cpus=0.5",
            "async_pipeline.evaluator_num_cpus=0.5",
        ]
    )
    assert cfg.policy_type == policy_type
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    try:
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 300 and m["train_iter"] > 0 and m["evaluations"] >= 1
    ckpt = load_checkpoint(os.path.join(tmp_path, "ckpt", "ckpt_latest.pt"), policy_type=policy_type)
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]
