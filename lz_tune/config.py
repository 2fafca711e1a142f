"""Typed experiment configuration.

One frozen dataclass per concern (env, model, mcts, buffer, learner, collector, evaluator,
async_pipeline) plus one section per policy type with its own keys (efficientzero, gumbel, sampled,
stochastic, context),
gathered in :class:`Config`. Every field has a docstring-style comment and a
default; values are checked when the object is built, so a wrong key or value fails with a
:class:`ConfigError` naming the dotted key before any env or actor starts.

Three ways to change a config::

    cfg = Config()                                            # defaults
    cfg = Config.from_dict({"learner": {"learning_rate": 3e-3}})
    cfg = cfg.with_overrides(["learner.learning_rate=3e-3", "mcts.num_simulations=25"])
    cfg = cfg.with_updates({"learner.learning_rate": 3e-3})   # what Tune search spaces use

A zoo config is a Python module with a ``make_config() -> Config`` function.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence

from lz_tune.policy_registry import POLICY_TYPES, UnknownPolicyTypeError, lookup_policy_type  # noqa: F401  (re-exported)


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


class _Section:
    """Mixin: type-checks every field at construction, then runs ``_check``."""

    _prefix: str = ""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            key = f"{self._prefix}.{f.name}" if self._prefix else f.name
            value = getattr(self, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                if not isinstance(value, hints[f.name]):
                    raise ConfigError(f"{key}: expected a {hints[f.name].__name__} section")
                continue
            object.__setattr__(self, f.name, _coerce(key, value, hints[f.name]))
        self._check()

    def _check(self) -> None:  # per-section value rules
        pass

    def _key(self, name: str) -> str:
        return f"{self._prefix}.{name}" if self._prefix else name

    def _require(self, ok: bool, name: str, why: str) -> None:
        if not ok:
            raise ConfigError(f"{self._key(name)}: {why} (got {getattr(self, name)!r})")

    def _positive(self, *names: str) -> None:
        for n in names:
            v = getattr(self, n)
            if v is not None:
                self._require(v > 0, n, "must be > 0")

    def _non_negative(self, *names: str) -> None:
        for n in names:
            v = getattr(self, n)
            if v is not None:
                self._require(v >= 0, n, "must be >= 0")

    def _fraction(self, *names: str) -> None:
        for n in names:
            self._require(0.0 <= getattr(self, n) <= 1.0, n, "must be in [0, 1]")


# ----------------------------------------------------------------------------------------------
# sections


@dataclass(frozen=True)
class EnvConfig(_Section):
    """Which environment, how many copies, and Atari preprocessing."""

    _prefix = "env"
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

    def _check(self) -> None:
        self._require(bool(self.env_id.strip()), "env_id", "must not be empty")
        for i, name in enumerate(self.import_modules):
            module, _, function = name.partition(":")
            if not module.strip() or not all(part.isidentifier() for part in module.split(".")) or (
                    function and not function.isidentifier()):
                raise ConfigError(f"env.import_modules[{i}]: {name!r} is not 'package.module' or "
                                  "'package.module:function'")
        self._positive("collector_env_num", "evaluator_env_num", "frame_stack", "max_episode_steps",
                       "frame_skip", "action_repeat")
        self._require(self.image_size >= 32, "image_size", "must be >= 32")
        self._non_negative("noop_max")
        self._fraction("repeat_action_probability")


@dataclass(frozen=True)
class ModelConfig(_Section):
    """Network shapes. The kind is picked from the observation unless given."""

    _prefix = "model"
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

    def _check(self) -> None:
        self._positive("latent_dim", "num_channels", "value_support_size", "reward_support_size",
                       "projection_dim", "projection_hidden_dim")
        self._non_negative("num_res_blocks")
        self._require(all(h > 0 for h in self.hidden_sizes), "hidden_sizes", "every size must be > 0")


@dataclass(frozen=True)
class MCTSConfig(_Section):
    """Tree search constants (MuZero appendix values by default)."""

    _prefix = "mcts"
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
    through torch. ``torch``: always torch (the reference path)."""

    def _check(self) -> None:
        self._positive("num_simulations", "eval_num_simulations", "pb_c_base", "root_dirichlet_alpha",
                       "value_delta_max")
        self._non_negative("pb_c_init")
        self._fraction("root_noise_weight")
        self._require(0.0 < self.discount_factor <= 1.0, "discount_factor", "must be in (0, 1]")


