"""Typed network outputs and the abstract MuZero network interface.

Shapes: ``B`` batch, ``A`` actions, ``V = 2 * value_support_size + 1``,
``R = 2 * reward_support_size + 1``, ``P`` projection dim. ``latent`` is
``[B, *latent_shape]``, min-max normalised per sample to ``[0, 1]``.
"""

from __future__ import annotations

import abc
import dataclasses

import numba
import numpy as np
import torch
from torch import nn

from lz_tune.models import _validation as check

__all__ = [
    "InitialOutput",
    "RecurrentOutput",
    "MuZeroNetwork",
    "ComposedMuZeroNetwork",
    "normalize_latent",
    "observation_to_float",
]

LATENT_RANGE_EPS = 1e-5


@dataclasses.dataclass(frozen=True, slots=True)
class InitialOutput:
    """Output of :meth:`MuZeroNetwork.initial_inference`.

    Attributes:
        latent: ``[B, *latent_shape]`` normalised latent state.
        value_logits: ``[B, V]``.
        policy_logits: ``[B, A]``.
    """

    latent: torch.Tensor
    value_logits: torch.Tensor
    policy_logits: torch.Tensor


@dataclasses.dataclass(frozen=True, slots=True)
class RecurrentOutput:
    """Output of :meth:`MuZeroNetwork.recurrent_inference`.

    Attributes:
        latent: ``[B, *latent_shape]`` normalised next latent state.
        reward_logits: ``[B, R]`` logits of the reward for the transition.
        value_logits: ``[B, V]`` logits of the next state's value.
        policy_logits: ``[B, A]`` logits of the next state's policy.
    """

    latent: torch.Tensor
    reward_logits: torch.Tensor
    value_logits: torch.Tensor
    policy_logits: torch.Tensor


@numba.njit(cache=True, nogil=True)
def minmax_rows_into(x: np.ndarray, eps: float, out: np.ndarray) -> None:
    """``out [B, D]`` = each row of ``x [B, D]`` min-max scaled to [0, 1] (range >= eps); ``out``
    may be ``x`` itself. Also called from other numba kernels (the search engine)."""
    batch, dim = x.shape
    for b in range(batch):
        lo = x[b, 0]
        hi = x[b, 0]
        for j in range(1, dim):
            v = x[b, j]
            lo = min(lo, v)
            hi = max(hi, v)
        span = np.float32(max(hi - lo, eps))
        for j in range(dim):
            out[b, j] = (x[b, j] - lo) / span  # same float32 arithmetic as the torch path


@numba.njit(cache=True, nogil=True)
def _minmax_rows(x: np.ndarray, eps: float) -> np.ndarray:
    """[B, D] float32 -> new [B, D] float32, each row min-max scaled to [0, 1] (range >= eps)."""
    out = np.empty(x.shape, np.float32)
    minmax_rows_into(x, eps, out)
    return out


def normalize_latent(latent: torch.Tensor) -> torch.Tensor:
    """Min-max normalise each sample of ``latent`` to ``[0, 1]`` (MuZero appendix G).

    The per-sample range is clamped below at ``1e-5`` so constant latents map to 0
    instead of NaN.

    Args:
        latent: ``[B, ...]``; the min/max are taken over all non-batch dims.

    Returns:
        ``[B, ...]`` tensor, same shape; contiguous, or channels-last when ``latent`` is a
        channels-last ``[B, C, H, W]``.
    """
    if (
        latent.dim() == 2
        and latent.dtype == torch.float32
        and latent.device.type == "cpu"
        and not torch.is_grad_enabled()
    ):
        # search hot path (no autograd): one numba pass instead of five torch ops
        return torch.from_numpy(_minmax_rows(latent.numpy(), LATENT_RANGE_EPS))
    if latent.dim() == 4 and latent.is_contiguous(memory_format=torch.channels_last) and not latent.is_contiguous():
        # channels-last conv latent (the learner's fused path): reduce over (C, H, W) in place
        # of flattening, which would copy it back to NCHW; same values
        dims = (1, 2, 3)
        low, high = latent.amin(dim=dims, keepdim=True), latent.amax(dim=dims, keepdim=True)
        return (latent - low) / (high - low).clamp_min(LATENT_RANGE_EPS)
    flat = latent if latent.dim() == 2 else latent.flatten(1)
    low, high = torch.aminmax(flat, dim=1, keepdim=True)
    normalized = (flat - low) / (high - low).clamp_min(LATENT_RANGE_EPS)
    return normalized if flat is latent else normalized.view(latent.shape)


def observation_to_float(
    obs: torch.Tensor, dtype: torch.dtype, memory_format: torch.memory_format = torch.preserve_format
) -> torch.Tensor:
    """Convert observations to ``dtype``; uint8 (pixel) observations are scaled by 1/255.

    Args:
        obs: ``[B, ...]`` observations, uint8 or any numeric dtype.
        dtype: the floating dtype of the network parameters.
        memory_format: layout of the result (``torch.channels_last`` for ``[B, C, H, W]``
            conv inputs: converted in the same pass as the dtype).

    Returns:
        ``[B, ...]`` floating tensor.
    """
    if obs.dtype == torch.uint8:
        return obs.to(dtype, memory_format=memory_format).div_(255.0)
    return obs.to(dtype, memory_format=memory_format)


