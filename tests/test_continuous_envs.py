"""Box action spaces: normalised [-1, 1] actions inside, scaled to the env's bounds at the boundary."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from lz_tune.envs import make_vector_env, probe_env_spec


class _RecordingEnv(gymnasium.Env):
    """Box(low, high) actions; the observation is the last action the env received."""

    def __init__(self, low=(-2.0, 0.0), high=(2.0, 10.0)):
        self.action_space = spaces.Box(np.array(low, np.float32), np.array(high, np.float32))
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(len(low),), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


gymnasium.register("LzTuneRecordingBox-v0", entry_point=_RecordingEnv, max_episode_steps=50)
gymnasium.register("LzTuneInfiniteBox-v0", entry_point=lambda: _RecordingEnv(low=(-np.inf,), high=(np.inf,)))


def test_box_actions_are_normalised_and_scaled_to_the_bounds():
    spec = probe_env_spec("LzTuneRecordingBox-v0")
    assert spec.is_continuous and spec.action_dim == 2 and spec.action_shape == (2,)
    assert spec.action_space_size == 1 and spec.action_low == (-2.0, 0.0) and spec.action_high == (2.0, 10.0)
    env = make_vector_env(env_id="LzTuneRecordingBox-v0", num_envs=3, seed=0, mode="collect")
    try:
        batch = env.reset()
        assert batch.action_mask.shape == (3, 1) and batch.action_mask.all()
        res = env.step(np.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]], np.float32))
        np.testing.assert_allclose(res.batch.observation, [[-2.0, 0.0], [0.0, 5.0], [2.0, 10.0]], atol=1e-6)
        with pytest.raises(ValueError, match=r"\[-1, 1\]"):
            env.step(np.array([[0.0, 1.5]] * 3, np.float32))  # outside the normalised box
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros(3, np.int64))  # discrete-style actions
    finally:
        env.close()


def test_pendulum_runs_with_normalised_actions():
    spec = probe_env_spec("Pendulum-v1")
    assert spec.action_dim == 1 and spec.action_low == (-2.0,) and spec.action_high == (2.0,)
    env = make_vector_env(env_id="Pendulum-v1", num_envs=2, seed=0, mode="eval")
    try:
        env.reset()
        for _ in range(3):
            res = env.step(np.random.default_rng(0).uniform(-1, 1, size=(2, 1)).astype(np.float32))
        assert np.all(res.reward <= 0)
    finally:
        env.close()


def test_infinite_action_bounds_are_rejected_naming_the_env():
    with pytest.raises(ValueError, match=r"LzTuneInfiniteBox-v0.*infinite action bounds"):
        probe_env_spec("LzTuneInfiniteBox-v0")
    with pytest.raises(ValueError, match=r"LzTuneInfiniteBox-v0.*infinite action bounds"):
        make_vector_env(env_id="LzTuneInfiniteBox-v0", num_envs=1, seed=0, mode="collect")