@dataclass(frozen=True)
class BufferConfig(_Section):
    """Game segments, prioritized replay and reanalyze."""

    _prefix = "buffer"
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
    """Periodic buffer reanalyze (the reference's). >= 1: spread through each collect budget of u
    updates, before the update at budget progress p whenever p % max(1, u // freq) == 0 (so
    int(u // max(1, u // freq)) rounded up times per budget); < 1: once every round(1/freq)
    collects, when the collect is pushed (the reference computes int(1 // freq), which gives 9
    for 1/10); 0 disables. Each needs N // num_unroll_steps > int(reanalyze_batch_size /
    reanalyze_partition) positions in the buffer, else it is skipped."""
    reanalyze_batch_size: int = 160
    """Sequences of num_unroll_steps steps re-searched per periodic buffer reanalyze, taken as
    whole segments of game_segment_length // num_unroll_steps sequences each (the reference's
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

    def _check(self) -> None:
        self._positive("replay_buffer_size", "game_segment_length", "td_steps", "reanalyze_batch_size",
                       "mini_infer_size")
        self._non_negative("num_unroll_steps", "buffer_reanalyze_freq", "checkpoint_max_gb")
        self._require(self.checkpoint_chunk_mb * 2**20 >= 1, "checkpoint_chunk_mb", "must be >= 1 byte (1e-6 MB)")
        self._fraction("priority_prob_alpha", "priority_prob_beta", "reanalyze_ratio")
        self._require(0.0 < self.reanalyze_partition <= 1.0, "reanalyze_partition", "must be in (0, 1]")
        if self.num_unroll_steps + self.td_steps > self.game_segment_length:
            # names both keys: either one may be the one that is too long
            raise ConfigError(
                f"buffer.num_unroll_steps / buffer.td_steps: num_unroll_steps + td_steps ({self.num_unroll_steps} "
                f"+ {self.td_steps}) must be <= buffer.game_segment_length ({self.game_segment_length}): a segment "
                "is padded with that many steps of the next one")


@dataclass(frozen=True)
class LearnerConfig(_Section):
    """Optimisation, losses and the replay ratio."""

    _prefix = "learner"
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
    than learner.batch_size positions (the reference's rule)."""
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
    torch's fused kernel (~2x the updates/s of eager on CartPole). ``eager``: the reference
    path, every step on its own and the optimizer's per-parameter loop. Both compute the same
    losses, gradients and priorities (to float rounding; tests/test_learner_paths.py)."""
    num_workers: int = 1
    """Data-parallel learner workers. 1: the update runs in the driver process (no Ray needed).
    N >= 2: every update runs on N Ray Train workers with PyTorch DDP (gloo on CPU, NCCL on GPU);
    the driver still samples the global batch of ``batch_size``, splits it into N shards, and
    writes back every shard's priorities (lz_tune/parallel/)."""
    worker_num_cpus: float = 1.0
    """CPUs reserved per learner worker (num_workers >= 2; part of each Tune trial's bundles)."""
    worker_num_gpus: float = 0.0
    """GPUs reserved per learner worker (num_workers >= 2); > 0 needs ``learner.device=cuda``."""
    sync_batchnorm: bool = False
    """num_workers >= 2: BatchNorm layers use the statistics of the whole global batch (all-reduced
    over the workers, as one process would) instead of each worker's shard (the default, as
    LightZero's DDP). Needs a network with BatchNorm."""
    prepare_ahead_with_lag: bool = False
    """num_workers >= 2: sample and build the next batch while the workers compute the current
    update even when that changes the result: the next sample is drawn before the current
    update's priorities are written back (PER one update late). Off: batches are prepared ahead
    only where nothing changes (no PER, target network unchanged by the update in flight)."""

    def _check(self) -> None:
        self._positive("batch_size", "learning_rate", "threshold_training_steps_for_final_lr", "grad_clip_value",
                       "target_update_freq", "update_per_collect", "replay_ratio", "num_threads", "num_workers",
                       "worker_num_cpus", "max_nonfinite_updates_in_a_row")
        self._non_negative("worker_num_gpus")
        self._require(self.num_workers <= self.batch_size, "num_workers",
                      f"{self.num_workers} workers cannot share a global batch of learner.batch_size="
                      f"{self.batch_size} (each needs at least one sample)")
        self._require(not self.sync_batchnorm or self.num_workers >= 2, "sync_batchnorm",
                      "synchronises BatchNorm over learner workers: needs learner.num_workers >= 2")
        self._require(self.worker_num_gpus == 0 or self.device.startswith("cuda"), "worker_num_gpus",
                      f"reserves GPUs for the learner workers, but learner.device="
                      f"{self.device} leaves them idle; set learner.device=cuda")
        self._require(self.num_workers == 1 or not self.device.startswith("cuda") or self.worker_num_gpus > 0,
                      "device", f"with learner.num_workers={self.num_workers}: the workers "
                      "run the update, set learner.worker_num_gpus (e.g. 1) so each gets a GPU")
        self._non_negative("weight_decay", "value_loss_weight", "reward_loss_weight", "policy_loss_weight",
                           "ssl_loss_weight", "policy_entropy_weight", "train_start_after_envsteps")
        self._fraction("momentum")
        self._require(self.device == "cpu" or self.device.startswith(("cuda", "mps")), "device",
                      "must be cpu, cuda[:N] or mps")


