"""Learner pieces shared by the policy types: the MuZero network builder, optimizer, LR
schedule, soft cross-entropy and gradient scaling."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from lz_tune.config import Config, ConfigError
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.conv import MuZeroConvNetwork
from lz_tune.models.unizero import UniZeroWorldModel

if TYPE_CHECKING:
    from lz_tune.models.mlp import MuZeroMLPNetwork

__all__ = [
    "build_network",
    "resolve_model_kind",
    "make_optimizer",
    "learning_rate_at",
    "soft_ce",
    "entropy",
    "cosine",
    "full_precision",
    "scale_gradient",
    "require_device",
    "learner_autocast",
    "use_channels_last",
]


def resolve_model_kind(cfg: Config, spec: EnvSpecInfo) -> str:
    """``mlp``, ``conv`` or ``conv_mlp`` (``model.kind``; ``auto`` decides from the observation rank);
    raises ConfigError naming model.kind when the kind does not fit the env's observations."""
    kind = cfg.model.kind
    if kind == "auto":
        kind = "conv" if len(spec.observation_shape) == 3 else "mlp"
    if kind == "mlp" and len(spec.observation_shape) != 1:
        raise ConfigError(
            f"model.kind: 'mlp' needs vector observations, {cfg.env.env_id} gives "
            f"{spec.observation_shape}; use model.kind=conv"
        )
    if kind in ("conv", "conv_mlp") and len(spec.observation_shape) != 3:
        raise ConfigError(
            f"model.kind: {kind!r} needs image observations [C, H, W], {cfg.env.env_id} gives "
            f"{spec.observation_shape}; use model.kind=mlp"
        )
    return kind


def build_network(cfg: Config, spec: EnvSpecInfo) -> MuZeroMLPNetwork | MuZeroConvNetwork:
    """The MuZero MLP network for vector observations (``mlp``) and, behind a conv stem, for small
    images (``conv_mlp``); the conv network for images (``conv``); for a continuous action space
    (``spec.action_dim``) with a Gaussian policy output."""
    m = cfg.model
    kind = resolve_model_kind(cfg, spec)
    if kind in ("mlp", "conv_mlp"):
        from lz_tune.models.mlp import MuZeroMLPNetwork

        image: dict[str, Any] = (
            dict(
                image_shape=spec.observation_shape,
                encoder_channels=m.num_channels,
                encoder_res_blocks=m.num_res_blocks,
                encoder_downsample=m.downsample,
            )
            if kind == "conv_mlp"
            else {}
        )
        return MuZeroMLPNetwork(
            observation_dim=math.prod(spec.observation_shape),
            action_space_size=spec.action_space_size,
            action_dim=spec.action_dim,
            latent_dim=m.latent_dim,
            hidden_sizes=m.hidden_sizes,
            value_support_size=m.value_support_size,
            reward_support_size=m.reward_support_size,
            projection_dim=m.projection_dim,
            projection_hidden_dim=m.projection_hidden_dim,
            layer_norm=m.layer_norm,
            **image,
        )
    from lz_tune.models.conv import MuZeroConvNetwork

    return MuZeroConvNetwork(
        observation_shape=spec.observation_shape,
        action_space_size=spec.action_space_size,
        action_dim=spec.action_dim,
        num_channels=m.num_channels,
        num_res_blocks=m.num_res_blocks,
        downsample=m.downsample,
        value_support_size=m.value_support_size,
        reward_support_size=m.reward_support_size,
        projection_dim=m.projection_dim,
        projection_hidden_dim=m.projection_hidden_dim,
    )


def scale_gradient(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Identity forward; multiplies the gradient by ``scale``."""
    return x * scale + x.detach() * (1.0 - scale)


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 when it is in a 16-bit float type (a bfloat16 forward pass), else as it is."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def soft_ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B] cross-entropy of ``logits`` [B, K] against target probabilities [B, K] (in float32
    at least, also when the logits come out of a bfloat16 forward pass)."""
    return -(target * F.log_softmax(full_precision(logits), dim=-1)).sum(-1)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """[B] entropy of softmax(``logits`` [B, K]) (in float32 at least)."""
    logits = full_precision(logits)
    return -(F.softmax(logits, -1) * F.log_softmax(logits, -1)).sum(-1)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[B] cosine similarity of ``a`` and ``b`` [B, P] along the last axis (in float32 at least)."""
    return F.cosine_similarity(full_precision(a), full_precision(b), dim=-1)


def require_device(device: str, key: str) -> torch.device:
    """``torch.device(device)``, or a ConfigError naming ``key`` when this torch cannot use it
    (``cuda`` on a CPU-only build or a machine without a GPU; an index past the visible GPUs)."""
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ConfigError(f"{key}: {device!r} is not a torch device ({e})") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"{key}: asks for {device!r}, but torch sees no CUDA device here (CPU-only torch "
                f"build {torch.__version__}, or no GPU on this node)"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"{key}: {device!r}, but only {torch.cuda.device_count()} CUDA device(s) are visible")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"{key}: asks for 'mps', which this machine's torch cannot use")
    return dev


def learner_autocast(cfg: Config, device: torch.device):
    """The context of the learner's forward pass and losses: ``torch.autocast`` to bfloat16
    when ``learner.precision=bfloat16`` (matrix products and convolutions in bfloat16; the
    loss helpers above upcast to float32), a no-op context for float32."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cfg.learner.precision == "bfloat16")


def use_channels_last(network: torch.nn.Module) -> None:
    """Every :class:`MuZeroConvNetwork` and image-encoder :class:`UniZeroWorldModel` in
    ``network`` to the channels-last layout (the learner's fused path: convolutions and batch
    norms on NHWC data); MLP networks are left as they are."""
    for module in network.modules():
        if isinstance(module, (MuZeroConvNetwork, UniZeroWorldModel)):
            module.use_channels_last()


def make_optimizer(cfg: Config, params, *, fused: bool = False) -> torch.optim.Optimizer:
    """``learner.optim_type`` over ``params``. ``fused``: torch's fused kernel (one call for all
    parameters instead of a Python loop over them; ~5x faster step on the CPU, same update)."""
    lc = cfg.learner
    extra: dict[str, Any] = {"fused": True} if fused else {}
    if lc.optim_type == "sgd":
        return torch.optim.SGD(params, lr=lc.learning_rate, momentum=lc.momentum, weight_decay=lc.weight_decay, **extra)
    if lc.optim_type == "adam":
        return torch.optim.Adam(params, lr=lc.learning_rate, weight_decay=lc.weight_decay, **extra)
    return torch.optim.AdamW(params, lr=lc.learning_rate, weight_decay=lc.weight_decay, **extra)


def learning_rate_at(cfg: Config, train_iter: int) -> float:
    """Piecewise schedule: x1 before 50%, x0.1 before 100%, x0.01 after threshold updates."""
    lc = cfg.learner
    if not lc.piecewise_decay_lr_scheduler:
        return lc.learning_rate
    frac = train_iter / lc.threshold_training_steps_for_final_lr
    return lc.learning_rate * (1.0 if frac < 0.5 else 0.1 if frac < 1.0 else 0.01)
