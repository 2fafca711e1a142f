"""Search-time inference for :class:`~lz_tune.models.stochastic.StochasticMuZeroNetwork` on the CPU,
without torch: one call per simulation expands decision nodes (afterstates) and chance nodes
(next states) of B trees, as :meth:`lz_tune.algos.stochastic_muzero.StochasticMuZeroPolicy.recurrent_inference`
does in torch.

* trees expanding a decision node (``slot < A``): phi = the MuZero MLP's dynamics, latent columns
  only (``MLPSearchInference.dynamics_latent``), then psi = the afterstate head
  (:class:`SequentialMLP`) -> chance logits into slots ``[A, A + C)``, the decoded afterstate
  value, reward 0;
* trees expanding a chance node (``slot >= A``): g = the chance dynamics on ``[afterstate |
  one_hot(slot - A)]`` (:class:`SequentialMLP` with a one-hot input) -> min-max latent and the
  decoded reward, then f = the MuZero MLP's prediction -> policy logits into slots ``[0, A)``,
  the decoded value.

The other node kind's slots are -inf. Each kind's rows run as one sub-batch. Outputs agree with
the torch path to float32 rounding (``tests/test_composed_inference.py``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from lz_tune.models.mlp_inference import ComposedSearchInference, add_bias_decode, finish_latent
from lz_tune.models.sequential_inference import SequentialMLP
from lz_tune.models.stochastic import StochasticMuZeroNetwork

__all__ = ["StochasticSearchInference"]


class StochasticSearchInference(ComposedSearchInference):
    """``recurrent_fn`` of Stochastic MuZero's search on numpy latents (module docstring):
    ``engine(latent [B, D], slot [B] int64) -> (child latent [B, D], reward [B], value [B],
    logits [B, A + C])``. Returned arrays are engine buffers, valid until its next call.
    :meth:`bind` before every search."""

    network_type = StochasticMuZeroNetwork

    def __init__(self) -> None:
        super().__init__()
        self._afterstate: Optional[SequentialMLP] = None
        self._chance: Optional[SequentialMLP] = None
        self._sizes: tuple[int, int, int] = (0, 0, 0)

    def read_weights(self, network: StochasticMuZeroNetwork) -> None:
        """Fresh views of the MuZero MLP's parameters, copies of the small heads' weights."""
        self.bind_muzero(network, ())
        chance = network.chance_space_size
        self._afterstate = SequentialMLP(network.afterstate_head)
        self._chance = SequentialMLP(network.chance_dynamics, one_hot_inputs=chance)
        self._sizes = (network.muzero.action_space_size, chance, network.muzero.latent_dim)

    def __call__(self, latent: np.ndarray, slot: np.ndarray):
        if self._afterstate is None or self._chance is None:
            raise RuntimeError("StochasticSearchInference.bind(network) must be called before the first step")
        num_actions, num_chance, latent_dim = self._sizes
        batch = slot.shape[0]
        child = np.empty((batch, latent_dim), np.float32)
        reward = np.zeros(batch, np.float32)
        value = np.empty(batch, np.float32)
        logits = np.full((batch, num_actions + num_chance), -np.inf, np.float32)
        decision = slot < num_actions
        for rows, is_decision in ((np.flatnonzero(decision), True), (np.flatnonzero(~decision), False)):
            if not rows.size:
                continue
            parent = latent if rows.size == batch else latent[rows]
            buf, zeros = self.mlp.prepare(rows.size)
            if is_decision:  # phi, psi
                afterstate = self.mlp.dynamics_latent(parent, slot[rows], buf, zeros)
                head = self._afterstate(afterstate)
                bias = self._afterstate.head_bias
                logits[rows, num_actions:] = head[:, :num_chance] + bias[:num_chance]
                value[rows] = add_bias_decode(head[:, num_chance:], bias[num_chance:], buf["value_logits"])
                child[rows] = afterstate
            else:  # g, f
                head = self._chance(parent, slot[rows] - num_actions)
                bias = self._chance.head_bias
                finish_latent(head[:, :latent_dim], bias[:latent_dim], buf["next_latent"])
                reward[rows] = add_bias_decode(head[:, latent_dim:], bias[latent_dim:], buf["reward_logits"])
                value[rows] = self.mlp.predict(buf["next_latent"], buf, zeros)
                logits[rows, :num_actions] = buf["policy_logits"]
                child[rows] = buf["next_latent"]
        return child, reward, value, logits
