"""LightZero config (as read by :mod:`lz_tune.lightzero.loader`) -> our typed :class:`Config`.

Every key of the file goes through its rule in :mod:`lz_tune.lightzero.rules`; keys that only
mean something together (the policy type, the env, image settings, supports, loss weights, the
simulation counts, ...) are read by the combiners below. The result is a :class:`Config` and a
:class:`MappingReport` of the keys that have no effect here (a note) and of the LightZero
features the run trains without (warnings). Unknown keys and settings lz-tune cannot run are
collected and raised together as one :class:`ConfigError` that names each key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from lz_tune.config import AsyncPipelineConfig, Config, ConfigError
from lz_tune.lightzero import rules as R
from lz_tune.lightzero.loader import LightZeroFile
from lz_tune.policy_registry import POLICY_TYPES

__all__ = ["MappingReport", "map_lightzero", "ENV_TYPES", "POLICY_TYPE_NAMES", "TRAIN_ENTRIES"]

#: LightZero env types (``create_config.env.type``) lz-tune serves: default env id, continuous?
ENV_TYPES: dict[str, tuple[Optional[str], Optional[bool]]] = {
    "cartpole_lightzero": ("CartPole-v0", False),
    "pendulum_lightzero": ("Pendulum-v1", True),
    "atari_lightzero": (None, None),
    "mujoco_lightzero": (None, True),
}

#: LightZero policy names (``create_config.policy.type``) -> lz-tune's ``policy_type``
POLICY_TYPE_NAMES = {name: name for name in POLICY_TYPES}  # LightZero's names are ours

#: LightZero training entries whose run lz-tune reproduces (function configs name the one they call)
TRAIN_ENTRIES = (
    "train_muzero",
    "train_muzero_segment",
    "train_muzero_segment_async",
    "train_muzero_context",
    "train_muzero_with_gym_env",
    "train_unizero",
    "train_unizero_segment",
    "train_unizero_segment_async",
)

_MODEL_KINDS = {"mlp": "mlp", "conv": "conv", "mlp_context": "mlp", "conv_context": "conv"}
_ATARI_EPISODE_STEPS = 108_000  # LightZero's Atari env default (collect_ and eval_max_episode_steps)
_UNIZERO_FIXED_WEIGHTS = {  # LightZero's UniZero ignores the configured loss weights and uses these
    False: {"ssl_loss_weight": 10.0, "value_loss_weight": 0.5, "reward_loss_weight": 1.0, "policy_loss_weight": 1.0},
    True: {"ssl_loss_weight": 10.0, "value_loss_weight": 0.1, "reward_loss_weight": 0.1, "policy_loss_weight": 0.1},
}


@dataclass
class MappingReport:
    """What the mapping of one LightZero file says besides the config."""

    path: str
    no_effect: list[str] = field(default_factory=list)
    """LightZero keys of the file that cannot change training here."""
    features: list[str] = field(default_factory=list)
    """``key=value: what runs instead`` for LightZero features the run trains without."""
    network: list[str] = field(default_factory=list)
    """``key=value: what runs instead`` for details of LightZero's networks that ours do not follow."""

    def lines(self) -> list[str]:
        """The report as ``note:`` / ``warning:`` lines for a terminal."""
        out = []
        if self.features:
            out.append(
                f"warning: {self.path}: LightZero features lz-tune does not implement; this run trains without them:"
            )
            out += [f"  {f}" for f in self.features]
        if self.network:
            out.append(f"warning: {self.path}: details of LightZero's networks that lz-tune's networks do not follow:")
            out += [f"  {f}" for f in self.network]
        if self.no_effect:
            out.append(
                f"note: {self.path}: LightZero keys with no effect on training here: "
                + ", ".join(sorted(self.no_effect))
            )
        return out


