"""Policy distributions of the sampled types (Hubert et al. 2021, "Learning and Planning in
Complex Action Spaces") and how the search draws K actions from them (numba kernels in
:mod:`lz_tune.algos.sampling_np`; the random numbers are drawn here, from the caller's Generator).

Two samplers, one interface (``sample`` in numpy for the search, ``log_prob`` / ``entropy``
in torch for the loss):

- :class:`TanhGaussian` (continuous, ``D`` action dims): the policy output ``[.., 2D]`` holds a
  Gaussian's mean and raw scale per dimension, ``std = softplus(raw) + min_std``; an action is
  ``a = tanh(u)``, ``u ~ N(mean, std)``, so it lies in (-1, 1). Its exact log-density is

      log pi(a) = sum_d [ log N(u_d; mean_d, std_d) - log(1 - tanh(u_d)^2) ],  u = atanh(a)

  with ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` (stable for large |u|; the
  original's sampled EfficientZero subtracts the log of the SUM of the Jacobian terms
  instead of the sum of their logs). K samples are i.i.d.
- :class:`CategoricalSampler` (discrete, ``A`` actions): K DISTINCT actions without
  replacement by the Gumbel-top-k trick (the K largest of ``logits + Gumbel`` over the legal
  actions), for K <= A; with fewer than K legal actions the extra slots are marked invalid.

Child priors (sample-based policy improvement, the paper's ``beta_hat / beta * pi``). The
proposal beta is the policy itself, so for i.i.d. samples the prior of sample k is
``beta_hat(a_k) = 1/K``: uniform over the K slots (:meth:`TanhGaussian.sample` returns zero
logits). Without replacement (discrete) the sampled set is distinct and the prior is ``pi``
renormalised over it (the logits gathered at the K indices). At the root the search then mixes
Dirichlet noise into these priors (:class:`lz_tune.mcts.PUCT`), so noise changes which
child is selected; in the original's C++ trees the prior term is a constant 1/K and the
root noise is inert.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from lz_tune.algos.common import full_precision
from lz_tune.algos.sampling_np import gumbel_top_k_into, tanh_gaussian_edges_into, tanh_gaussian_into

__all__ = ["TanhGaussian", "CategoricalSampler", "Sampler", "make_sampler", "tanh_log_det_jacobian"]

_ACTION_EPS = 1e-6  # stored actions are clamped to +-(1 - eps) before atanh
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG2 = math.log(2.0)
_ALL_LEGAL = np.zeros((0, 0), np.bool_)  # no action mask (gumbel_top_k_into)


def tanh_log_det_jacobian(u: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` element-wise, stable for large ``|u|``."""
    return 2.0 * (_LOG2 - u - F.softplus(-2.0 * u))


