"""MuZero MLP network for vector observations, tuned for the tree-search hot path; with an image
encoder (a small conv stem in front of the representation) also for small images.

The search calls :meth:`MuZeroNetwork.recurrent_inference` once per simulation at
batch 8..64, where per-op dispatch and Python overhead matter as much as FLOPs.
With one hidden layer and no LayerNorm a recurrent step is 14 torch ops:

* dynamics: ``index_select`` (action embedding, bias folded in) -> ``addmm``
  (latent weight) -> ``relu_`` -> ``addmm`` (fused ``[next_latent | reward]`` head)
  -> ``split_with_sizes`` -> min-max normalisation (``aminmax``, 2 ``sub``,
  ``clamp_min``, ``div``);
* prediction: ``addmm`` -> ``relu_`` -> ``addmm`` (fused ``[policy | value]`` head)
  -> ``split_with_sizes``.

Weights are stored ``[in, out]`` (one ``addmm``, no transposed-operand GEMM path) as
flat parameters of this module, read from ``self._parameters`` on the hot path,
which skips ``nn.Module.__getattr__`` and submodule ``__call__`` (~1 us each).

The action embedding replaces ``one_hot`` + ``cat`` + ``Linear``: row ``a`` of the
embedding equals the one-hot column ``a`` of ``Linear(D + A, H0)`` plus its bias.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import MuZeroNetwork, normalize_latent, observation_to_float
from lz_tune.models.blocks import DownsampleStem, ResidualBlock, downsampled_size
from lz_tune.models.projection import SimSiamProjector

__all__ = ["MuZeroMLPNetwork"]

LAYER_NORM_EPS = 1e-5


def _image_encoder(
    image_shape: tuple[int, ...], channels: int, res_blocks: int, downsample: bool
) -> tuple[nn.Sequential, int]:
    """The conv stem of an MLP network on images ``[C, H, W]``: 3x3 conv + BatchNorm + ReLU to
    ``channels`` (MuZero's stride-16 :class:`DownsampleStem` when ``downsample``), ``res_blocks``
    residual blocks, flattened. Returns the stem and its output width ``channels * H' * W'``."""
    if len(image_shape) != 3:
        raise ValueError(f"image_shape must be [C, H, W], got {image_shape}")
    check.positive_int("encoder_channels", channels)
    c, h, w = image_shape
    if downsample:
        layers: list[nn.Module] = [DownsampleStem(c, channels)]
        h, w = downsampled_size(h), downsampled_size(w)
    else:
        layers = [
            nn.Conv2d(c, channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
        ]
    layers += [ResidualBlock(channels) for _ in range(check.non_negative_int("encoder_res_blocks", res_blocks))]
    return nn.Sequential(*layers, nn.Flatten()), channels * h * w


def _uniform(shape: tuple[int, ...], bound: float) -> nn.Parameter:
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


class MuZeroMLPNetwork(MuZeroNetwork):
    """MuZero / EfficientZero network for vector observations.

    * representation: ``obs [B, O]`` -> MLP(``hidden_sizes``) -> ``latent [B, D]`` (normalised).
    * dynamics: ``(latent [B, D], action [B])`` -> MLP(``hidden_sizes``) -> fused head
      -> ``(next_latent [B, D]`` normalised, ``reward_logits [B, R])``.
    * prediction: ``latent [B, D]`` -> MLP(``hidden_sizes``) -> fused head
      -> ``(policy_logits [B, A], value_logits [B, V])``.
    * project: SimSiam projector on the latent -> ``[B, P]``.

    Parameters are named ``{trunk}_{layer}_{weight|bias}`` with ``trunk`` in
    ``representation|dynamics|prediction``, ``layer`` in ``in|hidden{i}|head``; linear
    weights are ``[in, out]``. The dynamics input layer is ``dynamics_latent_weight
    [D, H0]`` + ``dynamics_action_embedding [A, H0]``. The value and reward columns of
    the fused heads are zero-initialised, so the decoded value and reward are 0 at
    init. Returned logits are column slices of the fused head outputs (non-contiguous
    views; ``np.asarray`` / numba accept them as strided arrays).

    Args:
        observation_dim: ``O``; observations are ``[B, O]`` (extra dims are flattened;
            uint8 observations are scaled by 1/255).
        action_space_size: ``A``.
        action_dim: 0 (discrete), or ``D_a`` for continuous actions ``[B, D_a]`` (a linear
            action embedding; policy output ``[B, 2 D_a]``).
        latent_dim: ``D``.
        hidden_sizes: hidden widths of each of the three MLP trunks (non-empty).
        value_support_size: ``S_v``; ``V = 2 * S_v + 1``.
        reward_support_size: ``S_r``; ``R = 2 * S_r + 1``.
        projection_dim: ``P``, SimSiam output width.
        projection_hidden_dim: SimSiam projection hidden width.
        predictor_hidden_dim: SimSiam prediction-head hidden width.
        layer_norm: LayerNorm before every hidden ReLU (one extra op per hidden layer).
        image_shape: ``[C, H, W]`` for image observations (``model.kind=conv_mlp``): a conv stem
            (``image_encoder``: 3x3 conv + BatchNorm + ReLU to ``encoder_channels``, then
            ``encoder_res_blocks`` residual blocks; MuZero's stride-16 stem when
            ``encoder_downsample``) reads ``obs [B, C, H, W]`` and the representation MLP its
            flattened features (``observation_dim`` is then their width). Dynamics and
            prediction stay MLPs on the latent, so the tree search keeps the numba engine and
            an update unrolls matrix products instead of convolutions. None: vector observations.
        encoder_channels, encoder_res_blocks, encoder_downsample: the conv stem's shape.
    """

    batch_independent_prediction = True  # LayerNorm and ReLU only: per sample

    # registered by _add_linear (by name); declared for the zero-initialisation of their columns
    dynamics_head_weight: nn.Parameter
    dynamics_head_bias: nn.Parameter
    prediction_head_weight: nn.Parameter
    prediction_head_bias: nn.Parameter

    def __init__(
        self,
        *,
        observation_dim: int,
        action_space_size: int,
        latent_dim: int = 128,
        hidden_sizes: Sequence[int] = (128,),
        value_support_size: int = 300,
        reward_support_size: int = 300,
        projection_dim: int = 256,
        projection_hidden_dim: int = 256,
        predictor_hidden_dim: int = 64,
        layer_norm: bool = False,
        action_dim: int = 0,
        image_shape: Sequence[int] | None = None,
        encoder_channels: int = 32,
        encoder_res_blocks: int = 0,
        encoder_downsample: bool = False,
    ) -> None:
        super().__init__(
            action_space_size=action_space_size,
            action_dim=action_dim,
            value_support_size=value_support_size,
            reward_support_size=reward_support_size,
            projection_dim=projection_dim,
        )
        self.image_encoder: nn.Module | None = None
        if image_shape is not None:  # images: a conv stem reads them, the MLP works on its flattened features
            self.image_encoder, observation_dim = _image_encoder(
                tuple(image_shape), encoder_channels, encoder_res_blocks, encoder_downsample
            )
        self.observation_dim = check.positive_int("observation_dim", observation_dim)
        self.latent_dim = check.positive_int("latent_dim", latent_dim)
        self.hidden_sizes = check.positive_int_tuple("hidden_sizes", hidden_sizes, allow_empty=False)
        self.layer_norm = check.boolean("layer_norm", layer_norm)
        self.latent_shape = (self.latent_dim,)

        num_actions = self.action_dim or self.action_space_size  # rows of the action embedding
        policy_size = self.policy_size
        value_bins = 2 * self.value_support_size + 1
        reward_bins = 2 * self.reward_support_size + 1
        latent, first, last = self.latent_dim, self.hidden_sizes[0], self.hidden_sizes[-1]

        self._add_linear("representation_in", self.observation_dim, first)
        self._add_linear("representation_head", last, latent)

        # First dynamics layer = Linear(D + A, H0) on concat(latent, one_hot(action)),
        # split into a latent weight and per-action rows (one-hot column + bias).
        # Continuous: Linear(D + D_a, H0) on concat(latent, action), its bias kept apart.
        bound = 1.0 / math.sqrt(latent + num_actions)
        self.dynamics_latent_weight = _uniform((latent, first), bound)
        self.dynamics_action_embedding = _uniform((num_actions, first), bound)
        if self.action_dim:
            self.dynamics_action_bias = _uniform((first,), bound)
        else:
            with torch.no_grad():
                self.dynamics_action_embedding.add_(torch.empty(1, first).uniform_(-bound, bound))
        self._add_linear("dynamics_head", last, latent + reward_bins)
        self._dynamics_split = [latent, reward_bins]

        self._add_linear("prediction_in", latent, first)
        self._add_linear("prediction_head", last, policy_size + value_bins)
        self._prediction_split = [policy_size, value_bins]

        self._hidden_names: dict[str, tuple[tuple[str, str], ...]] = {}
        self._norm_names: dict[str, tuple[tuple[str, str], ...]] = {}
        for trunk in ("representation", "dynamics", "prediction"):
            self._hidden_names[trunk] = tuple(
                self._add_linear(f"{trunk}_hidden{i}", self.hidden_sizes[i - 1], self.hidden_sizes[i])
                for i in range(1, len(self.hidden_sizes))
            )
            self._norm_names[trunk] = (
                tuple(self._add_layer_norm(f"{trunk}_norm{i}", size) for i, size in enumerate(self.hidden_sizes))
                if self.layer_norm
                else ()
            )

        with torch.no_grad():
            self.dynamics_head_weight[:, latent:].zero_()
            self.dynamics_head_bias[latent:].zero_()
            self.prediction_head_weight[:, policy_size:].zero_()
            self.prediction_head_bias[policy_size:].zero_()

        self.projector = SimSiamProjector(
            input_dim=latent,
            hidden_dim=projection_hidden_dim,
            projection_dim=self.projection_dim,
            predictor_hidden_dim=predictor_hidden_dim,
        )

    def _add_linear(self, name: str, in_features: int, out_features: int) -> tuple[str, str]:
        """Register ``{name}_weight [in, out]`` and ``{name}_bias [out]`` with ``nn.Linear``'s init."""
        bound = 1.0 / math.sqrt(in_features)
        self.register_parameter(f"{name}_weight", _uniform((in_features, out_features), bound))
        self.register_parameter(f"{name}_bias", _uniform((out_features,), bound))
        return f"{name}_weight", f"{name}_bias"

    def _add_layer_norm(self, name: str, size: int) -> tuple[str, str]:
        self.register_parameter(f"{name}_weight", nn.Parameter(torch.ones(size)))
        self.register_parameter(f"{name}_bias", nn.Parameter(torch.zeros(size)))
        return f"{name}_weight", f"{name}_bias"

    def _trunk(self, params: dict[str, nn.Parameter], trunk: str, pre: torch.Tensor) -> torch.Tensor:
        """Activate the first hidden pre-activation ``pre [B, H0]``, run the rest -> ``[B, H_last]``."""
        norms = self._norm_names[trunk]
        if norms:
            weight, bias = norms[0]
            pre = F.layer_norm(pre, pre.shape[1:], params[weight], params[bias], LAYER_NORM_EPS)
        hidden = torch.relu_(pre)
        for index, (weight, bias) in enumerate(self._hidden_names[trunk], start=1):
            pre = torch.addmm(params[bias], hidden, params[weight])
            if norms:
                norm_weight, norm_bias = norms[index]
                pre = F.layer_norm(pre, pre.shape[1:], params[norm_weight], params[norm_bias], LAYER_NORM_EPS)
            hidden = torch.relu_(pre)
        return hidden

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, O]`` (``[B, C, H, W]`` with an image encoder; float, or uint8 scaled by 1/255) ->
        normalised ``latent [B, D]``."""
        p = cast("dict[str, nn.Parameter]", self._parameters)  # every entry is registered (not None)
        x = observation_to_float(obs, p["representation_in_weight"].dtype)
        x = self.image_encoder(x) if self.image_encoder is not None else x.flatten(1)
        pre = torch.addmm(p["representation_in_bias"], x, p["representation_in_weight"])
        hidden = self._trunk(p, "representation", pre)
        return normalize_latent(torch.addmm(p["representation_head_bias"], hidden, p["representation_head_weight"]))

    def dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, D]``, ``action [B]`` int64 (continuous: ``[B, D_a]`` float) ->
        ``(next_latent [B, D], reward_logits [B, R])``."""
        p = cast("dict[str, nn.Parameter]", self._parameters)  # every entry is registered (not None)
        if self.action_dim:
            embedded = torch.addmm(p["dynamics_action_bias"], action.to(latent.dtype), p["dynamics_action_embedding"])
        else:
            embedded = p["dynamics_action_embedding"].index_select(0, action)
        pre = torch.addmm(embedded, latent, p["dynamics_latent_weight"])
        hidden = self._trunk(p, "dynamics", pre)
        out = torch.addmm(p["dynamics_head_bias"], hidden, p["dynamics_head_weight"])
        next_latent, reward_logits = out.split_with_sizes(self._dynamics_split, 1)
        return normalize_latent(next_latent), reward_logits

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, D]`` -> ``(policy_logits [B, policy_size], value_logits [B, V])``."""
        p = cast("dict[str, nn.Parameter]", self._parameters)  # every entry is registered (not None)
        pre = torch.addmm(p["prediction_in_bias"], latent, p["prediction_in_weight"])
        hidden = self._trunk(p, "prediction", pre)
        out = torch.addmm(p["prediction_head_bias"], hidden, p["prediction_head_weight"])
        policy_logits, value_logits = out.split_with_sizes(self._prediction_split, 1)
        return policy_logits, value_logits

    def project(self, latent: torch.Tensor, *, with_grad: bool, groups: int = 1) -> torch.Tensor:
        """``latent [B, D]`` -> ``[B, P]``; the prediction head only when ``with_grad``."""
        return self.projector(latent, with_grad=with_grad, groups=groups)