class _Mapping:
    """State of one mapping: the effective LightZero values, our updates and what to report."""

    def __init__(self, file: LightZeroFile, values: dict[str, Any], from_file: set[str], policy_type: str) -> None:
        self.file, self.values, self.from_file, self.policy_type = file, values, from_file, policy_type
        self.updates: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.errors: list[str] = []
        self.report = MappingReport(path=file.path)

    # -- reading
    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def given(self, key: str) -> bool:
        return key in self.values

    # -- writing
    def set(self, target: str, value: Any, source: str) -> None:
        if target in self.updates and self.updates[target] != value:
            self.errors.append(
                f"{source}={value!r} and {self.sources[target]}={self.updates[target]!r} both set "
                f"{target}; they must agree"
            )
            return
        self.updates[target], self.sources[target] = value, source

    def no_effect(self, key: str) -> None:
        if key in self.from_file:
            self.report.no_effect.append(key)

    def differs(self, key: str, value: Any, what: str, group: str = "feature") -> None:
        origin = "" if key in self.from_file else " (LightZero's default)"
        line = f"{key}={value!r}{origin}: {what}"
        (self.report.network if group == "network" else self.report.features).append(line)

    def error(self, key: str, text: str) -> None:
        self.errors.append(f"{key}: {text}")

    def agreed(self, keys: tuple[str, ...], default: Any) -> Any:
        """The one value the present ``keys`` give (an error naming them when they disagree)."""
        present = {k: self.values[k] for k in keys if k in self.values}
        if len({repr(v) for v in present.values()}) > 1:
            self.error(" / ".join(present), f"disagree ({', '.join(f'{k}={v!r}' for k, v in present.items())})")
        return next(iter(present.values()), default)


