"""AlphaZero's network: observation -> (policy logits, value logits), no dynamics, no reward.

:class:`AlphaZeroMLPNetwork` (vector observations) is an MLP trunk and two linear heads; it offers
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

__all__ = ["AlphaZeroMLPNetwork"]


class AlphaZeroMLPNetwork(nn.Module):
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

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """Trunk features, value logits and policy logits of ``obs`` (MuZero's interface)."""
        latent = self.representation(obs)
        policy_logits, value_logits = self.prediction(latent)
        return InitialOutput(latent=latent, value_logits=value_logits, policy_logits=policy_logits)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits, value_logits)`` of ``obs``."""
        return self.prediction(self.representation(obs))