class MuZeroNetwork(nn.Module, abc.ABC):
    """Abstract MuZero network: representation h, dynamics g, prediction f, and the
    EfficientZero SimSiam projection used by the self-supervised consistency loss.

    Subclasses implement :meth:`representation`, :meth:`dynamics`,
    :meth:`prediction` and :meth:`project`, and set ``latent_shape``.

    Attributes:
        action_space_size: ``A`` (discrete actions).
        action_dim: 0 for discrete actions (``[B]`` int64 indices); ``D_a >= 1`` for
            continuous ones (``[B, D_a]`` float in [-1, 1]). Then the policy output is
            ``[B, 2 D_a]``: a Gaussian's mean and raw scale per dimension (see
            :mod:`lz_tune.algos.sampling`).
        policy_size: width of the policy output, ``A`` or ``2 D_a``.
        value_support_size: ``S_v``; value logits have ``V = 2 * S_v + 1`` bins.
        reward_support_size: ``S_r``; reward logits have ``R = 2 * S_r + 1`` bins.
        latent_shape: shape of one latent state, without the batch dim.
        projection_dim: ``P``, the width of :meth:`project`'s output.
    """

    latent_shape: tuple[int, ...]
    #: ``prediction`` treats every sample on its own (no batch statistics), so the learner may
    #: run it once over all unroll steps; False for networks with BatchNorm in prediction.
    batch_independent_prediction: bool = False

    def __init__(
        self,
        *,
        action_space_size: int,
        value_support_size: int,
        reward_support_size: int,
        projection_dim: int,
        action_dim: int = 0,
    ) -> None:
        super().__init__()
        self.action_space_size = check.positive_int("action_space_size", action_space_size)
        self.action_dim = check.non_negative_int("action_dim", action_dim)
        self.policy_size = 2 * self.action_dim if self.action_dim else self.action_space_size
        self.value_support_size = check.positive_int("value_support_size", value_support_size)
        self.reward_support_size = check.positive_int("reward_support_size", reward_support_size)
        self.projection_dim = check.positive_int("projection_dim", projection_dim)

    @abc.abstractmethod
    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """Encode observations ``[B, *obs_shape]`` (uint8 is scaled by 1/255) into a
        normalised latent ``[B, *latent_shape]``."""

    @abc.abstractmethod
    def dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One model step.

        Args:
            latent: ``[B, *latent_shape]``.
            action: ``[B]`` int64, or ``[B, D_a]`` float for continuous actions.

        Returns:
            ``(next_latent [B, *latent_shape] normalised, reward_logits [B, R])``.
        """

    @abc.abstractmethod
    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy and value of a latent ``[B, *latent_shape]``.

        Returns:
            ``(policy_logits [B, policy_size], value_logits [B, V])``.
        """

    @abc.abstractmethod
    def project(self, latent: torch.Tensor, *, with_grad: bool, groups: int = 1) -> torch.Tensor:
        """SimSiam projection of a latent ``[B, *latent_shape]`` to ``[B, P]``; with ``groups``
        > 1 the batch holds that many equal blocks normalised as separate batches.

        With ``with_grad=True`` (online branch) the prediction head is applied after
        the projection; with ``with_grad=False`` (target branch) only the projection
        is. The caller runs the target branch under ``torch.no_grad()``.
        """

    def forward(self, obs: torch.Tensor) -> InitialOutput:
        """``module(obs)`` is :meth:`initial_inference` (hooks, ``torch.func.functional_call``)."""
        return self.initial_inference(obs)

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """Representation then prediction for observations ``[B, *obs_shape]``."""
        latent = self.representation(obs)
        policy_logits, value_logits = self.prediction(latent)
        return InitialOutput(latent=latent, value_logits=value_logits, policy_logits=policy_logits)

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor) -> RecurrentOutput:
        """Dynamics then prediction for ``latent [B, *latent_shape]``, ``action [B]`` int64."""
        next_latent, reward_logits = self.dynamics(latent, action)
        policy_logits, value_logits = self.prediction(next_latent)
        return RecurrentOutput(
            latent=next_latent,
            reward_logits=reward_logits,
            value_logits=value_logits,
            policy_logits=policy_logits,
        )


class ComposedMuZeroNetwork(nn.Module, abc.ABC):
    """Base of the networks that compose a MuZero network (``self.muzero``) with parts of
    their own: EfficientZero's value-prefix LSTM, Stochastic MuZero's afterstate heads,
    muzero_rnn_full_obs's GRU history. It passes the MuZero parts through unchanged: the
    size attributes, :meth:`representation` and :meth:`project`; ``module(obs)`` is
    :meth:`initial_inference`. Each subclass defines that and its own ``prediction`` and
    ``dynamics``.

    Not a :class:`MuZeroNetwork` subclass: those two have signatures of their own here
    (EfficientZero's dynamics carries the LSTM state, the rnn network's prediction reads the
    history, Stochastic MuZero's step goes through an afterstate).
    """

    muzero: MuZeroNetwork

    @property
    def action_space_size(self) -> int:
        return self.muzero.action_space_size

    @property
    def value_support_size(self) -> int:
        return self.muzero.value_support_size

    @property
    def reward_support_size(self) -> int:
        return self.muzero.reward_support_size

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return self.muzero.latent_shape

    @property
    def projection_dim(self) -> int:
        return self.muzero.projection_dim

    def representation(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, *obs_shape]`` -> normalised ``latent [B, *latent_shape]`` (MuZero's h)."""
        return self.muzero.representation(obs)

    def project(self, latent: torch.Tensor, *, with_grad: bool, groups: int = 1) -> torch.Tensor:
        """SimSiam projection ``latent [B, *latent_shape]`` -> ``[B, P]`` (see
        :meth:`MuZeroNetwork.project`)."""
        return self.muzero.project(latent, with_grad=with_grad, groups=groups)

    @abc.abstractmethod
    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """``obs [B, *obs_shape]`` -> latent, value and policy logits of the root."""

    def forward(self, obs: torch.Tensor) -> InitialOutput:
        """``module(obs)`` is :meth:`initial_inference`."""
        return self.initial_inference(obs)
