"""The interface every policy type implements; shared code only talks to these two classes.

- :class:`Policy` (inference side, lives in collectors, evaluators AND the learner):
  the network plus the tree search; ``act`` turns an env batch into actions and search
  statistics, ``value_targets`` / ``reanalyze`` serve the training targets.
- :class:`Learner` (driver only): a Policy in learn mode, the target network, optimizer,
  LR schedule and ``train_iter``; ``make_batch`` builds the type's training batch from the
  buffer's primitives, ``learn(batch)`` does one update and returns priorities.

A policy type is a module that provides ``make_policy``, ``make_learner``, ``step_columns`` and
``policy_target_size``, registered by name in :mod:`lz_tune.policy_registry` (see
:func:`lz_tune.algos.get_algorithm`).

The hooks a MuZero-family type supplies are declared below, once: the search model
(:class:`SearchModel`: ``search_backend`` -> :class:`SearchRoots`, ``recurrent_inference``, a
:class:`RecurrentFn`), the search rule (:class:`SearchRule`), how a search becomes actions and
stored targets (:class:`Acting`), the training targets (:class:`TargetBuilder`), the policy term
of the loss (:class:`PolicyLoss`) and the unrolled model (:class:`UnrollModel`, returning
:class:`UnrollTerms`). :mod:`lz_tune.algos.muzero` is one implementation; its classes take the
parts as keyword arguments, so a variant is a composition of parts
(:mod:`lz_tune.algos.parts`), not a subclass that patches MuZero.

Stateful inference (history-conditioned types, UniZero KV caches) keeps its state inside the
Policy: :meth:`Policy.reset` is called for the envs whose episode ended (collector) and for
every env at the start of an evaluation; ``act`` receives the previous action of each env;
:meth:`Policy.on_weights_loaded` runs after EVERY weight change (snapshot load in a worker,
optimizer step and target sync in the learner).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional, Protocol, Union

import numpy as np
import torch

from lz_tune.algos.collective import IN_PROCESS, Collective
from lz_tune.buffer import GameBuffer, Reanalysis, SampledIndex, StepColumn, TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvBatch

__all__ = [
    "ActResult",
    "Temperature",
    "Learner",
    "Policy",
    "Reanalysis",
    "StepColumn",
    "RecurrentFn",
    "SearchRoots",
    "SearchModel",
    "SearchRule",
    "Acting",
    "TargetBuilder",
    "PolicyLoss",
    "UnrollTerms",
    "UnrollModel",
    "UpdateHooks",
    "PolicyFactory",
]


Temperature = Union[float, np.ndarray]
"""The visit-count temperature of one act: one for every env, or [N] one per env (0: the most
visited action, ties at random; see :func:`lz_tune.mcts.select_action`)."""


@dataclass(frozen=True)
class ActResult:
    """What one batched search decided for N envs."""

    action: np.ndarray
    """[N] int64 chosen actions ([N, D] float32 in [-1, 1] for continuous actions)."""
    root_value: np.ndarray
    """[N] float32 search values of the roots."""
    pred_value: np.ndarray
    """[N] float32 the network's own value estimates of the roots."""
    policy_target: np.ndarray
    """[N, P] float32 what the policy is trained towards: normalised root visit counts
    (MuZero, P = A), the improved policy (Gumbel MuZero), the visits over the K sampled root
    actions (Sampled MuZero, P = K)."""
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    """The type's extra per-step columns (its ``step_columns``), ``{name: [N, *shape]}``."""