@dataclass(frozen=True)
class CollectorConfig(_Section):
    """Acting during collection."""

    _prefix = "collector"
    temperature: float = 0.25
    """Visit-count temperature for action choice (fixed unless manual_temperature_decay)."""
    manual_temperature_decay: bool = False
    """Temperature 1.0 / 0.5 / 0.25 before 50% / 75% / after of threshold_training_steps_for_final_temperature."""
    threshold_training_steps_for_final_temperature: int = 100_000
    """Learner updates at which the decayed temperature reaches 0.25."""
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

    def _check(self) -> None:
        self._positive("temperature", "threshold_training_steps_for_final_temperature", "segments_per_collect",
                       "eps_greedy_decay_env_steps", "eps_greedy_max_duration")
        self._fraction("eps_greedy_start", "eps_greedy_end")


@dataclass(frozen=True)
class EvaluatorConfig(_Section):
    """Evaluation and stop criteria."""

    _prefix = "evaluator"
    eval_freq: int = 1000
    """Evaluate every this many learner updates (and once training stops)."""
    n_evaluator_episode: int = 8
    """Episodes per evaluation."""
    stop_value: Optional[float] = None
    """Stop once the mean evaluation return reaches this."""
    opponent: Literal["random", "mcts"] = "random"
    """Two-player games (``openspiel:<game>``): the OpenSpiel bot the agent plays in evaluation,
    its seat alternating game by game (half the games as first player); the return is the
    agent's (+1 win, 0 draw, -1 loss), and win / draw / loss rates are reported. ``random``: a
    uniformly random legal move; ``mcts``: OpenSpiel's MCTS bot (random rollouts, MCTS-Solver)."""
    opponent_mcts_simulations: int = 1000
    """Simulations per move of the ``mcts`` opponent."""
    opponent_mcts_uct_c: float = 2.0
    """UCT exploration constant of the ``mcts`` opponent."""
    opponent_mcts_rollouts: int = 1
    """Random rollouts per leaf evaluation of the ``mcts`` opponent."""
    stop_loss_rate: Optional[float] = None
    """Two-player games: also stop once an evaluation's loss rate against the opponent is at most
    this (0.0: no lost game); None: only stop_value stops."""

    max_failed_saves_in_a_row: int = 3
    """A checkpoint save that fails for lack of disk space (ENOSPC, EDQUOT) is skipped with a
    warning, the previous checkpoint staying valid, and tried again at the next evaluation; this
    many in a row stop the run cleanly (workers closed, exit code 1)."""

    def _check(self) -> None:
        self._positive("eval_freq", "n_evaluator_episode", "max_failed_saves_in_a_row", "opponent_mcts_simulations",
                       "opponent_mcts_rollouts")
        self._non_negative("opponent_mcts_uct_c")
        if self.stop_loss_rate is not None:
            self._fraction("stop_loss_rate")


