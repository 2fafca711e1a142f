"""Search-time inference for an MLP :class:`~lz_tune.models.efficientzero.EfficientZeroNetwork` on
the CPU, without torch: the MuZero MLP engine plus the value-prefix LSTM step.

One recurrent step of EfficientZero's search (node state ``(latent [B, D], h [B, H], c [B, H],
prefix [B], depth [B])``, see :mod:`lz_tune.algos.efficientzero`):

* the MuZero MLP's dynamics, latent columns only (``MLPSearchInference.dynamics_latent``; the torch
  path also computes the 601 reward columns the EfficientZero network ignores);
* LSTM cell: one GEMM ``[latent | h] @ [W_ih | W_hh]^T`` and one kernel for the gates (sigmoid /
  tanh with the vectorised ``exp`` of :mod:`lz_tune.models.fast_math`);
* value-prefix head: LayerNorm + ReLU, the ``fc_hidden`` layers (GEMM + bias/ReLU kernel), the
  head GEMM, bias + decode; for LSTMs up to 128 wide with one ``fc_hidden`` layer (the MLP
  network's default) the LSTM and the head run as one numba call (:func:`prefix_head_fused`);
* one kernel for the search's bookkeeping: reward = prefix difference (or the prefix alone
  after a reset depth), depth + 1, LSTM state zeroed where the child is a reset point;
* prediction of the MuZero MLP on the next latent (value, policy logits).

Outputs agree with ``EfficientZeroPolicy``'s torch path to float32 rounding (tested in
``tests/test_efficientzero_inference.py``). Weights are read at :meth:`bind` when they changed
(:class:`~lz_tune.models.mlp_inference.ComposedSearchInference`): views of the MuZero MLP's,
contiguous ``[in, out]`` copies of the LSTM and prefix head (BLAS is ~3x slower on the
transposed views at batch 8).
"""

from __future__ import annotations

from typing import Optional

import numba
import numpy as np
import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot calls this BLAS; loaded before bind limits its threads)
import torch

from lz_tune.models.efficientzero import EfficientZeroNetwork
from lz_tune.models.fast_math import layer_norm_rows, sigmoid_rows, tanh_rows
from lz_tune.models.mlp_inference import ComposedSearchInference, add_bias_decode, bias_norm_relu

__all__ = ["EfficientZeroSearchInference"]

_EMPTY = np.zeros(0, np.float32)  # no LayerNorm in a prefix fc layer (bias_norm_relu)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def lstm_gates_into(gates, bias, c_prev, h_out, c_out, work, bits):
    """``nn.LSTMCell``'s update from ``gates [B, 4H]`` (``x W_ih^T + h W_hh^T``, i, f, g, o blocks;
    overwritten) and ``bias [4H]`` (``b_ih + b_hh``): ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``,
    ``h' = sigmoid(o) tanh(c')`` into ``h_out``, ``c_out [B, H]``. tanh(g) is ``2 sigmoid(2g) - 1``,
    so one sigmoid pass covers all four blocks. ``work [>= 2 B 4H]`` float32, ``bits [>= B 4H]``
    int32 scratch."""
    batch, width = gates.shape
    hidden = width // 4
    for b in range(batch):
        row = gates[b]
        for j in range(width):
            row[j] += bias[j]
        g = row[2 * hidden : 3 * hidden]
        for j in range(hidden):
            g[j] *= np.float32(2.0)
    sigmoid_rows(gates, work, bits)
    for b in range(batch):
        i = gates[b, :hidden]
        f = gates[b, hidden : 2 * hidden]
        g = gates[b, 2 * hidden : 3 * hidden]
        dst = c_out[b]
        prev = c_prev[b]
        for j in range(hidden):
            dst[j] = f[j] * prev[j] + i[j] * (np.float32(2.0) * g[j] - np.float32(1.0))
    h_out[:] = c_out
    tanh_rows(h_out, work, bits)
    for b in range(batch):
        o = gates[b, 3 * hidden :]
        dst = h_out[b]
        for j in range(hidden):
            dst[j] *= o[j]


@numba.njit(cache=True, nogil=True)
def _concat_rows(a, b, out):
    """``out [B, Da + Db] = [a | b]`` (the LSTM's input for one stacked GEMM)."""
    width = a.shape[1]
    for r in range(out.shape[0]):
        head = out[r, :width]
        tail = out[r, width:]
        src = a[r]
        for j in range(width):
            head[j] = src[j]
        src = b[r]
        for j in range(tail.shape[0]):
            tail[j] = src[j]


