"""Causal transformer with a sliding attention window and rolling key/value caches (UniZero).

Every token attends to itself and the ``C - 1`` tokens before it in its sequence
(``C = context_tokens``), in training and in inference alike. Positions are rotary (RoPE), so
the attention score of two tokens depends only on their distance: a cache never has to shift
positions when old tokens fall out of the window.

:class:`KVWindow` holds, for B sequences, the keys and values of every layer for the last
``C - 1`` tokens. Appending tokens to a window (:meth:`WindowTransformer.forward` with
``window``) gives exactly the outputs of running each whole sequence from its start at once:
token j's layer-l key and value depend only on tokens ``j - C + 1 .. j`` of layer l - 1, and
those were computed under the same rule when they were appended. So a cache is bounded
(``C - 1`` tokens per sequence) and exact; ``tests/test_unizero_model.py`` checks it over a
sequence many windows long.

Shapes: ``B`` sequences, ``T`` new tokens, ``S = C - 1`` cached slots, ``L`` layers,
``E`` embedding width (``num_heads`` heads of ``E / num_heads``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["KVWindow", "WindowTransformer"]


@dataclass(frozen=True)
class KVWindow:
    """Keys and values of the last ``S`` tokens of B sequences, right-aligned (newest last)."""

    keys: torch.Tensor
    """[B, L, S, E] rotary-encoded keys of every layer."""
    values: torch.Tensor
    """[B, L, S, E] values of every layer."""
    key_pos: torch.Tensor
    """[B, S] int64 token position of each slot."""
    valid: torch.Tensor
    """[B, S] bool: the slot holds a real token (False: empty, or padding)."""
    next_pos: torch.Tensor
    """[B] int64 position of the next token of each sequence."""

    def as_tuple(self) -> tuple[torch.Tensor, ...]:
        """The five tensors (leading dim B), e.g. as a search node state."""
        return self.keys, self.values, self.key_pos, self.valid, self.next_pos

    @classmethod
    def from_tuple(cls, state: tuple[torch.Tensor, ...]) -> "KVWindow":
        return cls(*state)

    @property
    def batch_size(self) -> int:
        return self.keys.shape[0]

    def select(self, rows: torch.Tensor) -> "KVWindow":
        """The windows of ``rows`` [k] int64."""
        return KVWindow(*(t.index_select(0, rows) for t in self.as_tuple()))

    def scatter_(self, rows: torch.Tensor, other: "KVWindow") -> None:
        """Write ``other``'s windows into ``rows`` [k] of this one (in place)."""
        for mine, theirs in zip(self.as_tuple(), other.as_tuple()):
            mine.index_copy_(0, rows, theirs)

    def clone(self) -> "KVWindow":
        return KVWindow(*(t.clone() for t in self.as_tuple()))

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.as_tuple())


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE of ``x [B, T, H, D]`` with ``cos, sin [B, T, 1, D/2]`` (rotate-half convention)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class _Block(nn.Module):
    """Pre-LN block: ``x + attn(LN(x))`` then ``x + MLP(LN(x))`` (4E GELU MLP)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_attn = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        self.ln_mlp = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(
            nn.Linear(embed_dim, 4 * embed_dim),
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * embed_dim, embed_dim),
            nn.Dropout(dropout),
        )
        self.dropout = dropout

    def forward(self, x, cos, sin, past_k, past_v, mask):
        """x [B, T, E]; past_k, past_v [B, S, E] or None; mask [B, 1, T, S+T] bool (True:
        attend). Returns (x [B, T, E], k [B, T, E] rotated, v [B, T, E]) of the new tokens."""
        b, t, e = x.shape
        h = self.num_heads
        qkv = self.qkv(self.ln_attn(x))
        qk = _rotate(qkv[..., : 2 * e].reshape(b, t, 2 * h, e // h), cos, sin)  # q and k heads at once
        q, k, v = qk[:, :, :h], qk[:, :, h:].reshape(b, t, e), qkv[..., 2 * e :]
        keys = k if past_k is None else torch.cat((past_k, k), dim=1)
        vals = v if past_v is None else torch.cat((past_v, v), dim=1)
        n = keys.shape[1]
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            keys.view(b, n, h, e // h).transpose(1, 2),
            vals.view(b, n, h, e // h).transpose(1, 2),
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
        )
        x = x + F.dropout(self.out(att.transpose(1, 2).reshape(b, t, e)), self.dropout, self.training)
        x = x + self.mlp(self.ln_mlp(x))
        return x, k, v


class WindowTransformer(nn.Module):
    """GPT-style causal transformer over token embeddings with a ``context_tokens`` window.

    Args:
        embed_dim: ``E`` (``num_heads`` divides it; ``E / num_heads`` even, for RoPE).
        num_layers: ``L``.
        num_heads: attention heads.
        context_tokens: ``C``, each token attends to itself and the ``C - 1`` tokens before it.
        dropout: on attention weights, residual branches and the MLP (training only).
        rope_theta: RoPE base.
    """

    inv_freq: torch.Tensor  # [head_dim / 2] RoPE frequencies (a registered buffer)

    def __init__(
        self,
        *,
        embed_dim: int,
        num_layers: int,
        num_heads: int,
        context_tokens: int,
        dropout: float = 0.0,
        rope_theta: float = 10_000.0,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads or (embed_dim // num_heads) % 2:
            raise ValueError(f"embed_dim={embed_dim} must split into {num_heads} heads of even width")
        if context_tokens < 2:
            raise ValueError(f"context_tokens must be >= 2, got {context_tokens}")
        self.embed_dim, self.num_layers, self.context_tokens = embed_dim, num_layers, context_tokens
        self.blocks = nn.ModuleList(_Block(embed_dim, num_heads, dropout) for _ in range(num_layers))
        self.ln_final = nn.LayerNorm(embed_dim)
        head_dim = embed_dim // num_heads
        self.register_buffer(
            "inv_freq", rope_theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim), persistent=False
        )

    @property
    def window_slots(self) -> int:
        """``S = C - 1``: tokens a window keeps."""
        return self.context_tokens - 1

    def empty_window(self, batch: int, *, like: torch.Tensor) -> KVWindow:
        """B empty windows (next position 0) on ``like``'s device and dtype."""
        s, shape = self.window_slots, (batch, self.num_layers, self.window_slots, self.embed_dim)
        dev = like.device
        return KVWindow(
            keys=like.new_zeros(shape),
            values=like.new_zeros(shape),
            key_pos=torch.zeros(batch, s, dtype=torch.int64, device=dev),
            valid=torch.zeros(batch, s, dtype=torch.bool, device=dev),
            next_pos=torch.zeros(batch, dtype=torch.int64, device=dev),
        )

    def forward(
        self, tokens: torch.Tensor, window: Optional[KVWindow] = None, token_valid: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, KVWindow]:
        """Append ``tokens [B, T, E]`` to ``window`` (None: sequences that start here).

        token_valid: [B, T] bool, False for padding tokens (no other token attends to them);
        padding goes before or after the real tokens, so that their positions stay contiguous.
        None: all real.
        Returns (outputs [B, T, E] after the final LayerNorm, the window after the new tokens).
        """
        b, t, _ = tokens.shape
        dev = tokens.device
        start = window.next_pos if window is not None else torch.zeros(b, dtype=torch.int64, device=dev)
        pos = start[:, None] + torch.arange(t, device=dev)  # [B, T]
        new_valid = torch.ones(b, t, dtype=torch.bool, device=dev) if token_valid is None else token_valid
        if window is not None:
            key_pos = torch.cat((window.key_pos, pos), dim=1)  # [B, S+T]
            key_valid = torch.cat((window.valid, new_valid), dim=1)
        else:
            key_pos, key_valid = pos, new_valid
        own = self._own_mask(t, key_pos.shape[1], dev)  # a token sees itself
        dist = pos[:, :, None] - key_pos[:, None, :]  # [B, T, S+T]
        mask = (key_valid[:, None, :] | own) & (dist >= 0) & (dist < self.context_tokens)
        angles = pos.double()[..., None] * self.inv_freq  # [B, T, D/2] exact
        cos = angles.cos().to(tokens.dtype)[:, :, None, :]
        sin = angles.sin().to(tokens.dtype)[:, :, None, :]
        x = tokens
        new_k, new_v = [], []
        for layer, block in enumerate(self.blocks):
            past_k = window.keys[:, layer] if window is not None else None
            past_v = window.values[:, layer] if window is not None else None
            x, k, v = block(x, cos, sin, past_k, past_v, mask[:, None])
            new_k.append(k if past_k is None else torch.cat((past_k, k), dim=1))
            new_v.append(v if past_v is None else torch.cat((past_v, v), dim=1))
        return self.ln_final(x), self._keep_last(
            torch.stack(new_k, 1), torch.stack(new_v, 1), key_pos, key_valid, pos[:, -1] + 1
        )

    def _own_mask(self, t: int, n: int, device: torch.device) -> torch.Tensor:
        """[T, n] bool, True where new token i meets its own key (slot n - T + i); cached."""
        cache = self.__dict__.setdefault("_own_masks", {})
        key = (t, n, str(device))
        if key not in cache:
            own = torch.zeros(t, n, dtype=torch.bool, device=device)
            own[torch.arange(t), n - t + torch.arange(t)] = True
            cache[key] = own
        return cache[key]

    def _keep_last(self, keys, values, key_pos, key_valid, next_pos) -> KVWindow:
        """The last S slots of [B, L, n, E] keys/values (left-padded with empty slots if n < S)."""
        s, n = self.window_slots, keys.shape[2]
        if n < s:
            pad = s - n
            keys = F.pad(keys, (0, 0, pad, 0))
            values = F.pad(values, (0, 0, pad, 0))
            key_pos = F.pad(key_pos, (pad, 0))
            key_valid = F.pad(key_valid, (pad, 0), value=False)
        return KVWindow(
            keys=keys[:, :, -s:],
            values=values[:, :, -s:],
            key_pos=key_pos[:, -s:],
            valid=key_valid[:, -s:],
            next_pos=next_pos,
        )
