"""Every registered policy type through every entry point on a tiny budget: the sync CLI with a
resume from its folder, the async pipeline on real Ray actors, ``ray_local_mode``, and Tune
trials with checkpoints that load back. Adding a built-in type to
``lz_tune.policy_registry.BUILTIN_POLICY_TYPES`` adds it here (and needs a smoke config in
``SMOKE_CONFIG``).

MuZero's own entry-point tests (test_cli, test_train_muzero_segment_async, test_tune) are more thorough, so
its rows here run only with ``-m slow``.
"""

from __future__ import annotations

import os

import pytest

from lz_tune.checkpoint import load_checkpoint
from lz_tune.config import parse_override
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver
from lz_tune.policy_registry import POLICY_TYPES
from tests.conftest import REPO_ROOT, TINY_OVERRIDES
from tests.test_cli import _final_counters, _main

#: policy type -> the zoo config its smoke runs start from
SMOKE_CONFIG = {
    "muzero": "zoo/classic_control/cartpole_muzero.py",
    "efficientzero": "zoo/classic_control/cartpole_efficientzero.py",
    "gumbel_muzero": "zoo/classic_control/cartpole_gumbel_muzero.py",
    "sampled_muzero": "zoo/classic_control/pendulum_sampled_muzero.py",
    "sampled_efficientzero": "zoo/classic_control/pendulum_sampled_efficientzero.py",
    "stochastic_muzero": "zoo/classic_control/cartpole_stochastic_muzero.py",
    "muzero_context": "zoo/classic_control/cartpole_muzero_context.py",
    "muzero_rnn_full_obs": "zoo/classic_control/cartpole_muzero_rnn_full_obs.py",
    "unizero": "zoo/classic_control/cartpole_unizero.py",
    "sampled_unizero": "zoo/classic_control/pendulum_sampled_unizero.py",
    "alphazero": "zoo/board_games/tictactoe_alphazero.py",  # true rules: board games only
}

TYPES = [pytest.param(t, marks=pytest.mark.slow) if t == "muzero" else t for t in sorted(POLICY_TYPES)]
#: async rows: muzero_context's carried state and sampled_muzero's step column add nothing to the
#: pipeline beyond unizero's and sampled_efficientzero's rows, nor efficientzero's, gumbel_muzero's
#: and alphazero's (MuZero's data, another network or search) beyond the MuZero pipeline tests
#: (tests/test_train_muzero_segment_async.py), so theirs run with ``-m slow``
ASYNC_TYPES = [
    pytest.param(t, marks=pytest.mark.slow)
    if t in ("muzero", "muzero_context", "sampled_muzero", "efficientzero", "gumbel_muzero", "alphazero")
    else t
    for t in sorted(POLICY_TYPES)
]
EXTRA = (
    "efficientzero.lstm_hidden_size=8",
    "sampled.num_samples=3",
    "context.rnn_hidden_size=8",
    "unizero.embed_dim=16",
    "evaluator.stop_confirm_episodes=None",  # (tictactoe_alphazero.py confirms on 1,000 games)
)
ASYNC = (
    "async_pipeline.enabled=True",
    "async_pipeline.collector_num_cpus=0.5",
    "async_pipeline.evaluator_num_cpus=0.5",
    "env.max_episode_steps=40",
)


def test_every_registered_type_has_a_smoke_config():
    assert set(SMOKE_CONFIG) == set(POLICY_TYPES)
    for path in SMOKE_CONFIG.values():
        assert os.path.isfile(os.path.join(REPO_ROOT, path)), path


def _cfg(policy_type: str, *extra: str):
    path = os.path.join(REPO_ROOT, SMOKE_CONFIG[policy_type])
    cfg = load_config_module(path).with_overrides([*TINY_OVERRIDES, *EXTRA, *extra])
    assert cfg.policy_type == policy_type
    return cfg


@pytest.mark.parametrize("policy_type", TYPES)
def test_sync_cli_trains_and_resumes(policy_type, tmp_path, capsys):
    exp_dir = tmp_path / "exp"
    args = ("train", SMOKE_CONFIG[policy_type], *TINY_OVERRIDES, *EXTRA)
    code, out, err = _main(REPO_ROOT, capsys, *args, "max_env_step=120", "--exp-dir", str(exp_dir))
    assert code == 0, err[-3000:]
    first_steps, first_iter = _final_counters(out)
    assert first_steps >= 120 and first_iter > 0
    ckpt = load_checkpoint(exp_dir / "ckpt" / "ckpt_latest.pt", policy_type=policy_type)
    assert ckpt["counters"]["train_iter"] > 0

    code, out, err = _main(REPO_ROOT, capsys, *args, "max_env_step=180", "--resume", str(exp_dir))
    assert code == 0, err[-3000:]
    env_steps, train_iter = _final_counters(out)
    assert env_steps >= 180 and env_steps > first_steps and train_iter > first_iter