@numba.njit(cache=True, nogil=True)
def prefix_step(parent_prefix, parent_depth, child_prefix, horizon, h, c, reward, child_depth):
    """The search's value-prefix bookkeeping for B edges parent -> child (``[B]`` arrays):
    ``reward = child_prefix - parent_prefix`` (``child_prefix`` alone when the parent sits at a
    reset depth, ``parent_depth % horizon == 0``), ``child_depth = parent_depth + 1``, and the
    child's LSTM state ``h, c [B, H]`` zeroed where ``child_depth % horizon == 0``."""
    for b in range(reward.shape[0]):
        base = np.float32(0.0) if parent_depth[b] % horizon == 0 else parent_prefix[b]
        reward[b] = child_prefix[b] - base
        depth = parent_depth[b] + 1
        child_depth[b] = depth
        if depth % horizon == 0:
            h[b, :] = 0.0
            c[b, :] = 0.0


@numba.njit(cache=True, nogil=True)
def _lstm_step(gates, bias, c_prev, h_out, c_out, norm_weight, norm_bias, norm_eps, normed, work, bits):
    """:func:`lstm_gates_into`, then ``normed = ReLU(LayerNorm(h'))`` (the prefix head's input)."""
    lstm_gates_into(gates, bias, c_prev, h_out, c_out, work, bits)
    layer_norm_rows(h_out, norm_weight, norm_bias, norm_eps, normed, True)


@numba.njit(cache=True, nogil=True)
def _finish_prefix(head, bias, logits, parent_prefix, parent_depth, horizon, h, c, reward, child_depth):
    """The prefix head's bias and decode (-> child prefix ``[B]``, returned), then
    :func:`prefix_step`."""
    child_prefix = add_bias_decode(head, bias, logits)
    prefix_step(parent_prefix, parent_depth, child_prefix, horizon, h, c, reward, child_depth)
    return child_prefix


@numba.njit(cache=True, nogil=True)
def prefix_head_fused(
    next_latent,
    h,
    c,
    prefix,
    depth,
    horizon,
    lstm_w,
    lstm_bias,
    norm_w,
    norm_b,
    norm_eps,
    fc_w,
    fc_b,
    head_w,
    head_b,
    lstm_in,
    gates,
    h_out,
    c_out,
    normed,
    fc_out,
    head_out,
    logits,
    reward,
    child_depth,
    zeros,
    work,
    bits,
):
    """The whole value-prefix step in one call (LSTM widths up to ``FUSED_MAX_HIDDEN``, one
    ``fc_hidden`` layer): ``[latent | h]`` -> GEMM -> gates -> LayerNorm + ReLU -> fc GEMM + bias +
    ReLU -> head GEMM -> bias, decode, :func:`prefix_step`. GEMMs are numba's ``np.dot`` (scipy's
    BLAS), which saves ~8 Python-level calls per simulation. Returns the child prefix ``[B]``."""
    _concat_rows(next_latent, h, lstm_in)
    np.dot(lstm_in, lstm_w, gates)
    _lstm_step(gates, lstm_bias, c, h_out, c_out, norm_w, norm_b, norm_eps, normed, work, bits)
    np.dot(normed, fc_w, fc_out)
    bias_norm_relu(fc_out, fc_b.reshape(1, fc_b.shape[0]), zeros, _EMPTY, _EMPTY, 0.0)
    np.dot(fc_out, head_w, head_out)
    return _finish_prefix(head_out, head_b, logits, prefix, depth, horizon, h_out, c_out, reward, child_depth)


FUSED_MAX_HIDDEN = 128
"""Widest LSTM run by :func:`prefix_head_fused` (scipy's BLAS behind numba's ``np.dot`` is slower
than numpy's on wide GEMMs at batch 8; see ``transformer_inference.FUSED_MAX_WIDTH``)."""


