"""Search-time inference of a plain ``nn.Sequential`` MLP (``Linear -> [LayerNorm] -> ReLU`` per
hidden layer, then a ``Linear`` head) on numpy, for the engines of the composed networks
(Stochastic MuZero's afterstate head and chance dynamics).

Per hidden layer one GEMM (numpy's BLAS, a contiguous ``[in, out]`` copy of the weight made at
construction) and one kernel (bias, LayerNorm, ReLU: :func:`lz_tune.models.mlp_inference.bias_norm_relu`);
the head is a GEMM whose bias the caller adds with its own finishing kernel.

A first layer over ``[x | one_hot(index)]`` (a chance code appended to a latent) is split the way
the MuZero MLP splits its action input: ``x @ W_x`` plus row ``index`` of ``W_onehot + bias``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import nn

from lz_tune.models.mlp_inference import bias_norm_relu

__all__ = ["SequentialMLP"]

_EMPTY = np.zeros(0, np.float32)


class SequentialMLP:
    """numpy twin of an ``nn.Sequential`` of ``(Linear, [LayerNorm], ReLU) * n, Linear``.

    ``one_hot_inputs``: the last that many inputs of the first Linear are a one-hot (``index``
    of :meth:`__call__`) instead of columns of ``x``.
    """

    def __init__(self, seq: nn.Sequential, *, one_hot_inputs: int = 0) -> None:
        layers: list[list] = []
        for module in seq:
            if isinstance(module, nn.Linear):
                layers.append([module, None])
            elif isinstance(module, nn.LayerNorm):
                layers[-1][1] = module
            elif not isinstance(module, nn.ReLU):
                raise TypeError(f"SequentialMLP: unsupported layer {type(module).__name__}")
        if len(layers) < 2:
            raise ValueError("SequentialMLP needs at least one hidden layer before the head")
        with torch.no_grad():
            first = layers[0][0]
            width = first.in_features - one_hot_inputs
            self._first_rows = (
                (first.weight[:, width:].t() + first.bias).contiguous().numpy()
                if one_hot_inputs
                else first.bias.detach().numpy()[None]
            )
            self._weights = [
                (m.weight[:, :width] if i == 0 else m.weight).t().contiguous().numpy()
                for i, (m, _) in enumerate(layers)
            ]
            self._bias_rows = [self._first_rows] + [m.bias.detach().numpy()[None] for m, _ in layers[1:-1]]
            self.head_bias = layers[-1][0].bias.detach().numpy()
            self._norms = [
                (n.weight.detach().numpy(), n.bias.detach().numpy(), float(n.eps))
                if n is not None
                else (_EMPTY, _EMPTY, 0.0)
                for _, n in layers[:-1]
            ]
        self.one_hot = one_hot_inputs > 0
        self._buffers: dict[int, list] = {}

    def __call__(self, x: np.ndarray, index: Optional[np.ndarray] = None) -> np.ndarray:
        """``x [B, in]`` (``index [B]`` int64 of the one-hot part) -> head output ``[B, out]``
        WITHOUT its bias (:attr:`head_bias`); an engine buffer, valid until the next call."""
        batch = x.shape[0]
        outs = self._buffers.get(batch)
        if outs is None:
            outs = self._buffers[batch] = [np.empty((batch, w.shape[1]), np.float32) for w in self._weights]
        zeros = np.zeros(batch, np.int64)
        for i, weight in enumerate(self._weights[:-1]):
            np.dot(x, weight, out=outs[i])
            norm_weight, norm_bias, eps = self._norms[i]
            bias_norm_relu(
                outs[i], self._bias_rows[i], index if i == 0 and self.one_hot else zeros, norm_weight, norm_bias, eps
            )
            x = outs[i]
        np.dot(x, self._weights[-1], out=outs[-1])
        return outs[-1]