def _softplus_np(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


@dataclass(frozen=True, kw_only=True)
class TanhGaussian:
    """Tanh-squashed diagonal Gaussian over ``[-1, 1]^D`` (see the module docstring)."""

    action_dim: int
    """D, action dimensions; the policy output is ``[.., 2D]`` (mean, raw scale)."""
    min_std: float = 1e-3
    """Added to ``softplus(raw)``: the smallest standard deviation (pre-tanh units)."""
    max_std: float = 5.0
    """Upper clamp of the standard deviation (pre-tanh units)."""

    draws_at_edges: ClassVar[bool] = True
    """The K samples of a node are i.i.d. under a uniform prior, so a search may draw each one
    when its edge is first expanded (:meth:`edge_actions`) instead of all K at the node's expansion."""

    def __post_init__(self) -> None:
        if self.action_dim < 1:
            raise ValueError(f"action_dim must be >= 1, got {self.action_dim}")
        if not 0.0 < self.min_std < self.max_std:
            raise ValueError(f"need 0 < min_std < max_std, got {self.min_std}, {self.max_std}")

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (self.action_dim,)

    def params(self, policy_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``policy_out [.., 2D]`` -> ``(mean [.., D], std [.., D])``."""
        mean, raw = policy_out.split(self.action_dim, dim=-1)
        return mean, (F.softplus(raw) + self.min_std).clamp(max=self.max_std)

    def params_np(self, policy_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """numpy twin of :meth:`params`."""
        d = self.action_dim
        return policy_out[..., :d], np.minimum(_softplus_np(policy_out[..., d:]) + self.min_std, self.max_std)

    def sample(
        self,
        policy_out: np.ndarray,
        num_samples: int,
        rng: np.random.Generator,
        action_mask: Optional[np.ndarray] = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """K i.i.d. actions per row of ``policy_out [B, 2D]``.

        Returns ``(actions [B, K, D] float32 in (-1, 1), prior_logits [B, K] float32 (zeros: the
        uniform 1/K prior), valid [B, K] bool (all True))``; ``action_mask`` is ignored.
        """
        batch = policy_out.shape[0]
        shape = (batch, num_samples, self.action_dim)
        noise = rng.standard_normal(shape)
        actions = np.empty(shape, np.float32)
        size = actions.size
        scratch = np.empty(3 * size, np.float32)  # the tanh kernel's work [2n] and bits [n]
        tanh_gaussian_into(
            np.asarray(policy_out, np.float32),
            noise,
            self.min_std,
            self.max_std,
            _ACTION_EPS,
            actions,
            scratch[: 2 * size],
            scratch[2 * size :].view(np.int32),
        )
        valid = np.empty((batch, num_samples), np.bool_)
        valid.fill(True)
        return actions, np.zeros((batch, num_samples), np.float32), valid

    def edge_actions(
        self, node_out: np.ndarray, slot: np.ndarray, root_actions: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """``[B, D]`` float32 actions of B edges ``(node, slot)``: a fresh sample of the node's
        policy, or for a root (``node_out [B, 2D + 1]``: policy output, then a root flag) its
        pre-drawn sample ``root_actions[b, slot[b]]`` (``root_actions [B, K, D]``). One sample per
        edge: distributed as the slot's share of K i.i.d. draws made at the node's expansion."""
        batch, dim = node_out.shape[0], self.action_dim
        noise = rng.standard_normal((batch, 1, dim))
        out = np.empty((batch, dim), np.float32)
        scratch = np.empty(3 * batch * dim, np.float32)
        tanh_gaussian_edges_into(
            node_out,
            slot,
            root_actions,
            noise,
            self.min_std,
            self.max_std,
            _ACTION_EPS,
            out,
            scratch[: 2 * batch * dim],
            scratch[2 * batch * dim :].view(np.int32),
        )
        return out

    def log_prob(self, policy_out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``log pi(a_k)`` of ``actions [N, K, D]`` under ``policy_out [N, 2D]`` -> ``[N, K]``."""
        mean, std = self.params(full_precision(policy_out))
        a = actions.to(mean.dtype).clamp(-1.0 + _ACTION_EPS, 1.0 - _ACTION_EPS)
        u = torch.atanh(a)
        z = (u - mean.unsqueeze(-2)) / std.unsqueeze(-2)
        log_normal = -0.5 * z * z - torch.log(std).unsqueeze(-2) - _LOG_SQRT_2PI
        return (log_normal - tanh_log_det_jacobian(u)).sum(-1)

    def entropy(self, policy_out: torch.Tensor) -> torch.Tensor:
        """``[N]`` entropy of the pre-tanh Gaussian, ``sum_d log(std_d sqrt(2 pi e))`` (the
        squashed density has no closed form; this is the bonus the paper and LightZero use)."""
        _, std = self.params(full_precision(policy_out))
        return (torch.log(std) + 0.5 + _LOG_SQRT_2PI).sum(-1)

    def greedy(self, policy_out: np.ndarray) -> np.ndarray:
        """``[B, D]`` the squashed mean, ``tanh(mean)``."""
        mean, _ = self.params_np(np.asarray(policy_out, np.float32))
        return np.tanh(mean).astype(np.float32)


@dataclass(frozen=True, kw_only=True)
class CategoricalSampler:
    """K distinct actions out of A by Gumbel-top-k (see the module docstring)."""

    num_actions: int
    """A."""

    draws_at_edges: ClassVar[bool] = False
    """K distinct actions are drawn together (without replacement, priors from the draw)."""

    @property
    def action_shape(self) -> tuple[int, ...]:
        return ()

    def sample(
        self,
        policy_out: np.ndarray,
        num_samples: int,
        rng: np.random.Generator,
        action_mask: Optional[np.ndarray] = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """K distinct legal actions per row of the logits ``policy_out [B, A]``.

        action_mask: ``[B, A]`` bool legal actions (None: all legal).
        Returns ``(actions [B, K] int64, prior_logits [B, K] float32 (the logits at the sampled
        actions: softmax over them is pi renormalised over the sample), valid [B, K] bool)``.
        Invalid slots (fewer than K legal actions) repeat the first sample, with logit -inf.
        """
        logits = np.asarray(policy_out, np.float32)
        batch, num_actions = logits.shape
        if num_samples > num_actions:
            raise ValueError(f"cannot draw {num_samples} distinct actions out of {num_actions}")
        gumbel = rng.gumbel(size=logits.shape).astype(np.float32)
        mask = _ALL_LEGAL if action_mask is None else np.asarray(action_mask, np.bool_)
        actions = np.empty((batch, num_samples), np.int64)
        prior = np.empty((batch, num_samples), np.float32)
        valid = np.empty((batch, num_samples), np.bool_)
        gumbel_top_k_into(logits, gumbel, mask, actions, prior, valid)
        return actions, prior, valid

    def log_prob(self, policy_out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``log pi(a_k)`` of indices ``actions [N, K]`` under logits ``[N, A]`` -> ``[N, K]``."""
        return F.log_softmax(full_precision(policy_out), dim=-1).gather(-1, actions.long())

    def entropy(self, policy_out: torch.Tensor) -> torch.Tensor:
        """``[N]`` entropy of the categorical policy."""
        logp = F.log_softmax(full_precision(policy_out), dim=-1)
        return -(logp.exp() * logp).sum(-1)


Sampler = Union[TanhGaussian, CategoricalSampler]


def make_sampler(*, action_dim: int, num_actions: int, min_std: float = 1e-3, max_std: float = 5.0) -> Sampler:
    """The sampler of an action space: :class:`TanhGaussian` when ``action_dim >= 1``, else
    :class:`CategoricalSampler` over ``num_actions``."""
    if action_dim:
        return TanhGaussian(action_dim=action_dim, min_std=min_std, max_std=max_std)
    return CategoricalSampler(num_actions=num_actions)
