"""muzero_rnn_full_obs network: a MuZero network whose prediction is conditioned on a GRU
history of the real (latent, action) sequence.

Composes an existing :class:`~lz_tune.models.mlp.MuZeroMLPNetwork` or
:class:`~lz_tune.models.conv.MuZeroConvNetwork` (``self.muzero``: representation, dynamics,
prediction and projection as they are) with

* a GRU cell ``h' = GRU([flatten(latent), one_hot(action)], h)``, ``h [B, H]``: the history;
* a history read-in ``latent_h = normalise(latent + tanh(W h + b))`` (``W: H -> prod(latent_shape)``,
  zero-initialised, so at init the prediction is the base network's) that prediction reads:
  ``f(latent, h) = muzero.prediction(latent_h)``. The tanh bounds the read-in to (-1, 1), the
  scale of the [0, 1] latent: unbounded, it grew past the latent's range on some seeds and the
  min-max normalisation then squeezed the state itself into a sliver of [0, 1]; one CartPole
  run in five plateaued at eval ~112 for 3,000+ updates that way (benchmarks/README.md).

The model state is ``(latent, h)``; one model step is ``dynamics`` on the latent (next latent and
reward, MuZero's) plus the GRU step on the history. ``initial_inference(obs)`` uses an empty
history (``h = 0``).

Shapes: ``B`` batch, ``A`` actions, ``H`` = ``hidden_size``, ``V``/``R`` value/reward bins.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import ComposedMuZeroNetwork, InitialOutput, normalize_latent
from lz_tune.models.conv import MuZeroConvNetwork
from lz_tune.models.mlp import MuZeroMLPNetwork

__all__ = ["RNNFullObsNetwork"]


class RNNFullObsNetwork(ComposedMuZeroNetwork):
    """MuZero network + GRU history that conditions prediction (see the module docstring).

    Args:
        muzero: exactly a ``MuZeroMLPNetwork`` or ``MuZeroConvNetwork`` with discrete actions.
        hidden_size: ``H``, the GRU width.
    """

    def __init__(self, muzero: MuZeroMLPNetwork | MuZeroConvNetwork, *, hidden_size: int) -> None:
        super().__init__()
        if type(muzero) not in (MuZeroMLPNetwork, MuZeroConvNetwork) or muzero.action_dim:
            raise TypeError("muzero must be a MuZeroMLPNetwork or MuZeroConvNetwork with discrete actions")
        self.muzero = muzero
        self.hidden_size = check.positive_int("hidden_size", hidden_size)
        self.latent_size = math.prod(muzero.latent_shape)
        self.gru = nn.GRUCell(self.latent_size + muzero.action_space_size, self.hidden_size)
        self.history_to_latent = nn.Linear(self.hidden_size, self.latent_size)
        nn.init.zeros_(self.history_to_latent.weight)
        nn.init.zeros_(self.history_to_latent.bias)
        self.batch_independent_prediction = muzero.batch_independent_prediction

    def empty_history(self, batch: int, *, like: torch.Tensor) -> torch.Tensor:
        """``[B, H]`` zeros (no history) on ``like``'s device and dtype."""
        return like.new_zeros((batch, self.hidden_size))

    def history_step(self, latent: torch.Tensor, action: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """``h' = GRU([flatten(latent), one_hot(action)], h)``: ``latent [B, *L]``, ``action [B]``
        int64, ``history [B, H]`` -> ``[B, H]``."""
        one_hot = F.one_hot(action, self.action_space_size).to(latent.dtype)
        return self.gru(torch.cat([latent.flatten(1), one_hot], dim=1), history)

    def dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MuZero's dynamics: ``(next_latent [B, *L], reward_logits [B, R])``."""
        return self.muzero.dynamics(latent, action)

    def prediction(self, latent: torch.Tensor, history: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits [B, A], value_logits [B, V])`` of ``latent`` read with ``history``."""
        read_in = torch.tanh(self.history_to_latent(history)).view(latent.shape)
        return self.muzero.prediction(normalize_latent(latent + read_in))

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """Representation, then prediction with an empty history."""
        latent = self.representation(obs)
        policy_logits, value_logits = self.prediction(latent, self.empty_history(latent.shape[0], like=latent))
        return InitialOutput(latent=latent, value_logits=value_logits, policy_logits=policy_logits)