@dataclass(frozen=True)
class EfficientZeroConfig(_Section):
    """EfficientZero (``policy_type=efficientzero``): the value-prefix LSTM. Ignored by other types."""

    _prefix = "efficientzero"
    lstm_horizon_len: int = 5
    """The value prefix (sum of rewards since the last reset) and the LSTM state are reset every
    this many model steps, counted from the root of each search and from each sampled position
    of a training batch."""
    lstm_hidden_size: int = 64
    """Hidden size of the value-prefix LSTM (the original uses 512 on Atari)."""
    value_prefix_loss_weight: float = 1.0
    """Weight of the value-prefix cross-entropy (it replaces MuZero's reward loss)."""

    def _check(self) -> None:
        self._positive("lstm_horizon_len", "lstm_hidden_size")
        self._non_negative("value_prefix_loss_weight")


@dataclass(frozen=True)
class GumbelConfig(_Section):
    """Gumbel MuZero (``policy_type=gumbel_muzero``) search. Ignored by other types. The Gumbel
    search has no Dirichlet root noise and no pUCT constants: ``mcts.root_*`` and ``mcts.pb_c_*``
    do not apply to it, nor does ``collector.temperature`` (the search chooses the action)."""

    _prefix = "gumbel"
    max_num_considered_actions: int = 16
    """m: actions sampled without replacement at the root (Gumbel top-k) and halved by
    sequential halving; capped at the legal actions of each root."""
    gumbel_scale: float = 1.0
    """Scale of the root Gumbel noise during collection (evaluation uses none)."""
    c_visit: float = 50.0
    """sigma(q) = (c_visit + max visits) * c_scale * q (paper's constants)."""
    c_scale: float = 0.1
    """See c_visit."""

    def _check(self) -> None:
        self._positive("max_num_considered_actions", "c_visit", "c_scale")
        self._non_negative("gumbel_scale")


@dataclass(frozen=True)
class SampledConfig(_Section):
    """Sampled MuZero / Sampled EfficientZero (``policy_type=sampled_muzero`` or
    ``sampled_efficientzero``): the search plans over K actions sampled from the policy at
    every expansion. Ignored by other types. The pUCT keys ``mcts.*`` (root noise included)
    apply to the K children."""

    _prefix = "sampled"
    num_samples: int = 20
    """K: actions sampled at every expansion (continuous: i.i.d. from the tanh-Gaussian policy;
    discrete: K distinct actions by Gumbel-top-k, so K <= the env's action count)."""
    policy_loss_type: Literal["cross_entropy", "kl"] = "cross_entropy"
    """Policy loss against the visit distribution over the K root samples:
    ``-sum_k pi_hat_k log pi(a_k)``, or that plus ``sum_k pi_hat_k log pi_hat_k`` (KL; same
    gradient, a loss that is 0 at the optimum for discrete actions)."""
    min_std: float = 1e-3
    """Continuous: smallest standard deviation of the (pre-tanh) Gaussian policy."""
    max_std: float = 5.0
    """Continuous: largest standard deviation of the (pre-tanh) Gaussian policy."""

    def _check(self) -> None:
        self._positive("num_samples", "min_std", "max_std")
        self._require(self.min_std < self.max_std, "min_std", f"must be < sampled.max_std={self.max_std}")


