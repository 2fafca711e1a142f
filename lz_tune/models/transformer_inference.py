"""Search-time inference for :class:`~lz_tune.models.unizero.UniZeroWorldModel` on the CPU, without
torch: the cached transformer step of UniZero's search (per-node key/value windows).

A node's state is its :class:`~lz_tune.models.transformer.KVWindow` as five numpy arrays
``(keys [B, L, S, E], values [B, L, S, E], key_pos [B, S] int64, valid [B, S] bool,
next_pos [B] int64)``. One recurrent step appends two tokens to the parent's window, as
:meth:`UniZeroWorldModel.recurrent_step` does:

1. the action token (``Embedding`` row, or ``action @ W^T`` for continuous actions); at its output
   the reward head (-> reward logits -> decoded reward) and the latent head (-> next latent);
2. the next latent as an observation token; at its output the policy and value heads.

Per token and layer: LayerNorm -> ``qkv`` GEMM -> one kernel for bias, RoPE (cos/sin from a
table indexed by position, computed as torch does: float64 angles, cast to float32), the
attention of every tree's token over its window (the parent's slots still in the window plus
this step's tokens, masked by validity and distance < C; softmax with the vectorised ``exp``)
-> output GEMM -> residual + LayerNorm kernel -> MLP GEMM -> bias + GELU(tanh) kernel -> GEMM ->
residual + next LayerNorm kernel. Heads: LayerNorm -> GEMM -> bias + GELU(erf) -> GEMM -> bias
(+ decode, or + LayerNorm for the latent). The new window (the last S of the parent's slots and
the two tokens) is written once, by one kernel. So a simulation is ~50 BLAS/numba calls of a few
microseconds of overhead each instead of ~90 torch ops, and the attention over at most C keys is
one loop per tree instead of padded batched matmuls.

GEMMs run on numpy's BLAS with contiguous ``[in, out]`` copies of the Linear weights (BLAS is ~3x
slower on transposed views at batch 8). The copies are kept between searches while the
parameters are unchanged: :meth:`TransformerSearchInference.bind` re-copies when a parameter's
storage or in-place version changed, or after :meth:`TransformerSearchInference.invalidate`
(the policy calls it from ``on_weights_loaded``, which also covers fused optimizers that do not
bump versions). Outputs agree with the torch path to float32 rounding
(``tests/test_transformer_inference.py``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numba
import numpy as np
import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot calls this BLAS; loaded before bind limits its threads)
import torch
from torch import nn

from lz_tune.models.fast_math import exp_row, gelu_erf_rows, gelu_tanh_rows, layer_norm_rows
from lz_tune.models.mlp_inference import (_add_bias_into, _embed_actions_into, add_bias_decode, cpu_float32,
                                          limit_blas_threads)
from lz_tune.models.unizero import UniZeroWorldModel

__all__ = ["TransformerSearchInference", "attend_token", "assemble_window", "token_pass"]

_TOKENS_PER_STEP = 2  # the action token, then the predicted observation token


# ---------------------------------------------------------------------------------------- kernels


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def attend_token(qkv, bias, cos_table, sin_table, pos, parent_keys, parent_values, parent_pos, parent_valid,
                 new_keys, new_values, layer, token, context, num_heads, out, scores, weights, bits):
    """Attention of this step's token ``token`` (0 or 1) at ``layer`` for B trees.

    qkv: ``[B, 3E]`` the token's ``q | k | v`` before the bias (bias [3E] added in place, q and k
    rotated in place); pos: ``[B]`` int64 its positions; parent_*: the parents' windows
    (``[B, L, S, E]``, ``[B, S]``); new_keys, new_values: ``[B, L, T, E]`` this step's tokens
    (rows ``< token`` filled; row ``token`` is written here). Keys: the parent's slots
    ``token .. S-1`` (the ones still in the window) and this step's tokens ``0 .. token``; a key
    is attended when valid (or the token itself) and ``0 <= distance < context``.
    out: ``[B, E]`` heads concatenated (before the output projection); scores, weights:
    ``[>= B H (S + T)]`` float32 scratch; bits: ``[>= B H (S + T)]`` int32 scratch.
    """
    batch = qkv.shape[0]
    slots = parent_keys.shape[2]
    width = out.shape[1]
    head_dim = width // num_heads
    half = head_dim // 2
    span = slots + new_keys.shape[2]
    scale = np.float32(1.0 / math.sqrt(head_dim))
    neg = np.float32(-1e30)
    for b in range(batch):
        row = qkv[b]
        for j in range(3 * width):
            row[j] += bias[j]
        p = pos[b]
        cos = cos_table[p]
        sin = sin_table[p]
        for h in range(2 * num_heads):  # q heads, then k heads (rotate-half RoPE)
            x1 = row[h * head_dim:h * head_dim + half]
            x2 = row[h * head_dim + half:(h + 1) * head_dim]
            for i in range(half):
                a = x1[i]
                c = x2[i]
                x1[i] = a * cos[i] - c * sin[i]
                x2[i] = c * cos[i] + a * sin[i]
        own_k = new_keys[b, layer, token]
        own_v = new_values[b, layer, token]
        for j in range(width):
            own_k[j] = row[width + j]
            own_v[j] = row[2 * width + j]
        for h in range(num_heads):
            q = row[h * head_dim:(h + 1) * head_dim]
            base = (b * num_heads + h) * span
            n = 0
            for s in range(token, slots):
                dist = p - parent_pos[b, s]
                score = neg
                if parent_valid[b, s] and dist >= 0 and dist < context:
                    k = parent_keys[b, layer, s, h * head_dim:(h + 1) * head_dim]
                    acc = np.float32(0.0)
                    for i in range(head_dim):
                        acc += q[i] * k[i]
                    score = acc * scale
                scores[base + n] = score
                n += 1
            for t in range(token + 1):
                dist = token - t
                score = neg
                if dist < context:
                    k = new_keys[b, layer, t, h * head_dim:(h + 1) * head_dim]
                    acc = np.float32(0.0)
                    for i in range(head_dim):
                        acc += q[i] * k[i]
                    score = acc * scale
                scores[base + n] = score
                n += 1
            peak = scores[base]
            for j in range(1, n):
                peak = max(peak, scores[base + j])
            for j in range(n):
                scores[base + j] -= peak
            for j in range(n, span):
                scores[base + j] = neg
    total = batch * num_heads * span
    exp_row(scores[:total], weights[:total], bits)
    for b in range(batch):
        for h in range(num_heads):
            base = (b * num_heads + h) * span
            dst = out[b, h * head_dim:(h + 1) * head_dim]
            for i in range(head_dim):
                dst[i] = 0.0
            norm = np.float32(0.0)
            n = 0
            for s in range(token, slots):
                w = weights[base + n] if scores[base + n] > neg * np.float32(0.5) else np.float32(0.0)
                norm += w
                if w != 0.0:
                    v = parent_values[b, layer, s, h * head_dim:(h + 1) * head_dim]
                    for i in range(head_dim):
                        dst[i] += w * v[i]
                n += 1
            for t in range(token + 1):
                w = weights[base + n] if scores[base + n] > neg * np.float32(0.5) else np.float32(0.0)
                norm += w
                if w != 0.0:
                    v = new_values[b, layer, t, h * head_dim:(h + 1) * head_dim]
                    for i in range(head_dim):
                        dst[i] += w * v[i]
                n += 1
            inv = np.float32(1.0) / norm
            for i in range(head_dim):
                dst[i] *= inv


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def residual_norm(x, y, bias, norm_weight, norm_bias, eps, out):
    """``x [B, E] += y + bias`` (a residual branch's Linear output), then ``out = LayerNorm(x)``."""
    for b in range(x.shape[0]):
        dst = x[b]
        src = y[b]
        for j in range(x.shape[1]):
            dst[j] += src[j] + bias[j]
    layer_norm_rows(x, norm_weight, norm_bias, eps, out, False)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def bias_gelu(x, bias, approximate_tanh, work, bits):
    """In place: ``x [B, W] = GELU(x + bias)`` (tanh form, or erf form)."""
    for b in range(x.shape[0]):
        row = x[b]
        for j in range(x.shape[1]):
            row[j] += bias[j]
    if approximate_tanh:
        gelu_tanh_rows(x, work, bits)
    else:
        gelu_erf_rows(x, work)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def token_pass(x, token, pos, cos, sin, keys, values, key_pos, valid, new_keys, new_values, context, num_heads,
               ln_attn, qkv_w, qkv_b, out_w, out_b, ln_mlp, fc1_w, fc1_b, fc2_w, fc2_b, ln_final, eps,
               normed, qkv, att, proj, mlp, out, scores, weights, work, bits):
    """One token of B trees through every block and the final LayerNorm (``WindowTransformer``'s
    forward for T = 1 in eval mode), attending to the parents' windows (see :func:`attend_token`).

    x: ``[B, E]`` the token (the residual stream; overwritten); pos: ``[B]`` int64 its positions.
    Per-layer weights are stacked over the L layers: ``ln_attn, ln_mlp [L, 2, E]`` (weight, bias),
    ``qkv_w [L, E, 3E]``, ``qkv_b [L, 3E]``, ``out_w [L, E, E]``, ``out_b [L, E]``, ``fc1_w
    [L, E, 4E]``, ``fc1_b [L, 4E]``, ``fc2_w [L, 4E, E]``, ``fc2_b [L, E]`` (``[in, out]``);
    ``ln_final [2, E]``. Writes the output ``out [B, E]`` and this token's keys and values into
    ``new_keys``/``new_values [B, L, T, E]`` at ``token``; the rest are scratch.
    """
    layers = qkv_w.shape[0]
    layer_norm_rows(x, ln_attn[0, 0], ln_attn[0, 1], eps, normed, False)
    for layer in range(layers):
        np.dot(normed, qkv_w[layer], qkv)
        attend_token(qkv, qkv_b[layer], cos, sin, pos, keys, values, key_pos, valid, new_keys, new_values, layer,
                     token, context, num_heads, att, scores, weights, bits)
        np.dot(att, out_w[layer], proj)
        residual_norm(x, proj, out_b[layer], ln_mlp[layer, 0], ln_mlp[layer, 1], eps, normed)
        np.dot(normed, fc1_w[layer], mlp)
        bias_gelu(mlp, fc1_b[layer], True, work, bits)
        np.dot(mlp, fc2_w[layer], proj)
        if layer + 1 < layers:
            residual_norm(x, proj, fc2_b[layer], ln_attn[layer + 1, 0], ln_attn[layer + 1, 1], eps, normed)
        else:
            residual_norm(x, proj, fc2_b[layer], ln_final[0], ln_final[1], eps, out)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _bias_norm(head, bias, norm_weight, norm_bias, eps, out):
    """``out [B, E] = LayerNorm(head + bias)`` (the latent head's last Linear, then its LayerNorm)."""
    _add_bias_into(head, bias, 0, out)
    layer_norm_rows(out, norm_weight, norm_bias, eps, out, False)


@numba.njit(cache=True, nogil=True)
def assemble_window(parent_keys, parent_values, parent_pos, parent_valid, next_pos, new_keys, new_values,
                    out_keys, out_values, out_pos, out_valid, out_next):
    """The child windows: the last S of (the parent's S slots, this step's T tokens) for B trees,
    at positions ``next_pos .. next_pos + T - 1``; ``out_next = next_pos + T``."""
    batch, layers, slots, width = parent_keys.shape
    tokens = new_keys.shape[2]
    for b in range(batch):
        for s in range(slots):
            src = s + tokens
            if src < slots:
                out_pos[b, s] = parent_pos[b, src]
                out_valid[b, s] = parent_valid[b, src]
            else:
                out_pos[b, s] = next_pos[b] + src - slots
                out_valid[b, s] = True
            for layer in range(layers):
                if src < slots:
                    k = parent_keys[b, layer, src]
                    v = parent_values[b, layer, src]
                else:
                    k = new_keys[b, layer, src - slots]
                    v = new_values[b, layer, src - slots]
                dk = out_keys[b, layer, s]
                dv = out_values[b, layer, s]
                for j in range(width):
                    dk[j] = k[j]
                    dv[j] = v[j]
        out_next[b] = next_pos[b] + tokens


# ---------------------------------------------------------------------------------------- weights


@dataclasses.dataclass(frozen=True)
class _Linear:
    weight: np.ndarray  # [in, out] contiguous copy
    bias: np.ndarray    # [out] view (zeros when the layer has none)


@dataclasses.dataclass(frozen=True)
class _Norm:
    weight: np.ndarray
    bias: np.ndarray
    eps: float


@dataclasses.dataclass(frozen=True)
class _Blocks:
    """The transformer's L blocks, stacked for :func:`token_pass` (``[in, out]`` copies)."""

    ln_attn: np.ndarray  # [L, 2, E] weight, bias
    qkv_w: np.ndarray    # [L, E, 3E]
    qkv_b: np.ndarray    # [L, 3E]
    out_w: np.ndarray    # [L, E, E]
    out_b: np.ndarray    # [L, E]
    ln_mlp: np.ndarray   # [L, 2, E]
    fc1_w: np.ndarray    # [L, E, 4E]
    fc1_b: np.ndarray    # [L, 4E]
    fc2_w: np.ndarray    # [L, 4E, E]
    fc2_b: np.ndarray    # [L, E]
    ln_final: np.ndarray  # [2, E]
    eps: float


@dataclasses.dataclass(frozen=True)
class _Head:
    norm: _Norm
    fc1: _Linear
    fc2: _Linear


@dataclasses.dataclass(frozen=True)
class _Weights:
    blocks: _Blocks
    action: np.ndarray  # discrete: Embedding [A, E] view; continuous: [D, E] copy of W^T
    reward: _Head
    latent: _Head
    latent_norm: _Norm
    policy: _Head
    value: _Head


def _linear(m: nn.Linear) -> _Linear:
    bias = m.bias.detach().numpy() if m.bias is not None else np.zeros(m.out_features, np.float32)
    return _Linear(m.weight.detach().t().contiguous().numpy(), bias)


def _norm(m: nn.LayerNorm) -> _Norm:
    return _Norm(m.weight.detach().numpy(), m.bias.detach().numpy(), float(m.eps))


def _head(seq: nn.Sequential) -> _Head:
    """``LN -> Linear -> GELU -> Linear`` (:func:`lz_tune.models.unizero._head`)."""
    return _Head(_norm(seq[0]), _linear(seq[1]), _linear(seq[3]))


def _stack(tensors) -> np.ndarray:
    with torch.no_grad():
        return torch.stack([t.detach() for t in tensors]).contiguous().numpy()


def _blocks(net: UniZeroWorldModel) -> _Blocks:
    blocks = list(net.transformer.blocks)
    norms = [m for b in blocks for m in (b.ln_attn, b.ln_mlp)] + [net.transformer.ln_final]
    if len({m.eps for m in norms}) != 1:
        raise ValueError("TransformerSearchInference: the transformer's LayerNorms must share one eps")

    def linear(get, part):
        return _stack([getattr(get(b), part).t() if part == "weight" else getattr(get(b), part) for b in blocks])

    def norm(get):
        return _stack([torch.stack((get(b).weight, get(b).bias)) for b in blocks])

    final = net.transformer.ln_final
    return _Blocks(ln_attn=norm(lambda b: b.ln_attn), qkv_w=linear(lambda b: b.qkv, "weight"),
                   qkv_b=linear(lambda b: b.qkv, "bias"), out_w=linear(lambda b: b.out, "weight"),
                   out_b=linear(lambda b: b.out, "bias"), ln_mlp=norm(lambda b: b.ln_mlp),
                   fc1_w=linear(lambda b: b.mlp[0], "weight"), fc1_b=linear(lambda b: b.mlp[0], "bias"),
                   fc2_w=linear(lambda b: b.mlp[2], "weight"), fc2_b=linear(lambda b: b.mlp[2], "bias"),
                   ln_final=_stack([final.weight, final.bias]), eps=float(final.eps))


def _pack(net: UniZeroWorldModel) -> _Weights:
    emb = net.action_embedding
    action = emb.weight.detach().t().contiguous().numpy() if net.action_dim else emb.weight.detach().numpy()
    return _Weights(blocks=_blocks(net), action=action, reward=_head(net.reward_head), latent=_head(net.latent_head[0]),
                    latent_norm=_norm(net.latent_head[1]), policy=_head(net.policy_head), value=_head(net.value_head))


# ---------------------------------------------------------------------------------------- engine


class TransformerSearchInference:
    """``recurrent_fn`` of UniZero's search on numpy window states (module docstring).

    ``engine(window, action) -> (child window, reward [B], value [B], policy_logits [B, A])`` with
    ``window`` the five arrays of a :class:`~lz_tune.models.transformer.KVWindow` and ``action``
    ``[B]`` int64 (continuous: ``[B, D]`` float32). Returned arrays are engine buffers, valid
    until its next call. :meth:`bind` before every search.
    """

    def __init__(self) -> None:
        self._weights: Optional[_Weights] = None
        self._key: Optional[tuple] = None
        self._generation = 0
        self._dims: Optional[tuple] = None
        self._buffers: dict[tuple, dict] = {}
        self._rope: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32))
        self._inv_freq: Optional[np.ndarray] = None

    @staticmethod
    def supports(network: torch.nn.Module) -> bool:
        """True for exactly a :class:`UniZeroWorldModel` (any encoder) whose parameters are
        float32 on the CPU."""
        return type(network) is UniZeroWorldModel and cpu_float32(network)

    def invalidate(self) -> None:
        """The weights changed (``Policy.on_weights_loaded``): re-copy them at the next bind."""
        self._generation += 1

    def bind(self, network: UniZeroWorldModel) -> None:
        """Copy the Linear weights if they changed since the last bind; limit numpy's BLAS threads."""
        if not self.supports(network):
            raise ValueError("TransformerSearchInference needs a UniZeroWorldModel with float32 parameters on the CPU")
        limit_blas_threads(torch.get_num_threads())
        params = list(network.parameters())
        key = (id(network), self._generation, tuple((p.data_ptr(), p._version) for p in params))
        if key != self._key:
            self._weights = _pack(network)
            self._key = key
        tf = network.transformer
        dims = (tf.num_layers, tf.window_slots, tf.embed_dim, tf.blocks[0].num_heads, tf.context_tokens,
                network.policy_head[-1].out_features, network.reward_head[-1].out_features,
                network.value_head[-1].out_features, network.action_dim)
        if dims != self._dims:
            self._dims = dims
            self._buffers.clear()
        inv_freq = tf.inv_freq.detach().cpu().numpy()
        if self._inv_freq is None or not np.array_equal(inv_freq, self._inv_freq):
            self._inv_freq = inv_freq
            self._rope = (np.zeros((0, inv_freq.shape[0]), np.float32),) * 2

    def _rope_tables(self, max_pos: int) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin ``[P, head_dim / 2]`` float32 for positions ``0 .. P-1``, ``P > max_pos``, as
        :class:`WindowTransformer` computes them (float64 angles, cast to float32)."""
        cos, sin = self._rope
        if cos.shape[0] <= max_pos:
            size = max(2 * cos.shape[0], max_pos + 1, 64)
            angles = np.arange(size, dtype=np.float64)[:, None] * self._inv_freq[None]
            cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
            self._rope = (cos, sin)
        return cos, sin

    def _buffers_for(self, batch: int) -> dict:
        buf = self._buffers.get(batch)
        if buf is None:
            layers, slots, width, heads, _, policy_out, reward_out, value_out, _ = self._dims
            f32, tokens = np.float32, _TOKENS_PER_STEP
            span = batch * heads * (slots + tokens)
            hidden = 4 * width
            buf = {
                "x": np.empty((batch, width), f32), "normed": np.empty((batch, width), f32),
                "qkv": np.empty((batch, 3 * width), f32), "att": np.empty((batch, width), f32),
                "proj": np.empty((batch, width), f32), "mlp": np.empty((batch, hidden), f32),
                "head_in": np.empty((batch, width), f32), "head_mid": np.empty((batch, hidden), f32),
                "reward_out": np.empty((batch, reward_out), f32), "reward_logits": np.empty((batch, reward_out), f32),
                "latent_out": np.empty((batch, width), f32), "next_latent": np.empty((batch, width), f32),
                "policy_out": np.empty((batch, policy_out), f32), "policy_logits": np.empty((batch, policy_out), f32),
                "value_out": np.empty((batch, value_out), f32), "value_logits": np.empty((batch, value_out), f32),
                "new_keys": np.empty((batch, layers, tokens, width), f32),
                "new_values": np.empty((batch, layers, tokens, width), f32),
                "pos": np.empty(batch, np.int64),
                "scores": np.empty(span, f32), "weights": np.empty(span, f32),
                "work": np.empty(2 * batch * hidden, f32), "bits": np.empty(max(batch * hidden, span), np.int32),
                "zero_bias": np.zeros(width, f32),
                "window": (np.empty((batch, layers, slots, width), f32), np.empty((batch, layers, slots, width), f32),
                           np.empty((batch, slots), np.int64), np.empty((batch, slots), np.bool_),
                           np.empty(batch, np.int64)),
            }
            self._buffers[batch] = buf
        return buf

    def _token(self, buf: dict, window: tuple, token: int, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Run ``buf["x"]`` (this step's token ``token``) through every block and the final
        LayerNorm against ``window``; returns the output ``[B, E]`` (``buf["head_in"]``)."""
        w = self._weights.blocks
        keys, values, key_pos, valid, next_pos = window
        _, _, _, heads, context, *_ = self._dims
        pos = buf["pos"]
        np.add(next_pos, token, out=pos)
        token_pass(buf["x"], token, pos, cos, sin, keys, values, key_pos, valid, buf["new_keys"], buf["new_values"],
                   context, heads, w.ln_attn, w.qkv_w, w.qkv_b, w.out_w, w.out_b, w.ln_mlp, w.fc1_w, w.fc1_b, w.fc2_w,
                   w.fc2_b, w.ln_final, w.eps, buf["normed"], buf["qkv"], buf["att"], buf["proj"], buf["mlp"],
                   buf["head_in"], buf["scores"], buf["weights"], buf["work"], buf["bits"])
        return buf["head_in"]

    def _head(self, head: _Head, h: np.ndarray, buf: dict, out: np.ndarray) -> np.ndarray:
        """``LN -> Linear -> GELU(erf) -> Linear`` on ``h [B, E]`` into ``out`` (no last bias)."""
        mid = buf["head_mid"]
        layer_norm_rows(h, head.norm.weight, head.norm.bias, head.norm.eps, buf["normed"], False)
        np.dot(buf["normed"], head.fc1.weight, out=mid)
        bias_gelu(mid, head.fc1.bias, False, buf["work"], buf["bits"])
        np.dot(mid, head.fc2.weight, out=out)
        return out

    def __call__(self, window: tuple, action: np.ndarray):
        if self._weights is None:
            raise RuntimeError("TransformerSearchInference.bind(network) must be called before the first step")
        w = self._weights
        batch = action.shape[0]
        buf = self._buffers_for(batch)
        next_pos = window[4]
        cos, sin = self._rope_tables(int(next_pos.max()) + _TOKENS_PER_STEP)
        x = buf["x"]
        if self._dims[-1]:  # continuous actions: Linear(D, E, bias=False)
            _embed_actions_into(action, w.action, buf["zero_bias"], x)
        else:
            np.take(w.action, action, axis=0, out=x)
        h = self._token(buf, window, 0, cos, sin)
        reward = add_bias_decode(self._head(w.reward, h, buf, buf["reward_out"]), w.reward.fc2.bias,
                                 buf["reward_logits"])
        norm = w.latent_norm
        _bias_norm(self._head(w.latent, h, buf, buf["latent_out"]), w.latent.fc2.bias, norm.weight, norm.bias,
                   norm.eps, x)  # the next latent is the next token
        h = self._token(buf, window, 1, cos, sin)
        policy_logits = buf["policy_logits"]
        _add_bias_into(self._head(w.policy, h, buf, buf["policy_out"]), w.policy.fc2.bias, 0, policy_logits)
        value = add_bias_decode(self._head(w.value, h, buf, buf["value_out"]), w.value.fc2.bias, buf["value_logits"])
        child = buf["window"]
        assemble_window(*window, buf["new_keys"], buf["new_values"], *child)
        return child, reward, value, policy_logits
