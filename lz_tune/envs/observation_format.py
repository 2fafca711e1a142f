"""How a gymnasium observation becomes the model input: image layout and flattening.

Every image inside lz_tune is channels-first ``[C, H, W]`` (frame stacking concatenates on axis
0, the conv networks read NCHW). Gymnasium envs give images in either layout: ALE's raw frames
and MinAtar are channels-last ``[H, W, C]``. :func:`resolve_observation_layout` decides which one
an env gives, from the user's ``env.observation_layout``, then what the env declares, then a shape
rule that refuses to guess when the shape is ambiguous (a ``[10, 10, 10]`` observation); it is
never silently wrong. :class:`ObservationFormat` then turns each env's raw observations into
lz_tune frames: transposed to ``[C, H, W]``, or flattened to ``[D]`` for a vector network
(``model.kind=mlp`` on an image or any multi-axis observation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

__all__ = [
    "LAYOUTS",
    "DECLARED_LAYOUTS",
    "ObservationFormat",
    "discrete_components",
    "resolve_observation_layout",
    "declared_layout",
    "observation_format",
]

Layout = Literal["auto", "chw", "hwc"]

LAYOUTS = ("auto", "chw", "hwc")
"""Values of ``env.observation_layout``."""

DECLARED_LAYOUTS = {
    "minatar.gym:BaseEnv": "hwc",  # MinAtar: Environment.state() is [10, 10, n_channels]
}
"""Layouts of env entry points whose observations are known (gymnasium has no standard way to declare
one). An env of its own can declare its layout with ``metadata["observation_layout"] = "hwc"``."""

_SMALL_CHANNELS = 4  # 1 gray, 3 RGB, 4 RGBA / stacked frames: a channel count, never an image side


def declared_layout(entry_point: object, metadata: Optional[dict]) -> Optional[str]:
    """The layout an env declares: ``metadata["observation_layout"]``, else the entry point's entry
    in :data:`DECLARED_LAYOUTS`; None when it declares none. Raises ValueError on a bad declaration."""
    value = (metadata or {}).get("observation_layout")
    if value is None and isinstance(entry_point, str):
        value = DECLARED_LAYOUTS.get(entry_point)
    if value is not None and value not in ("chw", "hwc"):
        raise ValueError(f"env metadata observation_layout={value!r}: must be 'chw' or 'hwc'")
    return value


def _looks_like_channels(shape: tuple[int, ...], channel_axis: int) -> bool:
    """Whether axis ``channel_axis`` of a 3-D ``shape`` reads as the channel axis: few channels
    (<= 4) beside two larger sides, or fewer channels than the two sides of a square image."""
    c = shape[channel_axis]
    h, w = (shape[1], shape[2]) if channel_axis == 0 else (shape[0], shape[1])
    if c <= _SMALL_CHANNELS and min(h, w) > _SMALL_CHANNELS:
        return True
    return h == w and c < h


def resolve_observation_layout(
    env_id: str, shape: tuple[int, ...], requested: str = "auto", declared: Optional[str] = None
) -> tuple[Optional[str], str]:
    """The layout of ``env_id``'s observations of ``shape``, and why.

    Returns ``(layout, reason)``: layout ``"chw"`` / ``"hwc"`` for a 3-D observation, None for
    any other rank. ``requested`` (``env.observation_layout``) wins when it is not ``"auto"``;
    then ``declared`` (:func:`declared_layout`); then the shape: the channel axis is axis 0 or 2,
    whichever alone holds at most 4 channels beside two larger sides, or fewer channels than the
    sides of a square image.

    Raises:
        ValueError: naming ``env.observation_layout`` when the shape fits both layouts or neither
            (``[10, 10, 10]``, ``[5, 84, 3]``), or a layout is asked of a non-image observation.
    """
    if requested not in LAYOUTS:
        raise ValueError(f"env.observation_layout: {requested!r} is not one of {list(LAYOUTS)}")
    if len(shape) != 3:
        if requested != "auto":
            raise ValueError(
                f"env.observation_layout={requested!r}: {env_id} gives observations of shape "
                f"{tuple(shape)}, not images (a layout is for 3-D observations only); leave it 'auto'"
            )
        return None, f"{len(shape)}-D observation, not an image"
    if requested != "auto":
        return requested, "env.observation_layout"
    if declared is not None:
        return declared, f"declared by the env ({declared})"
    chw, hwc = _looks_like_channels(shape, 0), _looks_like_channels(shape, 2)
    if chw != hwc:
        layout = "chw" if chw else "hwc"
        c = shape[0] if chw else shape[2]
        return layout, f"shape {tuple(shape)}: {c} channels on axis {0 if chw else 2}"
    raise ValueError(
        f"env.observation_layout: {env_id} gives observations of shape {tuple(shape)}, which "
        f"could be channels-first [C, H, W] or channels-last [H, W, C] "
        f"({'both fit' if chw else 'neither fits a clear rule'}); set env.observation_layout=chw "
        f"or env.observation_layout=hwc"
    )


def discrete_components(space: object) -> Optional[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(sizes, starts)`` of an observation space made of discrete parts (``Discrete(n)``,
    ``MultiDiscrete`` of one axis, a ``Tuple`` of ``Discrete``: FrozenLake, Taxi, Blackjack), each
    part served one-hot; None for any other space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return (int(space.n),), (int(space.start),)
    if isinstance(space, spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        return tuple(int(n) for n in space.nvec), tuple(int(x) for x in np.broadcast_to(space.start, space.nvec.shape))
    if isinstance(space, spaces.Tuple) and space.spaces:
        parts = [p for p in space.spaces if isinstance(p, spaces.Discrete)]
        if len(parts) == len(space.spaces):  # every part Discrete
            return tuple(int(p.n) for p in parts), tuple(int(p.start) for p in parts)
    return None


@dataclass(frozen=True)
class ObservationFormat:
    """Raw env observations ``[N, *raw_shape]`` -> lz_tune frames ``[N, *frame_shape]``.

    Attributes:
        raw_shape: one observation as the env gives it (``(K,)`` int64 for K discrete parts).
        layout: ``"hwc"`` (transposed to ``[C, H, W]``), ``"chw"`` or None (kept).
        flatten: reshape each observation to ``[D]`` (after the transpose: a vector network
            reads channels-first order, the same for either layout).
        reason: why the layout was chosen (printed by ``config --env``).
        one_hot_sizes, one_hot_starts: a discrete observation space's parts (sizes ``n_k`` and
            first values): each part becomes a one-hot vector, concatenated to ``[sum n_k]``
            float32. Empty for Box spaces.
    """

    raw_shape: tuple[int, ...]
    layout: Optional[str] = None
    flatten: bool = False
    reason: str = ""
    one_hot_sizes: tuple[int, ...] = ()
    one_hot_starts: tuple[int, ...] = ()

    @property
    def raw_dtype(self) -> Optional[np.dtype]:
        """int64 for discrete parts; None: the env's own (Box) dtype."""
        return np.dtype(np.int64) if self.one_hot_sizes else None

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """Shape of one frame after the transform."""
        if self.one_hot_sizes:
            return (sum(self.one_hot_sizes),)
        shape = self.raw_shape
        if self.layout == "hwc":
            shape = (shape[2], shape[0], shape[1])
        if self.flatten:
            shape = (math.prod(shape),)
        return tuple(int(d) for d in shape)

    @property
    def is_identity(self) -> bool:
        return self.layout != "hwc" and not self.flatten and not self.one_hot_sizes

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        """``frames`` ``[N, *raw_shape]`` -> ``[N, *frame_shape]`` (a new contiguous array unless
        the transform is the identity)."""
        if self.is_identity:
            return frames
        if self.one_hot_sizes:
            index = frames.reshape(frames.shape[0], -1) - np.asarray(self.one_hot_starts)
            sizes = np.asarray(self.one_hot_sizes)
            if (index < 0).any() or (index >= sizes).any():
                raise ValueError(
                    f"observation {frames.tolist()} outside the discrete space's sizes {self.one_hot_sizes}"
                )
            out = np.zeros((frames.shape[0], int(sizes.sum())), np.float32)
            offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            out[np.arange(frames.shape[0])[:, None], offsets + index] = 1.0
            return out
        if self.layout == "hwc":
            frames = frames.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(frames).reshape(frames.shape[0], *self.frame_shape)


