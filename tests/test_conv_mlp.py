"""``model.kind=conv_mlp``: a conv stem in front of the MLP network. The stem reads images ``[C, H, W]``;
dynamics and prediction stay MLPs, so the search keeps the numba engine and finds what the torch
path finds; the stem is trained (its gradients come through the representation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lz_tune.algos.common import build_network
from lz_tune.algos.muzero import MuZeroPolicy
from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.mlp import MuZeroMLPNetwork
from lz_tune.models.mlp_inference import MLPSearchInference
from tests.engine_checks import assert_same_search

SPEC = EnvSpecInfo(
    observation_shape=(4, 10, 10), frame_shape=(4, 10, 10), frame_stack=1, action_space_size=3, is_atari=False
)


def _cfg(inference: str = "auto") -> Config:
    return Config().with_updates(
        {
            "mcts.inference": inference,
            "model.kind": "conv_mlp",
            "model.num_channels": 8,
            "model.num_res_blocks": 1,
            "model.downsample": False,
            "model.latent_dim": 16,
            "model.hidden_sizes": (32,),
            "model.value_support_size": 10,
            "model.reward_support_size": 5,
        }
    )


def test_the_network_reads_images_through_its_stem():
    torch.manual_seed(0)
    net = build_network(_cfg(), SPEC)
    assert type(net) is MuZeroMLPNetwork and net.image_encoder is not None
    assert net.observation_dim == 8 * 10 * 10  # the stem's flattened features
    obs = torch.rand(5, 4, 10, 10)
    latent = net.representation(obs)
    assert latent.shape == (5, 16)
    # the stem sees the image's structure: a change in one pixel moves the latent
    moved = obs.clone()
    moved[0, 2, 3, 4] += 1.0
    assert not torch.allclose(net.representation(moved)[0], latent[0])
    latent.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.image_encoder.parameters())


def test_the_search_engine_serves_it_and_agrees_with_torch():
    torch.manual_seed(1)
    net = build_network(_cfg(), SPEC).eval()
    auto, reference = MuZeroPolicy(_cfg("auto"), SPEC, network=net), MuZeroPolicy(_cfg("torch"), SPEC, network=net)
    obs = np.random.default_rng(2).random((6, 4, 10, 10)).astype(np.float32)
    assert_same_search(auto, reference, MLPSearchInference, obs, 3)


def test_conv_mlp_needs_images():
    cfg = Config().with_updates({"model.kind": "conv_mlp"})
    vector = EnvSpecInfo(observation_shape=(4,), frame_shape=(4,), frame_stack=1, action_space_size=2, is_atari=False)
    with pytest.raises(ConfigError, match="model.kind: 'conv_mlp' needs image observations"):
        build_network(cfg, vector)