class EfficientZeroSearchInference(ComposedSearchInference):
    """``recurrent_fn`` of EfficientZero's search on numpy node states (module docstring).

    ``engine(state, action [B]) -> (next_state, reward [B], value [B], policy_logits [B, A])``
    with ``state = (latent [B, D], h [B, H], c [B, H], prefix [B] float32, depth [B] int64)``;
    continuous actions as :class:`~lz_tune.models.mlp_inference.MLPSearchInference`. Returned arrays are engine buffers,
    valid until its next call. :meth:`bind` before every search.
    """

    network_type = EfficientZeroNetwork

    def __init__(self, horizon: int) -> None:
        super().__init__()
        self.horizon = int(horizon)
        self._lstm: Optional[tuple] = None

    def read_weights(self, network: EfficientZeroNetwork) -> None:
        """Fresh views of the MuZero MLP's parameters, copies of the LSTM's and the prefix head's."""
        layers = [m for m in network.prefix_mlp if isinstance(m, torch.nn.Linear)]
        self.bind_muzero(
            network, (network.muzero.latent_dim, network.lstm_hidden_size, tuple(m.out_features for m in layers))
        )
        net = network
        lstm = net.lstm
        with torch.no_grad():  # contiguous [in, out] copies: BLAS is ~3x slower on transposed views at batch 8
            lstm_weight = torch.cat((lstm.weight_ih, lstm.weight_hh), 1).t().contiguous().numpy()  # [D + H, 4H]
            lstm_bias = (lstm.bias_ih + lstm.bias_hh).numpy()
            fc = tuple((m.weight.t().contiguous().numpy(), m.bias.detach().numpy()) for m in layers)
        norm = net.prefix_norm
        self._lstm = (
            lstm_weight,
            lstm_bias,
            norm.weight.detach().numpy(),
            norm.bias.detach().numpy(),
            float(norm.eps),
            fc,
        )

    def _buffers_for(self, batch: int) -> dict:
        buf = self.batch_buffers.get(batch)
        if buf is None:
            assert self.buffer_shapes is not None  # set by read_weights
            d, hidden, widths = self.buffer_shapes
            f32 = np.float32
            buf = {
                "gates": np.empty((batch, 4 * hidden), f32),
                "lstm_in": np.empty((batch, d + hidden), f32),
                "h": np.empty((batch, hidden), f32),
                "c": np.empty((batch, hidden), f32),
                "normed": np.empty((batch, hidden), f32),
                "fc": [np.empty((batch, w), f32) for w in widths[:-1]],
                "prefix_head": np.empty((batch, widths[-1]), f32),
                "prefix_logits": np.empty((batch, widths[-1]), f32),
                "reward": np.empty(batch, f32),
                "depth": np.empty(batch, np.int64),
                "work": np.empty(2 * batch * 4 * hidden, f32),
                "bits": np.empty(batch * 4 * hidden, np.int32),
            }
            self.batch_buffers[batch] = buf
        return buf

    def root(self, latent: np.ndarray) -> tuple[tuple, np.ndarray, np.ndarray]:
        """Root node states from root latents ``[B, D]``: ``(state, value [B], policy_logits [B, A])``,
        with a zero LSTM state, prefix 0 and depth 0 (new arrays)."""
        latent = np.ascontiguousarray(latent, np.float32)
        batch = latent.shape[0]
        assert self.buffer_shapes is not None, "EfficientZeroSearchInference.bind(network) comes first"
        hidden = self.buffer_shapes[1]
        value, policy_logits = self.mlp.prediction(latent)
        state = (
            latent,
            np.zeros((batch, hidden), np.float32),
            np.zeros((batch, hidden), np.float32),
            np.zeros(batch, np.float32),
            np.zeros(batch, np.int64),
        )
        return state, value, policy_logits

    def __call__(self, state: tuple, action: np.ndarray):
        latent, h, c, prefix, depth = state
        if self._lstm is None:
            raise RuntimeError("EfficientZeroSearchInference.bind(network) must be called before the first step")
        lstm_w, lstm_bias, norm_w, norm_b, norm_eps, fc = self._lstm
        batch = latent.shape[0]
        mlp_buf, zeros = self.mlp.prepare(batch)
        buf = self._buffers_for(batch)
        next_latent = self.mlp.dynamics_latent(latent, action, mlp_buf, zeros)
        h_new, c_new = buf["h"], buf["c"]
        reward, child_depth = buf["reward"], buf["depth"]
        if len(fc) == 2 and h.shape[1] <= FUSED_MAX_HIDDEN:
            (fc_w, fc_b), (head_w, head_b) = fc
            child_prefix = prefix_head_fused(
                next_latent,
                h,
                c,
                prefix,
                depth,
                self.horizon,
                lstm_w,
                lstm_bias,
                norm_w,
                norm_b,
                norm_eps,
                fc_w,
                fc_b,
                head_w,
                head_b,
                buf["lstm_in"],
                buf["gates"],
                h_new,
                c_new,
                buf["normed"],
                buf["fc"][0],
                buf["prefix_head"],
                buf["prefix_logits"],
                reward,
                child_depth,
                zeros,
                buf["work"],
                buf["bits"],
            )
            value = self.mlp.predict(next_latent, mlp_buf, zeros)
            return (next_latent, h_new, c_new, child_prefix, child_depth), reward, value, mlp_buf["policy_logits"]
        _concat_rows(next_latent, h, buf["lstm_in"])
        np.dot(buf["lstm_in"], lstm_w, out=buf["gates"])
        x = buf["normed"]
        _lstm_step(buf["gates"], lstm_bias, c, h_new, c_new, norm_w, norm_b, norm_eps, x, buf["work"], buf["bits"])
        for (weight, bias), out in zip(fc[:-1], buf["fc"]):
            np.dot(x, weight, out=out)
            bias_norm_relu(out, bias[None], zeros, _EMPTY, _EMPTY, 0.0)
            x = out
        np.dot(x, fc[-1][0], out=buf["prefix_head"])
        child_prefix = _finish_prefix(
            buf["prefix_head"],
            fc[-1][1],
            buf["prefix_logits"],
            prefix,
            depth,
            self.horizon,
            h_new,
            c_new,
            reward,
            child_depth,
        )
        value = self.mlp.predict(next_latent, mlp_buf, zeros)
        return (next_latent, h_new, c_new, child_prefix, child_depth), reward, value, mlp_buf["policy_logits"]
