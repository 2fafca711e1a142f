"""UniZero world model (Pu et al. 2024): one token per observation and per action, a causal
transformer over ``[o_0, a_0, o_1, a_1, ...]``, heads on its outputs.

* encoder ``obs -> [B, E]`` (MLP for vectors, MuZero's downsampling ResNet for images), ending
  in a LayerNorm: the observation token (and UniZero's latent state);
* action token: ``Embedding(A, E)`` (discrete) or ``Linear(D, E)`` (continuous);
* :class:`~lz_tune.models.transformer.WindowTransformer`: causal, each token sees the
  ``C - 1`` tokens before it (``C = 2 * infer_context_length``), rotary positions;
* on observation-token outputs: policy ``[B, A]`` (continuous: ``[B, 2D]`` mean and raw std)
  and value ``[B, V]``; on action-token outputs: reward ``[B, R]`` and the next latent
  ``[B, E]`` (ending in a LayerNorm, like the encoder). Heads are ``LN -> Linear(E, 4E) ->
  GELU -> Linear``; the last Linear of value, reward and (discrete) policy is zero-initialised.

Training runs a whole sequence at once (:meth:`UniZeroWorldModel.sequence`); inference
appends tokens to per-sequence :class:`~lz_tune.models.transformer.KVWindow` caches
(:meth:`root_step`, :meth:`recurrent_step`), with the same outputs (see ``transformer``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from lz_tune.models.base import observation_to_float
from lz_tune.models.blocks import DownsampleStem, downsampled_size
from lz_tune.models.transformer import KVWindow, WindowTransformer

__all__ = ["UniZeroWorldModel"]


def _head(embed_dim: int, out: int, *, zero_init: bool) -> nn.Sequential:
    head = nn.Sequential(
        nn.LayerNorm(embed_dim), nn.Linear(embed_dim, 4 * embed_dim), nn.GELU(), nn.Linear(4 * embed_dim, out)
    )
    if zero_init:
        out_layer = head[-1]
        assert isinstance(out_layer, nn.Linear)
        nn.init.zeros_(out_layer.weight)
        nn.init.zeros_(out_layer.bias)
    return head


class UniZeroWorldModel(nn.Module):
    """Encoder + transformer + heads (see the module docstring).

    Args:
        observation_shape: ``(O,)`` vectors or ``(C, H, W)`` images (uint8 scaled by 1/255).
        action_space_size: ``A`` (discrete; for continuous actions the sampled-search K).
        action_dim: 0 (discrete) or ``D``, the continuous action width.
        embed_dim: ``E``.
        num_layers, num_heads: transformer size.
        context_tokens: ``C``, the attention window in tokens.
        value_support_size, reward_support_size: ``S``; ``2 S + 1`` bins each.
        hidden_sizes: MLP encoder hidden widths (vector observations).
        num_channels: conv encoder channels (image observations).
        dropout: transformer dropout (training only).
    """

    def __init__(
        self,
        *,
        observation_shape: Sequence[int],
        action_space_size: int,
        action_dim: int = 0,
        embed_dim: int = 64,
        num_layers: int = 2,
        num_heads: int = 2,
        context_tokens: int = 8,
        value_support_size: int = 300,
        reward_support_size: int = 300,
        hidden_sizes: Sequence[int] = (128,),
        num_channels: int = 64,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.observation_shape = tuple(int(s) for s in observation_shape)
        self.action_space_size, self.action_dim, self.embed_dim = action_space_size, action_dim, embed_dim
        if len(self.observation_shape) == 3:
            c, h, w = self.observation_shape
            flat = num_channels * downsampled_size(h) * downsampled_size(w)
            self.encoder = nn.Sequential(
                DownsampleStem(c, num_channels),
                nn.Flatten(),
                nn.Linear(flat, embed_dim, bias=False),
                nn.LayerNorm(embed_dim),
            )
        else:
            layers, width = [], math.prod(self.observation_shape)
            for hidden in hidden_sizes:
                layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.GELU()]
                width = hidden
            self.encoder = nn.Sequential(nn.Flatten(), *layers, nn.Linear(width, embed_dim), nn.LayerNorm(embed_dim))
        self.action_embedding = (
            nn.Linear(action_dim, embed_dim, bias=False) if action_dim else nn.Embedding(action_space_size, embed_dim)
        )
        self.transformer = WindowTransformer(
            embed_dim=embed_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            context_tokens=context_tokens,
            dropout=dropout,
        )
        policy_out = 2 * action_dim if action_dim else action_space_size
        self.policy_head = _head(embed_dim, policy_out, zero_init=not action_dim)
        self.value_head = _head(embed_dim, 2 * value_support_size + 1, zero_init=True)
        self.reward_head = _head(embed_dim, 2 * reward_support_size + 1, zero_init=True)
        self.latent_head = nn.Sequential(_head(embed_dim, embed_dim, zero_init=False), nn.LayerNorm(embed_dim))

    # ------------------------------------------------------------------ tokens and heads

    channels_last = False
    """Whether the image encoder's conv weights and inputs use the channels-last (NHWC) memory
    layout; set by :meth:`use_channels_last`. A layout only: the shapes stay ``[B, C, H, W]``."""

    def use_channels_last(self) -> UniZeroWorldModel:
        """Store an image encoder's conv weights channels-last and convert observations to it in
        :meth:`encode`, so that its convs and batch norms run on NHWC data (oneDNN's fast kernels:
        the Pong encoder's forward + backward at 512 frames takes 1.3 s instead of 1.9 s on 2
        threads, benchmarks/README.md). Same values to float rounding; vector encoders are left
        as they are. Returns ``self``."""
        if len(self.observation_shape) == 3:
            self.encoder.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit memory_format
            self.channels_last = True
        return self

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, *obs_shape]`` -> observation tokens / latents ``[B, E]``."""
        layout = torch.channels_last if self.channels_last else torch.preserve_format
        dtype = self.policy_head[-1].weight.dtype  # a Linear's (torch types Sequential items as Module)
        return self.encoder(observation_to_float(obs, dtype, layout))  # type: ignore[arg-type]

    def embed_action(self, action: torch.Tensor) -> torch.Tensor:
        """``[B]`` int64 (or ``[B, D]`` float) actions -> action tokens ``[B, E]``."""
        return self.action_embedding(action.to(self.action_embedding.weight.dtype) if self.action_dim else action)

    def observation_heads(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Observation-token outputs ``[N, E]`` -> (policy logits ``[N, A]``, value logits ``[N, V]``)."""
        return self.policy_head(h), self.value_head(h)

    def action_heads(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action-token outputs ``[N, E]`` -> (reward logits ``[N, R]``, next latent ``[N, E]``)."""
        return self.reward_head(h), self.latent_head(h)

    @property
    def encoder_final_norm(self) -> Optional[nn.LayerNorm]:
        """The encoder's last layer when it is a LayerNorm with weight and bias (what sets the
        latents' scale), else None."""
        last = self.encoder[-1]
        return last if isinstance(last, nn.LayerNorm) and last.elementwise_affine else None

    def empty_window(self, batch: int) -> KVWindow:
        like = self.value_head[-1].weight  # a Linear's (torch types Sequential items as Module)
        return self.transformer.empty_window(batch, like=like)  # type: ignore[arg-type]

    @property
    def context_tokens(self) -> int:
        return self.transformer.context_tokens

    # ------------------------------------------------------------------ whole sequences

    def sequence(
        self, latents: torch.Tensor, actions: torch.Tensor, *, token_valid: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, KVWindow]:
        """Teacher-forced pass over ``[z_0, a_0, ..., a_{U-1}, z_U]``.

        latents: ``[B, U+1, E]`` observation tokens; actions: ``[B, U]`` (``[B, U, D]``);
        token_valid: ``[B, 2U+1]`` bool (left padding False) or None.
        Returns (observation-token outputs ``[B, U+1, E]``, action-token outputs ``[B, U, E]``,
        the window after the last token).
        """
        b, steps, e = latents.shape
        u = steps - 1
        tokens = latents.new_empty(b, 2 * u + 1, e)
        tokens[:, 0::2] = latents
        if u:
            tokens[:, 1::2] = self.embed_action(actions.reshape(b * u, *actions.shape[2:])).view(b, u, e)
        out, window = self.transformer(tokens, token_valid=token_valid)
        return out[:, 0::2], out[:, 1::2], window

    # ------------------------------------------------------------------ inference steps

    def root_step(
        self, window: Optional[KVWindow], action: Optional[torch.Tensor], latent: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, KVWindow]:
        """A real env step: append ``[a_{t-1}, z_t]`` to ``window`` (or start a sequence with
        ``z_t`` when ``window`` is None). latent: ``[B, E]``; action: ``[B]`` or None.
        Returns (policy logits, value logits, window ending at ``z_t``)."""
        if window is None:
            tokens = latent[:, None]
        else:
            assert action is not None, "a window goes on with the action taken"
            tokens = torch.stack((self.embed_action(action), latent), dim=1)
        out, window = self.transformer(tokens, window)
        policy_logits, value_logits = self.observation_heads(out[:, -1])
        return policy_logits, value_logits, window

    def recurrent_step(self, window: KVWindow, action: torch.Tensor):
        """One imagined step from windows ending at an observation token: the action token gives
        reward and the next latent, which is appended as the next observation token.
        Returns (window ending at the predicted observation, reward logits ``[B, R]``,
        policy logits ``[B, A]``, value logits ``[B, V]``, next latent ``[B, E]``)."""
        out, window = self.transformer(self.embed_action(action)[:, None], window)
        reward_logits, next_latent = self.action_heads(out[:, 0])
        out, window = self.transformer(next_latent[:, None], window)
        policy_logits, value_logits = self.observation_heads(out[:, 0])
        return window, reward_logits, policy_logits, value_logits, next_latent
