"""muzero_context: MuZero whose search root is carried across real env steps.

Training is plain MuZero (:class:`MuZeroLearner` composed with this type's policy). At collection and evaluation the
root latent of env i is ``dynamics(its previous ROOT latent, the action it really took)``, and it is
re-encoded from the real observation every ``context.context_length_init`` steps of that env,
counted from its episode start. So the search plans from the model's own rollout of the
episode, as the original's ``conv_context`` model does, with three differences (each tested in
``tests/test_muzero_context.py``):

- the re-encode schedule is counted per env (the original counts over the whole batch, so one
  env's reset shifts every other env's schedule);
- the carried latent is the previous ROOT latent (the original's search overwrites the stored
  latent with the last simulation's leaves, so the next root is built from a leaf);
- the per-env state is tagged with the weights version it was built with and never used under
  another one: after any weight load (snapshot in a worker, optimizer step in the learner) every
  env re-encodes at its next step.

Per-env state lives in the Policy (see :mod:`lz_tune.algos.base`): ``reset(env_ids)`` drops it
for envs whose episode ended and at the start of every evaluation; collectors keep it across
``collect()`` calls while their envs keep running.

Bootstrap values and reanalysis (buffer side) search from the stored observation, re-encoded:
the buffer keeps no latents, and the learner trains every position from its encoded observation
(plain MuZero), so the encoded root is what the network's value head is trained on.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from lz_tune.algos.history import EnvHistory
from lz_tune.algos.muzero import MuZeroLearner, MuZeroPolicy, policy_target_size, step_columns  # noqa: F401  (same as MuZero's)
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo

__all__ = ["MuZeroContextPolicy", "make_policy", "make_learner", "step_columns", "policy_target_size"]


class MuZeroContextPolicy(MuZeroPolicy):
    """MuZero's network and search; the root latent of each env is carried between steps."""

    def __init__(
        self, cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
    ) -> None:
        super().__init__(cfg, spec, device=device, network=network)
        self.history = EnvHistory(cfg.context.context_length_init)
        self._latent: Optional[torch.Tensor] = None  # [N, *latent] each env's last root latent

    # ------------------------------------------------------------------ per-env state

    def on_weights_loaded(self) -> None:
        super().on_weights_loaded()
        self.history.on_weights_loaded()

    def reset(self, env_ids: np.ndarray) -> None:
        self.history.reset(env_ids)

    def carried_envs(self, num_envs: int, previous_action: Optional[np.ndarray]) -> np.ndarray:
        """[N] bool: the envs whose root this step is ``dynamics(previous root, action)`` (see
        :meth:`lz_tune.algos.history.EnvHistory.carried`)."""
        return self.history.carried(num_envs, previous_action)

    def root_latents(self, obs: np.ndarray, previous_action: Optional[np.ndarray]) -> torch.Tensor:
        """[N, *latent] this step's root latents (and the per-env state updated to them)."""
        num_envs = obs.shape[0]
        carried = self.carried_envs(num_envs, previous_action)
        with torch.inference_mode():
            if not carried.any():
                latent = self.network.representation(self.obs_tensor(obs))
            else:
                assert self._latent is not None  # an env is carried only after a step that stored its root
                latent = torch.empty(
                    (num_envs, *self._latent.shape[1:]), dtype=self._latent.dtype, device=self._latent.device
                )
                rows = torch.from_numpy(np.flatnonzero(carried)).to(self.device)
                action = torch.from_numpy(np.asarray(previous_action)[carried].astype(np.int64)).to(self.device)
                rolled, _ = self.network.dynamics(self._latent.index_select(0, rows), action)
                latent.index_copy_(0, rows, rolled)
                fresh = np.flatnonzero(~carried)
                if fresh.size:
                    encoded = self.network.representation(self.obs_tensor(obs[fresh]))
                    latent.index_copy_(0, torch.from_numpy(fresh).to(self.device), encoded)
        self.history.advance(carried)
        self._latent = latent.clone()  # the ROOT latents (the search never writes into them)
        return latent

    def act_root(self, obs: np.ndarray, previous_action: Optional[np.ndarray]) -> torch.Tensor:
        """The carried root latents of :meth:`root_latents`."""
        return self.root_latents(obs, previous_action)


def make_policy(
    cfg: Config, spec: EnvSpecInfo, *, device: str = "cpu", network: Optional[torch.nn.Module] = None
) -> MuZeroContextPolicy:
    return MuZeroContextPolicy(cfg, spec, device=device, network=network)


def make_learner(cfg: Config, spec: EnvSpecInfo) -> MuZeroLearner:
    """Plain MuZero training; its policies are context policies (their state is unused there)."""
    return MuZeroLearner(cfg, spec, policy_factory=MuZeroContextPolicy)
