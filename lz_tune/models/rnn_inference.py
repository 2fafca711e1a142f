"""Search-time inference for an MLP :class:`~lz_tune.models.rnn_full_obs.RNNFullObsNetwork` on the
CPU, without torch: MuZero's MLP dynamics on the latent plus the GRU history step, and the
history read-in before prediction (node state ``(latent [B, D], history [B, H])``, see
:mod:`lz_tune.algos.muzero_rnn_full_obs`).

Per simulation: ``latent @ W_x`` (GRU input weights of the latent columns, a contiguous copy) and
``history @ W_hh^T`` (two GEMMs), one gate kernel (the one-hot action's columns of ``W_ih`` plus
``b_ih`` folded into per-action rows; sigmoid / tanh with the vectorised ``exp``); the MuZero MLP
engine's dynamics (next latent, decoded reward); ``history' @ W_read`` and one kernel for
``normalise(next_latent + tanh(read_in))``; the MuZero MLP engine's prediction on that. Outputs
agree with the torch path to float32 rounding (``tests/test_composed_inference.py``).
"""

from __future__ import annotations

from typing import Optional

import numba
import numpy as np
import torch

from lz_tune.models.base import LATENT_RANGE_EPS, minmax_rows_into
from lz_tune.models.fast_math import sigmoid_rows, tanh_rows
from lz_tune.models.mlp_inference import ComposedSearchInference, finish_dynamics
from lz_tune.models.rnn_full_obs import RNNFullObsNetwork

