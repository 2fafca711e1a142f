"""AlphaZero's network: observation -> (policy logits, value logits), no dynamics, no reward.

:class:`AlphaZeroMLPNetwork` (vector observations) is an MLP trunk and two linear heads;
:class:`AlphaZeroConvNetwork` (board planes ``[C, H, W]``, ``env.openspiel_planes=True``) is
AlphaZero's residual tower with its policy and value heads. Both offer
the part of the MuZero network interface the MuZero learner's update reads at unroll step 0
(``representation``, ``prediction``, ``initial_inference``, ``batch_independent_prediction``),
so that ``policy_type=alphazero`` trains through :func:`lz_tune.algos.update.unrolled_update`
like the other types, with the same categorical value support (``2 * S_v + 1`` bins of ``h(v)``).
It has no ``dynamics`` and no projector: nothing is unrolled through a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import InitialOutput, observation_to_float
from lz_tune.models.blocks import ResidualBlock

__all__ = ["AlphaZeroConvNetwork", "AlphaZeroMLPNetwork"]


class _PolicyValueNetwork(nn.Module):
    """What both AlphaZero networks share: ``representation`` (obs -> trunk features) and
    ``prediction`` (features -> policy and value logits) composed into MuZero's initial inference."""

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """Trunk features, value logits and policy logits of ``obs`` (MuZero's interface)."""
        latent = self.representation(obs)
        policy_logits, value_logits = self.prediction(latent)
        return InitialOutput(latent=latent, value_logits=value_logits, policy_logits=policy_logits)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits, value_logits)`` of ``obs``."""
        return self.prediction(self.representation(obs))


class AlphaZeroMLPNetwork(_PolicyValueNetwork):
    """``obs [B, O]`` -> trunk (``Linear`` [+ ``LayerNorm``] + ReLU for each of ``hidden_sizes``,
    then to ``latent_dim``) -> ``policy_logits [B, A]`` and ``value_logits [B, 2 S_v + 1]``.

    The value head is zero-initialised (the decoded value is 0 before training, as MuZero's).

    Args:
        observation_dim: ``O`` (extra observation dims are flattened).
        action_space_size: ``A``.
        latent_dim: width of the trunk's output (the features both heads read).
        hidden_sizes: widths of the trunk's hidden layers (may be empty).
        value_support_size: ``S_v``.
        layer_norm: LayerNorm before every ReLU of the trunk.
    """

    batch_independent_prediction = True  # LayerNorm and ReLU only: per sample

    def __init__(
        self,
        *,
        observation_dim: int,
        action_space_size: int,
        latent_dim: int = 64,
        hidden_sizes: Sequence[int] = (128,),
        value_support_size: int = 10,
        layer_norm: bool = True,
    ) -> None:
        super().__init__()
        self.observation_dim = check.positive_int("observation_dim", observation_dim)
        self.action_space_size = check.positive_int("action_space_size", action_space_size)
        self.policy_size = self.action_space_size
        self.latent_dim = check.positive_int("latent_dim", latent_dim)
        self.hidden_sizes = check.positive_int_tuple("hidden_sizes", hidden_sizes, allow_empty=True)
        self.value_support_size = check.positive_int("value_support_size", value_support_size)
        self.layer_norm = check.boolean("layer_norm", layer_norm)
        self.latent_shape = (self.latent_dim,)
        layers: list[nn.Module] = []
        width = self.observation_dim
        for size in (*self.hidden_sizes, self.latent_dim):
            layers.append(nn.Linear(width, size))
            if self.layer_norm:
                layers.append(nn.LayerNorm(size))
            layers.append(nn.ReLU(inplace=True))
            width = size
        self.trunk = nn.Sequential(*layers)
        self.policy_head = nn.Linear(self.latent_dim, self.action_space_size)
        self.value_head = nn.Linear(self.latent_dim, 2 * self.value_support_size + 1)
        with torch.no_grad():
            self.value_head.weight.zero_()
            self.value_head.bias.zero_()

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, *obs_shape]`` -> trunk features ``[B, latent_dim]``."""
        x = observation_to_float(obs, self.policy_head.weight.dtype)
        return self.trunk(x.reshape(x.shape[0], -1))

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits [B, A], value_logits [B, V])`` of trunk features ``[B, latent_dim]``."""
        return self.policy_head(latent), self.value_head(latent)


class AlphaZeroConvNetwork(_PolicyValueNetwork):
    """AlphaZero's network over board planes: ``obs [B, C, H, W]`` -> a 3x3 conv of ``num_channels``
    (BatchNorm, ReLU) and ``num_res_blocks`` residual blocks (the trunk, ``[B, F, H, W]``) ->
    policy head (1x1 conv to 2 planes, BatchNorm, ReLU, linear to ``[B, A]``) and value head (1x1
    conv to 1 plane, BatchNorm, ReLU, linear to ``latent_dim``, ReLU, linear to ``[B, 2 S_v + 1]``).
    The value head's last layer is zero-initialised (the decoded value is 0 before training).

    Args:
        observation_shape: ``(C, H, W)``.
        action_space_size: ``A``.
        num_channels: ``F``, the trunk's width.
        num_res_blocks: residual blocks after the first conv (>= 0).
        latent_dim: hidden width of the value head.
        value_support_size: ``S_v``.
    """

    batch_independent_prediction = False  # BatchNorm in training mode normalises over the batch

    def __init__(
        self,
        *,
        observation_shape: Sequence[int],
        action_space_size: int,
        num_channels: int = 64,
        num_res_blocks: int = 2,
        latent_dim: int = 64,
        value_support_size: int = 10,
    ) -> None:
        super().__init__()
        shape = tuple(int(n) for n in observation_shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"observation_shape: board planes (C, H, W) expected, got {observation_shape}")
        self.observation_shape = shape
        self.action_space_size = check.positive_int("action_space_size", action_space_size)
        self.policy_size = self.action_space_size
        self.num_channels = check.positive_int("num_channels", num_channels)
        self.num_res_blocks = check.non_negative_int("num_res_blocks", num_res_blocks)
        self.latent_dim = check.positive_int("latent_dim", latent_dim)
        self.value_support_size = check.positive_int("value_support_size", value_support_size)
        c, h, w = shape
        self.latent_shape = (self.num_channels, h, w)
        self.stem = nn.Sequential(
            nn.Conv2d(c, self.num_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(self.num_channels),
            nn.ReLU(inplace=True),
        )
        self.tower = nn.Sequential(*(ResidualBlock(self.num_channels) for _ in range(self.num_res_blocks)))
        self.policy_conv = nn.Sequential(
            nn.Conv2d(self.num_channels, 2, kernel_size=1, bias=False), nn.BatchNorm2d(2), nn.ReLU(inplace=True)
        )
        self.policy_head = nn.Linear(2 * h * w, self.action_space_size)
        self.value_conv = nn.Sequential(
            nn.Conv2d(self.num_channels, 1, kernel_size=1, bias=False), nn.BatchNorm2d(1), nn.ReLU(inplace=True)
        )
        self.value_hidden = nn.Linear(h * w, self.latent_dim)
        self.value_head = nn.Linear(self.latent_dim, 2 * self.value_support_size + 1)
        with torch.no_grad():
            self.value_head.weight.zero_()
            self.value_head.bias.zero_()

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, C, H, W]`` -> trunk features ``[B, F, H, W]``."""
        x = observation_to_float(obs, self.policy_head.weight.dtype)
        return self.tower(self.stem(x.reshape(x.shape[0], *self.observation_shape)))

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits [B, A], value_logits [B, V])`` of trunk features ``[B, F, H, W]``."""
        policy = self.policy_head(self.policy_conv(latent).flatten(1))
        value = self.value_head(torch.relu(self.value_hidden(self.value_conv(latent).flatten(1))))
        return policy, value
