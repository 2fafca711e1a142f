"""Config: defaults, validation errors that name the key, dotted overrides, zoo modules."""

import dataclasses

import pytest

from lz_tune.config import POLICY_TYPES, Config, ConfigError, parse_override
from lz_tune.config_loader import load_config_module


def test_defaults_follow_the_spec_table():
    ap = Config().async_pipeline
    assert (ap.num_collector_actors, ap.num_evaluator_actors, ap.max_eval_inflight) == (1, 1, 1)
    assert (ap.max_train_chunk_steps, ap.weight_sync_interval, ap.max_policy_lag) == (4, 1, 0)
    assert ap.collect_inflight == 1 and ap.budget_queue_cap == 2
    assert (ap.collector_num_cpus, ap.evaluator_num_cpus, ap.collector_num_gpus) == (1.0, 1.0, 0.0)
    assert (ap.buffer_stats_interval, ap.poll_interval_s, ap.shutdown_timeout_s) == (100, 0.1, 30.0)
    assert ap.eval_at_start is False and ap.ray_local_mode is False
    assert Config().with_updates({"async_pipeline.num_collector_actors": 3}).async_pipeline.budget_queue_cap == 6
    assert len(POLICY_TYPES) == 11


@pytest.mark.parametrize(
    "data, key",
    [
        ({"learner": {"learning_rte": 1e-3}}, "learner.learning_rte"),
        ({"lerner": {}}, "lerner"),
        ({"learner": {"batch_size": 0}}, "learner.batch_size"),
        ({"learner": {"batch_size": "big"}}, "learner.batch_size"),
        ({"learner": {"batch_size": True}}, "learner.batch_size"),
        ({"learner": {"optim_type": "rmsprop"}}, "learner.optim_type"),
        ({"learner": {"device": "tpu"}}, "learner.device"),
        ({"policy_type": "muzer"}, "policy_type"),
        ({"mcts": {"num_simulations": -5}}, "mcts.num_simulations"),
        ({"mcts": {"discount_factor": 1.5}}, "mcts.discount_factor"),
        ({"collector": {"eps_greedy_start": 1.5}}, "collector.eps_greedy_start"),
        ({"collector": {"eps_greedy_end": -0.1}}, "collector.eps_greedy_end"),
        ({"collector": {"eps_greedy_decay_env_steps": 0}}, "collector.eps_greedy_decay_env_steps"),
        ({"buffer": {"game_segment_length": 8, "num_unroll_steps": 5, "td_steps": 5}}, "buffer.num_unroll_steps"),
        ({"buffer": {"reanalyze_ratio": 2.0}}, "buffer.reanalyze_ratio"),
        ({"env": {"frame_stack": 1.5}}, "env.frame_stack"),
        ({"env": {"env_id": ""}}, "env.env_id"),
        ({"model": {"hidden_sizes": [64, 0]}}, "model.hidden_sizes"),
        ({"model": {"hidden_sizes": 64}}, "model.hidden_sizes"),
        ({"async_pipeline": {"collector_num_cpus": -1}}, "async_pipeline.collector_num_cpus"),
        ({"async_pipeline": {"poll_interval_s": 0}}, "async_pipeline.poll_interval_s"),
        ({"env": 3}, "env"),
    ],
)
def test_bad_values_name_the_key(data, key):
    with pytest.raises(ConfigError) as err:
        Config.from_dict(data)
    assert str(err.value).startswith(key), str(err.value)


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(ConfigError, match="did you mean 'learning_rate'"):
        Config.from_dict({"learner": {"learning_rte": 1e-3}})


def test_overrides_parse_types():
    cfg = Config().with_overrides(
        [
            "learner.learning_rate=3e-3",
            "mcts.num_simulations=25",
            "model.hidden_sizes=(64, 64)",
            "evaluator.stop_value=195",
            "learner.update_per_collect=None",
            "async_pipeline.enabled=true",
            "env.env_id=ALE/Pong-v5",
        ]
    )
    assert cfg.learner.learning_rate == pytest.approx(3e-3)
    assert cfg.mcts.num_simulations == 25
    assert cfg.model.hidden_sizes == (64, 64)
    assert cfg.evaluator.stop_value == 195.0 and isinstance(cfg.evaluator.stop_value, float)
    assert cfg.learner.update_per_collect is None
    assert cfg.async_pipeline.enabled is True
    assert cfg.env.env_id == "ALE/Pong-v5"
    assert parse_override("a.b = 1") == ("a.b", 1)


def test_override_errors_name_the_key():
    with pytest.raises(ConfigError, match="^learner.foo"):
        Config().with_overrides(["learner.foo=1"])
    with pytest.raises(ConfigError, match="^learner.batch_size"):
        Config().with_overrides(["learner.batch_size=-1"])
    with pytest.raises(ConfigError, match="section"):
        Config().with_updates({"learner": 3})
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("learner.batch_size")


def test_round_trip_and_nested_updates():
    cfg = Config().with_updates({"learner": {"batch_size": 32}, "mcts.num_simulations": 8})
    again = Config.from_dict(cfg.to_dict())
    assert again == cfg and again.learner.batch_size == 32 and again.mcts.num_simulations == 8


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().learner.batch_size = 3  # type: ignore[misc]


def test_zoo_modules_load(tmp_path):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py")
    assert cfg.env.env_id == "CartPole-v1"
    pong = load_config_module("zoo/atari/pong_muzero.py")
    assert pong.env.env_id == "ALE/Pong-v5" and pong.env.frame_stack == 4
    with pytest.raises(ConfigError, match="not found"):
        load_config_module(str(tmp_path / "nope.py"))
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="make_config"):
        load_config_module(str(bad))
