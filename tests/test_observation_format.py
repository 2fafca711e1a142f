"""Image observations in either layout reach the network channels-first, a vector network reads any
observation flattened, and an ambiguous shape is an error naming ``env.observation_layout``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lz_tune.config import Config
from lz_tune.envs.observation_format import observation_format, resolve_observation_layout
from lz_tune.workers.common import env_spec_for, make_env
from tests import registered_env
from tests.registered_env import ENV_ID, C, H, W


def _cfg(*overrides: str) -> Config:
    return Config.from_dict(
        {"env": {"env_id": ENV_ID, "import_modules": ["tests.registered_env:register"]}}
    ).with_overrides(list(overrides))


@pytest.mark.parametrize(
    "shape, layout",
    [
        ((10, 10, 4), "hwc"),
        ((10, 10, 7), "hwc"),
        ((84, 84, 3), "hwc"),
        ((210, 160, 3), "hwc"),
        ((8, 8, 1), "hwc"),
        ((4, 84, 84), "chw"),
        ((3, 64, 48), "chw"),
        ((1, 8, 8), "chw"),
        ((7, 10, 10), "chw"),
    ],
)
def test_the_shape_rule_finds_the_channel_axis(shape, layout):
    assert resolve_observation_layout("X-v0", shape)[0] == layout


@pytest.mark.parametrize("shape", [(10, 10, 10), (3, 3, 3), (4, 84, 3), (84, 3, 84)])
def test_an_ambiguous_shape_is_an_error_naming_the_key(shape):
    with pytest.raises(ValueError, match=r"env.observation_layout: X-v0 .* set env.observation_layout=chw"):
        resolve_observation_layout("X-v0", shape)
    # the user's key or the env's declaration settles it
    assert resolve_observation_layout("X-v0", shape, "hwc")[0] == "hwc"
    assert resolve_observation_layout("X-v0", shape, "auto", declared="chw")[0] == "chw"


def test_a_layout_for_a_vector_observation_is_refused():
    with pytest.raises(ValueError, match="env.observation_layout='hwc'.*not images"):
        resolve_observation_layout("CartPole-v1", (4,), "hwc")


def test_declarations_metadata_and_minatar_entry_point():
    assert observation_format("X", (10, 10, 10), metadata={"observation_layout": "hwc"}).layout == "hwc"
    assert observation_format("X", (10, 10, 10), entry_point="minatar.gym:BaseEnv").layout == "hwc"
    with pytest.raises(ValueError, match="must be 'chw' or 'hwc'"):
        observation_format("X", (10, 10, 10), metadata={"observation_layout": "nhwc"})
    # a vector network reads an ambiguous image flattened as given (its layout does not matter there)
    assert observation_format("X", (10, 10, 10), flatten=True).frame_shape == (1000,)


def _vertical_and_horizontal_gradients(frames: np.ndarray) -> tuple[float, float]:
    """Mean |d/dH| and |d/dW| of channel 1 of ``frames`` [N, C, H, W] through fixed conv filters:
    what a conv network sees of a ramp that runs along H only."""
    x = torch.as_tensor(frames[:, 1:2])
    d_h = F.conv2d(x, torch.tensor([[[[-1.0], [1.0]]]]))
    d_w = F.conv2d(x, torch.tensor([[[[-1.0, 1.0]]]]))
    return float(d_h.abs().mean()), float(d_w.abs().mean())


@pytest.mark.parametrize("layout", ["auto", "hwc"])
def test_a_channels_last_env_is_served_channels_first(layout):
    cfg = _cfg(f"env.observation_layout={layout!r}", "env.frame_stack=2")
    spec = env_spec_for(cfg)
    assert spec.raw_observation_shape == (H, W, C) and spec.observation_layout == "hwc"
    assert spec.frame_shape == (C, H, W) and spec.observation_shape == (2 * C, H, W)
    with make_env(cfg, num_envs=3, seed=0, mode="collect") as env:
        batch = env.reset()
        step = env.step(np.zeros(3, np.int64))
    for b in (batch, step.batch):
        rows = b.frame[:, 0].argmax(axis=1)[:, 0]  # [N]: the bright row, read along H
        for i, row in enumerate(rows):
            np.testing.assert_array_equal(b.frame[i], registered_env.rows_image(row).transpose(2, 0, 1))
        # the stack is on the channel axis: the newest frame is the last C planes
        np.testing.assert_array_equal(b.observation[:, -C:], b.frame)
    # a filter along H sees the ramp (1/H per row), one along W sees nothing
    d_h, d_w = _vertical_and_horizontal_gradients(step.batch.frame)
    assert d_h == pytest.approx(1.0 / H) and d_w == 0.0


def test_reading_a_channels_last_env_as_channels_first_would_be_wrong():
    """The negative control of the test above, and what lz_tune did before env.observation_layout:
    forced to ``chw``, the env's [6, 5, 2] is read as a legal [C=6, H=5, W=2] image, and the same
    filter along "H" no longer sees the ramp that runs along the real H."""
    cfg = _cfg("env.observation_layout='chw'")
    with make_env(cfg, num_envs=2, seed=0, mode="collect") as env:
        frames = env.reset().frame
    assert frames.shape == (2, H, W, C)
    d_h, _ = _vertical_and_horizontal_gradients(frames)
    assert d_h != pytest.approx(1.0 / H)


def test_mlp_flattens_any_observation_and_conv_takes_the_image():
    spec = env_spec_for(_cfg("model.kind='mlp'"))
    assert spec.observation_shape == spec.frame_shape == (C * H * W,)
    with make_env(_cfg("model.kind='mlp'"), num_envs=2, seed=0, mode="collect") as env:
        batch = env.reset()
    np.testing.assert_array_equal(
        batch.frame[0],
        registered_env.rows_image(int(batch.frame[0].reshape(C, H, W)[0].argmax(axis=0)[0]))
        .transpose(2, 0, 1)
        .reshape(-1),
    )
    assert env_spec_for(_cfg("model.kind='conv'")).observation_shape == (C, H, W)


@pytest.mark.parametrize("env_id, width, parts", [("FrozenLake-v1", 16, 1), ("Blackjack-v1", 32 + 11 + 2, 3)])
def test_discrete_observations_are_served_one_hot(env_id, width, parts):
    cfg = Config.from_dict({"env": {"env_id": env_id}})
    spec = env_spec_for(cfg)
    assert spec.observation_shape == spec.frame_shape == (width,) and spec.observation_dtype == np.float32
    assert "one-hot" in spec.observation_layout_reason
    with make_env(cfg, num_envs=3, seed=0, mode="collect") as env:
        batch = env.reset()
        raw = [e.unwrapped.s if env_id == "FrozenLake-v1" else e.unwrapped._get_obs() for e in env.gym_envs]
        step = env.step(np.zeros(3, np.int64))
    for b in (batch, step.batch):
        assert b.frame.dtype == np.float32 and set(np.unique(b.frame)) <= {0.0, 1.0}
        np.testing.assert_array_equal(b.frame.sum(axis=1), parts)  # one hot per part
    if env_id == "FrozenLake-v1":
        np.testing.assert_array_equal(batch.frame.argmax(axis=1), raw)
    else:  # (player sum, dealer card, usable ace): offsets 0, 32, 43
        for frame, (total, dealer, ace) in zip(batch.frame, raw):
            assert frame[total] == frame[32 + dealer] == frame[43 + int(ace)] == 1.0


def test_a_layout_for_discrete_observations_is_refused():
    with pytest.raises(ValueError, match="env.observation_layout='hwc': FrozenLake-v1 has discrete observations"):
        env_spec_for(Config.from_dict({"env": {"env_id": "FrozenLake-v1", "observation_layout": "hwc"}}))