def observation_format(
    env_id: str,
    raw_shape: tuple[int, ...],
    *,
    layout: str = "auto",
    flatten: Optional[bool] = None,
    entry_point: object = None,
    metadata: Optional[dict] = None,
    space: object = None,
) -> ObservationFormat:
    """The :class:`ObservationFormat` of an env.

    Args:
        env_id: for error messages.
        raw_shape: one observation as the env gives it.
        layout: ``env.observation_layout``.
        flatten: True: always flatten to ``[D]`` (``model.kind=mlp``); False: never
            (``model.kind=conv``); None (``model.kind=auto``): flatten every observation that is
            neither a vector nor a 3-D image.
        entry_point, metadata: the env's registration entry point and ``metadata`` (what it declares).
        space: the env's observation space; a discrete one (:func:`discrete_components`) is served
            one-hot, and ``raw_shape`` is then ignored.
    """
    parts = discrete_components(space) if space is not None else None
    if parts is not None:
        if layout != "auto":
            raise ValueError(
                f"env.observation_layout={layout!r}: {env_id} has discrete observations {space}, "
                "not images; leave it 'auto'"
            )
        return ObservationFormat(
            raw_shape=(len(parts[0]),),
            one_hot_sizes=parts[0],
            one_hot_starts=parts[1],
            reason=f"discrete observations {space}, one-hot",
        )
    declared = declared_layout(entry_point, metadata) if len(raw_shape) == 3 else None
    try:
        resolved, reason = resolve_observation_layout(env_id, tuple(raw_shape), layout, declared)
    except ValueError:
        if flatten is not True or layout != "auto":
            raise
        # a vector network reads every input anyway: an ambiguous image is flattened as given
        resolved, reason = None, f"shape {tuple(raw_shape)} flattened as the env gives it"
    if flatten is None:
        flatten = len(raw_shape) not in (1, 3)
    return ObservationFormat(
        raw_shape=tuple(int(d) for d in raw_shape), layout=resolved, flatten=bool(flatten), reason=reason
    )
