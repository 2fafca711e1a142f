"""Typed experiment configuration.

One frozen dataclass per concern (env, model, mcts, buffer, learner, collector, evaluator,
async_pipeline), gathered in :class:`Config`. Every field has a docstring-style comment and a
default; values are checked when the object is built, so a wrong key or value fails with a
:class:`ConfigError` naming the dotted key before any env or actor starts.

Three ways to change a config::

    cfg = Config()                                            # defaults
    cfg = Config.from_dict({"learner": {"learning_rate": 3e-3}})
    cfg = cfg.with_overrides(["learner.learning_rate=3e-3", "mcts.num_simulations=25"])
    cfg = cfg.with_updates({"learner.learning_rate": 3e-3})   # what Tune search spaces use

A zoo config is a Python module with a ``make_config() -> Config`` function.

**Policy types' own sections.** This module holds only the sections every type reads. A type
with keys of its own declares them in a :class:`Section` subclass next to its algorithm
(``lz_tune/algos/unizero_config.py``: ``UniZeroConfig``, ``section_name = "unizero"``) and
registers the class with the type (``register_policy_type(..., config_section=...)``,
:mod:`lz_tune.policy_registry`). A :class:`Config` holds the registered sections its
``policy_type`` calls for (:func:`lz_tune.policy_registry.config_section_classes`: every built-in
type's, then those a type registered elsewhere reads) in one typed field, :attr:`Config.sections`,
built at construction; nothing else about them is special:

- attribute access as for a shared section: ``cfg.unizero.num_layers`` (``Config.__getattr__``
  looks the name up in ``sections``; ``cfg.section(UniZeroConfig)`` is the same, typed);
- dicts, ``config.json`` and Tune configs key them by name at the top level, as the shared
  sections (``{"unizero": {"num_layers": 4}}``, ``unizero.num_layers=4``), so :meth:`Config.to_dict`
  / :meth:`Config.from_dict` round-trip and ``config.json`` files of earlier runs load;
- the same checks (types, ``validate``, did-you-mean on a wrong key naming the dotted key) and
  the same documentation (``python -m lz_tune config`` reads the field docstrings of any section).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Optional, Sequence

from lz_tune.policy_registry import (
    POLICY_TYPES,  # noqa: F401  (re-exported)
    UnknownConfigSectionError,  # noqa: F401  (re-exported)
    UnknownPolicyTypeError,
    config_section_classes,
    lookup_policy_type,
)


class ConfigError(ValueError):
    """A config key or value is wrong. The message starts with the dotted key."""


# ----------------------------------------------------------------------------------------------
# generic checking


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Return ``value`` checked against the annotation ``tp`` (ints are accepted for floats,
    lists for tuples). Raises ConfigError naming ``key``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(key, value, arg)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{key}: {value!r} is not {_type_name(tp)}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key}: {value!r} is not one of {list(args)}")
        return value
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            raise ConfigError(f"{key}: expected a tuple, got {type(value).__name__} {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{key}: expected {len(args)} items, got {len(value)}")
        return tuple(_coerce(f"{key}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {type(value).__name__} {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{key}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {type(value).__name__} {value!r}")
        if not math.isfinite(float(value)):  # (inf and nan would pass or fail every comparison)
            raise ConfigError(f"{key}: must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {type(value).__name__} {value!r}")
        return value
    raise TypeError(f"unsupported annotation {tp!r} for {key}")  # programming error


class Section:
    """Base of every config section: subclass it as a frozen dataclass whose fields are the
    section's keys, each with a default and a docstring below it (``python -m lz_tune config``
    prints it), and set ``section_name`` (its key in the config: ``learner``, ``unizero``)::

        @dataclass(frozen=True)
        class ToyConfig(Section):
            \"\"\"The toy type's keys (first line: the section's title).\"\"\"
            section_name = "toy"
            key: int = 1
            \"\"\"How many toys (>= 1).\"\"\"

            def validate(self) -> None:
                self.require_positive("key")

    At construction every field is checked against its annotation (``int``, ``float``, ``bool``,
    ``str``, ``Optional``, ``Literal``, ``tuple``; ints pass for floats, lists for tuples), then
    :meth:`validate` runs; a bad value raises :class:`ConfigError` naming the dotted key
    (``toy.key: must be > 0 (got 0)``). The sections of :class:`Config` are defined here; a
    policy type's own section lives next to its algorithm and is registered with the type
    (:mod:`lz_tune.policy_registry`)."""

    section_name: ClassVar[str] = ""
    """The section's key in the config ("" for :class:`Config` itself)."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.metadata.get(_NOT_A_KEY):
                continue
            key = self.dotted_key(f.name)
            if f.name in _SECTION_API:
                raise TypeError(f"{key}: a config key may not be named like a Section method")  # programming error
            value = getattr(self, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                if not isinstance(value, hints[f.name]):
                    raise ConfigError(f"{key}: expected a {hints[f.name].__name__} section")
                continue
            object.__setattr__(self, f.name, _coerce(key, value, hints[f.name]))
        self.validate()

    def validate(self) -> None:
        """The section's value rules beyond the types (override; raise through :meth:`require`)."""

    def dotted_key(self, name: str) -> str:
        """``name`` under the section: ``"key"`` -> ``"toy.key"``."""
        return f"{self.section_name}.{name}" if self.section_name else name

    def require(self, ok: bool, name: str, why: str) -> None:
        """Raise ConfigError ``"<section>.<name>: <why> (got <value>)"`` unless ``ok``."""
        if not ok:
            raise ConfigError(f"{self.dotted_key(name)}: {why} (got {getattr(self, name)!r})")

    def require_positive(self, *names: str) -> None:
        """Each named key is > 0 (or None)."""
        for n in names:
            v = getattr(self, n)
            if v is not None:
                self.require(v > 0, n, "must be > 0")

    def require_non_negative(self, *names: str) -> None:
        """Each named key is >= 0 (or None)."""
        for n in names:
            v = getattr(self, n)
            if v is not None:
                self.require(v >= 0, n, "must be >= 0")

    def require_fraction(self, *names: str) -> None:
        """Each named key is in [0, 1]."""
        for n in names:
            self.require(0.0 <= getattr(self, n) <= 1.0, n, "must be in [0, 1]")


_SECTION_API = frozenset(name for name in vars(Section) if not name.startswith("_"))
"""Method names a section's key may not take (its default would hide the method)."""

_NOT_A_KEY = "lz_tune.config.not_a_key"
"""Field metadata marking a dataclass field that is not a config key (:attr:`Config.sections`)."""


# ----------------------------------------------------------------------------------------------
# sections


@dataclass(frozen=True)
class EnvConfig(Section):
    """Which environment, how many copies, and Atari preprocessing."""

    section_name = "env"
    env_id: str = "CartPole-v1"
    """Any gymnasium id with a Discrete action space (``CartPole-v1``), an ALE id (``ALE/Pong-v5``), or
    ``openspiel:<game>`` for a two-player OpenSpiel board game (``openspiel:tic_tac_toe``)."""
    collector_env_num: int = 8
    """Envs stepped together by one collector (one search batch)."""
    evaluator_env_num: int = 3
    """Envs stepped together by one evaluator."""
    frame_stack: int = 1
    """Frames stacked into one observation (Atari: 4). The buffer stores each frame once."""
    max_episode_steps: Optional[int] = None
    """Cap on env steps per episode (None: the env's own limit)."""
    frame_skip: int = 4
    """Atari: emulator frames per env step (max-pooled over the last two)."""
    image_size: int = 64
    """Atari: side of the square resized frame (64 or 96)."""
    grayscale: bool = True
    """Atari: one gray channel per frame, else RGB."""
    noop_max: int = 30
    """Atari: up to this many no-op actions after reset."""
    episodic_life: bool = True
    """Atari, collection only: a lost life ends a training episode (the game goes on)."""
    clip_rewards: bool = True
    """Atari, collection only: rewards clipped to {-1, 0, 1}. Evaluation always reports raw scores."""
    repeat_action_probability: float = 0.0
    """Atari sticky actions (0 as in LightZero; 0.25 is the ALE v5 default)."""
    action_repeat: int = 1
    """Gymnasium envs other than Atari and 2048: each agent step plays its action for this many env
    steps and returns the summed reward (an episode end inside stops it early); returns stay in the
    env's own units, episode lengths count agent steps. Atari: ``frame_skip``."""
    openspiel_planes: bool = False
    """OpenSpiel games (``env_id="openspiel:<game>"``): observations as ``[C + 2, H, W]`` planes (the
    game's tensor and one to-play plane per player; for ``model.kind=conv``) instead of a flat
    vector (for ``mlp``)."""
    observation_layout: Literal["auto", "chw", "hwc"] = "auto"
    """Gymnasium envs with image observations: ``chw`` (channels first, ``[C, H, W]``) or ``hwc``
    (channels last, ``[H, W, C]``, as MinAtar and raw ALE frames); served channels-first to the
    network either way. ``auto``: what the env declares (MinAtar: ``hwc``; any env through
    ``metadata["observation_layout"]``), else the shape when it is unambiguous (``[84, 84, 3]``,
    ``[4, 84, 84]``); an ambiguous shape such as ``[10, 10, 10]`` is an error naming this key."""
    import_modules: tuple[str, ...] = ()
    """Code that registers the env with gymnasium, run in every process that makes or probes an env
    (the driver, each collector / evaluator actor, Tune trials, learner workers) before it does:
    ``"package.module"`` imports the module, ``"package.module:function"`` also calls
    ``function()`` once per process, e.g. ``("minatar.gym:register_envs",)``. (lz_tune registers
    ``MinAtar/*`` and ALE ids by itself.)"""

    def validate(self) -> None:
        self.require(bool(self.env_id.strip()), "env_id", "must not be empty")
        for i, name in enumerate(self.import_modules):
            module, _, function = name.partition(":")
            if (
                not module.strip()
                or not all(part.isidentifier() for part in module.split("."))
                or (function and not function.isidentifier())
            ):
                raise ConfigError(
                    f"env.import_modules[{i}]: {name!r} is not 'package.module' or 'package.module:function'"
                )
        self.require_positive(
            "collector_env_num", "evaluator_env_num", "frame_stack", "max_episode_steps", "frame_skip", "action_repeat"
        )
        self.require(self.image_size >= 32, "image_size", "must be >= 32")
        self.require_non_negative("noop_max")
        self.require_fraction("repeat_action_probability")


@dataclass(frozen=True)
class ModelConfig(Section):
    """Network shapes. The kind is picked from the observation unless given."""

    section_name = "model"
    kind: Literal["auto", "mlp", "conv", "conv_mlp"] = "auto"
    """``mlp`` for vector observations (any other observation is flattened), ``conv`` for images (MuZero's
    conv network: convolutional latent, dynamics and heads); ``conv_mlp`` for small images: a conv stem
    (``num_channels``, ``num_res_blocks``, ``downsample``) in front of the MLP network, whose dynamics
    and prediction work on a vector latent (the search's numba engine, an update without convolutions
    in the unroll; MinAtar). ``auto``: ``conv`` for 3-D observations, else ``mlp``.
    Types with their own networks: ``unizero`` / ``sampled_unizero`` follow the observation (a conv
    encoder for images); ``stochastic_muzero`` takes vectors only."""
    latent_dim: int = 128
    """MLP: size of the latent state."""
    hidden_sizes: tuple[int, ...] = (128,)
    """MLP: hidden layers of each of representation / dynamics / prediction."""
    num_channels: int = 64
    """Conv: channels of the residual tower."""
    num_res_blocks: int = 1
    """Conv: residual blocks per network."""
    downsample: bool = True
    """Conv: downsample images by 16 in the representation network (as MuZero on Atari)."""
    value_support_size: int = 300
    """Value head has 2S+1 bins over h(value) (300 -> 601 bins)."""
    reward_support_size: int = 300
    """Reward head has 2S+1 bins over h(reward)."""
    projection_dim: int = 256
    """Width of the self-supervised consistency projection (SimSiam projector output)."""
    projection_hidden_dim: int = 256
    """Hidden width of the SimSiam projector (its prediction head is 64 wide)."""
    layer_norm: bool = False
    """MLP: LayerNorm after every hidden layer."""

    def validate(self) -> None:
        self.require_positive(
            "latent_dim",
            "num_channels",
            "value_support_size",
            "reward_support_size",
            "projection_dim",
            "projection_hidden_dim",
        )
        self.require_non_negative("num_res_blocks")
        self.require(all(h > 0 for h in self.hidden_sizes), "hidden_sizes", "every size must be > 0")


@dataclass(frozen=True)
class MCTSConfig(Section):
    """Tree search constants (MuZero appendix values by default)."""

    section_name = "mcts"
    num_simulations: int = 50
    """Simulations per search during collection (and reanalyze)."""
    eval_num_simulations: Optional[int] = None
    """Simulations per search during evaluation (None: same as num_simulations)."""
    pb_c_base: float = 19652.0
    """pUCT c2."""
    pb_c_init: float = 1.25
    """pUCT c1."""
    root_dirichlet_alpha: float = 0.3
    """Dirichlet concentration of the root noise (collection only)."""
    root_noise_weight: float = 0.25
    """Mixing weight of the root noise (0 disables it)."""
    value_delta_max: float = 0.01
    """Minimum spread used by the per-tree min-max value normalisation."""
    discount_factor: float = 0.997
    """gamma, used by the search AND the n-step value targets."""
    inference: Literal["auto", "torch"] = "auto"
    """Network calls inside the search. ``auto``: CPU float32 networks the engines know run through
    them (numpy BLAS + numba on the same weights: the MuZero MLP, ``mlp_inference.py``; the MLP
    EfficientZero, stochastic and GRU-history networks; UniZero's world model with any encoder,
    ``transformer_inference.py``), everything else (conv MuZero-family networks, GPU networks)
    through torch. ``torch``: always torch (the plain path, what the engines are checked against)."""

    def validate(self) -> None:
        self.require_positive(
            "num_simulations", "eval_num_simulations", "pb_c_base", "root_dirichlet_alpha", "value_delta_max"
        )
        self.require_non_negative("pb_c_init")
        self.require_fraction("root_noise_weight")
        self.require(0.0 < self.discount_factor <= 1.0, "discount_factor", "must be in (0, 1]")


@dataclass(frozen=True)
class BufferConfig(Section):
    """Game segments, prioritized replay and reanalyze."""

    section_name = "buffer"
    replay_buffer_size: int = 1_000_000
    """Capacity in transitions (owned positions); the oldest segments are evicted past it."""
    game_segment_length: int = 200
    """L: positions per game segment."""
    num_unroll_steps: int = 5
    """U: dynamics unroll steps per sample."""
    td_steps: int = 5
    """T: n of the n-step value target."""
    use_priority: bool = True
    """Prioritized replay (else uniform)."""
    priority_prob_alpha: float = 0.6
    """PER alpha: P(i) ~ p_i^alpha."""
    priority_prob_beta: float = 0.4
    """PER beta of the importance-sampling weights."""
    use_max_priority_for_new_data: bool = True
    """New positions get the max priority seen so far; else |search value - predicted value|."""
    reanalyze_ratio: float = 0.0
    """Share of each batch whose policy targets are recomputed by a search with the target network."""
    buffer_reanalyze_freq: float = 0.0
    """Periodic buffer reanalyze (LightZero's). >= 1: spread through each collect budget of u
    updates, before the update at budget progress p whenever p % max(1, u // freq) == 0 (so
    int(u // max(1, u // freq)) rounded up times per budget); < 1: once every round(1/freq)
    collects, when the collect is pushed (LightZero computes int(1 // freq), which gives 9
    for 1/10); 0 disables. Each needs N // num_unroll_steps > int(reanalyze_batch_size /
    reanalyze_partition) positions in the buffer, else it is skipped."""
    reanalyze_batch_size: int = 160
    """Sequences of num_unroll_steps steps re-searched per periodic buffer reanalyze, taken as
    whole segments of game_segment_length // num_unroll_steps sequences each (LightZero's
    count, ``reanalysis.segments_for_sequences``)."""
    reanalyze_partition: float = 0.75
    """Periodic reanalyze picks segments among this oldest fraction of the buffer, the least
    often reanalysed first (probability ∝ exp(-100 c / P) for a segment reanalysed c times
    among the P candidates)."""
    reanalyze_writes_root_values: Optional[bool] = None
    """Whether a periodic buffer reanalyze also replaces the stored root (search) values of the
    steps it re-searches (it always replaces their policy targets). Stored root values are read
    by ``use_root_value`` value targets. None: as LightZero's buffer of the policy type does
    (efficientzero, sampled_efficientzero, sampled_muzero, sampled_unizero replace them; muzero,
    gumbel_muzero, stochastic_muzero, unizero and the context types keep the values of the
    collecting search); see ``Config.reanalyze_writes_root_values``."""
    mini_infer_size: int = 2048
    """Chunk size of target-network inference when building value targets."""
    use_root_value: bool = False
    """Bootstrap value targets from stored search values instead of the target network."""
    save_in_checkpoint: bool = True
    """Save the replay buffer with every checkpoint (segments, priorities, clocks, reanalyze
    counts), so a resumed run or a restored Tune trial trains on its old experience at once.
    Incremental: a save writes only the rows pushed since the previous one, compressed, into the
    run's chunk store (``lz_tune.pipeline.buffer_checkpoint``); False: checkpoints hold no
    buffer and a restore starts with an empty one."""
    checkpoint_max_gb: float = 16.0
    """A checkpoint leaves the buffer out (and says so in the log) while the buffer's arrays hold
    more than this many GB (raw, before compression; Pong frames compress ~20-50x); 0: never."""
    checkpoint_chunk_mb: float = 1.0
    """Raw size of one chunk file of a buffer checkpoint (at most 16384 rows): a save rewrites
    the chunks at the two ends of each table; smaller means finer increments and more files."""

    def validate(self) -> None:
        self.require_positive(
            "replay_buffer_size", "game_segment_length", "td_steps", "reanalyze_batch_size", "mini_infer_size"
        )
        self.require_non_negative("num_unroll_steps", "buffer_reanalyze_freq", "checkpoint_max_gb")
        self.require(self.checkpoint_chunk_mb * 2**20 >= 1, "checkpoint_chunk_mb", "must be >= 1 byte (1e-6 MB)")
        self.require_fraction("priority_prob_alpha", "priority_prob_beta", "reanalyze_ratio")
        self.require(0.0 < self.reanalyze_partition <= 1.0, "reanalyze_partition", "must be in (0, 1]")
        if self.num_unroll_steps + self.td_steps > self.game_segment_length:
            # names both keys: either one may be the one that is too long
            raise ConfigError(
                f"buffer.num_unroll_steps / buffer.td_steps: num_unroll_steps + td_steps ({self.num_unroll_steps} "
                f"+ {self.td_steps}) must be <= buffer.game_segment_length ({self.game_segment_length}): a segment "
                "is padded with that many steps of the next one"
            )


@dataclass(frozen=True)
class LearnerConfig(Section):
    """Optimisation, losses and the replay ratio."""

    section_name = "learner"
    batch_size: int = 256
    """Samples per update."""
    optim_type: Literal["sgd", "adam", "adamw"] = "sgd"
    """Optimizer."""
    learning_rate: float = 0.2
    """Initial learning rate."""
    piecewise_decay_lr_scheduler: bool = True
    """LR x1, then x0.1 after 50% and x0.01 after 100% of threshold_training_steps_for_final_lr."""
    threshold_training_steps_for_final_lr: int = 50_000
    """Updates until the final learning rate of the piecewise schedule."""
    momentum: float = 0.9
    """SGD momentum."""
    weight_decay: float = 1e-4
    """L2 (SGD/Adam) or decoupled (AdamW) weight decay."""
    grad_clip_value: float = 10.0
    """Global gradient-norm clip."""
    max_nonfinite_updates_in_a_row: int = 20
    """An update whose loss or gradient norm is NaN or infinite is skipped (weights and their
    BatchNorm statistics unchanged, priorities not written) and counted
    (``learners/<type>/nonfinite_updates``); this many in a row stop the run with an error naming
    the first non-finite loss term (the checkpoints written so far hold finite weights)."""
    target_update_freq: int = 100
    """Hard copy of the learner weights into the target network every this many updates."""
    value_loss_weight: float = 0.25
    """Weight of the value cross-entropy."""
    reward_loss_weight: float = 1.0
    """Weight of the reward cross-entropy."""
    policy_loss_weight: float = 1.0
    """Weight of the policy cross-entropy."""
    ssl_loss_weight: float = 2.0
    """Weight of the self-supervised latent consistency loss (0 disables it)."""
    policy_entropy_weight: float = 0.0
    """Entropy bonus on the predicted policy."""
    update_per_collect: Optional[int] = None
    """Learner updates per collect; None derives it from replay_ratio."""
    replay_ratio: float = 0.25
    """Updates per collected transition when update_per_collect is None."""
    train_start_after_envsteps: int = 0
    """Cold start: training starts once the env steps EXCEED this and the buffer holds MORE
    than learner.batch_size positions (LightZero's rule)."""
    device: str = "cpu"
    """Torch device of the learner (``cpu``, ``cuda``, ``cuda:1``). Under Tune, ``cuda`` needs
    ``driver_num_gpus`` > 0 (the trial's driver bundle then reserves the GPU), and a reserved GPU
    needs ``cuda`` here: the two are checked against each other."""
    precision: Literal["float32", "bfloat16"] = "float32"
    """Arithmetic of the learner's forward pass and losses. ``bfloat16``: mixed precision with
    torch.autocast (matrix products and convolutions in bfloat16, weights, optimizer state,
    softmaxes and loss sums in float32); pays on GPUs with bfloat16 tensor cores (and CPUs with
    AMX), costs accuracy in the last digits. Collectors and evaluators always run float32."""
    num_threads: int = 1
    """torch intra-op threads of the learner process."""
    update_path: Literal["fused", "eager"] = "fused"
    """How an update is computed. ``fused``: only the dynamics runs step by step; prediction,
    the SSL projector and the loss terms run once over all unroll steps, and the optimizer uses
    torch's fused kernel (~2x the updates/s of eager on CartPole). ``eager``: the plain
    path, every step on its own and the optimizer's per-parameter loop. Both compute the same
    losses, gradients and priorities (to float rounding; tests/test_learner_paths.py)."""
    num_workers: int = 1
    """Data-parallel learner workers. 1: the update runs in the driver process (no Ray needed).
    N >= 2: every update runs on N Ray actors with PyTorch DDP (gloo on CPU, NCCL on GPU);
    the driver still samples the global batch of ``batch_size``, splits it into N shards, and
    writes back every shard's priorities (lz_tune/parallel/)."""
    worker_num_cpus: float = 1.0
    """CPUs reserved per learner worker (num_workers >= 2; part of each Tune trial's bundles)."""
    worker_num_gpus: float = 0.0
    """GPUs per learner worker (num_workers >= 2): 0 (CPU ranks, gloo) or 1 (one whole GPU per rank,
    NCCL; more GPUs: more workers). 1 needs ``learner.device=cuda``; each rank then runs on its own
    GPU whatever index ``learner.device`` names."""
    sync_batchnorm: bool = False
    """num_workers >= 2: BatchNorm layers use the statistics of the whole global batch (all-reduced
    over the workers, as one process would) instead of each worker's shard (the default, as
    LightZero's DDP). Needs a network with BatchNorm."""
    targets_on_workers: bool = True
    """num_workers >= 2: each rank builds its own shard's targets (bootstrap values with its
    copy of the target network, reanalysed rows) on its own device, from a read-only replica
    of the buffer that follows the driver's changes (every pushed segment's frames travel once,
    through Ray's object store); the driver sends each rank only the sampled indices. False: the
    driver builds every batch's targets on its CPU mirror of the target network and sends each
    rank its shard's observations (the replicas' memory saved, the driver on every update's
    critical path)."""
    prepare_ahead_with_lag: bool = False
    """num_workers >= 2: sample and build the next batch while the workers compute the current
    update even when that changes the result: the next sample is drawn before the current
    update's priorities are written back (PER one update late). Off: batches are prepared ahead
    only where nothing changes (no PER; with ``targets_on_workers=False`` also a target network
    unchanged by the update in flight)."""

    def validate(self) -> None:
        self.require_positive(
            "batch_size",
            "learning_rate",
            "threshold_training_steps_for_final_lr",
            "grad_clip_value",
            "target_update_freq",
            "update_per_collect",
            "replay_ratio",
            "num_threads",
            "num_workers",
            "worker_num_cpus",
            "max_nonfinite_updates_in_a_row",
        )
        self.require_non_negative("worker_num_gpus")
        self.require(
            self.worker_num_gpus in (0, 1),
            "worker_num_gpus",
            "each learner worker drives 0 or 1 whole GPU (DDP: one process per device; two ranks on one "
            "GPU make NCCL fail); for more GPUs raise learner.num_workers",
        )
        self.require(
            self.num_workers <= self.batch_size,
            "num_workers",
            f"{self.num_workers} workers cannot share a global batch of learner.batch_size="
            f"{self.batch_size} (each needs at least one sample)",
        )
        self.require(
            not self.sync_batchnorm or self.num_workers >= 2,
            "sync_batchnorm",
            "synchronises BatchNorm over learner workers: needs learner.num_workers >= 2",
        )
        self.require(
            self.worker_num_gpus == 0 or self.device.startswith("cuda"),
            "worker_num_gpus",
            f"reserves GPUs for the learner workers, but learner.device="
            f"{self.device} leaves them idle; set learner.device=cuda",
        )
        self.require(
            self.num_workers == 1 or not self.device.startswith("cuda") or self.worker_num_gpus > 0,
            "device",
            f"with learner.num_workers={self.num_workers}: the workers "
            "run the update, set learner.worker_num_gpus (e.g. 1) so each gets a GPU",
        )
        self.require_non_negative(
            "weight_decay",
            "value_loss_weight",
            "reward_loss_weight",
            "policy_loss_weight",
            "ssl_loss_weight",
            "policy_entropy_weight",
            "train_start_after_envsteps",
        )
        self.require_fraction("momentum")
        self.require(
            self.device == "cpu" or self.device.startswith(("cuda", "mps")), "device", "must be cpu, cuda[:N] or mps"
        )


@dataclass(frozen=True)
class CollectorConfig(Section):
    """Acting during collection."""

    section_name = "collector"
    temperature: float = 0.25
    """Visit-count temperature for action choice (fixed unless manual_temperature_decay)."""
    manual_temperature_decay: bool = False
    """Temperature 1.0 / 0.5 / 0.25 before 50% / 75% / after of threshold_training_steps_for_final_temperature."""
    threshold_training_steps_for_final_temperature: int = 100_000
    """Learner updates at which the decayed temperature reaches 0.25."""
    temperature_moves: Optional[int] = None
    """AlphaZero's opening temperature: only the first ``temperature_moves`` steps of each episode
    (the env's step counter, both players' moves in a board game) are sampled at the temperature;
    later steps play the most visited action, ties at random. Self-play then varies its openings
    while the rest of each game, and so each position's outcome target, is the search's best
    play. None: every step is sampled. Types whose search chooses the action itself (Gumbel root
    selection) ignore it, as they ignore the temperature."""
    segments_per_collect: Optional[int] = None
    """A collect returns once this many segments are complete (None: one per env)."""
    eps_greedy_start: float = 0.0
    """Epsilon-greedy exploration: probability that a collect step plays a uniformly random legal
    action (continuous: uniform in [-1, 1]^D) instead of the searched one, at env step 0. The step
    keeps the search's policy target and root value. 0 (with eps_greedy_end 0) disables it."""
    eps_greedy_end: float = 0.0
    """Epsilon once eps_greedy_decay_env_steps env steps (all collectors together) are collected."""
    eps_greedy_decay_env_steps: int = 100_000
    """Env steps over which epsilon falls linearly from eps_greedy_start to eps_greedy_end."""
    eps_greedy_max_duration: int = 1
    """Temporally extended epsilon-greedy: a random action is held for n steps, n ~ zeta(2) on
    1..eps_greedy_max_duration (Dabney et al. 2021); 1: plain epsilon-greedy."""

    def validate(self) -> None:
        self.require_positive(
            "temperature",
            "threshold_training_steps_for_final_temperature",
            "segments_per_collect",
            "eps_greedy_decay_env_steps",
            "eps_greedy_max_duration",
        )
        self.require_non_negative("temperature_moves")
        self.require_fraction("eps_greedy_start", "eps_greedy_end")


@dataclass(frozen=True)
class EvaluatorConfig(Section):
    """Evaluation and stop criteria."""

    section_name = "evaluator"
    eval_freq: int = 1000
    """Evaluate every this many learner updates (and once training stops)."""
    n_evaluator_episode: int = 8
    """Episodes per evaluation."""
    stop_value: Optional[float] = None
    """Stop once the mean evaluation return reaches this."""
    opponent: Literal["random", "mcts", "minimax"] = "random"
    """Two-player games (``openspiel:<game>``): the OpenSpiel bot the agent plays in evaluation,
    its seat alternating game by game (half the games as first player); the return is the
    agent's (+1 win, 0 draw, -1 loss), and win / draw / loss rates are reported. ``random``: a
    uniformly random legal move; ``mcts``: OpenSpiel's MCTS bot (random rollouts, MCTS-Solver);
    ``minimax``: a perfect player (alpha-beta search to the end of the game, or to
    opponent_minimax_depth plies), drawing at random among equally good moves."""
    opponent_mcts_simulations: int = 1000
    """Simulations per move of the ``mcts`` opponent."""
    opponent_mcts_uct_c: float = 2.0
    """UCT exploration constant of the ``mcts`` opponent."""
    opponent_mcts_rollouts: int = 1
    """Random rollouts per leaf evaluation of the ``mcts`` opponent."""
    opponent_minimax_depth: Optional[int] = None
    """Plies the ``minimax`` opponent searches (None: to the end of the game, perfect play; fine
    for tic-tac-toe, connect four needs a limit such as 4). Positions at the limit that are not
    over score 0, as a draw."""
    stop_loss_rate: Optional[float] = None
    """Two-player games: also stop once an evaluation's loss rate against the opponent is at most
    this (0.0: no lost game); None: only stop_value stops."""
    stop_confirm_episodes: Optional[int] = None
    """Confirm a stop: when an evaluation meets stop_value or stop_loss_rate, play this many more
    episodes (other env seeds) with the same weights, and stop only if all the episodes together
    meet it (the evaluation then reports all of them). A short evaluation that meets a strict
    condition by luck (no lost game in 100 while 1% are lost) no longer ends the run, and
    evaluations stay cheap until one looks like a stop. None: no confirmation."""

    max_failed_saves_in_a_row: int = 3
    """A checkpoint save that fails for lack of disk space (ENOSPC, EDQUOT) is skipped with a
    warning, the previous checkpoint staying valid, and tried again at the next evaluation; this
    many in a row stop the run cleanly (workers closed, exit code 1)."""

    def validate(self) -> None:
        self.require_positive(
            "eval_freq",
            "n_evaluator_episode",
            "max_failed_saves_in_a_row",
            "opponent_mcts_simulations",
            "opponent_mcts_rollouts",
            "opponent_minimax_depth",
            "stop_confirm_episodes",
        )
        self.require_non_negative("opponent_mcts_uct_c")
        if self.stop_loss_rate is not None:
            self.require_fraction("stop_loss_rate")


@dataclass(frozen=True)
class AsyncPipelineConfig(Section):
    """The async segment pipeline (docs/async_pipeline.md). Ignored unless ``enabled``."""

    section_name = "async_pipeline"
    enabled: bool = False
    """Run collectors / evaluators as Ray actors that overlap the learner."""
    num_collector_actors: int = 1
    """Collector actors (each owns env.collector_env_num envs)."""
    num_evaluator_actors: int = 1
    """Evaluator actors."""
    max_collect_inflight: Optional[int] = None
    """Collect tasks in flight (None: num_collector_actors). Above num_collector_actors, each
    actor holds up to ceil(max_collect_inflight / num_collector_actors) collects: the extra
    ones wait in its mailbox and start the moment the previous one ends, without waiting for
    the driver (whose reaction time is up to one learner update); each uses the newest snapshot
    at its launch. Launches also wait while the budget queue is at max_train_budget_queue_size
    (once trainable); collects in flight do not count toward that cap, as in LightZero."""
    max_eval_inflight: int = 1
    """Concurrent eval tasks."""
    max_train_chunk_steps: int = 4
    """Learner updates in a row before the driver polls actor results again."""
    weight_sync_interval: int = 1
    """Minimum train_iter gap between two published weight snapshots."""
    max_policy_lag: int = 0
    """Largest tolerated collector policy lag at collect launch; exceeding it forces a publish
    (negative: no bound)."""
    max_train_budget_queue_size: Optional[int] = None
    """Backpressure: no collect is launched while this many train budgets are queued (None:
    2 * num_collector_actors); active once trainable. Collects in flight do not count, so the
    queue can pass the cap by the budgets of the collects that were running when it filled."""
    eval_at_start: bool = False
    """Evaluate the initial weights before training."""
    collector_num_cpus: float = 1.0
    """Ray CPUs per collector actor (fractional allowed)."""
    evaluator_num_cpus: float = 1.0
    """Ray CPUs per evaluator actor."""
    collector_num_gpus: float = 0.0
    """Ray GPUs per collector actor."""
    evaluator_num_gpus: float = 0.0
    """Ray GPUs per evaluator actor."""
    buffer_stats_interval: int = 100
    """Log buffer statistics every this many learner updates."""
    poll_interval_s: float = 0.1
    """Driver sleep when there is nothing to train (seconds)."""
    shutdown_timeout_s: float = 30.0
    """Actors that do not close within this are killed (seconds)."""
    collect_timeout_s: Optional[float] = None
    """A collect not back this many seconds after its launch is given up: its actor is killed
    and restarted (counted in actor_restarts, against max_actor_restarts) with the collects
    queued on it, and nothing of them is pushed. None: wait forever. Set it well above the
    slowest collect (a collect queued behind another on one actor waits for that one too)."""
    eval_timeout_s: Optional[float] = None
    """An evaluation not back this many seconds after its launch is given up (its actor killed
    and restarted, counted as for collects; the run goes on, and its next evaluation is launched
    when due). None: wait forever."""
    ray_local_mode: bool = False
    """Run the actor code in-process instead of in Ray workers (Ray 2.60 removed local_mode)."""
    max_actor_restarts: int = 100
    """Actor restarts tolerated per run before the run fails."""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    """How a Tune trial's placement group (driver bundle + one bundle per actor) is laid out over
    the cluster's nodes (Ray's strategies). ``PACK``: as few nodes as possible (the driver and its
    actors share a node when they fit). ``SPREAD``: over as many nodes as possible, so collectors
    run on other nodes than the driver when there are any. ``STRICT_PACK`` / ``STRICT_SPREAD``:
    all on one node / every bundle on its own node, or the trial does not start (checked up
    front). Outside Tune (``train --async-pipeline`` on a cluster) SPREAD and STRICT_SPREAD
    spread the actors over the nodes (Ray's SPREAD scheduling); the driver is the calling process."""

    def validate(self) -> None:
        self.require_positive(
            "num_collector_actors",
            "num_evaluator_actors",
            "max_collect_inflight",
            "max_eval_inflight",
            "max_train_chunk_steps",
            "weight_sync_interval",
            "max_train_budget_queue_size",
            "buffer_stats_interval",
            "poll_interval_s",
            "shutdown_timeout_s",
            "collect_timeout_s",
            "eval_timeout_s",
        )
        self.require_non_negative(
            "collector_num_cpus", "evaluator_num_cpus", "collector_num_gpus", "evaluator_num_gpus", "max_actor_restarts"
        )

    @property
    def collect_inflight(self) -> int:
        return self.max_collect_inflight or self.num_collector_actors

    @property
    def budget_queue_cap(self) -> int:
        return self.max_train_budget_queue_size or 2 * self.num_collector_actors


S = typing.TypeVar("S", bound=Section)


@dataclass(frozen=True)
class Config(Section):
    """A whole experiment.

    The shared sections (``cfg.learner``, ...) are fields; the policy types' own sections
    (``cfg.unizero``, ...) are held in :attr:`sections` and read as attributes too."""

    policy_type: str = "muzero"
    """A registered policy type (:mod:`lz_tune.policy_registry`: the built-in POLICY_TYPES and
    those registered since), or ``"<module>:<name>"`` for a type that ``<module>`` registers."""
    seed: int = 0
    """Seeds torch, numpy and the envs (env i of actor k gets seed + 1000 k + i)."""
    exp_name: str = "muzero"
    """Experiment name (folder under the experiment root)."""
    max_env_step: int = 10_000_000
    """Stop after this many env steps."""
    max_train_iter: int = 10_000_000_000
    """Stop after this many learner updates."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    mcts: MCTSConfig = field(default_factory=MCTSConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    collector: CollectorConfig = field(default_factory=CollectorConfig)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    async_pipeline: AsyncPipelineConfig = field(default_factory=AsyncPipelineConfig)
    sections: tuple[Section, ...] = field(default=(), metadata={_NOT_A_KEY: True})
    """The policy types' own sections, in the order of
    :func:`lz_tune.policy_registry.config_section_classes` of ``policy_type`` (every built-in
    type's, then those a type registered elsewhere reads). Each is read as an attribute under its
    ``section_name`` (``cfg.unizero.num_layers``) and keyed by it in dicts and overrides
    (``unizero.num_layers=4``), as a shared section; it is not a key itself. Given sections
    replace the defaults, the others are filled in at construction:
    ``Config(policy_type="unizero", sections=(UniZeroConfig(num_layers=4),))``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy_type", _coerce("policy_type", self.policy_type, str))
        classes = {cls.section_name: cls for cls in _section_classes(self.policy_type)}
        if not isinstance(self.sections, (tuple, list)):
            raise ConfigError(f"sections: expected a tuple of config sections, got {type(self.sections).__name__}")
        given: dict[str, Section] = {}
        for section in self.sections:
            if not isinstance(section, Section) or not dataclasses.is_dataclass(section):
                raise ConfigError(f"sections: {section!r} is not a config section")
            name = section.section_name
            if name not in classes:
                raise ConfigError(
                    f"{name}: not a config section of policy_type {self.policy_type!r}"
                    f"{_did_you_mean(name, classes)} (its sections: {', '.join(classes)})"
                )
            if not isinstance(section, classes[name]):
                raise ConfigError(f"{name}: expected a {classes[name].__name__} section, got {type(section).__name__}")
            if name in given:
                raise ConfigError(f"{name}: section given twice")
            given[name] = section
        object.__setattr__(self, "sections", tuple(given.get(name) or cls() for name, cls in classes.items()))
        super().__post_init__()

    def __getattr__(self, name: str) -> Any:
        """``cfg.unizero``: the section of :attr:`sections` named ``name`` (Python asks here only
        for names that are no field, method or property)."""
        held = self.__dict__.get("sections", ()) if not name.startswith("_") else ()
        for section in held:
            if section.section_name == name:
                return section
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute or config section {name!r}"
            + (f" (its sections: {', '.join(s.section_name for s in held)})" if held else "")
        )

    def section(self, cls: type[S]) -> S:
        """The held section of class ``cls``, typed: ``cfg.section(UniZeroConfig).num_layers``
        (what ``cfg.unizero.num_layers`` reads, for type checkers)."""
        for section in self.sections:
            if isinstance(section, cls):
                return section
        raise ConfigError(f"{cls.section_name}: not a config section of policy_type {self.policy_type!r}")

    def validate(self) -> None:
        self.require_positive("max_env_step", "max_train_iter")
        self.require_non_negative("seed")
        if self.buffer.replay_buffer_size <= self.learner.batch_size:  # training needs more than one batch held
            raise ConfigError(
                f"buffer.replay_buffer_size: must be larger than learner.batch_size, or training "
                f"never starts (got {self.buffer.replay_buffer_size} <= {self.learner.batch_size})"
            )

    @property
    def reanalyze_writes_root_values(self) -> bool:
        """``buffer.reanalyze_writes_root_values``, with None resolved for this policy type (as
        LightZero's buffer of the type does: :attr:`PolicyTypeEntry.reanalyze_writes_root_values`)."""
        explicit = self.buffer.reanalyze_writes_root_values
        return lookup_policy_type(self.policy_type).reanalyze_writes_root_values if explicit is None else explicit

    # -------------------------------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Config":
        """Build from a nested dict (the layout of :meth:`to_dict`); unknown keys raise
        ConfigError naming them. ``policy_type`` says which type sections it may hold."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"config: expected a mapping, got {type(data).__name__}")
        policy_type = _coerce(
            "policy_type", data.get("policy_type", cls.__dataclass_fields__["policy_type"].default), str
        )
        classes = {c.section_name: c for c in _section_classes(policy_type)}
        sections = tuple(
            value if isinstance(value, classes[key]) else _from_dict(classes[key], value, key)
            for key, value in data.items()
            if key in classes
        )
        shared = {key: value for key, value in data.items() if key not in classes}
        return _from_dict(cls, shared, "", also_known=tuple(classes), sections=sections)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (tuples become lists), suitable for JSON and Tune: the shared keys,
        then each type section under its name."""
        out = _to_dict(self)
        out.update((section.section_name, _to_dict(section)) for section in self.sections)
        return out

    def flat_dict(self) -> dict[str, Any]:
        """``{"learner.learning_rate": 3e-3, ...}``: every field under its dotted key (as Tune configs)."""
        return _flatten(self.to_dict())

    def with_updates(self, updates: Mapping[str, Any]) -> "Config":
        """Return a copy with dotted keys replaced: ``{"learner.learning_rate": 3e-3}``.
        Nested dicts are accepted too: ``{"learner": {"learning_rate": 3e-3}}``. A new
        ``policy_type`` is applied first, so the keys of its sections may be set with it (in any
        order); sections the new type does not hold are dropped."""
        flat = _flatten(updates)
        data = self.to_dict()
        if "policy_type" in flat:
            data["policy_type"] = flat.pop("policy_type")
            if data["policy_type"] != self.policy_type and isinstance(data["policy_type"], str):
                new = {c.section_name: c for c in _section_classes(data["policy_type"])}
                for section in self.sections:
                    if section.section_name not in new:
                        del data[section.section_name]
                for name, c in new.items():
                    data.setdefault(name, _to_dict(c()))
        for key, value in flat.items():
            _check_dotted_key(data, key)
            parts = key.split(".")
            node = data
            for p in parts[:-1]:
                node = node[p]
            node[parts[-1]] = value
        return Config.from_dict(data)

    def with_overrides(self, overrides: Sequence[str]) -> "Config":
        """Apply CLI-style ``key=value`` strings; values are parsed as Python literals
        (``3e-3``, ``True``, ``(64, 64)``, ``None``) and otherwise kept as strings."""
        return self.with_updates(dict(parse_override(o) for o in overrides))


def parse_override(text: str) -> tuple[str, Any]:
    """``"learner.learning_rate=3e-3"`` -> ``("learner.learning_rate", 0.003)``."""
    if "=" not in text:
        raise ConfigError(f"{text}: an override must look like section.key=value")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    if not key:
        raise ConfigError(f"{text}: empty key")
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    if lowered in ("none", "null"):
        return key, None
    try:
        return key, ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return key, raw


def _key_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a section that are config keys (not ``_`` names, not :attr:`Config.sections`)."""
    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_") and not f.metadata.get(_NOT_A_KEY)]


def _did_you_mean(name: str, options: Any) -> str:
    close = difflib.get_close_matches(str(name), sorted(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _section_classes(policy_type: str) -> tuple[type[Section], ...]:
    """The type sections a config of ``policy_type`` holds (ConfigError naming ``policy_type``)."""
    try:
        classes = config_section_classes(policy_type)
    except (UnknownPolicyTypeError, UnknownConfigSectionError) as e:
        raise ConfigError(f"policy_type: {e}") from None
    shared = {f.name for f in _key_fields(Config)}
    for cls in classes:
        if not (issubclass(cls, Section) and dataclasses.is_dataclass(cls)):
            raise ConfigError(
                f"policy_type: {policy_type!r} has a config section {cls.__qualname__} that is not a "
                "frozen dataclass subclassing lz_tune.config.Section"
            )
        if cls.section_name in shared:
            raise ConfigError(
                f"policy_type: {policy_type!r} has a config section named {cls.section_name!r}, the "
                "name of a shared key"
            )
    return classes


def _from_dict(cls: type, data: Mapping[str, Any], prefix: str, *, also_known: Sequence[str] = (), **given: Any) -> Any:
    """``cls(**data)`` with nested sections built from dicts; unknown keys (hinted among the keys
    and ``also_known``) raise ConfigError naming them."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in _key_fields(cls)}
    kwargs: dict[str, Any] = dict(given)
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise ConfigError(f"{dotted}: unknown config key{_did_you_mean(key, names | set(also_known))}")
        tp = hints[key]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a nested section's class
            value = value if isinstance(value, tp) else _from_dict(tp, value, dotted)
        kwargs[key] = value
    return cls(**kwargs)


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_dict(getattr(obj, f.name)) for f in _key_fields(type(obj))}
    if isinstance(obj, tuple):
        return [_to_dict(v) for v in obj]
    return obj


def _flatten(updates: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in updates.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(_flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def _check_dotted_key(data: dict[str, Any], key: str) -> None:
    """Check that ``key`` names an existing leaf of ``data`` (raises ConfigError naming it)."""
    node: Any = data
    parts = key.split(".")
    for i, p in enumerate(parts):
        if not isinstance(node, dict) or p not in node:
            where = ".".join(parts[: i + 1])
            options = sorted(node) if isinstance(node, dict) else []
            close = difflib.get_close_matches(p, options, n=1)
            hint = f"; did you mean {'.'.join(parts[:i] + [close[0]])!r}?" if close else ""
            raise ConfigError(f"{key}: unknown config key {where!r}{hint}")
        node = node[p]
    if isinstance(node, dict):
        raise ConfigError(f"{key}: is a section, not a value; set one of its keys ({', '.join(sorted(node))})")