class Policy(abc.ABC):
    """Network + search for one policy type (inference only; no optimizer)."""

    network: torch.nn.Module
    device: torch.device

    @abc.abstractmethod
    def act(
        self,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        previous_action: Optional[np.ndarray] = None,
    ) -> ActResult:
        """Search from every observation of ``batch`` and pick actions.

        A type that searches on the game's true rules reads ``batch.game_states`` instead (the
        envs' game states, which ``openspiel:<game>`` envs give and others leave None:
        ``alphazero``); the collector and the evaluator pass batches as the env made them.

        mode: ``"collect"`` (root noise, exploration with ``temperature``) or ``"eval"`` (no
        noise, greedy).
        previous_action: [N] int64 the action each env took last (-1 right after a reset;
        continuous actions: [N, D] float32, NaN rows right after a reset);
        None when the caller does not track it (stateless types ignore it).
        """

    @abc.abstractmethod
    def value_targets(self, obs: np.ndarray) -> np.ndarray:
        """[K] float32 bootstrap values of stacked observations [K, *obs_shape]."""

    @abc.abstractmethod
    def reanalyze(
        self, obs: np.ndarray, action_mask: np.ndarray, to_play: np.ndarray, rng: np.random.Generator
    ) -> Reanalysis:
        """Fresh search without root noise over K stored observations."""

    def reset(self, env_ids: np.ndarray) -> None:  # noqa: B027 (an optional hook: a no-op by default)
        """Forget per-env inference state of ``env_ids`` [k] int (their episodes ended or an
        evaluation starts). Stateless types have none."""

    def weights(self) -> dict[str, torch.Tensor]:
        """CPU copy of the network weights (a snapshot safe to ship to other processes)."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.network.state_dict().items()}

    def load_weights(self, state: Mapping[str, torch.Tensor]) -> None:
        self.network.load_state_dict(state)
        self.on_weights_loaded()

    def on_weights_loaded(self) -> None:  # noqa: B027 (an optional hook: a no-op by default)
        """Hook for caches that depend on the weights (KV caches, recurrent history); called
        after every weight change. None for MuZero."""


class Learner(abc.ABC):
    """Optimisation state of one policy type (driver process, or one data-parallel rank)."""

    cfg: Config
    policy: Policy
    target_policy: Policy
    train_iter: int
    #: what the update calls for the parts that span data-parallel ranks (the DDP forward,
    #: all-reduces of statistics); a rank injects its own with :meth:`set_collective`
    collective: Collective = IN_PROCESS
    #: True for a learner whose updates run on worker processes (lz_tune.parallel): the driver
    #: then calls :meth:`check_resources` and :meth:`start` before the first update, pipelines
    #: updates with :meth:`start_update` / :meth:`finish_update`, and :meth:`close` at the end
    runs_on_workers: bool = False
    #: True when :meth:`make_batch` only describes the batch and its targets are built when the
    #: update runs, with that update's target network (lz_tune.parallel with
    #: ``learner.targets_on_workers``): the driver may then prepare a batch ahead of an update
    #: that refreshes the target network
    targets_at_update: bool = False

    def set_collective(self, collective: Collective) -> None:
        """Take ``collective`` for every later update (a data-parallel rank's)."""
        self.collective = collective

    def check_resources(self) -> None:  # noqa: B027 (an optional hook: nothing to check in one process)
        """Raise ConfigError when the workers cannot be placed (before any actor starts)."""

    def start(self) -> None:  # noqa: B027 (an optional hook: nothing to start in one process)
        """Start the worker processes (after everything was validated)."""

    def close(self) -> None:  # noqa: B027 (an optional hook: nothing to end in one process)
        """End the worker processes; a second call does nothing."""

    def start_update(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> Any:
        """Begin one update; :meth:`finish_update` returns its result. In one process the update
        runs here (nothing overlaps it)."""
        return self.learn(batch, train_iter=train_iter)

    def finish_update(self, pending: Any) -> tuple[dict[str, float], np.ndarray]:
        """The (logs, priorities) of the update :meth:`start_update` began."""
        return pending

    @abc.abstractmethod
    def make_batch(self, buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator) -> TrainBatch:
        """The type's training batch for the sampled positions, built from the buffer's
        primitives (``buffer.gather_window``, ``buffer.n_step_values``) and the target policy.
        The driver hands it to ``learn`` / ``start_update`` as it is and reads nothing in it (the
        data-parallel learner returns a description of the batch that its ranks build)."""

    @abc.abstractmethod
    def learn(self, batch: TrainBatch, *, train_iter: Optional[int] = None) -> tuple[dict[str, float], np.ndarray]:
        """One update on ``batch``; returns (scalar logs, new priorities [B] float32).

        train_iter: the driver's update count before this update (the driver always passes it,
        as the spec's learner input does); types with schedules in train_iter read it (UniZero),
        the others ignore it. None: the learner's own ``train_iter``."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, target weights, optimizer, schedule, train_iter."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""

    @property
    @abc.abstractmethod
    def learning_rate(self) -> float:
        """The learning rate of the next update."""

    def reanalyze_segments(self, buffer: GameBuffer, segment_ids: np.ndarray, *, rng: np.random.Generator) -> None:
        """Periodic buffer reanalyze: re-search every step of these live segments (`[k]` global
        ids) with the target network and store the new policy targets in the buffer, and the new
        root values where ``cfg.reanalyze_writes_root_values``. Default: a search from each stored
        observation (``target_policy.reanalyze``); types whose search needs the steps before a
        position override it."""
        target = self.target_policy
        buffer.reanalyze_segments(
            segment_ids,
            lambda obs, mask, to_play: target.reanalyze(obs, mask, to_play, rng),
            write_root_values=self.cfg.reanalyze_writes_root_values,
        )

    def snapshot_weights(self) -> Mapping[str, torch.Tensor]:
        """The online network's weights for a snapshot published to collectors and evaluators (a
        data-parallel learner's are put into Ray's object store by rank 0)."""
        return self.policy.weights()

    def target_changes_at(self, train_iter: int) -> bool:
        """Whether the update that takes ``train_iter`` to ``train_iter + 1`` changes the target
        network (what :meth:`make_batch` bootstraps from). True unless the type knows better: a
        data-parallel driver fetches the target weights after such updates and prepares the next
        batch ahead only across updates that leave the target unchanged."""
        return True

    def update_path_notice(self) -> Optional[str]:
        """What ``learner.update_path`` does NOT give this type, in one sentence for the start
        of a run (the driver prints it); None when the type runs the path that was asked for."""
        return None


# ---------------------------------------------------------------------------------------------
# the hooks of a MuZero-family type (what :mod:`lz_tune.algos.muzero` is built from)


class RecurrentFn(Protocol):
    """One simulation's model step for B trees at once (what ``run_search`` calls)."""

    def __call__(self, state: Any, action: np.ndarray, /) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """``state``: the parents' model state (a tensor, a numpy array or a tuple of them, rows =
        the B trees); ``action``: [B] int64 child slots (or [B, D] float32 continuous actions).

        Returns ``(child state, reward [B] float32, value [B] float32, policy logits [B, A])``:
        reward and value as scalars (decoded from the support), in env reward units."""


class SearchRoots(NamedTuple):
    """What a search starts from, for K roots (``search_backend``'s result)."""

    state: Any
    """The roots' model state (rows = K roots), as :class:`RecurrentFn` takes it."""
    value: np.ndarray
    """[K] float32 the network's value of each root."""
    policy_logits: np.ndarray
    """[K, A] float32 prior logits (a sampled type: the raw policy output the sampler reads)."""
    recurrent_fn: RecurrentFn
    """The model step of every simulation."""


class SearchModel(Protocol):
    """The inference side of a MuZero-family Policy, as its search and acting use it."""

    cfg: Any
    device: torch.device

    @property
    def network(self) -> torch.nn.Module:
        """The policy's network (read only here)."""

    def search_backend(self, obs: np.ndarray, root_latent: Any = None) -> SearchRoots:
        """Roots from observations ``[K, *obs_shape]``, or from prepared roots ``root_latent``
        (what ``act_root`` returned: carried per-env state); call under inference mode."""

    def recurrent_inference(self, state: Any, action: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """The torch :class:`RecurrentFn` of the type (CPU engines provide their own)."""

    def strategy(self, *, noise: bool) -> Any:
        """The search rule of :mod:`lz_tune.mcts.strategies` (``noise``: collection)."""

    def act_root(self, obs: np.ndarray, previous_action: Optional[np.ndarray]) -> Any:
        """Roots for acting from per-env state carried across steps, or None (search from ``obs``)."""

    def num_simulations(self, *, collect: bool) -> int:
        """Simulations per search."""

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """``obs`` [K, *obs_shape] as a tensor on the policy's device."""

    def to_numpy(self, t: torch.Tensor) -> np.ndarray:
        """float32 numpy array of ``t`` (a view on the CPU)."""


class SearchRule(Protocol):
    """Builds the search strategy (:mod:`lz_tune.mcts.strategies`) from the config."""

    def __call__(self, cfg: Any, *, noise: bool) -> Any:
        """``noise``: collection (root noise / Gumbel noise); False: evaluation and reanalysis."""


class Acting(Protocol):
    """How a search over a batch becomes actions and stored targets (discrete actions: the
    visit counts over A actions; sampled types: over K sampled actions)."""

    @property
    def continuous_actions(self) -> bool:
        """Whether it can act in continuous (Box) action spaces."""

    def act(
        self,
        policy: SearchModel,
        batch: EnvBatch,
        *,
        mode: str,
        temperature: Temperature,
        rng: np.random.Generator,
        root: Any = None,
    ) -> ActResult:
        """Search from ``root`` (``policy.act_root``'s result) or the observations of ``batch``
        and pick actions (``mode``: ``collect`` or ``eval``)."""

    def reanalyze(
        self,
        policy: SearchModel,
        obs: np.ndarray,
        action_mask: np.ndarray,
        to_play: np.ndarray,
        rng: np.random.Generator,
        root: Any = None,
    ) -> Reanalysis:
        """Fresh search without noise over K stored positions: new policy targets and the
        type's extras (sampled types: the new K root actions)."""


class TargetBuilder(Protocol):
    """The training batch of a learner (MuZero: n-step values bootstrapped by the target network)."""

    def __call__(
        self, learner: "Learner", buffer: GameBuffer, index: SampledIndex, *, rng: np.random.Generator
    ) -> TrainBatch:
        """Targets of the sampled positions, built from the buffer's primitives and
        ``learner.target_policy``."""


class PolicyLoss(Protocol):
    """The policy term of the loss."""

    def targets(self, batch: TrainBatch, device: torch.device) -> Any:
        """What :meth:`loss` compares with, ``[B, U+1, ...]``: a tensor or a tuple of tensors."""

    def loss(self, policy_out: torch.Tensor, target: Any) -> torch.Tensor:
        """[N] loss of the policy output [N, ...] against one step (or the flattened steps) of
        :meth:`targets`."""

    def entropy(self, policy_out: torch.Tensor) -> torch.Tensor:
        """[N] entropy of the policy (its bonus has weight learner.policy_entropy_weight)."""


class UnrollTerms(NamedTuple):
    """The loss terms of one batch, each [B] summed over the unroll (before the weights)."""

    policy: torch.Tensor
    value: torch.Tensor
    reward: torch.Tensor
    """Reward-like term (EfficientZero: the value prefix)."""
    ssl: torch.Tensor
    """Self-supervised consistency term (UniZero: the latent MSE)."""
    entropy: torch.Tensor
    """Policy entropy (a bonus: it is subtracted)."""
    pred_value0: torch.Tensor
    """[B] the predicted root value (no gradient; new priorities are |this - target|)."""


class UnrollModel(Protocol):
    """The training side of a MuZero-family Learner: the model carried through the unroll."""

    def initial_state(self, latent: torch.Tensor) -> Any:
        """Model state carried through the unroll, from the root latent [B, *latent]."""

    def unroll_step(
        self, net: torch.nn.Module, state: Any, action: torch.Tensor, k: int
    ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """Dynamics step k (1..U): ``(next state, next latent, reward-like logits [B, R])``."""

    def unroll_all(
        self, net: torch.nn.Module, latent0: torch.Tensor, actions: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Dynamics steps 1..U from the root latent ``latent0`` [B, *latent] and ``actions`` [B, U]:
        ``(latents, reward_logits)``, U+1 latents (``latent0`` first) and U reward-like logits
        [B, R]. What the default update path unrolls; the same numbers as :meth:`initial_state`
        then :meth:`unroll_step` step by step (MuZero's learner does exactly that), in fewer
        calls where a model allows it (EfficientZero: the LSTM over whole sequences)."""

    def unroll_losses(
        self,
        net: torch.nn.Module,
        obs: torch.Tensor,
        actions: torch.Tensor,
        value_t: torch.Tensor,
        reward_t: torch.Tensor,
        target_policy: Any,
        mask: torch.Tensor,
    ) -> UnrollTerms:
        """Every loss term of the batch: ``obs`` [B, U+1, *obs], ``actions`` [B, U], ``value_t``
        [B, U+1, V] and ``reward_t`` [B, U, R] support targets, ``target_policy`` from
        :meth:`PolicyLoss.targets`, ``mask`` [B, U+1] (1: a real step)."""


class UpdateHooks(Protocol):
    """What :func:`lz_tune.algos.update.unrolled_update` reads of a learner (MuZero's and
    UniZero's): its networks and optimizer, the loss weights and names, and the hooks around
    one update."""

    cfg: Any
    optimizer: torch.optim.Optimizer
    device: torch.device
    train_iter: int
    nonfinite_term: Optional[str]
    """Set by an update skipped for a non-finite loss or gradient: the first such term."""
    collective: Collective
    """The DDP forward and all-reduces of a data-parallel rank; in one process, no-ops."""

    @property
    def policy(self) -> Policy:
        """The learner's policy (its network is the one updated)."""

    @property
    def reward_loss_weight(self) -> float:
        """Weight of the reward-like term (EfficientZero: ``efficientzero.value_prefix_loss_weight``)."""

    @property
    def value_reward_label_smoothing(self) -> float:
        """eps of the value and reward support targets' label smoothing (0: plain two-hot)."""

    @property
    def reward_loss_name(self) -> str:
        """Log name of the reward-like term (``loss/reward``, ``loss/value_prefix``)."""

    @property
    def ssl_loss_name(self) -> str:
        """Log name of the SSL term (``loss/ssl``, UniZero's ``loss/latent``)."""

    @property
    def learning_rate(self) -> float:
        """The learning rate of the next update."""

    def unroll_losses(
        self,
        net: torch.nn.Module,
        obs: torch.Tensor,
        actions: torch.Tensor,
        value_t: torch.Tensor,
        reward_t: torch.Tensor,
        target_policy: Any,
        mask: torch.Tensor,
    ) -> UnrollTerms:
        """Every loss term of the batch (see :meth:`UnrollModel.unroll_losses`)."""

    def reward_targets(self, batch: TrainBatch) -> torch.Tensor:
        """[B, U] scalar targets of the reward-like head."""

    def policy_targets(self, batch: TrainBatch) -> Any:
        """The policy targets ``[B, U+1, ...]`` (a tensor or a tuple) ``unroll_losses`` reads."""

    def policy_entropy_weight_now(self) -> Any:
        """Weight of the entropy bonus of this update, asked once right after its forward pass."""

    def extra_losses(self, batch: TrainBatch) -> dict[str, tuple[float, torch.Tensor]]:
        """``{log name: (weight, [B] term)}``: the type's terms of the forward pass that just ran."""

    def run_forward(self, forward: Callable[[], Any]) -> Any:
        """Run the loss closure (in-process, or through a data-parallel module)."""

    def before_optimizer_step(self) -> None:
        """Between the backward pass and the gradient clipping + optimizer step."""

    def update_target(self) -> None:
        """After every update: the target network's rule (hard copy, momentum average)."""


PolicyFactory = Callable[..., Policy]
"""``factory(cfg, spec, device=..., network=None) -> Policy``: how a learner builds its policies."""
