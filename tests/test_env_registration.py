"""Envs that need registration code (``env.import_modules``) work in every process, and MinAtar's
ids are served by name with MinAtar's own settings."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lz_tune.config import Config, ConfigError
from lz_tune.envs.registration import run_env_imports
from lz_tune.pipeline import Driver
from lz_tune.workers.common import env_spec_for, make_env
from tests.conftest import REPO_ROOT
from tests.registered_env import ENV_ID

REGISTER = "tests.registered_env:register"
CONV = (
    "model.kind='conv'",
    "model.num_channels=4",
    "model.num_res_blocks=1",
    "model.downsample=False",
    "model.projection_dim=16",
    "model.projection_hidden_dim=16",
)


def test_import_modules_is_checked_at_construction():
    for bad in ("", "a b", "pkg.mod:not a name", "pkg..mod"):
        with pytest.raises(ConfigError, match=r"env.import_modules\[0\]"):
            Config.from_dict({"env": {"import_modules": [bad]}})
    with pytest.raises(ValueError, match=r"env.import_modules\[1\]: cannot import 'no_such_pkg_xyz'"):
        run_env_imports(("tests.registered_env", "no_such_pkg_xyz:register"))
    with pytest.raises(ValueError, match=r"env.import_modules\[0\]: module 'tests.registered_env' has no function"):
        run_env_imports(("tests.registered_env:nope",))


def test_a_fresh_process_finds_the_env_only_through_import_modules():
    """What a Ray actor, a Tune trial or a learner worker is: a process that registered nothing."""
    script = textwrap.dedent(f"""
        from lz_tune.config import Config
        from lz_tune.workers.common import env_spec_for
        try:
            env_spec_for(Config.from_dict({{"env": {{"env_id": "{ENV_ID}"}}}}))
            raise SystemExit("found without registration")
        except ValueError as e:
            assert "unknown env id" in str(e), e
        cfg = Config.from_dict({{"env": {{"env_id": "{ENV_ID}", "import_modules": ["{REGISTER}"]}},
                                "model": {{"kind": "conv"}}}})
        print(env_spec_for(cfg).observation_shape)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(2, 6, 5)"


def test_registration_runs_in_every_ray_actor(tiny_cfg, ray_cluster):
    cfg = tiny_cfg(
        f"env.env_id={ENV_ID!r}",
        f"env.import_modules=({REGISTER!r},)",
        *CONV,
        "async_pipeline.enabled=True",
        "async_pipeline.num_collector_actors=1",
        "async_pipeline.num_evaluator_actors=1",
        "async_pipeline.collector_num_cpus=0.5",
        "async_pipeline.evaluator_num_cpus=0.5",
        "max_env_step=60",
        "evaluator.stop_value=None",
    )
    driver = Driver(cfg, print_fn=None)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["env_steps"] >= 60 and metrics["train_iter"] > 0
    assert driver.last_eval is not None


minatar = pytest.importorskip("minatar", reason="the minatar extra is not installed")

GAMES = {"Asterix": (4, 5), "Breakout": (4, 3), "Freeway": (7, 3), "Seaquest": (10, 6), "SpaceInvaders": (6, 4)}


@pytest.mark.parametrize("game", sorted(GAMES))
def test_minatar_ids_by_name(game):
    channels, minimal_actions = GAMES[game]
    for version, actions in (("v1", minimal_actions), ("v0", 6)):
        for kind, shape in (("auto", (channels, 10, 10)), ("mlp", (channels * 100,))):
            cfg = Config.from_dict({"env": {"env_id": f"MinAtar/{game}-{version}"}, "model": {"kind": kind}})
            spec = env_spec_for(cfg)
            assert spec.observation_shape == shape and spec.action_space_size == actions
            assert spec.observation_layout == "hwc" and spec.observation_dtype == np.float32


def test_minatar_frames_are_the_game_state_channels_first():
    cfg = Config.from_dict({"env": {"env_id": "MinAtar/Breakout-v1"}})
    with make_env(cfg, num_envs=2, seed=3, mode="collect") as env:
        batch = env.reset()
        state = env.gym_envs[0].unwrapped.game.state()  # [10, 10, 4] bool, channels last
        np.testing.assert_array_equal(batch.frame[0], state.transpose(2, 0, 1).astype(np.float32))
        game = env.gym_envs[0].unwrapped.game
        assert game.sticky_action_prob == pytest.approx(0.1)  # MinAtar's own default
        # the paddle sits on the bottom row: H is axis 1 of the served frame
        paddle = game.env.channels["paddle"]
        assert batch.frame[0, paddle, 9].any() and not batch.frame[0, paddle, :9].any()


def test_minatar_without_the_package_is_a_clear_error():
    script = textwrap.dedent("""
        import sys
        sys.modules["minatar"] = None  # as if it were not installed
        from lz_tune.envs import probe_env_spec
        try:
            probe_env_spec("MinAtar/Breakout-v1")
        except ValueError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert "needs the MinAtar package" in out.stdout and "pip install" in out.stdout, out.stdout + out.stderr