@dataclass(frozen=True)
class ContextConfig(_Section):
    """History-conditioned inference (``policy_type=muzero_context`` and ``muzero_rnn_full_obs``):
    per-env state carried across real env steps. Ignored by other types."""

    _prefix = "context"
    context_length_init: int = 4
    """Restart each env's carried state from its real observation every this many env steps
    (counted per env from its episode start). muzero_context: in between, the root latent is
    ``dynamics(previous root latent, real action)``; muzero_rnn_full_obs: the GRU history is
    zeroed. 1: every step (no history)."""
    rnn_hidden_size: int = 256
    """muzero_rnn_full_obs: width H of the GRU history."""
    train_search_chain: bool = True
    """muzero_rnn_full_obs: also train prediction, reward and consistency along the search's own
    chain of states (dynamics latents, history over them), besides the true-observation unroll;
    without it the search evaluates states its heads never saw in training."""

    def _check(self) -> None:
        self._positive("context_length_init", "rnn_hidden_size")


@dataclass(frozen=True)
class StochasticConfig(_Section):
    """Stochastic MuZero (``policy_type=stochastic_muzero``): afterstates and chance outcomes
    in the model and the tree (Antonoglou et al. 2022). Ignored by other types."""

    _prefix = "stochastic"
    chance_space_size: int = 32
    """C: chance codes of an afterstate (learned codes: the chance encoder's one-hot width;
    true labels: at least the env's number of chance outcomes, 32 for 2048)."""
    use_true_chance_label: bool = False
    """Train with the env's true chance outcome (``StepResult.info_columns['chance_outcome']``,
    stored per step) as the dynamics code and the sigma target instead of the chance
    encoder's code. Needs an env that reports chance outcomes."""
    chance_loss_weight: float = 1.0
    """Weight of the cross-entropy of the afterstate's chance distribution sigma against the
    code that happened (the encoder's one-hot, detached; or the true label)."""
    afterstate_value_loss_weight: float = 0.25
    """Weight of the afterstate value Q's cross-entropy against the value target z_k."""
    commitment_loss_weight: float = 1.0
    """Weight of the commitment term ||softmax(c_e) - sg(one_hot(argmax c_e))||^2 that pulls
    the chance encoder's distribution to its own one-hot code (learned codes only)."""
    code_usage_loss_weight: float = 0.0
    """Weight of the code-usage term ``log C - H(mean over the batch of softmax(c_e))`` (learned
    codes only; 0 when a batch uses its codes evenly). With the commitment term (each code
    confident) it maximises the information the code carries about the transition, as in
    information-maximising clustering. Without it the encoder can settle on one code for every
    transition, and the model is then a deterministic one (2048: 1 of 32 codes in use after 500
    updates, benchmarks/README.md). 0 is the paper's loss."""
    q_normalization: Literal["tree", "node"] = "tree"
    """Q normalisation at decision nodes: ``tree`` (min-max over the whole tree, MuZero) or
    ``node`` (per node, as mctx)."""

    def _check(self) -> None:
        self._positive("chance_space_size")
        self._non_negative("chance_loss_weight", "afterstate_value_loss_weight", "commitment_loss_weight",
                           "code_usage_loss_weight")


