"""EfficientZero networks (Ye et al. 2021): a MuZero network plus a value-prefix LSTM.

EfficientZero replaces MuZero's per-step reward with the *value prefix*, the sum of the
rewards since the last LSTM reset, predicted by an LSTM that runs along the unroll (or
the search path). :class:`EfficientZeroNetwork` composes an existing
:class:`~lz_tune.models.mlp.MuZeroMLPNetwork` or
:class:`~lz_tune.models.conv.MuZeroConvNetwork` (``self.muzero``, its representation,
dynamics latent, prediction and projection are reused as they are) with a value-prefix
head:

* conv: dynamics features = the un-normalised dynamics block output ``[B, c, h, w]``
  -> 1x1 conv to ``reduced_channels`` + BatchNorm2d + ReLU -> flatten;
  MLP: dynamics features = the (normalised) next latent ``[B, D]``;
* one ``nn.LSTMCell`` step ``(features, (h, c)) -> (h', c')``, ``[B, H]`` each;
* LayerNorm(H) + ReLU -> MLP(``fc_hidden``, ReLU) -> ``value_prefix_logits [B, R]``; the last
  Linear is zero-initialised, so the decoded prefix is exactly 0 at init.

Differences from the original (LightZero ``efficientzero_model.py``): ``LayerNorm`` instead
of ``BatchNorm1d`` after the LSTM (the search runs in eval mode at batch 1..64, the learner
in train mode; LayerNorm has no batch statistics to disagree between the two).

Shapes: ``B`` batch, ``A`` actions, ``V = 2 * value_support_size + 1``,
``R = 2 * reward_support_size + 1``, ``H`` = ``lstm_hidden_size``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lz_tune.models import _validation as check
from lz_tune.models.base import ComposedMuZeroNetwork, InitialOutput
from lz_tune.models.conv import MuZeroConvNetwork
from lz_tune.models.mlp import MuZeroMLPNetwork

__all__ = ["EZRecurrentOutput", "EfficientZeroNetwork"]

Hidden = tuple[torch.Tensor, torch.Tensor]


@dataclasses.dataclass(frozen=True, slots=True)
class EZRecurrentOutput:
    """Output of :meth:`EfficientZeroNetwork.recurrent_inference`.

    Attributes:
        latent: ``[B, *latent_shape]`` normalised next latent state.
        hidden: ``(h [B, H], c [B, H])`` LSTM state after the step.
        value_prefix_logits: ``[B, R]`` logits of the value prefix after the step.
        value_logits: ``[B, V]`` logits of the next state's value.
        policy_logits: ``[B, A]`` logits of the next state's policy.
    """

    latent: torch.Tensor
    hidden: Hidden
    value_prefix_logits: torch.Tensor
    value_logits: torch.Tensor
    policy_logits: torch.Tensor


class EfficientZeroNetwork(ComposedMuZeroNetwork):
    """MuZero network + value-prefix LSTM head (see the module docstring).

    Not a :class:`~lz_tune.models.base.MuZeroNetwork` (``dynamics`` takes and returns the
    LSTM state), and deliberately no subclass of the MuZero networks: code that checks
    ``type(net) is MuZeroMLPNetwork`` must not mistake this for one.

    A conv ``muzero`` is modified in place: its ``reward_head`` is replaced by
    ``nn.Identity`` so that ``muzero.dynamics`` returns ``(next_latent, features)`` with
    ``features`` the un-normalised block output, and no unused reward head is computed
    (its parameters leave the state dict). An MLP ``muzero`` is used unchanged; its fused
    dynamics head still emits ``R`` reward-logit columns that are ignored here (a few
    extra GEMM columns, negligible, and their weights get no gradient).

    Args:
        muzero: exactly a ``MuZeroMLPNetwork`` or ``MuZeroConvNetwork`` (no subclass).
        lstm_hidden_size: ``H``.
        reduced_channels: 1x1-conv channels before the LSTM (conv only).
        fc_hidden: hidden widths of the MLP after the LSTM (may be empty).
    """

    def __init__(
        self,
        muzero: MuZeroMLPNetwork | MuZeroConvNetwork,
        *,
        lstm_hidden_size: int = 512,
        reduced_channels: int = 16,
        fc_hidden: Sequence[int] = (32,),
    ) -> None:
        super().__init__()
        if type(muzero) not in (MuZeroMLPNetwork, MuZeroConvNetwork):
            raise TypeError(f"muzero must be a MuZeroMLPNetwork or MuZeroConvNetwork, got {type(muzero).__name__}")
        self.lstm_hidden_size = check.positive_int("lstm_hidden_size", lstm_hidden_size)
        reduced_channels = check.positive_int("reduced_channels", reduced_channels)
        self.fc_hidden = check.positive_int_tuple("fc_hidden", fc_hidden, allow_empty=True)

        self.muzero = muzero
        self.prefix_reduce: nn.Module
        if isinstance(muzero, MuZeroConvNetwork):
            muzero.reward_head = nn.Identity()  # dynamics now returns the raw block output
            channels, height, width = muzero.latent_shape
            self.prefix_reduce = nn.Sequential(
                nn.Conv2d(channels, reduced_channels, kernel_size=1, bias=False),
                nn.BatchNorm2d(reduced_channels),
                nn.ReLU(inplace=True),
                nn.Flatten(),
            )
            lstm_input = reduced_channels * height * width
        else:
            self.prefix_reduce = nn.Identity()
            lstm_input = muzero.latent_dim

        self.lstm = nn.LSTMCell(lstm_input, self.lstm_hidden_size)
        self.prefix_norm = nn.LayerNorm(self.lstm_hidden_size)
        layers: list[nn.Module] = []
        width = self.lstm_hidden_size
        for size in self.fc_hidden:
            layers += [nn.Linear(width, size), nn.ReLU(inplace=True)]
            width = size
        output = nn.Linear(width, 2 * muzero.reward_support_size + 1)
        nn.init.zeros_(output.weight)
        nn.init.zeros_(output.bias)
        self.prefix_mlp = nn.Sequential(*layers, output)

    # ------------------------------------------------------------------ factories

    @classmethod
    def mlp(cls, *, lstm_hidden_size: int = 512, **muzero_kwargs: Any) -> EfficientZeroNetwork:
        """Wrap ``MuZeroMLPNetwork(**muzero_kwargs)``."""
        return cls(MuZeroMLPNetwork(**muzero_kwargs), lstm_hidden_size=lstm_hidden_size)

    @classmethod
    def conv(
        cls, *, lstm_hidden_size: int = 512, reduced_channels: int = 16, **muzero_kwargs: Any
    ) -> EfficientZeroNetwork:
        """Wrap ``MuZeroConvNetwork(**muzero_kwargs)``; its ``fc_hidden`` widths are also used
        after the LSTM."""
        muzero = MuZeroConvNetwork(**muzero_kwargs)
        return cls(
            muzero, lstm_hidden_size=lstm_hidden_size, reduced_channels=reduced_channels, fc_hidden=muzero.fc_hidden
        )

    # ------------------------------------------------------------------ MuZero parts

    @property
    def batch_independent_prediction(self) -> bool:
        return self.muzero.batch_independent_prediction

    def prediction(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``latent [B, *latent_shape]`` -> ``(policy_logits [B, A], value_logits [B, V])``."""
        return self.muzero.prediction(latent)

    def initial_inference(self, obs: torch.Tensor) -> InitialOutput:
        """Representation then prediction for ``obs [B, *obs_shape]``; start from
        :meth:`initial_hidden` for the first :meth:`dynamics` step."""
        return self.muzero.initial_inference(obs)

    # ------------------------------------------------------------------ value prefix

    def initial_hidden(self, batch: int) -> Hidden:
        """Zero LSTM state ``(h [B, H], c [B, H])`` on the parameters' device and dtype."""
        batch = check.non_negative_int("batch", batch)
        weight = self.lstm.weight_ih
        zeros = torch.zeros(batch, self.lstm_hidden_size, dtype=weight.dtype, device=weight.device)
        return zeros, zeros.clone()

    def dynamics(
        self, latent: torch.Tensor, hidden: Hidden, action: torch.Tensor
    ) -> tuple[torch.Tensor, Hidden, torch.Tensor]:
        """One model step.

        Args:
            latent: ``[B, *latent_shape]``.
            hidden: ``(h [B, H], c [B, H])``, e.g. :meth:`initial_hidden` after a reset.
            action: ``[B]`` int64.

        Returns:
            ``(next_latent [B, *latent_shape] normalised, (h' [B, H], c' [B, H]),
            value_prefix_logits [B, R])``.
        """
        next_latent, features = self.muzero.dynamics(latent, action)
        if isinstance(self.muzero, MuZeroMLPNetwork):
            features = next_latent  # the fused head's reward logits are ignored
        h, c = self.lstm(self.prefix_reduce(features), hidden)
        value_prefix_logits = self.prefix_mlp(F.relu(self.prefix_norm(h)))
        return next_latent, (h, c), value_prefix_logits

    def latent_dynamics(self, latent: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The latent half of :meth:`dynamics` (it does not read the LSTM state): ``(next_latent
        [B, *latent_shape], lstm_input [B, I])``, the LSTM's input after ``prefix_reduce``."""
        next_latent, features = self.muzero.dynamics(latent, action)
        if isinstance(self.muzero, MuZeroMLPNetwork):
            features = next_latent  # the fused head's reward logits are ignored
        return next_latent, self.prefix_reduce(features)

    def value_prefix_unroll(self, lstm_inputs: torch.Tensor, horizon: int) -> torch.Tensor:
        """The value-prefix logits of U consecutive model steps, ``lstm_inputs [U, B, I]`` (from
        :meth:`latent_dynamics`) -> ``[U, B, R]``: the LSTM starts from zero and is reset to zero
        after every ``horizon`` steps, as a step-by-step unroll of :meth:`dynamics` does. Each
        chunk of ``horizon`` steps is one sequence of a single ``torch.lstm`` call (the chunks side
        by side in its batch; the last one padded at its end, which no earlier step sees), and the
        LayerNorm and MLP run over all U steps at once: the same numbers as the step-by-step
        unroll, in a few calls instead of ~5 per step (forward and backward)."""
        steps, batch = lstm_inputs.shape[:2]
        horizon = check.positive_int("horizon", horizon)
        chunks = -(-steps // horizon)
        pad = chunks * horizon - steps
        x = F.pad(lstm_inputs, (0, 0, 0, 0, 0, pad)) if pad else lstm_inputs  # [C*T, B, I]
        x = x.view(chunks, horizon, batch, -1).transpose(0, 1).reshape(horizon, chunks * batch, -1)
        h0 = lstm_inputs.new_zeros(1, chunks * batch, self.lstm_hidden_size)
        out = torch.lstm(
            x,
            (h0, h0),
            (self.lstm.weight_ih, self.lstm.weight_hh, self.lstm.bias_ih, self.lstm.bias_hh),
            True,
            1,
            0.0,
            self.training,
            False,
            False,
        )[0]
        h = out.view(horizon, chunks, batch, -1).transpose(0, 1).reshape(chunks * horizon, batch, -1)[:steps]
        return self.prefix_mlp(F.relu(self.prefix_norm(h)))

    def recurrent_inference(self, latent: torch.Tensor, hidden: Hidden, action: torch.Tensor) -> EZRecurrentOutput:
        """:meth:`dynamics` then :meth:`prediction` on the next latent."""
        next_latent, new_hidden, value_prefix_logits = self.dynamics(latent, hidden, action)
        policy_logits, value_logits = self.prediction(next_latent)
        return EZRecurrentOutput(
            latent=next_latent,
            hidden=new_hidden,
            value_prefix_logits=value_prefix_logits,
            value_logits=value_logits,
            policy_logits=policy_logits,
        )