__all__ = ["RNNFullObsSearchInference", "gru_gates_into"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def gru_gates_into(gx, action_rows, action, gh, bias_hh, h_prev, rz, n, h_out, work, bits):
    """``nn.GRUCell``'s update (gates r, z, n): ``gx [B, 3H]`` (``x W_x``) + ``action_rows[action[b]]``
    (the one-hot input's columns plus ``b_ih``) and ``gh [B, 3H]`` (``h W_hh^T``) + ``bias_hh``,
    both overwritten; ``r, z = sigmoid(gx + gh)``, ``n = tanh(gx_n + r gh_n)``, ``h' = (1 - z) n +
    z h`` into ``h_out [B, H]``. ``rz [B, 2H]``, ``n [B, H]`` float32 buffers; ``work [>= 2 B 2H]``
    float32, ``bits [>= B 2H]`` int32 scratch."""
    batch, width = gx.shape
    hidden = width // 3
    for b in range(batch):
        x = gx[b]
        h = gh[b]
        rows = action_rows[action[b]]
        for j in range(width):
            x[j] += rows[j]
            h[j] += bias_hh[j]
        gates = rz[b]
        for j in range(2 * hidden):
            gates[j] = x[j] + h[j]
    sigmoid_rows(rz, work, bits)
    for b in range(batch):
        x = gx[b, 2 * hidden :]
        h = gh[b, 2 * hidden :]
        r = rz[b, :hidden]
        dst = n[b]
        for j in range(hidden):
            dst[j] = x[j] + r[j] * h[j]
    tanh_rows(n, work, bits)
    for b in range(batch):
        z = rz[b, hidden:]
        src = n[b]
        prev = h_prev[b]
        dst = h_out[b]
        for j in range(hidden):
            dst[j] = (np.float32(1.0) - z[j]) * src[j] + z[j] * prev[j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _read_in(next_latent, read, bias, out, work, bits):
    """``out [B, D] = normalise(next_latent + tanh(read + bias))`` (the history read-in before
    prediction; ``read`` is overwritten)."""
    for b in range(read.shape[0]):
        r = read[b]
        for j in range(read.shape[1]):
            r[j] += bias[j]
    tanh_rows(read, work, bits)
    for b in range(out.shape[0]):
        dst = out[b]
        src = next_latent[b]
        r = read[b]
        for j in range(out.shape[1]):
            dst[j] = src[j] + r[j]
    minmax_rows_into(out, LATENT_RANGE_EPS, out)


class RNNFullObsSearchInference(ComposedSearchInference):
    """``recurrent_fn`` of muzero_rnn_full_obs's search on numpy node states (module docstring):
    ``engine((latent [B, D], history [B, H]), action [B] int64) -> ((next latent, next history),
    reward [B], value [B], policy_logits [B, A])``. Returned arrays are engine buffers, valid until
    its next call. :meth:`bind` before every search."""

    network_type = RNNFullObsNetwork

    def __init__(self) -> None:
        super().__init__()
        self._gru: Optional[tuple] = None

    def read_weights(self, network: RNNFullObsNetwork) -> None:
        """Fresh views of the MuZero MLP's parameters; contiguous ``[in, out]`` copies of the GRU's
        and the read-in's weights."""
        self.bind_muzero(network, (network.latent_size, network.hidden_size))
        gru, read = network.gru, network.history_to_latent
        d = network.latent_size
        with torch.no_grad():
            self._gru = (
                gru.weight_ih[:, :d].t().contiguous().numpy(),  # [D, 3H]
                (gru.weight_ih[:, d:].t() + gru.bias_ih).contiguous().numpy(),  # [A, 3H]
                gru.weight_hh.t().contiguous().numpy(),
                gru.bias_hh.detach().numpy(),
                read.weight.t().contiguous().numpy(),
                read.bias.detach().numpy(),
            )

    def _buffers_for(self, batch: int) -> dict:
        buf = self.batch_buffers.get(batch)
        if buf is None:
            assert self.buffer_shapes is not None  # set by read_weights
            d, hidden = self.buffer_shapes
            f32 = np.float32
            buf = self.batch_buffers[batch] = {
                "gx": np.empty((batch, 3 * hidden), f32),
                "gh": np.empty((batch, 3 * hidden), f32),
                "rz": np.empty((batch, 2 * hidden), f32),
                "n": np.empty((batch, hidden), f32),
                "history": np.empty((batch, hidden), f32),
                "read": np.empty((batch, d), f32),
                "read_latent": np.empty((batch, d), f32),
                "work": np.empty(2 * batch * max(2 * hidden, d), f32),
                "bits": np.empty(batch * max(2 * hidden, d), np.int32),
            }
        return buf

    def __call__(self, state: tuple, action: np.ndarray):
        if self._gru is None:
            raise RuntimeError("RNNFullObsSearchInference.bind(network) must be called before the first step")
        latent, history = state
        w_x, action_rows, w_hh, b_hh, w_read, b_read = self._gru
        batch = latent.shape[0]
        buf = self._buffers_for(batch)
        mlp_buf, zeros = self.mlp.prepare(batch)
        np.dot(latent, w_x, out=buf["gx"])
        np.dot(history, w_hh, out=buf["gh"])
        next_history = buf["history"]
        gru_gates_into(
            buf["gx"],
            action_rows,
            action,
            buf["gh"],
            b_hh,
            history,
            buf["rz"],
            buf["n"],
            next_history,
            buf["work"],
            buf["bits"],
        )
        hidden = self.mlp.dynamics_hidden(latent, action, mlp_buf, zeros)
        head_weight, head_bias = self.mlp.dynamics_head
        np.dot(hidden, head_weight, out=mlp_buf["dynamics_head"])
        next_latent = mlp_buf["next_latent"]
        reward = finish_dynamics(
            mlp_buf["dynamics_head"], head_bias, next_latent, mlp_buf["reward_logits"], LATENT_RANGE_EPS
        )
        np.dot(next_history, w_read, out=buf["read"])
        _read_in(next_latent, buf["read"], b_read, buf["read_latent"], buf["work"], buf["bits"])
        value = self.mlp.predict(buf["read_latent"], mlp_buf, zeros)
        return (next_latent, next_history), reward, value, mlp_buf["policy_logits"]
