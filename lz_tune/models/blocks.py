"""Convolutional building blocks: residual blocks, the MuZero downsampling stem, heads."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["ResidualBlock", "DownsampleStem", "ConvHead", "downsampled_size"]


def _conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)


def downsampled_size(size: int) -> int:
    """Spatial size after :class:`DownsampleStem`: four stride-2 stages, ``ceil(size / 16)``."""
    for _ in range(4):
        size = (size + 1) // 2
    return size


class ResidualBlock(nn.Module):
    """``relu(x' + bn(conv(relu(bn(conv(x))))))`` with 3x3 convs and BatchNorm.

    ``x'`` is ``x``, or a strided 3x3 conv + BatchNorm projection when the channel
    count or stride changes (EfficientZero's downsampling block).

    Args:
        in_channels: ``C_in``.
        out_channels: ``C_out``; defaults to ``C_in``.
        stride: 1, or 2 to halve the spatial size.

    Shapes: ``[B, C_in, H, W]`` -> ``[B, C_out, ceil(H / stride), ceil(W / stride)]``.
    """

    def __init__(self, in_channels: int, out_channels: int | None = None, *, stride: int = 1) -> None:
        super().__init__()
        out_channels = in_channels if out_channels is None else out_channels
        self.conv1 = _conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(_conv3x3(in_channels, out_channels, stride), nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # relu_ in place on fresh tensors (a batch norm's output, the sum): the same values and
        # gradients (batch norm's backward reads its input, relu's its output, the sum's
        # neither) with two fewer activation-sized allocations per block
        out = self.bn1(self.conv1(x)).relu_()
        out = self.bn2(self.conv2(out))
        return (out + self.shortcut(x)).relu_()


class DownsampleStem(nn.Module):
    """MuZero Atari downsampling (appendix, as in EfficientZero/LightZero).

    stride-2 conv (``C/2``) -> res block -> stride-2 res block (``C``) -> res block ->
    avg pool /2 -> res block -> avg pool /2.

    Shapes: ``[B, C_in, H, W]`` -> ``[B, C, ceil(H / 16), ceil(W / 16)]``
    (96x96 -> 6x6, 64x64 -> 4x4).

    Args:
        in_channels: ``C_in``.
        out_channels: ``C`` (even).
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        half = out_channels // 2
        self.layers = nn.Sequential(
            _conv3x3(in_channels, half, stride=2),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
            ResidualBlock(half),
            ResidualBlock(half, out_channels, stride=2),
            ResidualBlock(out_channels),
            nn.AvgPool2d(kernel_size=3, stride=2, padding=1),
            ResidualBlock(out_channels),
            nn.AvgPool2d(kernel_size=3, stride=2, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ConvHead(nn.Module):
    """1x1 conv + BatchNorm + ReLU to ``reduced_channels``, flatten, then an MLP.

    Shapes: ``[B, C, h, w]`` -> ``[B, out_features]``.

    Args:
        in_channels: ``C``.
        reduced_channels: channels after the 1x1 conv.
        spatial_size: ``h * w``.
        hidden_sizes: MLP hidden widths (ReLU); may be empty.
        out_features: output width.
        zero_init_output: zero the last Linear (value/reward heads predict 0 at init).
    """

    def __init__(
        self,
        *,
        in_channels: int,
        reduced_channels: int,
        spatial_size: int,
        hidden_sizes: Sequence[int],
        out_features: int,
        zero_init_output: bool,
    ) -> None:
        super().__init__()
        self.reduce = nn.Sequential(
            nn.Conv2d(in_channels, reduced_channels, kernel_size=1, bias=False),
            nn.BatchNorm2d(reduced_channels),
            nn.ReLU(inplace=True),
            nn.Flatten(),
        )
        layers: list[nn.Module] = []
        width = reduced_channels * spatial_size
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU(inplace=True)]
            width = hidden
        output = nn.Linear(width, out_features)
        if zero_init_output:
            nn.init.zeros_(output.weight)
            nn.init.zeros_(output.bias)
        self.mlp = nn.Sequential(*layers, output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.reduce(x))