@pytest.mark.parametrize("policy_type", ASYNC_TYPES)
def test_async_pipeline_on_ray_actors(policy_type, ray_cluster):
    driver = Driver(_cfg(policy_type, *ASYNC, "max_env_step=100"), print_fn=None)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["env_steps"] >= 100 and metrics["train_iter"] > 0
    assert driver.last_eval is not None and driver.buffer.num_transitions > 0
    driver.buffer.check_invariants()


#: local mode runs the same actor code in-process; the history types and alphazero add no pipeline
#: behaviour beyond their policy (covered by the sync and Ray rows), so their rows run with ``-m slow``
LOCAL_TYPES = [
    pytest.param(t, marks=pytest.mark.slow)
    if t in ("muzero", "muzero_context", "muzero_rnn_full_obs", "unizero", "alphazero")
    else t
    for t in sorted(POLICY_TYPES)
]


@pytest.mark.parametrize("policy_type", LOCAL_TYPES)
def test_ray_local_mode(policy_type):
    driver = Driver(_cfg(policy_type, *ASYNC, "async_pipeline.ray_local_mode=True", "max_env_step=60"), print_fn=None)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["env_steps"] >= 60 and metrics["train_iter"] > 0


#: Tune trials: the default run covers one type of each kind of model state and stored data
#: (value-prefix LSTM, chance outcomes, GRU history, transformer caches + continuous sampled
#: actions); the rest run with ``-m slow`` (muzero: tests/test_tune.py)
TUNE_DEFAULT = ("efficientzero", "stochastic_muzero", "muzero_rnn_full_obs", "sampled_unizero")
TUNE_GROUPS = [
    pytest.param(TUNE_DEFAULT, id="one-of-each-state-kind"),
    pytest.param(
        tuple(t for t in sorted(POLICY_TYPES) if t not in TUNE_DEFAULT and t != "muzero"),
        id="the-others",
        marks=pytest.mark.slow,
    ),
]


def test_tune_groups_cover_every_type():
    assert set(TUNE_GROUPS[0].values[0]) | set(TUNE_GROUPS[1].values[0]) | {"muzero"} == set(POLICY_TYPES)


@pytest.mark.parametrize("types", TUNE_GROUPS)
def test_tune_trials_of_every_type_checkpoint_and_load(ray_cluster, tmp_path, types):
    from ray import tune

    from lz_tune.tune import MuZeroTrainable
    from lz_tune.tune.trainable import CHECKPOINT_FILE

    types = list(types)
    modules = {t: SMOKE_CONFIG[t][:-3].replace("/", ".") for t in types}
    space = {
        "config": tune.grid_search([modules[t] for t in types]),
        "step_seconds": 1.5,
        "driver_num_cpus": 1,
        "evaluator.eval_freq": 4,
        "learner.update_per_collect": 4,
        **dict(
            parse_override(o)
            for o in (*TINY_OVERRIDES, *EXTRA)
            if not o.startswith(("evaluator.eval_freq", "learner.update_per"))
        ),
    }
    analysis = tune.run(
        MuZeroTrainable,
        config=space,
        stop={"training_iteration": 2},
        storage_path=str(tmp_path),
        name="types",
        metric="evaluation/env_runners/episode_return_mean",
        mode="max",
        verbose=0,
        raise_on_failed_trial=True,
    )
    assert len(analysis.trials) == len(types)
    for trial in analysis.trials:
        policy_type = next(t for t in types if modules[t] == trial.config["config"])
        assert trial.status == "TERMINATED" and trial.last_result["train_iter"] > 0
        checkpoint = analysis.get_best_checkpoint(
            trial, metric="evaluation/env_runners/episode_return_mean", mode="max"
        )
        assert checkpoint is not None, policy_type
        with checkpoint.as_directory() as d:
            ckpt = load_checkpoint(os.path.join(d, CHECKPOINT_FILE), policy_type=policy_type)
        assert ckpt["eval"] is not None
