"""MuZero residual conv network for image observations (Atari-like)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import MuZeroNetwork, normalize_latent, observation_to_float
from lz_tune.models.blocks import ConvHead, DownsampleStem, ResidualBlock, downsampled_size
from lz_tune.models.projection import SimSiamProjector

__all__ = ["MuZeroConvNetwork"]


class MuZeroConvNetwork(MuZeroNetwork):
    """MuZero / EfficientZero residual network for ``[B, C, H, W]`` observations.

    * representation: uint8 obs scaled by 1/255 -> :class:`DownsampleStem` (``downsample``,
      latent ``[B, num_channels, ceil(H/16), ceil(W/16)]``) or a 3x3 conv + BN + ReLU at
      full resolution -> ``num_res_blocks`` residual blocks -> normalised latent.
    * dynamics: ``cat(latent, plane(a / A))`` -> 3x3 conv + BN + latent skip + ReLU ->
      ``num_res_blocks`` residual blocks -> next latent (normalised); the reward head
      (1x1 conv + fc) reads the un-normalised block output -> ``reward_logits [B, R]``.
    * prediction: ``num_res_blocks`` residual blocks -> value head ``[B, V]`` and policy
      head ``[B, A]`` (1x1 conv + fc each).
    * project: SimSiam projector on the flattened latent -> ``[B, P]``.

    The last Linear of the value and reward heads is zero-initialised, so the decoded
    value and reward are exactly 0 at init.

    Args:
        observation_shape: ``(C, H, W)``.
        action_space_size: ``A``.
        num_channels: latent channels (even when ``downsample``).
        num_res_blocks: residual blocks in each of the three trunks.
        downsample: MuZero's /16 downsampling for 64x64 / 96x96 frames; ``False`` keeps
            the full resolution (small boards).
        value_support_size: ``S_v``; ``V = 2 * S_v + 1``.
        reward_support_size: ``S_r``; ``R = 2 * S_r + 1``.
        reduced_channels_value: 1x1-conv channels of the value head.
        reduced_channels_reward: 1x1-conv channels of the reward head.
        reduced_channels_policy: 1x1-conv channels of the policy head.
        fc_hidden: hidden widths of the value, reward and policy fc layers (may be empty).
        projection_dim: ``P``, SimSiam output width.
        projection_hidden_dim: SimSiam projection hidden width.
        predictor_hidden_dim: SimSiam prediction-head hidden width.
    """

    def __init__(
        self,
        *,
        observation_shape: Sequence[int],
        action_space_size: int,
        num_channels: int = 64,
        num_res_blocks: int = 1,
        downsample: bool = True,
        value_support_size: int = 300,
        reward_support_size: int = 300,
        reduced_channels_value: int = 16,
        reduced_channels_reward: int = 16,
        reduced_channels_policy: int = 16,
        fc_hidden: Sequence[int] = (32,),
        projection_dim: int = 256,
        projection_hidden_dim: int = 256,
        predictor_hidden_dim: int = 64,
        action_dim: int = 0,
    ) -> None:
        super().__init__(
            action_space_size=action_space_size,
            action_dim=action_dim,
            value_support_size=value_support_size,
            reward_support_size=reward_support_size,
            projection_dim=projection_dim,
        )
        shape = check.positive_int_tuple("observation_shape", observation_shape, allow_empty=False)
        if len(shape) != 3:
            raise ValueError(f"observation_shape must be (C, H, W), got {observation_shape!r}")
        self.observation_shape = shape
        self.downsample = check.boolean("downsample", downsample)
        self.num_channels = check.positive_int("num_channels", num_channels)
        if self.downsample and self.num_channels % 2 != 0:
            raise ValueError(f"num_channels must be even when downsample=True, got {num_channels!r}")
        self.num_res_blocks = check.non_negative_int("num_res_blocks", num_res_blocks)
        reduced_value = check.positive_int("reduced_channels_value", reduced_channels_value)
        reduced_reward = check.positive_int("reduced_channels_reward", reduced_channels_reward)
        reduced_policy = check.positive_int("reduced_channels_policy", reduced_channels_policy)
        self.fc_hidden = check.positive_int_tuple("fc_hidden", fc_hidden, allow_empty=True)

        in_channels, height, width = shape
        channels = self.num_channels
        if self.downsample:
            height, width = downsampled_size(height), downsampled_size(width)
            self.stem: nn.Module = DownsampleStem(in_channels, channels)
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, channels, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(channels),
                nn.ReLU(inplace=True),
            )
        self.latent_shape = (channels, height, width)
        spatial = height * width

        self.representation_blocks = self._blocks()

        self.dynamics_conv = nn.Conv2d(
            channels + max(self.action_dim, 1), channels, kernel_size=3, padding=1, bias=False
        )
        self.dynamics_bn = nn.BatchNorm2d(channels)
        self.dynamics_blocks = self._blocks()
        self.reward_head: nn.Module = ConvHead(  # EfficientZeroNetwork puts an Identity here
            in_channels=channels,
            reduced_channels=reduced_reward,
            spatial_size=spatial,
            hidden_sizes=self.fc_hidden,
            out_features=2 * self.reward_support_size + 1,
            zero_init_output=True,
        )

        self.prediction_blocks = self._blocks()
        self.value_head = ConvHead(
            in_channels=channels,
            reduced_channels=reduced_value,
            spatial_size=spatial,
            hidden_sizes=self.fc_hidden,
            out_features=2 * self.value_support_size + 1,
            zero_init_output=True,
        )
        self.policy_head = ConvHead(
            in_channels=channels,
            reduced_channels=reduced_policy,
            spatial_size=spatial,
            hidden_sizes=self.fc_hidden,
            out_features=self.policy_size,
            zero_init_output=False,
        )

        self.projector = SimSiamProjector(
            input_dim=channels * spatial,
            hidden_dim=projection_hidden_dim,
            projection_dim=self.projection_dim,
            predictor_hidden_dim=predictor_hidden_dim,
        )

    def _blocks(self) -> nn.Sequential:
        return nn.Sequential(*(ResidualBlock(self.num_channels) for _ in range(self.num_res_blocks)))

    channels_last = False
    """Whether the conv weights and activations use the channels-last (NHWC) memory layout;
    set by :meth:`use_channels_last`. A layout only: the shapes stay ``[B, C, H, W]``."""

    def use_channels_last(self) -> MuZeroConvNetwork:
        """Store the conv weights channels-last and convert observations to it in
        :meth:`representation`, so that every conv and batch norm runs on NHWC data (the
        layout oneDNN's and cuDNN's fast kernels want; benchmarks/README.md, "Learner speed").
        Same values to float rounding. Returns ``self``."""
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit memory_format
        self.channels_last = True
        return self

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, C, H, W]`` (uint8 scaled by 1/255) -> normalised ``latent [B, *latent_shape]``."""
        x = observation_to_float(
            obs, self.dynamics_conv.weight.dtype, torch.channels_last if self.channels_last else torch.preserve_format
        )
        return normalize_latent(self.representation_blocks(self.stem(x)))

    def dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, c, h, w]``, ``action [B]`` int64 (continuous: ``[B, D_a]`` float, one
        constant plane per dimension) -> ``(next_latent [B, c, h, w], reward_logits [B, R])``."""
        batch, _, height, width = latent.shape
        if self.action_dim:
            plane = action.to(latent.dtype).reshape(batch, self.action_dim, 1, 1)
        else:
            plane = (action.to(latent.dtype) / self.action_space_size).reshape(batch, 1, 1, 1)
        x = torch.cat([latent, plane.expand(batch, plane.shape[1], height, width)], dim=1)
        x = (self.dynamics_bn(self.dynamics_conv(x)) + latent).relu_()
        x = self.dynamics_blocks(x)
        return normalize_latent(x), self.reward_head(x)

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, *latent_shape]`` -> ``(policy_logits [B, A], value_logits [B, V])``."""
        x = self.prediction_blocks(latent)
        return self.policy_head(x), self.value_head(x)

    def project(self, latent: torch.Tensor, *, with_grad: bool, groups: int = 1) -> torch.Tensor:
        """``latent [B, *latent_shape]`` -> ``[B, P]``; the prediction head only when ``with_grad``."""
        return self.projector(latent, with_grad=with_grad, groups=groups)
