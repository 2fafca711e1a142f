"""Stochastic MuZero network (Antonoglou et al. 2022): afterstates and chance codes.

A real env step ``s --a--> s'`` is modelled in two halves, a deterministic one (the agent's
action) and a stochastic one (the env's chance outcome):

* representation ``h(o) -> s`` and prediction ``f(s) -> (pi, v)``: MuZero's;
* afterstate dynamics ``phi(s, a) -> as``: the state after the action, before the env's chance
  outcome (MuZero's dynamics trunk; its reward columns are not used);
* afterstate prediction ``psi(as) -> (sigma, Q)``: logits of the distribution over the C chance
  codes and the afterstate's value (``Q(s, a) = V(as)``);
* dynamics ``g(as, c) -> (s', r)``: the next state and the step's reward for chance code
  ``c`` (a one-hot ``[B, C]``, so a straight-through code passes gradient to the encoder);
* chance encoder ``e(o_t, o_{t+1}) -> c_e``: logits over the codes of the outcome that
  happened; the code is ``one_hot(argmax c_e)``, trained straight-through.

:class:`StochasticMuZeroNetwork` composes an existing
:class:`~lz_tune.models.mlp.MuZeroMLPNetwork` (``self.muzero``: representation, prediction,
projection, and its dynamics as phi) with three small MLPs (psi, g, e). Vector observations
only. Value, Q and reward are categorical over the supports of ``muzero``.

Shapes: ``B`` batch, ``O`` observation width, ``D`` latent width, ``A`` actions, ``C`` chance
codes, ``V = 2 * value_support_size + 1``, ``R = 2 * reward_support_size + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import (
    ComposedMuZeroNetwork,
    InitialOutput,
    MuZeroNetwork,
    normalize_latent,
    observation_to_float,
)
from lz_tune.models.mlp import MuZeroMLPNetwork

__all__ = ["StochasticMuZeroNetwork", "straight_through_one_hot"]


def _mlp(
    in_features: int,
    hidden_sizes: Sequence[int],
    out_features: int,
    *,
    layer_norm: bool,
    zero_columns: slice | None = None,
) -> nn.Sequential:
    """Linear -> [LayerNorm] -> ReLU per hidden width, then a Linear head; the head's
    ``zero_columns`` (value / reward bins) start at 0 so their decoded scalars are 0 at init."""
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden_sizes:
        layers.append(nn.Linear(width, size))
        if layer_norm:
            layers.append(nn.LayerNorm(size))
        layers.append(nn.ReLU(inplace=True))
        width = size
    head = nn.Linear(width, out_features)
    if zero_columns is not None:
        with torch.no_grad():
            head.weight[zero_columns].zero_()
            head.bias[zero_columns].zero_()
    layers.append(head)
    return nn.Sequential(*layers)


def straight_through_one_hot(logits: torch.Tensor) -> torch.Tensor:
    """``[B, C]`` one-hot of ``argmax logits`` in the forward pass; in the backward pass the
    gradient of ``softmax(logits)`` (straight-through estimator), so what consumes the code
    trains the encoder."""
    probs = F.softmax(logits, dim=-1)
    one_hot = F.one_hot(logits.argmax(-1), logits.shape[-1]).to(probs.dtype)
    return one_hot + (probs - probs.detach())  # exactly the one-hot forward


class StochasticMuZeroNetwork(ComposedMuZeroNetwork):
    """MuZero MLP network + afterstate prediction, chance dynamics and chance encoder (see the
    module docstring).

    Args:
        muzero: exactly a :class:`MuZeroMLPNetwork` with discrete actions.
        chance_space_size: ``C``.
        hidden_sizes: hidden widths of psi, g and e (default: ``muzero.hidden_sizes``).
    """

    batch_independent_prediction = True  # LayerNorm and ReLU only
    muzero: MuZeroMLPNetwork

    def __init__(
        self, muzero: MuZeroNetwork, *, chance_space_size: int, hidden_sizes: Sequence[int] | None = None
    ) -> None:
        super().__init__()
        if type(muzero) is not MuZeroMLPNetwork or muzero.action_dim:
            raise TypeError("muzero must be a MuZeroMLPNetwork with discrete actions")
        self.muzero = muzero
        self.chance_space_size = check.positive_int("chance_space_size", chance_space_size)
        hidden = check.positive_int_tuple(
            "hidden_sizes", hidden_sizes if hidden_sizes is not None else muzero.hidden_sizes, allow_empty=False
        )
        latent, obs = muzero.latent_dim, muzero.observation_dim
        value_bins = 2 * muzero.value_support_size + 1
        reward_bins = 2 * muzero.reward_support_size + 1
        chance = self.chance_space_size
        norm = muzero.layer_norm
        self.afterstate_head = _mlp(
            latent, hidden, chance + value_bins, layer_norm=norm, zero_columns=slice(chance, None)
        )
        self.chance_dynamics = _mlp(
            latent + chance, hidden, latent + reward_bins, layer_norm=norm, zero_columns=slice(latent, None)
        )
        self.chance_encoder = _mlp(2 * obs, hidden, chance, layer_norm=norm)
        self._afterstate_split = [chance, value_bins]
        self._dynamics_split = [latent, reward_bins]

    # --------------------------------------------------------------------- the MuZero parts

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, D]`` -> ``(policy_logits [B, A], value_logits [B, V])``."""
        return self.muzero.prediction(latent)

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        latent = self.representation(obs)
        policy_logits, value_logits = self.prediction(latent)
        return InitialOutput(latent=latent, value_logits=value_logits, policy_logits=policy_logits)

    # --------------------------------------------------------------------- the stochastic parts

    def afterstate_dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """phi: ``latent [B, D]``, ``action [B]`` int64 -> normalised ``afterstate [B, D]``."""
        afterstate, _ = self.muzero.dynamics(latent, action)
        return afterstate

    def afterstate_prediction(self, afterstate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """psi: ``afterstate [B, D]`` -> ``(chance_logits [B, C], q_logits [B, V])``."""
        chance_logits, q_logits = self.afterstate_head(afterstate).split_with_sizes(self._afterstate_split, 1)
        return chance_logits, q_logits

    def dynamics(self, afterstate: torch.Tensor, code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """g: ``afterstate [B, D]`` and ``code`` (``[B, C]`` float one-hot, or ``[B]`` int64
        indices) -> ``(next_latent [B, D]`` normalised, ``reward_logits [B, R])``."""
        if code.dim() == 1:
            code = F.one_hot(code, self.chance_space_size).to(afterstate.dtype)
        out = self.chance_dynamics(torch.cat([afterstate, code.to(afterstate.dtype)], dim=1))
        next_latent, reward_logits = out.split_with_sizes(self._dynamics_split, 1)
        return normalize_latent(next_latent), reward_logits

    def encode_chance(self, obs: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
        """e: ``obs, next_obs [B, O]`` (the observations before and after the env step) ->
        ``chance logits [B, C]``."""
        dtype: torch.dtype = self.chance_encoder[0].weight.dtype  # type: ignore[assignment]  # a Linear (torch: Module)
        x = torch.cat(
            [observation_to_float(obs, dtype).flatten(1), observation_to_float(next_obs, dtype).flatten(1)], 1
        )
        return self.chance_encoder(x)
