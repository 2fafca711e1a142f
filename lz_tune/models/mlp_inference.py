"""Search-time inference for :class:`~lz_tune.models.mlp.MuZeroMLPNetwork` on CPU, without torch.

The tree search calls dynamics + prediction once per simulation at batch 8..64. Through torch a
recurrent step is ~14 ops, each with ~5-10 us of dispatch on this class of CPU: at batch 8 that
is more than the arithmetic. :class:`MLPSearchInference` runs the SAME arithmetic on numpy views
of the network's parameters, per step:

* dynamics: GEMM ``latent [B, D] @ W [D, H0]`` -> kernel (``+ action_embedding[action]``,
  LayerNorm if any, ReLU) -> hidden layers (GEMM + kernel) -> GEMM into the fused
  ``[next_latent | reward_logits]`` head -> kernel (bias, min-max normalised latent, reward decode);
  continuous actions (the sampled types): ``bias + action [B, D_a] @ W_a`` in a small kernel
  instead of the embedding row;
* prediction: GEMM -> kernel -> hidden layers -> GEMM into ``[policy | value]`` -> kernel (bias,
  policy logits copy, value decode); also used alone for the roots (:meth:`prediction`), after
  the representation network ran in torch.

GEMMs go to numpy's BLAS (``np.dot(..., out=)``, ~1-2 us of overhead each); the kernels are
numba. Threads: numpy's BLAS would use every core for the batch-64 heads; the engine limits it
to ``torch.get_num_threads()`` (see :func:`limit_blas_threads`) so a collector pinned to one
torch thread also searches on one thread.

Outputs agree with ``network.recurrent_inference`` + :func:`support_to_scalar_np` to float32
rounding (~1e-5; tested in ``tests/test_mlp_inference.py``). Parameters are read by
:meth:`MLPSearchInference.bind` (views, and a copy of the head's latent columns) when they are
not the ones of its last bind: another network, storage or in-place version
(:func:`parameter_state`), or an :meth:`~MLPSearchInference.invalidate` since, which every
Policy calls after a weight change (a fused optimizer step counts no version). The engines of the
composed networks (EfficientZero, Stochastic MuZero, muzero_rnn_full_obs) reuse its pieces:
:meth:`~MLPSearchInference.dynamics_hidden`, :meth:`~MLPSearchInference.dynamics_latent`,
:meth:`~MLPSearchInference.predict` and the finishing kernels.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
import threading
from typing import Any, Optional

import numba
import numpy as np
import torch

from lz_tune.models.base import LATENT_RANGE_EPS, ComposedMuZeroNetwork, minmax_rows_into
from lz_tune.models.mlp import LAYER_NORM_EPS, MuZeroMLPNetwork
from lz_tune.models.support_np import support_to_scalar_np

__all__ = [
    "ComposedSearchInference",
    "MLPSearchInference",
    "add_bias_decode",
    "cpu_float32",
    "finish_latent",
    "limit_blas_threads",
    "parameter_state",
    "WeightReadingEngine",
]


# ---------------------------------------------------------------------------------------- kernels


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def bias_norm_relu(pre, bias_rows, bias_index, norm_weight, norm_bias, norm_eps):
    """In place on ``pre [B, H]``: ``+ bias_rows[bias_index[b]]``, LayerNorm when ``norm_weight``
    is non-empty (``[H]``, biased variance, like ``F.layer_norm``), then ReLU.

    ``bias_rows [K, H]``: the dynamics input layer passes its action embedding ``[A, H]`` (bias
    folded in) with ``bias_index = action``; other layers pass ``bias[None]`` with zeros.
    """
    batch, width = pre.shape
    use_norm = norm_weight.shape[0] > 0
    for b in range(batch):
        row = bias_index[b]
        for j in range(width):
            pre[b, j] += bias_rows[row, j]
        if use_norm:
            mean = np.float32(0.0)
            for j in range(width):
                mean += pre[b, j]
            mean /= width
            var = np.float32(0.0)
            for j in range(width):
                d = pre[b, j] - mean
                var += d * d
            inv = np.float32(1.0) / np.sqrt(var / width + np.float32(norm_eps))
            for j in range(width):
                pre[b, j] = (pre[b, j] - mean) * inv * norm_weight[j] + norm_bias[j]
        for j in range(width):
            if pre[b, j] < 0.0:
                pre[b, j] = 0.0


@numba.njit(cache=True, nogil=True)
def _add_bias_into(head, bias, start, out):
    """``out [B, W] = head[:, start:start + W] + bias[start:start + W]``: a contiguous copy of one
    part of a fused head (the decode is ~20% faster on contiguous rows than on the strided slice).

    Loops index with the loop variable only: ``head[b, start + j]`` with a runtime ``start``
    makes numba emit a negative-index check that stops LLVM vectorising (~6x slower)."""
    part_bias = bias[start:]
    for b in range(out.shape[0]):
        src = head[b, start:]
        dst = out[b]
        for j in range(out.shape[1]):
            dst[j] = src[j] + part_bias[j]


@numba.njit(cache=True, nogil=True)
def finish_dynamics(head, bias, next_latent, reward_logits, range_eps):
    """``head [B, D + R]`` (no bias yet) -> writes ``next_latent [B, D]`` (min-max normalised per
    row, range clamped at ``range_eps``) and ``reward_logits [B, R]``, returns the decoded
    ``reward [B]`` float32."""
    _add_bias_into(head, bias, 0, next_latent)
    minmax_rows_into(next_latent, range_eps, next_latent)
    _add_bias_into(head, bias, next_latent.shape[1], reward_logits)
    return support_to_scalar_np(reward_logits)


@numba.njit(cache=True, nogil=True)
def finish_latent(head, bias, out):
    """``out [B, D]`` = min-max normalised rows of ``head [B, D] + bias`` (a next latent)."""
    _add_bias_into(head, bias, 0, out)
    minmax_rows_into(out, LATENT_RANGE_EPS, out)


@numba.njit(cache=True, nogil=True)
def add_bias_decode(head, bias, logits):
    """``logits [B, V] = head + bias``; returns the decoded scalars ``[B]`` float32 (a categorical
    value or reward head)."""
    _add_bias_into(head, bias, 0, logits)
    return support_to_scalar_np(logits)


@numba.njit(cache=True, nogil=True)
def _finish_prediction(head, bias, policy_logits, value_logits):
    """``head [B, A + V]`` (no bias yet) -> writes ``policy_logits [B, A]`` and ``value_logits
    [B, V]``, returns the decoded ``value [B]`` float32."""
    _add_bias_into(head, bias, 0, policy_logits)
    _add_bias_into(head, bias, policy_logits.shape[1], value_logits)
    return support_to_scalar_np(value_logits)


@numba.njit(cache=True, nogil=True)
def embed_actions_into(action, weight, bias, out):
    """``out [B, H] = bias [H] + action [B, D_a] @ weight [D_a, H]`` (continuous actions; D_a is
    small, so plain loops beat a GEMM call). Accumulates in the order of ``torch.addmm``'s
    reference result up to float32 rounding."""
    for b in range(out.shape[0]):
        dst = out[b]
        for j in range(out.shape[1]):
            dst[j] = bias[j]
        for d in range(action.shape[1]):
            a = np.float32(action[b, d])
            src = weight[d]
            for j in range(out.shape[1]):
                dst[j] += a * src[j]


# ---------------------------------------------------------------------------------------- threads

_blas_lock = threading.Lock()
_blas_limit: Optional[tuple] = None


def limit_blas_threads(num_threads: int) -> None:
    """Limit numpy's BLAS (and any other BLAS loaded now) to ``num_threads`` threads for this
    process; a no-op when the last call set the same limit and scipy's BLAS was already loaded
    then or is still not loaded.

    Uses ``threadpoolctl`` (the scikit-learn project's library that finds the BLAS loaded into the
    process, OpenBLAS, MKL or BLIS, and calls its own set-threads function).
    """
    global _blas_limit
    # scipy's BLAS (numba's np.dot calls it: the transformer engine) may load after a first limit
    key = (num_threads, "scipy.linalg.cython_blas" in sys.modules)
    if _blas_limit == key:
        return
    with _blas_lock:
        from threadpoolctl import ThreadpoolController

        ThreadpoolController().limit(limits=num_threads, user_api="blas")  # fresh scan: libraries loaded since
        _blas_limit = key


def cpu_float32(network: torch.nn.Module) -> bool:
    """Whether every parameter of ``network`` is float32 on the CPU (what the engines read)."""
    return all(p.is_cpu and p.dtype == torch.float32 for p in network.parameters())


def parameter_state(network: torch.nn.Module) -> tuple:
    """``(network id, (storage address, in-place version) of every parameter)``: what an engine's
    weights were read from. It changes when a parameter is moved, cast or replaced, or changed by
    an op that counts versions (plain and ``foreach`` optimizers, ``copy_``, ``load_state_dict``);
    a ``fused`` optimizer step does not count, hence the engines' ``invalidate`` (called from
    ``Policy.on_weights_loaded``, which runs after every weight change).

    Asked before every search: it walks ``_modules`` / ``_parameters`` itself, ~3x faster than
    ``network.parameters()`` (13 vs 43 us for a CartPole EfficientZero network, ~4% of its
    16-simulation search at 8 envs). A parameter shared by two modules appears twice."""
    state = []
    modules = [network]
    while modules:
        module = modules.pop()
        for p in module._parameters.values():
            if p is not None:
                state.append((p.data_ptr(), p._version))
        modules.extend(m for m in module._modules.values() if m is not None)
    return id(network), tuple(state)


# ---------------------------------------------------------------------------------------- engine


@dataclasses.dataclass(frozen=True)
class _Layer:
    """One linear layer + activation: ``weight [in, out]``, ``bias_rows [K, out]``, LayerNorm
    ``[out]`` pair (empty when the network has none)."""

    weight: np.ndarray
    bias_rows: np.ndarray
    norm_weight: np.ndarray
    norm_bias: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Weights:
    dynamics: tuple[_Layer, ...]  # input layer (bias_rows = action embedding) then hidden layers
    dynamics_head: tuple[np.ndarray, np.ndarray]  # weight [H, D + R], bias [D + R]
    prediction: tuple[_Layer, ...]
    prediction_head: tuple[np.ndarray, np.ndarray]  # weight [H, A + V], bias [A + V]


class WeightReadingEngine(abc.ABC):
    """Base of the CPU engines that read a network's weights (numpy views, contiguous copies):
    they read them again only when they are not the ones of the last read, i.e. another network,
    parameter storage or in-place version (:func:`parameter_state`), or an :meth:`invalidate`
    since (``Policy.on_weights_loaded`` calls it after every weight change; a fused optimizer step
    counts no version). Re-reading costs ~0.1-0.3 ms, a fifth of a 16-simulation search at 8 envs.
    """

    def __init__(self) -> None:
        self._bound: Optional[tuple] = None  # (generation, parameter_state) of the weights read
        self._generation = 0

    @classmethod
    @abc.abstractmethod
    def supports(cls, network: torch.nn.Module) -> bool:
        """Whether this engine serves ``network`` (its exact class, float32 parameters on the CPU)."""

    @abc.abstractmethod
    def read_weights(self, network: Any) -> None:
        """Read ``network``'s weights (a network :meth:`supports` accepted: each engine types its own)."""

    def invalidate(self) -> None:
        """The weights changed (``Policy.on_weights_loaded``): re-read them at the next bind."""
        self._generation += 1

    def try_bind(self, network: torch.nn.Module) -> bool:
        """Limit numpy's BLAS threads to torch's and bind ``network`` (reading its weights if they
        changed); False, nothing bound, when this engine does not serve it. The support check runs
        only when the weights are not the ones of the last read. Call before every search."""
        key = (self._generation, parameter_state(network))
        if key != self._bound:
            if not self.supports(network):
                return False
            self.read_weights(network)
            self._bound = key
        limit_blas_threads(torch.get_num_threads())
        return True

    def bind(self, network: torch.nn.Module) -> None:
        """:meth:`try_bind`; ValueError for a network this engine does not serve."""
        if not self.try_bind(network):
            raise ValueError(f"{type(self).__name__} needs {self.serves} with float32 parameters on the CPU")

    @property
    def serves(self) -> str:
        """What :meth:`supports` accepts, for the error of :meth:`bind`."""
        return "a supported network"