@dataclass(frozen=True)
class UniZeroConfig(_Section):
    """UniZero (``policy_type=unizero``): a transformer world model over observation and action
    tokens with per-env key/value caches (Pu et al. 2024). Ignored by other types. The loss
    weights are the learner's (``learner.policy_loss_weight``, ``value_loss_weight``,
    ``reward_loss_weight``, ``policy_entropy_weight``; ``ssl_loss_weight`` weighs the latent
    consistency MSE)."""

    _prefix = "unizero"
    embed_dim: int = 256
    """E: width of every token (observation latents included)."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads (E / num_heads must be even: rotary positions)."""
    infer_context_length: int = 4
    """H: real env steps of context. Every token attends to itself and the 2H - 1 tokens before
    it (the window C = 2H), in training, collection, evaluation and search alike."""
    kv_cache_clear_interval: int = 2000
    """Clear an env's key/value cache (restart its context from the current observation) every
    this many of its env steps; 0 disables the periodic clearing (the window keeps the cache
    bounded either way)."""
    dropout: float = 0.0
    """Transformer dropout in training (the original uses 0.1)."""
    search_cache: bool = True
    """Search with per-node key/value windows (one token step per model call). False: the
    uncached reference, every simulation recomputes each leaf's whole path of tokens from its
    root (same results; for tests and ``benchmarks/mcts_speed.py``)."""
    target_momentum: float = 0.05
    """tau of the momentum target network, updated after every update: theta_target <-
    (1 - tau) theta_target + tau theta. 1: a hard copy every update."""
    policy_ls_eps_start: float = 0.0
    """Policy label smoothing at train_iter 0 (target (1 - eps) pi + eps / A); 0: off (the
    schedule runs only when this is > 0, as the reference's)."""
    policy_ls_eps_end: float = 0.0
    """Policy label smoothing after policy_ls_eps_decay_steps updates (linear in train_iter)."""
    policy_ls_eps_decay_steps: int = 50_000
    """Updates over which the label smoothing goes from start to end."""
    label_smoothing_eps: Optional[float] = None
    """Label smoothing of the value and reward targets: the two-hot target over the K support
    bins becomes (1 - eps) two_hot + eps / K. None: the reference's default of the type
    (unizero 0.1, sampled_unizero 0: LightZero's sampled UniZero does not smooth)."""
    use_continuous_label_smoothing: bool = False
    """Smooth the policy target by continuous_ls_eps at every update instead of the
    policy_ls_eps_* schedule."""
    continuous_ls_eps: float = 0.05
    """The fixed policy label smoothing of use_continuous_label_smoothing."""
    use_adaptive_entropy_weight: bool = False
    """Learn the policy entropy weight alpha (it replaces learner.policy_entropy_weight): after
    every forward pass, one Adam step on log alpha with the loss log_alpha * (H - H_target), H
    the batch's mean policy entropy per valid unroll step, H_target = ln(A) * ratio(train_iter)
    (target_entropy_*). alpha starts at 1 and is kept in [adaptive_entropy_alpha_min, _max]; it
    and its optimizer are saved in checkpoints. unizero only (discrete actions)."""
    adaptive_entropy_alpha_lr: float = 1e-3
    """Adam learning rate of log alpha (the reference's Atari config uses 1e-4)."""
    adaptive_entropy_alpha_min: float = 1e-4
    """Lower bound of the adaptive alpha."""
    adaptive_entropy_alpha_max: float = 10.0
    """Upper bound of the adaptive alpha."""
    target_entropy_start_ratio: float = 0.98
    """Target entropy at train_iter 0, as a fraction of the maximum ln(A)."""
    target_entropy_end_ratio: float = 0.05
    """Target entropy after target_entropy_decay_steps updates (linear in train_iter; the
    reference's Atari config uses 0.7)."""
    target_entropy_decay_steps: int = 500_000
    """Updates over which the target entropy ratio goes from start to end (Atari: 100000)."""
    use_encoder_clip_annealing: bool = False
    """Encoder latent-norm clip with a threshold annealed in train_iter from
    encoder_clip_start_value to encoder_clip_end_value (off: the fixed
    latent_norm_clip_threshold). When the largest L2 norm of this update's observation latents
    exceeds the threshold, the encoder's final LayerNorm (weight and bias) is scaled by
    threshold / norm, after the backward pass and before the optimizer step."""
    encoder_clip_anneal_type: Literal["cosine", "linear"] = "cosine"
    """Shape of the encoder clip threshold's annealing."""
    encoder_clip_start_value: float = 30.0
    """Encoder clip threshold at train_iter 0 (annealing)."""
    encoder_clip_end_value: float = 10.0
    """Encoder clip threshold from encoder_clip_anneal_steps updates on (annealing)."""
    encoder_clip_anneal_steps: int = 100_000
    """Updates over which the encoder clip threshold anneals."""
    latent_norm_clip_threshold: float = 0.0
    """Fixed encoder latent-norm clip threshold when use_encoder_clip_annealing is off; 0: no
    clipping."""
    head_clip_heads: tuple[Literal["policy", "value", "reward", "observations"], ...] = ()
    """Heads whose outputs are clipped (the reference's head clip; empty: off). When the largest
    |output| of a head in this update exceeds the head clip threshold, every parameter of that
    head is scaled by threshold / max, after the backward pass and before the optimizer step
    (``observations``: the next-latent head). One schedule (head_clip_*) for all the heads."""
    head_clip_use_annealing: bool = True
    """Anneal the head clip threshold from head_clip_start_value to head_clip_end_value (off:
    the fixed head_clip_threshold)."""
    head_clip_anneal_type: Literal["cosine", "linear"] = "cosine"
    """Shape of the head clip threshold's annealing."""
    head_clip_start_value: float = 30.0
    """Head clip threshold at train_iter 0 (annealing)."""
    head_clip_end_value: float = 10.0
    """Head clip threshold from head_clip_anneal_steps updates on (annealing)."""
    head_clip_anneal_steps: int = 500_000
    """Updates over which the head clip threshold anneals."""
    head_clip_threshold: float = 15.0
    """Fixed head clip threshold when head_clip_use_annealing is off."""
    head_clip_monitor_freq: int = 1
    """Head clipping runs at the updates whose train_iter is a multiple of this."""
    monitor_norm_freq: int = 5000
    """Every this many updates (and at the first update of a process or after a restore):
    parameter and gradient norms per module, transformer-output, logit and latent statistics,
    logged (``norm/*``, ``grad/*``, ``logits/*``, ``embeddings/*``, ``stability/*``) and
    repeated in every update's logs until the next check; 0 disables it."""

    def _check(self) -> None:
        self._positive("embed_dim", "num_layers", "num_heads", "infer_context_length", "policy_ls_eps_decay_steps")
        self._non_negative("kv_cache_clear_interval")
        self._require(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        self._require(0.0 < self.target_momentum <= 1.0, "target_momentum", "must be in (0, 1]")
        self._require(self.label_smoothing_eps is None or 0.0 <= self.label_smoothing_eps < 1.0, "label_smoothing_eps",
                      "must be None or in [0, 1)")
        self._fraction("policy_ls_eps_start", "policy_ls_eps_end", "continuous_ls_eps", "target_entropy_start_ratio",
                       "target_entropy_end_ratio")
        self._positive("adaptive_entropy_alpha_lr", "adaptive_entropy_alpha_min", "adaptive_entropy_alpha_max",
                       "target_entropy_decay_steps", "encoder_clip_start_value", "encoder_clip_end_value",
                       "encoder_clip_anneal_steps", "head_clip_start_value", "head_clip_end_value",
                       "head_clip_anneal_steps", "head_clip_threshold", "head_clip_monitor_freq")
        self._require(self.adaptive_entropy_alpha_min <= self.adaptive_entropy_alpha_max, "adaptive_entropy_alpha_min",
                      f"must be <= unizero.adaptive_entropy_alpha_max={self.adaptive_entropy_alpha_max}")
        self._non_negative("latent_norm_clip_threshold", "monitor_norm_freq")
        self._require(self.embed_dim % self.num_heads == 0 and (self.embed_dim // self.num_heads) % 2 == 0,
                      "embed_dim", f"must split into unizero.num_heads={self.num_heads} heads of even width")


@dataclass(frozen=True)
class AsyncPipelineConfig(_Section):
    """The async segment pipeline (spec 4.2). Ignored unless ``enabled``."""

    _prefix = "async_pipeline"
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
    (once trainable); collects in flight do not count toward that cap, as in the reference."""
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

    def _check(self) -> None:
        self._positive("num_collector_actors", "num_evaluator_actors", "max_collect_inflight", "max_eval_inflight",
                       "max_train_chunk_steps", "weight_sync_interval", "max_train_budget_queue_size",
                       "buffer_stats_interval", "poll_interval_s", "shutdown_timeout_s", "collect_timeout_s",
                       "eval_timeout_s")
        self._non_negative("collector_num_cpus", "evaluator_num_cpus", "collector_num_gpus", "evaluator_num_gpus",
                           "max_actor_restarts")

    @property
    def collect_inflight(self) -> int:
        return self.max_collect_inflight or self.num_collector_actors

    @property
    def budget_queue_cap(self) -> int:
        return self.max_train_budget_queue_size or 2 * self.num_collector_actors


@dataclass(frozen=True)
class Config(_Section):
    """A whole experiment."""

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
    efficientzero: EfficientZeroConfig = field(default_factory=EfficientZeroConfig)
    gumbel: GumbelConfig = field(default_factory=GumbelConfig)
    sampled: SampledConfig = field(default_factory=SampledConfig)
    stochastic: StochasticConfig = field(default_factory=StochasticConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    unizero: UniZeroConfig = field(default_factory=UniZeroConfig)

    def _check(self) -> None:
        try:
            entry = lookup_policy_type(self.policy_type)
        except UnknownPolicyTypeError as e:
            raise ConfigError(f"policy_type: {e}") from None
        sections = {f.name for f in dataclasses.fields(self)}
        missing = [name for name in entry.config_sections if name not in sections]
        if missing:
            raise ConfigError(f"policy_type: {self.policy_type!r} reads config section(s) {', '.join(missing)}, "
                              f"which Config does not have")
        self._positive("max_env_step", "max_train_iter")
        self._non_negative("seed")
        if self.buffer.replay_buffer_size <= self.learner.batch_size:  # training needs more than one batch held
            raise ConfigError(f"buffer.replay_buffer_size: must be larger than learner.batch_size, or training "
                              f"never starts (got {self.buffer.replay_buffer_size} <= {self.learner.batch_size})")

    @property
    def reanalyze_writes_root_values(self) -> bool:
        """``buffer.reanalyze_writes_root_values``, with None resolved for this policy type (as
        LightZero's buffer of the type does: :attr:`PolicyTypeEntry.reanalyze_writes_root_values`)."""
        explicit = self.buffer.reanalyze_writes_root_values
        return lookup_policy_type(self.policy_type).reanalyze_writes_root_values if explicit is None else explicit

    # -------------------------------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Config":
        """Build from a nested dict; unknown keys raise ConfigError naming them."""
        return _from_dict(cls, data, "")

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (tuples become lists), suitable for JSON and Tune."""
        return _to_dict(self)

    def flat_dict(self) -> dict[str, Any]:
        """``{"learner.learning_rate": 3e-3, ...}``: every field under its dotted key (as Tune configs)."""
        return _flatten(self.to_dict())

    def with_updates(self, updates: Mapping[str, Any]) -> "Config":
        """Return a copy with dotted keys replaced: ``{"learner.learning_rate": 3e-3}``.
        Nested dicts are accepted too: ``{"learner": {"learning_rate": 3e-3}}``."""
        data = self.to_dict()
        for key, value in _flatten(updates).items():
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


def _public_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def _from_dict(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in _public_fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            close = difflib.get_close_matches(str(key), sorted(names), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{dotted}: unknown config key{hint}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            value = value if isinstance(value, tp) else _from_dict(tp, value, dotted)
        kwargs[key] = value
    return cls(**kwargs)


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_dict(getattr(obj, f.name)) for f in _public_fields(type(obj))}
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
