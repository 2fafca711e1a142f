"""Adding a policy type touches only new files: the toy type ``muzero_mc``
(tests/toy_policy_type.py: MuZero with a no-bootstrap value target, composed from existing
parts) registers from its own module and trains through the real entry point, the Driver
with Ray collector and evaluator actors, which resolve it from the config alone. The README's
"Adding a policy type" walks through this file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lz_tune.algos import get_algorithm
from lz_tune.algos.parts import n_step_targets
from lz_tune.config import Config, ConfigError
from lz_tune.pipeline import Driver
from lz_tune.policy_registry import POLICY_TYPES, register_policy_type, registered_policy_types
from tests import toy_policy_type as toy
from tests.conftest import REPO_ROOT

RAY_ACTORS = (
    "async_pipeline.enabled=True",
    "async_pipeline.num_collector_actors=1",
    "async_pipeline.num_evaluator_actors=1",
    "async_pipeline.collector_num_cpus=0.5",
    "async_pipeline.evaluator_num_cpus=0.5",
    "env.max_episode_steps=40",
    "max_env_step=100",
)


def test_the_toy_type_trains_on_ray_actors_with_its_own_value_target(tiny_cfg, ray_cluster):
    cfg = tiny_cfg(f"policy_type={toy.POLICY_TYPE}", *RAY_ACTORS)
    built_before = toy.BATCHES_BUILT[0]
    driver = Driver(cfg, print_fn=None)
    try:
        metrics = driver.run()
        assert metrics["env_steps"] >= 100 and metrics["train_iter"] > 0  # the actors' steps and evaluations
        assert driver.last_eval is not None and driver.buffer.num_transitions > 0
        assert driver.learner.target_builder is toy.monte_carlo_targets
        assert toy.BATCHES_BUILT[0] - built_before >= metrics["train_iter"]

        # the composed part is what shapes the targets: with a target network that values every
        # observation at 1 (a stand-in for a trained one; this tiny run's is still at 0), MuZero's
        # targets bootstrap above 1 + g + ... + g^(n-1), CartPole's n rewards, and the toy's do not
        driver.learner.target_policy.value_targets = lambda obs: np.ones(len(obs), np.float32)
        index = driver.buffer.sample(cfg.learner.batch_size)
        rng = np.random.default_rng(0)
        mc = driver.learner.make_batch(driver.buffer, index, rng=rng).target_value
        bootstrapped = n_step_targets(driver.learner, driver.buffer, index, rng=rng).target_value
    finally:
        driver.close()
    rewards_only = sum(cfg.mcts.discount_factor**i for i in range(cfg.buffer.td_steps))
    assert mc.min() >= 0.0 and mc.max() <= rewards_only + 1e-5
    assert bootstrapped.max() > rewards_only + 0.5


def test_a_fresh_process_resolves_the_type_from_the_config_alone():
    """What a Ray actor or a Tune trial does: it has registered nothing, it gets the config."""
    script = textwrap.dedent(f"""
        from lz_tune.policy_registry import registered_policy_types
        assert "muzero_mc" not in registered_policy_types()
        from lz_tune.algos import get_algorithm
        from lz_tune.config import Config
        cfg = Config.from_dict({{"policy_type": {toy.POLICY_TYPE!r}}})
        algo = get_algorithm(cfg.policy_type)
        assert algo.__name__ == "tests.toy_policy_type", algo.__name__
        assert "muzero_mc" in registered_policy_types()
        print("resolved")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "resolved" in done.stdout, done.stderr[-3000:]


def test_the_registry_is_the_one_list_of_names():
    assert set(POLICY_TYPES) <= set(registered_policy_types()) and "muzero_mc" in registered_policy_types()
    assert len(POLICY_TYPES) == 11
    for name in POLICY_TYPES:
        assert get_algorithm(name).make_learner  # every built-in resolves to its module
    assert get_algorithm(toy.POLICY_TYPE) is toy and get_algorithm("muzero_mc") is toy  # registered here


def test_unknown_and_conflicting_types_fail_with_the_names():
    with pytest.raises(
        ConfigError,
        match=r"policy_type: unknown policy type 'gumbel_mu_zero'; did you mean "
        r"'gumbel_muzero'\? \(known: muzero, .*muzero_mc",
    ):
        Config(policy_type="gumbel_mu_zero")
    with pytest.raises(ConfigError, match=r"policy_type: unknown policy type 'tests.toy_policy_type:nope'.*registers"):
        get_algorithm("tests.toy_policy_type:nope")
    with pytest.raises(ConfigError, match=r"cannot import module 'no_such_module'"):
        Config(policy_type="no_such_module:muzero_mc")
    with pytest.raises(ValueError, match="already registered by lz_tune.algos.muzero"):
        register_policy_type("muzero", module=toy.__name__)
    assert register_policy_type(toy.NAME, module=toy.__name__).module == "tests.toy_policy_type"  # a re-import


def test_a_type_reading_a_missing_config_section_is_refused():
    register_policy_type("muzero_mc_sectioned", module=toy.__name__, config_sections=("no_such_section",))
    with pytest.raises(ConfigError, match="policy_type: 'muzero_mc_sectioned' reads config section"):
        Config(policy_type="muzero_mc_sectioned")