class MLPSearchInference(WeightReadingEngine):
    """``recurrent_fn`` for :func:`lz_tune.mcts.puct_search` on numpy latents.

    ``engine(latent [B, D] float32, action [B] int64) -> (next_latent [B, D], reward [B],
    value [B], policy_logits [B, A])``, all float32 numpy. Continuous actions: ``action
    [B, D_a]`` float32 and ``policy_logits [B, 2 D_a]`` (the Gaussian's mean and raw scale).
    The returned arrays are buffers of the engine, valid until its next call (the search copies
    the latent into its store and consumes the rest before simulating again).

    Call :meth:`bind` with the network before every search: it applies the thread limit and
    re-reads the parameters when they are not those of the last bind (:func:`parameter_state`,
    :meth:`invalidate`). Only CPU float32 networks are supported (:meth:`supports`).
    """

    serves = "a MuZeroMLPNetwork"

    def __init__(self) -> None:
        super().__init__()
        self._weights: Optional[_Weights] = None
        self._shapes: Optional[tuple] = None
        self._buffers: dict[int, dict] = {}
        self._zero_index: dict[int, np.ndarray] = {}

    @staticmethod
    def supports(network: torch.nn.Module) -> bool:
        """True for exactly a :class:`MuZeroMLPNetwork` (not a subclass, whose arithmetic may
        differ), discrete or continuous actions, whose parameters are float32 on the CPU."""
        return type(network) is MuZeroMLPNetwork and cpu_float32(network)

    def read_weights(self, network: MuZeroMLPNetwork) -> None:
        """Numpy views of ``network``'s parameters and a copy of the dynamics head's latent columns."""
        net = network
        p = {name: param.detach().numpy() for name, param in net.named_parameters(recurse=False)}
        empty = np.zeros(0, np.float32)

        def trunk(name: str, first_weight: str, first_bias_rows: np.ndarray) -> tuple[_Layer, ...]:
            norms = [
                (p[f"{name}_norm{i}_weight"], p[f"{name}_norm{i}_bias"]) if net.layer_norm else (empty, empty)
                for i in range(len(net.hidden_sizes))
            ]
            layers = [_Layer(p[first_weight], first_bias_rows, *norms[0])]
            for i in range(1, len(net.hidden_sizes)):
                layers.append(_Layer(p[f"{name}_hidden{i}_weight"], p[f"{name}_hidden{i}_bias"][None], *norms[i]))
            return tuple(layers)

        # continuous actions: the first layer's rows are computed per call (embed_actions_into)
        self._action_projection = (
            (p["dynamics_action_embedding"], p["dynamics_action_bias"]) if net.action_dim else None
        )
        self._weights = _Weights(
            dynamics=trunk("dynamics", "dynamics_latent_weight", p["dynamics_action_embedding"]),
            dynamics_head=(p["dynamics_head_weight"], p["dynamics_head_bias"]),
            prediction=trunk("prediction", "prediction_in_weight", p["prediction_in_bias"][None]),
            prediction_head=(p["prediction_head_weight"], p["prediction_head_bias"]),
        )
        head_weight, head_bias = self._weights.dynamics_head
        self._latent_head = (np.ascontiguousarray(head_weight[:, : net.latent_dim]), head_bias[: net.latent_dim])
        shapes = (
            net.hidden_sizes,
            net.latent_dim,
            net.policy_size,
            self._weights.dynamics_head[0].shape[1],
            self._weights.prediction_head[0].shape[1],
        )
        if shapes != self._shapes:  # another network shape: the buffers no longer fit
            self._shapes = shapes
            self._buffers.clear()

    def _buffers_for(self, batch: int) -> dict[str, np.ndarray]:
        buffers = self._buffers.get(batch)
        if buffers is None:
            assert self._shapes is not None  # set by read_weights
            hidden_sizes, latent_dim, num_actions, dynamics_width, prediction_width = self._shapes
            f32 = np.float32
            buffers = {
                "dynamics": [np.empty((batch, h), f32) for h in hidden_sizes],
                "prediction": [np.empty((batch, h), f32) for h in hidden_sizes],
                "dynamics_head": np.empty((batch, dynamics_width), f32),
                "prediction_head": np.empty((batch, prediction_width), f32),
                "next_latent": np.empty((batch, latent_dim), f32),
                "latent_head": np.empty((batch, latent_dim), f32),
                "policy_logits": np.empty((batch, num_actions), f32),
                "reward_logits": np.empty((batch, dynamics_width - latent_dim), f32),
                "value_logits": np.empty((batch, prediction_width - num_actions), f32),
                "embedded_actions": np.empty((batch, hidden_sizes[0]), f32),
                "rows": np.arange(batch, dtype=np.int64),
            }
            self._buffers[batch] = buffers
            self._zero_index[batch] = np.zeros(batch, np.int64)
        return buffers

    def _trunk(
        self,
        x: np.ndarray,
        layers: tuple[_Layer, ...],
        outs: list[np.ndarray],
        first_index: np.ndarray,
        zeros: np.ndarray,
        first_rows: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """``first_rows``: the first layer's bias rows when not its own (continuous actions)."""
        for i, layer in enumerate(layers):
            out = outs[i]
            np.dot(x, layer.weight, out=out)
            rows = layer.bias_rows if i or first_rows is None else first_rows
            bias_norm_relu(
                out, rows, first_index if i == 0 else zeros, layer.norm_weight, layer.norm_bias, LAYER_NORM_EPS
            )
            x = out
        return x

    def dynamics_hidden(self, latent: np.ndarray, action: np.ndarray, buf: dict, zeros: np.ndarray) -> np.ndarray:
        """The dynamics trunk: ``latent [B, D]``, ``action [B]`` int64 (continuous: ``[B, D_a]``
        float32) -> last hidden layer ``[B, H_last]`` (a buffer of ``buf``), before the head."""
        w = self._weights
        assert w is not None  # bound (prepare raises before)
        if self._action_projection is None:
            return self._trunk(latent, w.dynamics, buf["dynamics"], action, zeros)
        embedded = buf["embedded_actions"]
        embed_actions_into(action, *self._action_projection, embedded)
        return self._trunk(latent, w.dynamics, buf["dynamics"], buf["rows"], zeros, first_rows=embedded)

    def dynamics_latent(self, latent: np.ndarray, action: np.ndarray, buf: dict, zeros: np.ndarray) -> np.ndarray:
        """Only the next latent of the dynamics, ``[B, D]`` normalised (``buf["next_latent"]``):
        the trunk and the latent columns of the fused head (networks that ignore the reward
        columns: EfficientZero's, Stochastic MuZero's afterstates)."""
        hidden = self.dynamics_hidden(latent, action, buf, zeros)
        weight, bias = self._latent_head
        np.dot(hidden, weight, out=buf["latent_head"])
        finish_latent(buf["latent_head"], bias, buf["next_latent"])
        return buf["next_latent"]

    def predict(self, latent: np.ndarray, buf: dict, zeros: np.ndarray) -> np.ndarray:
        """Prediction network on ``latent [B, D]``: fills ``buf["policy_logits"]``, returns value [B]."""
        w = self._weights
        assert w is not None  # bound (prepare raises before)
        hidden = self._trunk(latent, w.prediction, buf["prediction"], zeros, zeros)
        np.dot(hidden, w.prediction_head[0], out=buf["prediction_head"])
        return _finish_prediction(
            buf["prediction_head"], w.prediction_head[1], buf["policy_logits"], buf["value_logits"]
        )

    @property
    def dynamics_head(self) -> tuple[np.ndarray, np.ndarray]:
        """The bound network's fused dynamics head: ``(weight [H, D + R], bias [D + R])`` views."""
        assert self._weights is not None, "MLPSearchInference.bind(network) comes first"
        return self._weights.dynamics_head

    def prepare(self, batch: int) -> tuple[dict, np.ndarray]:
        """This batch size's buffers and its ``[B]`` zero index (for :meth:`predict` and
        :meth:`dynamics_hidden`)."""
        if self._weights is None:
            raise RuntimeError("MLPSearchInference.bind(network) must be called before the first step")
        return self._buffers_for(batch), self._zero_index[batch]

    def prediction(self, latent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Root evaluation: ``latent [B, D]`` float32 -> ``(value [B], policy_logits [B, A])``, new arrays."""
        latent = np.ascontiguousarray(latent, np.float32)
        buf, zeros = self.prepare(latent.shape[0])
        value = self.predict(latent, buf, zeros)
        return value, buf["policy_logits"].copy()

    def __call__(self, latent: np.ndarray, action: np.ndarray):
        buf, zeros = self.prepare(latent.shape[0])
        w = self._weights
        assert w is not None  # bound (prepare raises before)
        hidden = self.dynamics_hidden(latent, action, buf, zeros)
        np.dot(hidden, w.dynamics_head[0], out=buf["dynamics_head"])
        next_latent = buf["next_latent"]
        reward = finish_dynamics(
            buf["dynamics_head"], w.dynamics_head[1], next_latent, buf["reward_logits"], LATENT_RANGE_EPS
        )
        value = self.predict(next_latent, buf, zeros)
        return next_latent, reward, value, buf["policy_logits"]


class ComposedSearchInference(WeightReadingEngine):
    """Base of the engines of the networks that compose a MuZero MLP (``network.muzero``):
    EfficientZero's, Stochastic MuZero's, muzero_rnn_full_obs's. Holds the MuZero engine
    (``self.mlp``) and the subclass's per-batch buffers, which :meth:`bind_muzero` drops when
    the network's shapes change. The subclass's :meth:`read_weights` calls :meth:`bind_muzero`,
    then reads its own views / copies."""

    network_type: type = type(None)
    """The composed network class the subclass serves (exactly that class)."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = MLPSearchInference()
        self.batch_buffers: dict[int, dict] = {}
        self.buffer_shapes: Optional[tuple] = None

    @property
    def serves(self) -> str:
        return f"an MLP {self.network_type.__name__}"

    @classmethod
    def supports(cls, network: torch.nn.Module) -> bool:
        """True for exactly a ``network_type`` over exactly a :class:`MuZeroMLPNetwork`, all
        parameters float32 on the CPU."""
        return type(network) is cls.network_type and type(network.muzero) is MuZeroMLPNetwork and cpu_float32(network)

    def invalidate(self) -> None:
        super().invalidate()
        self.mlp.invalidate()

    def bind_muzero(self, network: ComposedMuZeroNetwork, shapes: tuple) -> None:
        """Bind the MuZero engine to ``network.muzero``; keep the buffers if ``shapes`` (the
        subclass's buffer shapes) are unchanged."""
        self.mlp.bind(network.muzero)
        if shapes != self.buffer_shapes:
            self.buffer_shapes = shapes
            self.batch_buffers.clear()