def map_lightzero(file: LightZeroFile) -> tuple[Config, MappingReport]:
    """The :class:`Config` a LightZero file describes, and its report. Raises one
    :class:`ConfigError` listing every key that cannot be mapped."""
    file_values = _flatten(file.main_config) | _flatten(file.create_config, "create_config.")
    policy_type = _policy_type(file, file_values)
    values = dict(file_values)
    for key in R.LIGHTZERO_DEFAULTS:
        if key not in values:
            with contextlib.suppress(KeyError):  # no LightZero default listed for this type
                default = R.lightzero_default(key, policy_type)
                if default is not None:
                    values[key] = default
    m = _Mapping(file, values, set(file_values), policy_type)
    for key, value in sorted(values.items()):
        _apply_rule(m, key, value)
    for combine in _COMBINERS:
        combine(m)
    _entry_call(m)
    if m.errors:
        raise ConfigError(
            f"{file.path}: {len(m.errors)} LightZero setting(s) cannot run in lz-tune:\n  " + "\n  ".join(m.errors)
        )
    m.updates["policy_type"] = policy_type
    try:
        cfg = Config().with_updates(m.updates)
    except ConfigError as e:
        key = str(e).split(":", 1)[0]
        source = m.sources.get(key)
        raise ConfigError(f"{e} (from LightZero's {source} in {file.path})" if source else f"{e} ({file.path})") from e
    return cfg, m.report


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _apply_rule(m: _Mapping, key: str, value: Any) -> None:
    rule = R.rule_for(key)
    if rule is None:
        close = difflib.get_close_matches(key, list(R.RULES), n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        m.error(key, f"unknown LightZero key{hint} (lz-tune maps every key it knows; docs/coming_from_lightzero.md)")
    elif rule.kind == "to":
        if rule.types is not None and m.policy_type not in rule.types:
            m.no_effect(key)
            return
        try:
            m.set(rule.target, rule.convert(value, key) if rule.convert else value, key)
        except ConfigError as e:
            m.errors.append(str(e))
    elif rule.kind == "no_effect":
        m.no_effect(key)
    elif rule.kind in ("differs", "unsupported"):
        if _is_inert(value, rule.inert):
            return
        if rule.kind == "differs":
            m.differs(key, value, rule.why, rule.group)
        else:
            m.error(f"{key}={value!r}", rule.why)


def _is_inert(value: Any, inert: tuple[Any, ...]) -> bool:
    return any(value is v or (v is not None and value == v) for v in inert)


# ---------------------------------------------------------------------------------- combiners


def _policy_type(file: LightZeroFile, values: dict[str, Any]) -> str:
    name = values.get("create_config.policy.type")
    if name is None:
        raise ConfigError(f"{file.path}: create_config.policy.type is missing (LightZero names the policy there)")
    model_type = values.get("policy.model.model_type")
    if name == "muzero" and model_type in ("conv_context", "mlp_context"):
        name = "muzero_context"
    if name not in POLICY_TYPE_NAMES:
        raise ConfigError(
            f"{file.path}: create_config.policy.type={name!r}: not a policy type lz-tune has (it has "
            f"{', '.join(sorted(POLICY_TYPE_NAMES))})"
        )
    return POLICY_TYPE_NAMES[name]


def _names(m: _Mapping) -> None:
    """exp_name (its last path part: LightZero's names are folders), model kind."""
    raw = m.get("exp_name")
    stem = os.path.splitext(os.path.basename(m.file.path))[0]
    name = os.path.basename(str(raw).rstrip("/")) if raw else stem
    m.set("exp_name", "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or stem, "exp_name")
    model_type = m.get("policy.model.model_type")
    if model_type is not None:
        if model_type not in _MODEL_KINDS:
            m.error(f"policy.model.model_type={model_type!r}", f"lz-tune's networks are {sorted(_MODEL_KINDS)}")
        else:
            m.set("model.kind", _MODEL_KINDS[model_type], "policy.model.model_type")


def _env(m: _Mapping) -> None:
    """The env id from create_config.env.type and env.env_id / env.env_name; env.continuous."""
    env_type = m.get("create_config.env.type")
    default_id, continuous = ENV_TYPES.get(env_type, (None, None)) if env_type else (None, None)
    if env_type is not None and env_type not in ENV_TYPES:
        m.error(f"create_config.env.type={env_type!r}", f"lz-tune serves the LightZero env types {sorted(ENV_TYPES)}")
        return
    env_id = m.agreed(("env.env_id", "env.env_name"), default_id)
    if env_id is None:
        m.error("env.env_id", "missing (name the env, e.g. --env ALE/Pong-v5)")
        return
    m.set("env.env_id", str(env_id), "env.env_id" if m.given("env.env_id") else "env.env_name")
    if m.given("env.continuous") and continuous is not None and bool(m.get("env.continuous")) != continuous:
        m.error(
            f"env.continuous={m.get('env.continuous')!r}",
            f"LightZero's {env_type} with {'discrete' if continuous else 'continuous'} actions is not available "
            "here (no discretisation wrapper)",
        )
    elif m.given("env.continuous"):
        m.no_effect("env.continuous")


def _env_nums(m: _Mapping) -> None:
    for role in ("collector", "evaluator"):
        keys = (
            f"env.{role}_env_num",
            f"policy.{role}_env_num",
            f"policy.model.{role}_env_num",
            f"policy.model.world_model_cfg.{role}_env_num",
        )
        value = m.agreed(keys, None)
        if value is not None:
            m.set(f"env.{role}_env_num", value, next(k for k in keys if m.given(k)))
    if not m.given("env.n_evaluator_episode"):  # LightZero's default: one episode per evaluator env
        m.set("evaluator.n_evaluator_episode", m.updates.get("env.evaluator_env_num", 3), "env.evaluator_env_num")


_IMAGE_KEYS = (
    "policy.model.observation_shape",
    "env.observation_shape",
    "policy.model.frame_stack_num",
    "env.frame_stack_num",
    "policy.model.gray_scale",
    "env.gray_scale",
    "policy.gray_scale",
)


def _image(m: _Mapping) -> None:
    """Atari: frame stack, image size and gray scale from LightZero's observation keys."""
    if m.get("create_config.env.type") != "atari_lightzero":
        for key in _IMAGE_KEYS:
            m.no_effect(key)
        return
    unizero = m.policy_type in R.UNIZERO_TYPES
    shape = m.agreed(
        ("policy.model.observation_shape", "env.observation_shape"), (3, 64, 64) if unizero else (4, 96, 96)
    )
    stack = m.agreed(("policy.model.frame_stack_num", "env.frame_stack_num"), 1)
    gray = m.agreed(("env.gray_scale", "policy.model.gray_scale", "policy.gray_scale"), True)
    if not (isinstance(shape, (tuple, list)) and len(shape) == 3 and shape[1] == shape[2]):
        m.error(f"policy.model.observation_shape={shape!r}", "Atari frames here are square: (C, N, N)")
        return
    if shape[0] != stack * (1 if gray else 3):
        m.error(
            f"policy.model.observation_shape={tuple(shape)!r}",
            f"{shape[0]} channels, but frame_stack_num={stack} {'gray' if gray else 'RGB'} frames give "
            f"{stack * (1 if gray else 3)}",
        )
    m.set("env.image_size", int(shape[-1]), "policy.model.observation_shape")
    m.set("env.frame_stack", int(stack), "policy.model.frame_stack_num")
    m.set("env.grayscale", bool(gray), "env.gray_scale")


def _episode_steps(m: _Mapping) -> None:
    keys = ("env.collect_max_episode_steps", "env.eval_max_episode_steps", "env.max_episode_steps")
    atari = m.get("create_config.env.type") == "atari_lightzero"
    steps = m.agreed(keys, _ATARI_EPISODE_STEPS if atari else None)
    if steps is not None:
        m.set("env.max_episode_steps", int(steps), next((k for k in keys if m.given(k)), keys[0]))


def _support_size(m: _Mapping, key: str) -> Optional[int]:
    value = m.get(key)
    if value is None:
        return None
    if not (isinstance(value, (tuple, list)) and len(value) == 3 and float(value[2]) == 1.0):
        m.error(f"{key}={value!r}", "lz-tune's supports are integer bins: (-S, S + 1, 1.)")
        return None
    low, high = float(value[0]), float(value[1])
    size = int(max(-low, high - 1))
    if low != -(high - 1):
        m.differs(key, value, f"the symmetric support [-{size}, {size}] (covers LightZero's range)")
    return size


def _supports(m: _Mapping) -> None:
    for name in ("value", "reward"):
        size = _support_size(m, f"policy.model.{name}_support_range")
        if size is not None:
            m.set(f"model.{name}_support_size", size, f"policy.model.{name}_support_range")


def _norm(m: _Mapping) -> None:
    norm = m.get("policy.model.norm_type")
    if norm is None:
        return
    kind = m.updates.get("model.kind") or ("conv" if m.get("create_config.env.type") == "atari_lightzero" else "mlp")
    if m.policy_type in R.UNIZERO_TYPES:
        m.differs("policy.model.norm_type", norm, "lz-tune's world model normalisation", "network")
    elif kind == "mlp":
        m.set("model.layer_norm", True, "policy.model.norm_type")
        if norm != "LN":
            m.differs("policy.model.norm_type", norm, "LayerNorm (lz-tune's MLP networks have no BatchNorm)", "network")
    elif norm != "BN":
        m.differs("policy.model.norm_type", norm, "BatchNorm (lz-tune's conv networks)", "network")


def _loss_weights(m: _Mapping) -> None:
    """SSL weight (on only with policy.model.self_supervised_learning_loss) and the other loss
    weights; LightZero's UniZero ignores the configured ones and uses fixed weights."""
    keys = (
        "policy.ssl_loss_weight",
        "policy.value_loss_weight",
        "policy.reward_loss_weight",
        "policy.policy_loss_weight",
        "policy.model.self_supervised_learning_loss",
    )
    if m.policy_type in R.UNIZERO_TYPES:
        continuous = m.policy_type == "sampled_unizero" and bool(m.get("policy.model.continuous_action_space"))
        for name, weight in _UNIZERO_FIXED_WEIGHTS[continuous].items():
            m.set(f"learner.{name}", weight, "LightZero's fixed UniZero loss weights")
        for key in keys:
            m.no_effect(key)
        return
    for name in ("value_loss_weight", "reward_loss_weight", "policy_loss_weight"):
        if m.given(f"policy.{name}"):
            m.set(f"learner.{name}", float(m.get(f"policy.{name}")), f"policy.{name}")
    ssl_on = bool(m.get("policy.model.self_supervised_learning_loss"))
    m.set(
        "learner.ssl_loss_weight",
        float(m.get("policy.ssl_loss_weight", 0.0)) if ssl_on else 0.0,
        "policy.ssl_loss_weight",
    )


def _simulations(m: _Mapping) -> None:
    """num_simulations; LightZero's UniZero collects with collect_num_simulations and evaluates with
    eval_num_simulations (num_simulations is its reanalyze count)."""
    if m.policy_type == "unizero":
        collect = m.get("policy.collect_num_simulations")
        m.set("mcts.num_simulations", collect, "policy.collect_num_simulations")
        m.set("mcts.eval_num_simulations", m.get("policy.eval_num_simulations"), "policy.eval_num_simulations")
        searched = m.get("policy.num_simulations")
        if searched is not None and searched != collect and _reanalyses(m):
            m.differs(
                "policy.num_simulations",
                searched,
                f"reanalyze searches run mcts.num_simulations={collect} (the collect count)",
            )
        elif searched is not None:
            m.no_effect("policy.num_simulations")
        return
    if m.given("policy.num_simulations"):
        m.set("mcts.num_simulations", m.get("policy.num_simulations"), "policy.num_simulations")
    if m.given("policy.eval_num_simulations"):
        m.set("mcts.eval_num_simulations", m.get("policy.eval_num_simulations"), "policy.eval_num_simulations")
    if m.given("policy.collect_num_simulations"):
        m.no_effect("policy.collect_num_simulations")


def _reanalyses(m: _Mapping) -> bool:
    return bool(m.get("policy.reanalyze_ratio", 0) or m.get("policy.buffer_reanalyze_freq", 0))


def _reanalyze_noise(m: _Mapping) -> None:
    """LightZero's reanalyze searches add root noise (policy.reanalyze_noise); ours do not."""
    noise = m.get("policy.reanalyze_noise")
    if noise and _reanalyses(m):
        m.differs("policy.reanalyze_noise", noise, "reanalyze searches add no root noise")
    elif noise is not None:
        m.no_effect("policy.reanalyze_noise")


def _unizero(m: _Mapping) -> None:
    """Context length (tokens, 2 per step) and the transformer's dropout."""
    prefix = "policy.model.world_model_cfg."
    keys = [
        prefix + k
        for k in ("context_length", "context_length_for_recurrent", "attn_pdrop", "resid_pdrop", "embed_pdrop")
    ]
    if m.policy_type not in R.UNIZERO_TYPES:
        for key in keys:
            m.no_effect(key)
        return
    context = m.get(prefix + "context_length")
    if context is not None:
        if context % 2:
            m.error(f"{prefix}context_length={context}", "must be even: 2 tokens (observation, action) per step")
        else:
            m.set("unizero.infer_context_length", context // 2, prefix + "context_length")
    recurrent = m.get(prefix + "context_length_for_recurrent")
    if recurrent is not None and context is not None and recurrent != context:
        m.differs(
            prefix + "context_length_for_recurrent",
            recurrent,
            f"the search uses the same window as collection ({context} tokens)",
        )
    dropout = m.agreed((prefix + "attn_pdrop", prefix + "resid_pdrop", prefix + "embed_pdrop"), None)
    if dropout is not None:
        m.set("unizero.dropout", float(dropout), prefix + "attn_pdrop")


def _exploration(m: _Mapping) -> None:
    """policy.eps.* -> epsilon-greedy; policy.num_segments / n_episode -> the collect size."""
    if m.get("policy.eps.eps_greedy_exploration_in_collect"):
        if m.get("policy.eps.type", "linear") != "linear":
            m.error(f"policy.eps.type={m.get('policy.eps.type')!r}", "lz-tune's epsilon decays linearly")
        m.set("collector.eps_greedy_start", float(m.get("policy.eps.start", 1.0)), "policy.eps.start")
        m.set("collector.eps_greedy_end", float(m.get("policy.eps.end", 0.05)), "policy.eps.end")
        m.set("collector.eps_greedy_decay_env_steps", int(m.get("policy.eps.decay", 100_000)), "policy.eps.decay")
    else:
        for key in ("type", "start", "end", "decay"):
            m.no_effect(f"policy.eps.{key}")
    if m.given("policy.num_segments"):
        m.set("collector.segments_per_collect", m.get("policy.num_segments"), "policy.num_segments")
        m.no_effect("policy.n_episode")
    elif m.given("policy.n_episode"):
        m.differs(
            "policy.n_episode",
            m.get("policy.n_episode"),
            "lz-tune collects segments (LightZero's segment collector): a collect returns "
            "collector.segments_per_collect segments (default: one per env), not whole episodes, and "
            "update_per_collect counts per collect",
        )


def _optimizer(m: _Mapping) -> None:
    name = m.get("policy.optim_type")
    if name in ("AdamW_mix_lr_wdecay", "AdamW_nanoGPT"):
        m.differs("policy.optim_type", name, "plain AdamW (weight decay on every parameter)", "network")


def _device(m: _Mapping) -> None:
    """policy.cuda as LightZero reads it: cuda when asked for and available, else cpu."""
    if m.get("policy.cuda"):
        import torch

        m.set("learner.device", "cuda" if torch.cuda.is_available() else "cpu", "policy.cuda")
    else:
        m.no_effect("policy.cuda")


def _async(m: _Mapping) -> None:
    prefix = "policy.async_pipeline."
    ours = {f.name for f in dataclasses.fields(AsyncPipelineConfig)}
    for key in sorted(k for k in m.values if k.startswith(prefix)):
        name = key[len(prefix) :]
        if name not in ours:
            m.error(
                key,
                "unknown async pipeline key (lz-tune has every key of LightZero's async entry: docs/async_pipeline.md)",
            )
        else:
            m.set(f"async_pipeline.{name}", m.get(key), key)


def _entry_call(m: _Mapping) -> None:
    """What the training entry gets besides the config: seed, max_env_step, the entry itself."""
    f = m.file
    if f.entry is not None and f.entry not in TRAIN_ENTRIES:
        m.error(f"lzero.entry.{f.entry}", f"not a training entry lz-tune reproduces ({', '.join(TRAIN_ENTRIES)})")
    for name, value in f.entry_kwargs.items():
        if value is not None:
            m.error(f"{f.entry}({name}={value!r})", "LightZero checkpoints / models cannot be loaded here")
    if f.seed is not None:
        m.set("seed", int(f.seed), f"{f.entry}(seed=)" if f.entry else "seed")
    if f.max_env_step is not None:
        m.set("max_env_step", int(f.max_env_step), "max_env_step")
    if f.max_train_iter is not None:
        m.set("max_train_iter", int(f.max_train_iter), f"{f.entry}(max_train_iter=)")


_COMBINERS: tuple[Callable[[_Mapping], None], ...] = (
    _names,
    _env,
    _env_nums,
    _image,
    _episode_steps,
    _supports,
    _norm,
    _loss_weights,
    _simulations,
    _reanalyze_noise,
    _unizero,
    _exploration,
    _optimizer,
    _device,
    _async,
)
