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

GEMMs run on contiguous ``[in, out]`` copies of the Linear weights (BLAS is ~3x slower on transposed
views at batch 8): for wide models (E > ``FUSED_MAX_WIDTH``), whose weights do not fit the L2 cache,
on :func:`~lz_tune.models.few_rows_matmul.few_rows_matmul` at 2-32 rows (it reads each weight once;
BLAS packs it first: a UniZero Pong collect runs ~1.25x faster), else on numpy's BLAS. The copies
are kept between searches while the parameters are unchanged
(:class:`~lz_tune.models.mlp_inference.WeightReadingEngine`): a bind re-copies when a parameter's
storage or in-place version changed, or after
:meth:`~lz_tune.models.mlp_inference.WeightReadingEngine.invalidate` (the policy calls it from
``on_weights_loaded``, which also covers fused optimizers that do not bump versions). Outputs
agree with the torch path to float32 rounding
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
from lz_tune.models.few_rows_matmul import CHUNK, FewRowsWeight
from lz_tune.models.mlp_inference import WeightReadingEngine, add_bias_decode, cpu_float32, embed_actions_into
from lz_tune.models.unizero import UniZeroWorldModel

__all__ = ["TransformerSearchInference", "attend_token", "assemble_window", "token_pass"]

_TOKENS_PER_STEP = 2  # the action token, then the predicted observation token
_Arena = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""keys, values ``[R, L, S, E]``, key_pos, valid ``[R, S]``, next_pos ``[R]``: the windows of R arena rows."""
FUSED_MAX_WIDTH = 128
"""Widest E run as fused numba calls: numba's in-kernel GEMMs call scipy's BLAS, ~1.5-2x slower
than numpy's at batch 8 from E = 256 on (benchmarks/README.md, "Tree search speed"); below, the
saved Python calls (~30 per simulation) win."""


# ---------------------------------------------------------------------------------------- kernels


@numba.njit(cache=True, nogil=True, fastmath={"contract", "reassoc", "nsz"})
def _dot(a, b):
    """``sum(a * b)`` of two float32 vectors, accumulated in float32 (reassociated: vectorised)."""
    acc = np.float32(0.0)
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def attend_token(
    qkv,
    bias,
    cos_table,
    sin_table,
    pos,
    parent_keys,
    parent_values,
    parent_pos,
    parent_valid,
    rows,
    new_keys,
    new_values,
    layer,
    token,
    context,
    num_heads,
    out,
    scores,
    weights,
    bits,
):
    """Attention of this step's token ``token`` (0 or 1) at ``layer`` for B trees.

    qkv: ``[B, 3E]`` the token's ``q | k | v`` before the bias (bias [3E] added in place, q and k
    rotated in place); pos: ``[B]`` int64 its positions; parent_*: the window arena (``[R, L, S, E]``,
    ``[R, S]``), tree b's parent at row ``rows[b]``; new_keys, new_values: ``[B, L, T, E]`` this step's tokens
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
        parent = rows[b]
        cos = cos_table[p]
        sin = sin_table[p]
        for h in range(2 * num_heads):  # q heads, then k heads (rotate-half RoPE)
            x1 = row[h * head_dim : h * head_dim + half]
            x2 = row[h * head_dim + half : (h + 1) * head_dim]
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
            q = row[h * head_dim : (h + 1) * head_dim]
            base = (b * num_heads + h) * span
            n = 0
            for s in range(token, slots):
                dist = p - parent_pos[parent, s]
                attended = parent_valid[parent, s] and dist >= 0 and dist < context
                scores[base + n] = (
                    _dot(q, parent_keys[parent, layer, s, h * head_dim : (h + 1) * head_dim]) * scale
                    if attended
                    else neg
                )
                n += 1
            for t in range(token + 1):
                scores[base + n] = (
                    _dot(q, new_keys[b, layer, t, h * head_dim : (h + 1) * head_dim]) * scale
                    if token - t < context
                    else neg
                )
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
        parent = rows[b]
        for h in range(num_heads):
            base = (b * num_heads + h) * span
            dst = out[b, h * head_dim : (h + 1) * head_dim]
            for i in range(head_dim):
                dst[i] = 0.0
            norm = np.float32(0.0)
            n = 0
            for s in range(token, slots + token + 1):  # the parent's slots still in the window, then the new tokens
                w = weights[base + n] if scores[base + n] > neg * np.float32(0.5) else np.float32(0.0)  # masked: 0
                norm += w
                if w != 0.0:
                    v = parent_values[parent, layer, s] if s < slots else new_values[b, layer, s - slots]
                    head_v = v[h * head_dim : (h + 1) * head_dim]
                    for i in range(head_dim):
                        dst[i] += w * head_v[i]
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
def token_pass(
    x,
    token,
    pos,
    cos,
    sin,
    keys,
    values,
    key_pos,
    valid,
    next_pos,
    rows,
    new_keys,
    new_values,
    context,
    num_heads,
    ln_attn,
    qkv_w,
    qkv_b,
    out_w,
    out_b,
    ln_mlp,
    fc1_w,
    fc1_b,
    fc2_w,
    fc2_b,
    ln_final,
    eps,
    normed,
    qkv,
    att,
    proj,
    mlp,
    out,
    scores,
    weights,
    work,
    bits,
):
    """One token of B trees through every block and the final LayerNorm (``WindowTransformer``'s
    forward for T = 1 in eval mode), attending to the parents' windows (see :func:`attend_token`).

    x: ``[B, E]`` the token (the residual stream; overwritten); the parents' windows are rows ``rows
    [B]`` of the arena (``keys`` .. ``next_pos``); the token's positions ``next_pos[rows] + token``
    are written to ``pos [B]``.
    Per-layer weights are stacked over the L layers: ``ln_attn, ln_mlp [L, 2, E]`` (weight, bias),
    ``qkv_w [L, E, 3E]``, ``qkv_b [L, 3E]``, ``out_w [L, E, E]``, ``out_b [L, E]``, ``fc1_w
    [L, E, 4E]``, ``fc1_b [L, 4E]``, ``fc2_w [L, 4E, E]``, ``fc2_b [L, E]`` (``[in, out]``);
    ``ln_final [2, E]``. Writes the output ``out [B, E]`` and this token's keys and values into
    ``new_keys``/``new_values [B, L, T, E]`` at ``token``; the rest are scratch.
    """
    layers = qkv_w.shape[0]
    for b in range(pos.shape[0]):
        pos[b] = next_pos[rows[b]] + token
    layer_norm_rows(x, ln_attn[0, 0], ln_attn[0, 1], eps, normed, False)
    for layer in range(layers):
        np.dot(normed, qkv_w[layer], qkv)
        attend_token(
            qkv,
            qkv_b[layer],
            cos,
            sin,
            pos,
            keys,
            values,
            key_pos,
            valid,
            rows,
            new_keys,
            new_values,
            layer,
            token,
            context,
            num_heads,
            att,
            scores,
            weights,
            bits,
        )
        np.dot(att, out_w[layer], proj)
        residual_norm(x, proj, out_b[layer], ln_mlp[layer, 0], ln_mlp[layer, 1], eps, normed)
        np.dot(normed, fc1_w[layer], mlp)
        bias_gelu(mlp, fc1_b[layer], True, work, bits)
        np.dot(mlp, fc2_w[layer], proj)
        if layer + 1 < layers:
            residual_norm(x, proj, fc2_b[layer], ln_attn[layer + 1, 0], ln_attn[layer + 1, 1], eps, normed)
        else:
            residual_norm(x, proj, fc2_b[layer], ln_final[0], ln_final[1], eps, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def head_hidden(h, norm, w1, b1, eps, normed, mid, work, bits):
    """The first half of a head (``LN -> Linear -> GELU(erf)``): ``mid [B, 4E]`` from ``h [B, E]``;
    ``norm [2, E]`` (weight, bias), ``w1 [E, 4E]``."""
    layer_norm_rows(h, norm[0], norm[1], eps, normed, False)
    np.dot(normed, w1, mid)
    bias_gelu(mid, b1, False, work, bits)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _narrow_head(h, norm, w1, b1, w2, b2, eps, normed, mid, out, work, bits):
    """A whole head with a narrow output (the latent and policy heads): ``out = head(h)`` with its
    last bias."""
    head_hidden(h, norm, w1, b1, eps, normed, mid, work, bits)
    np.dot(mid, w2, out)
    for b in range(out.shape[0]):
        row = out[b]
        for j in range(out.shape[1]):
            row[j] += b2[j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def action_heads(
    h,
    reward_norm,
    reward_w1,
    reward_b1,
    latent_norm,
    latent_w1,
    latent_b1,
    latent_w2,
    latent_b2,
    outer_norm,
    eps,
    normed,
    reward_mid,
    latent_mid,
    latent_out,
    next_latent,
    work,
    bits,
):
    """At the action token's output ``h [B, E]``: the reward head's first half (``reward_mid``; the
    601-wide second half runs on numpy's BLAS) and the whole latent head with its final LayerNorm
    (``next_latent [B, E]``)."""
    head_hidden(h, reward_norm, reward_w1, reward_b1, eps, normed, reward_mid, work, bits)
    _narrow_head(
        h, latent_norm, latent_w1, latent_b1, latent_w2, latent_b2, eps, normed, latent_mid, latent_out, work, bits
    )
    layer_norm_rows(latent_out, outer_norm[0], outer_norm[1], eps, next_latent, False)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def observation_heads(
    h,
    value_norm,
    value_w1,
    value_b1,
    policy_norm,
    policy_w1,
    policy_b1,
    policy_w2,
    policy_b2,
    eps,
    normed,
    value_mid,
    policy_mid,
    policy_logits,
    work,
    bits,
):
    """At the observation token's output ``h [B, E]``: the value head's first half (``value_mid``)
    and the whole policy head (``policy_logits [B, A]``)."""
    head_hidden(h, value_norm, value_w1, value_b1, eps, normed, value_mid, work, bits)
    _narrow_head(
        h, policy_norm, policy_w1, policy_b1, policy_w2, policy_b2, eps, normed, policy_mid, policy_logits, work, bits
    )


@numba.njit(cache=True, nogil=True)
def assemble_window(keys, values, key_pos, valid, next_pos, rows, child_rows, new_keys, new_values):
    """The child windows, in place in the window arena (``keys, values [R, L, S, E]``, ``key_pos,
    valid [R, S]``, ``next_pos [R]``): row ``child_rows[b]`` = the last S of (the slots of parent
    row ``rows[b]``, this step's T tokens ``new_keys/new_values [B, L, T, E]``), at positions
    ``next_pos .. next_pos + T - 1`` of the parent; its next position ``+ T``."""
    _, layers, slots, width = keys.shape
    tokens = new_keys.shape[2]
    for b in range(rows.shape[0]):
        parent = rows[b]
        child = child_rows[b]
        for s in range(slots):
            src = s + tokens
            if src < slots:
                key_pos[child, s] = key_pos[parent, src]
                valid[child, s] = valid[parent, src]
            else:
                key_pos[child, s] = next_pos[parent] + src - slots
                valid[child, s] = True
            for layer in range(layers):
                if src < slots:
                    k = keys[parent, layer, src]
                    v = values[parent, layer, src]
                else:
                    k = new_keys[b, layer, src - slots]
                    v = new_values[b, layer, src - slots]
                dk = keys[child, layer, s]
                dv = values[child, layer, s]
                for j in range(width):
                    dk[j] = k[j]
                    dv[j] = v[j]
        next_pos[child] = next_pos[parent] + tokens


# ---------------------------------------------------------------------------------------- weights


@dataclasses.dataclass(frozen=True)
class _Linear:
    rows: FewRowsWeight  # the weight: [in, out] contiguous copy (rows.dense) and its chunked layout
    bias: np.ndarray  # [out] view (zeros when the layer has none)

    @property
    def weight(self) -> np.ndarray:
        """``[in, out]`` contiguous (BLAS and the fused kernels)."""
        return self.rows.dense


@dataclasses.dataclass(frozen=True)
class _Blocks:
    """The transformer's L blocks, stacked for :func:`token_pass` (``[in, out]`` copies)."""

    ln_attn: np.ndarray  # [L, 2, E] weight, bias
    qkv_w: np.ndarray  # [L, E, 3E]
    qkv_b: np.ndarray  # [L, 3E]
    out_w: np.ndarray  # [L, E, E]
    out_b: np.ndarray  # [L, E]
    ln_mlp: np.ndarray  # [L, 2, E]
    fc1_w: np.ndarray  # [L, E, 4E]
    fc1_b: np.ndarray  # [L, 4E]
    fc2_w: np.ndarray  # [L, 4E, E]
    fc2_b: np.ndarray  # [L, E]
    ln_final: np.ndarray  # [2, E]
    eps: float
    layers: tuple  # per layer (qkv, out, fc1, fc2) FewRowsWeight, for the wide path's GEMMs


@dataclasses.dataclass(frozen=True)
class _Head:
    norm: np.ndarray  # [2, E] weight, bias
    fc1: _Linear
    fc2: _Linear


@dataclasses.dataclass(frozen=True)
class _Weights:
    blocks: _Blocks
    action: np.ndarray  # discrete: Embedding [A, E] view; continuous: [D, E] copy of W^T
    reward: _Head
    latent: _Head
    latent_norm: np.ndarray  # [2, E]
    policy: _Head
    value: _Head


def _linear(m: nn.Linear) -> _Linear:
    bias = m.bias.detach().numpy() if m.bias is not None else np.zeros(m.out_features, np.float32)
    return _Linear(FewRowsWeight.of(m.weight.detach().t().numpy()), bias)


def _head(seq: nn.Module) -> _Head:
    """``LN -> Linear -> GELU -> Linear`` (:func:`lz_tune.models.unizero._head`)."""
    assert isinstance(seq, nn.Sequential)
    fc1, fc2 = seq[1], seq[3]
    assert isinstance(fc1, nn.Linear) and isinstance(fc2, nn.Linear)
    return _Head(_stack([seq[0].weight, seq[0].bias]), _linear(fc1), _linear(fc2))


def _stack(tensors) -> np.ndarray:
    with torch.no_grad():
        return torch.stack([t.detach() for t in tensors]).contiguous().numpy()


def _blocks(net: UniZeroWorldModel) -> _Blocks:
    blocks = list(net.transformer.blocks)
    norms = (
        [m for b in blocks for m in (b.ln_attn, b.ln_mlp)]
        + [net.transformer.ln_final, net.latent_head[1]]
        # (latent_head[0] is a Sequential, and these items LayerNorms: torch types Sequential items as Module)
        + [head[0] for head in (net.reward_head, net.latent_head[0], net.policy_head, net.value_head)]  # type: ignore[index]
    )
    if len({m.eps for m in norms}) != 1:  # type: ignore[union-attr]
        raise ValueError("TransformerSearchInference: the world model's LayerNorms must share one eps")

    def linear(get, part):
        return _stack([getattr(get(b), part).t() if part == "weight" else getattr(get(b), part) for b in blocks])

    def norm(get):
        return _stack([torch.stack((get(b).weight, get(b).bias)) for b in blocks])

    final = net.transformer.ln_final
    qkv_w, out_w = linear(lambda b: b.qkv, "weight"), linear(lambda b: b.out, "weight")
    fc1_w, fc2_w = linear(lambda b: b.mlp[0], "weight"), linear(lambda b: b.mlp[2], "weight")
    layers = tuple(tuple(FewRowsWeight.of(w[i]) for w in (qkv_w, out_w, fc1_w, fc2_w)) for i in range(len(blocks)))
    return _Blocks(
        ln_attn=norm(lambda b: b.ln_attn),
        qkv_w=qkv_w,
        qkv_b=linear(lambda b: b.qkv, "bias"),
        out_w=out_w,
        out_b=linear(lambda b: b.out, "bias"),
        ln_mlp=norm(lambda b: b.ln_mlp),
        fc1_w=fc1_w,
        fc1_b=linear(lambda b: b.mlp[0], "bias"),
        fc2_w=fc2_w,
        fc2_b=linear(lambda b: b.mlp[2], "bias"),
        ln_final=_stack([final.weight, final.bias]),
        eps=float(final.eps),
        layers=layers,
    )


def _pack(net: UniZeroWorldModel) -> _Weights:
    emb = net.action_embedding
    action = emb.weight.detach().t().contiguous().numpy() if net.action_dim else emb.weight.detach().numpy()
    return _Weights(
        blocks=_blocks(net),
        action=action,
        reward=_head(net.reward_head),
        latent=_head(net.latent_head[0]),
        latent_norm=_stack([net.latent_head[1].weight, net.latent_head[1].bias]),
        policy=_head(net.policy_head),
        value=_head(net.value_head),
    )


# ---------------------------------------------------------------------------------------- engine


class TransformerSearchInference(WeightReadingEngine):
    """``recurrent_fn`` of UniZero's search (module docstring).

    The engine keeps every node's window itself, in an arena of windows (the five arrays of a
    :class:`~lz_tune.models.transformer.KVWindow` with a leading row dim); a node's search state
    is its arena row. :meth:`root` stores the roots' windows (``[B]`` row ids back, the root
    state), ``engine(rows [B], action) -> (child rows [B], reward [B], value [B], policy_logits
    [B, A])`` reads the parents' windows in place and writes each child's window once, into a
    fresh row (``action`` ``[B]`` int64, continuous: ``[B, D]`` float32). So the search's state
    store moves one int per node instead of two ``[L, S, E]`` windows (a gather and a put per
    simulation: ~0.2 ms at B = 64, E = 64). Returned arrays are engine buffers, valid until its next
    call; :meth:`windows` copies windows out. :meth:`bind` before every search; the rows of a
    search are valid until the next :meth:`root`.
    """

    serves = "a UniZeroWorldModel"

    def __init__(self, *, fused: Optional[bool] = None) -> None:
        super().__init__()
        self.fused = fused
        """Run each token (and the heads' first halves) as one numba call with in-kernel GEMMs;
        None: when ``E <= FUSED_MAX_WIDTH``."""
        self._fused = False
        self._weights: Optional[_Weights] = None
        self._dims: Optional[tuple] = None
        self._buffers: dict[int, dict] = {}  # per batch size
        self._rope: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32))
        self._inv_freq: Optional[np.ndarray] = None
        self._arena: Optional[_Arena] = None  # (keys, values [R, L, S, E], key_pos, valid [R, S], next_pos [R])
        self._gemm_scratch = np.zeros((8, CHUNK), np.float32)  # few_rows_matmul's chunk of x
        self._used = 0  # arena rows holding this search's nodes

    def root(self, window: tuple) -> np.ndarray:
        """Start a search from B root windows (numpy ``keys, values [B, L, S, E], key_pos, valid
        [B, S], next_pos [B]``): the arena is reset to them; returns their rows ``[B]``."""
        batch = window[0].shape[0]
        arena = self._ensure_rows(batch, keep=0)
        for dst, src in zip(arena, window):
            dst[:batch] = src
        self._used = batch
        return np.arange(batch, dtype=np.int64)

    def windows(self, rows: np.ndarray) -> tuple:
        """Copies of the windows of arena ``rows`` (five arrays with leading dim ``len(rows)``)."""
        assert self._arena is not None, "TransformerSearchInference.root(window) comes first"
        return tuple(a[rows] for a in self._arena)

    def _ensure_rows(self, needed: int, keep: int) -> _Arena:
        """An arena of at least ``needed`` rows whose first ``keep`` rows survive (grown x2); returns it."""
        assert self._dims is not None  # bound
        layers, slots, width = self._dims[0], self._dims[1], self._dims[2]
        arena = self._arena
        if arena is not None and arena[0].shape[0] >= needed and arena[0].shape[1:] == (layers, slots, width):
            return arena
        size = max(needed, 2 * arena[0].shape[0] if arena is not None and keep else needed, 64)
        grown = (
            np.empty((size, layers, slots, width), np.float32),
            np.empty((size, layers, slots, width), np.float32),
            np.empty((size, slots), np.int64),
            np.empty((size, slots), np.bool_),
            np.empty(size, np.int64),
        )
        if keep:
            assert arena is not None  # rows to keep are rows of an arena
            for dst, src in zip(grown, arena):
                dst[:keep] = src[:keep]
        self._arena = grown
        return grown

    @staticmethod
    def supports(network: torch.nn.Module) -> bool:
        """True for exactly a :class:`UniZeroWorldModel` (any encoder) whose parameters are
        float32 on the CPU."""
        return type(network) is UniZeroWorldModel and cpu_float32(network)

    def read_weights(self, network: UniZeroWorldModel) -> None:
        """Contiguous copies of the Linear weights, the shapes (per-batch buffers dropped when they
        change) and the rotary frequencies."""
        self._weights = _pack(network)
        tf = network.transformer
        dims = (
            tf.num_layers,
            tf.window_slots,
            tf.embed_dim,
            tf.blocks[0].num_heads,
            tf.context_tokens,
            network.policy_head[-1].out_features,
            network.reward_head[-1].out_features,
            network.value_head[-1].out_features,
            network.action_dim,
        )
        if dims != self._dims:
            self._dims = dims
            self._buffers.clear()
        inv_freq = tf.inv_freq.detach().cpu().numpy()
        if self._inv_freq is None or not np.array_equal(inv_freq, self._inv_freq):
            self._inv_freq = inv_freq
            self._rope = (np.zeros((0, inv_freq.shape[0]), np.float32),) * 2

    def try_bind(self, network: torch.nn.Module) -> bool:
        """:meth:`WeightReadingEngine.try_bind`, then the kernel choice (``fused``, which may be
        set between searches)."""
        if not super().try_bind(network):
            return False
        assert self._dims is not None  # read_weights set them
        self._fused = self._dims[2] <= FUSED_MAX_WIDTH if self.fused is None else self.fused
        return True

    def _rope_tables(self, max_pos: int) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin ``[P, head_dim / 2]`` float32 for positions ``0 .. P-1``, ``P > max_pos``, as
        :class:`WindowTransformer` computes them (float64 angles, cast to float32)."""
        cos, sin = self._rope
        if cos.shape[0] <= max_pos:
            assert self._inv_freq is not None  # read_weights set it
            size = max(2 * cos.shape[0], max_pos + 1, 64)
            angles = np.arange(size, dtype=np.float64)[:, None] * self._inv_freq[None]
            cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
            self._rope = (cos, sin)
        return cos, sin

    def _buffers_for(self, batch: int) -> dict:
        buf = self._buffers.get(batch)
        if buf is None:
            assert self._dims is not None  # bound
            layers, slots, width, heads, _, policy_out, reward_out, value_out, _ = self._dims
            f32, tokens = np.float32, _TOKENS_PER_STEP
            span = batch * heads * (slots + tokens)
            hidden = 4 * width
            buf = {
                "x": np.empty((batch, width), f32),
                "normed": np.empty((batch, width), f32),
                "qkv": np.empty((batch, 3 * width), f32),
                "att": np.empty((batch, width), f32),
                "proj": np.empty((batch, width), f32),
                "mlp": np.empty((batch, hidden), f32),
                "head_in": np.empty((batch, width), f32),
                "mid": np.empty((batch, hidden), f32),
                "narrow_mid": np.empty((batch, hidden), f32),
                "reward_out": np.empty((batch, reward_out), f32),
                "reward_logits": np.empty((batch, reward_out), f32),
                "latent_out": np.empty((batch, width), f32),
                "policy_logits": np.empty((batch, policy_out), f32),
                "value_out": np.empty((batch, value_out), f32),
                "value_logits": np.empty((batch, value_out), f32),
                "new_keys": np.empty((batch, layers, tokens, width), f32),
                "new_values": np.empty((batch, layers, tokens, width), f32),
                "pos": np.empty(batch, np.int64),
                "scores": np.empty(span, f32),
                "weights": np.empty(span, f32),
                "work": np.empty(2 * batch * hidden, f32),
                "bits": np.empty(max(batch * hidden, span), np.int32),
                "zero_bias": np.zeros(width, f32),
            }
            self._buffers[batch] = buf
        return buf

    def _token(self, buf: dict, rows: np.ndarray, token: int, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Run ``buf["x"]`` (this step's token ``token``) through every block and the final
        LayerNorm against the windows of arena ``rows``; returns the output ``[B, E]``
        (``buf["head_in"]``)."""
        window, weights, dims = self._arena, self._weights, self._dims
        assert window is not None and weights is not None and dims is not None  # bound, after root()
        w = weights.blocks
        _, _, _, heads, context, *_ = dims
        scratch = (buf["scores"], buf["weights"], buf["work"], buf["bits"])
        x, pos, normed, qkv, att, proj, mlp, out = (
            buf[k] for k in ("x", "pos", "normed", "qkv", "att", "proj", "mlp", "head_in")
        )
        if self._fused:
            token_pass(
                x,
                token,
                pos,
                cos,
                sin,
                *window,
                rows,
                buf["new_keys"],
                buf["new_values"],
                context,
                heads,
                w.ln_attn,
                w.qkv_w,
                w.qkv_b,
                w.out_w,
                w.out_b,
                w.ln_mlp,
                w.fc1_w,
                w.fc1_b,
                w.fc2_w,
                w.fc2_b,
                w.ln_final,
                w.eps,
                normed,
                qkv,
                att,
                proj,
                mlp,
                out,
                *scratch,
            )
            return out
        # wide models: the same steps with the GEMMs on few_rows_matmul / numpy's BLAS (scipy's is up to
        # ~2x slower there)
        np.add(window[4][rows], token, out=pos)
        layer_norm_rows(x, w.ln_attn[0, 0], w.ln_attn[0, 1], w.eps, normed, False)
        layers = w.qkv_w.shape[0]
        gemm = self._gemm_scratch
        for layer in range(layers):
            qkv_w, out_w, fc1_w, fc2_w = w.layers[layer]
            qkv_w.matmul(normed, qkv, gemm)
            attend_token(
                qkv,
                w.qkv_b[layer],
                cos,
                sin,
                pos,
                *window[:4],
                rows,
                buf["new_keys"],
                buf["new_values"],
                layer,
                token,
                context,
                heads,
                att,
                *scratch[:2],
                scratch[3],
            )
            out_w.matmul(att, proj, gemm)
            residual_norm(x, proj, w.out_b[layer], w.ln_mlp[layer, 0], w.ln_mlp[layer, 1], w.eps, normed)
            fc1_w.matmul(normed, mlp, gemm)
            bias_gelu(mlp, w.fc1_b[layer], True, *scratch[2:])
            fc2_w.matmul(mlp, proj, gemm)
            norm = w.ln_attn[layer + 1] if layer + 1 < layers else w.ln_final
            residual_norm(x, proj, w.fc2_b[layer], norm[0], norm[1], w.eps, normed if layer + 1 < layers else out)
        return out

    def _heads(self, buf: dict, h: np.ndarray, wide: _Head, narrow: _Head, narrow_out: np.ndarray) -> None:
        """The first half of the ``wide`` head (-> ``buf["mid"]``) and the whole ``narrow`` head with
        its last bias (-> ``narrow_out``), at the token output ``h [B, E]``."""
        assert self._weights is not None  # bound
        eps = self._weights.blocks.eps
        work, bits = buf["work"], buf["bits"]
        for head, mid in ((wide, buf["mid"]), (narrow, buf["narrow_mid"])):
            layer_norm_rows(h, head.norm[0], head.norm[1], eps, buf["normed"], False)
            head.fc1.rows.matmul(buf["normed"], mid, self._gemm_scratch)
            bias_gelu(mid, head.fc1.bias, False, work, bits)
        narrow.fc2.rows.matmul(buf["narrow_mid"], narrow_out, self._gemm_scratch)
        narrow_out += narrow.fc2.bias

    def _matmul(self, x: np.ndarray, linear: _Linear, out: np.ndarray) -> None:
        """``out = x @ linear.weight``: BLAS on the fused (narrow) path, where the weights fit the L2
        cache; :class:`FewRowsWeight` on the wide path."""
        if self._fused:
            np.dot(x, linear.weight, out=out)
        else:
            linear.rows.matmul(x, out, self._gemm_scratch)

    def __call__(self, rows: np.ndarray, action: np.ndarray):
        if self._weights is None:
            raise RuntimeError("TransformerSearchInference.bind(network) must be called before the first step")
        w = self._weights
        eps = w.blocks.eps
        batch = action.shape[0]
        buf = self._buffers_for(batch)
        rows = np.ascontiguousarray(rows, np.int64)
        assert self._arena is not None and self._dims is not None  # bound, after root()
        cos, sin = self._rope_tables(int(self._arena[4][rows].max()) + _TOKENS_PER_STEP)
        x, mid, work, bits = buf["x"], buf["mid"], buf["work"], buf["bits"]
        if self._dims[-1]:  # continuous actions: Linear(D, E, bias=False)
            embed_actions_into(action, w.action, buf["zero_bias"], x)
        else:
            np.take(w.action, action, axis=0, out=x)
        h = self._token(buf, rows, 0, cos, sin)
        r, lat = w.reward, w.latent
        if self._fused:
            action_heads(
                h,
                r.norm,
                r.fc1.weight,
                r.fc1.bias,
                lat.norm,
                lat.fc1.weight,
                lat.fc1.bias,
                lat.fc2.weight,
                lat.fc2.bias,
                w.latent_norm,
                eps,
                buf["normed"],
                mid,
                buf["narrow_mid"],
                buf["latent_out"],
                x,
                work,
                bits,
            )
        else:
            self._heads(buf, h, r, lat, buf["latent_out"])
            layer_norm_rows(buf["latent_out"], w.latent_norm[0], w.latent_norm[1], eps, x, False)
        # x: the next latent, i.e. the next token
        self._matmul(mid, r.fc2, buf["reward_out"])
        reward = add_bias_decode(buf["reward_out"], r.fc2.bias, buf["reward_logits"])
        h = self._token(buf, rows, 1, cos, sin)
        v, pol = w.value, w.policy
        policy_logits = buf["policy_logits"]
        if self._fused:
            observation_heads(
                h,
                v.norm,
                v.fc1.weight,
                v.fc1.bias,
                pol.norm,
                pol.fc1.weight,
                pol.fc1.bias,
                pol.fc2.weight,
                pol.fc2.bias,
                eps,
                buf["normed"],
                mid,
                buf["narrow_mid"],
                policy_logits,
                work,
                bits,
            )
        else:
            self._heads(buf, h, v, pol, policy_logits)
        self._matmul(mid, v.fc2, buf["value_out"])
        value = add_bias_decode(buf["value_out"], v.fc2.bias, buf["value_logits"])
        arena = self._ensure_rows(self._used + batch, keep=self._used)
        child = np.arange(self._used, self._used + batch, dtype=np.int64)
        self._used += batch
        assemble_window(*arena, rows, child, buf["new_keys"], buf["new_values"])
        return child, reward, value, policy_logits
