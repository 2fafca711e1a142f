"""Recording what an env shows while a policy plays it: the frames the network saw, the screen as
the env renders it, and animated GIFs of them (``python -m lz_tune evaluate --video``).

- :class:`FrameRecorder`: env 0's network-input frames (``EnvBatch.frame``) of its first game;
- :func:`screen_recorder`: env 0's first episode as the env renders it, RGB ``[H, W, 3]``:
  gymnasium envs (:class:`GymScreenRecorder`: env 0 made again with ``render_mode="rgb_array"``)
  and Atari (:class:`AtariScreenRecorder`: a mirror of env 0's game that keeps the full screen,
  built by :func:`lz_tune.envs.atari_vector.make_ale_vector_env`, the constructor the env uses);
- :func:`write_gif`: frames to a GIF file.

All recorders are pass-throughs of a :class:`lz_tune.envs.base.VectorEnv` (the evaluator steps
them as the env); an env that cannot render raises :class:`RenderError` before any episode.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, SupportsFloat

import gymnasium
import numpy as np

from lz_tune.envs.atari_vector import AtariVectorEnv, make_ale_vector_env
from lz_tune.envs.gym_vector import GymVectorEnv

__all__ = [
    "RenderError",
    "FrameRecorder",
    "EpisodeFrames",
    "GymScreenRecorder",
    "RenderOnStep",
    "AtariScreenRecorder",
    "full_screen_mirror",
    "screen_recorder",
    "write_gif",
    "as_image",
]


class RenderError(ValueError):
    """This env cannot be rendered here (no RGB rendering, a missing renderer package)."""


def as_image(frame: np.ndarray) -> np.ndarray:
    """[C, H, W] -> [H, W] (one channel) or [H, W, C]; vectors stay as they are."""
    if frame.ndim == 3:
        return frame[0] if frame.shape[0] == 1 else np.moveaxis(frame, 0, -1)
    return frame


class FrameRecorder:
    """A VectorEnv pass-through that keeps env 0's frames (``EnvBatch.frame``, the newest frame
    of the observation) from the reset until its first game ends, at most ``max_frames``."""

    def __init__(self, env: Any, max_frames: int) -> None:
        self.env = env
        self.max_frames = max_frames
        self.frames: list[np.ndarray] = []
        self._recording = False

    def __getattr__(self, name: str) -> Any:  # num_envs, action_space_size, shapes ...
        return getattr(self.env, name)

    def _keep(self, batch: Any) -> None:
        if self._recording and len(self.frames) < self.max_frames:
            self.frames.append(as_image(np.array(batch.frame[0], copy=True)))

    def reset(self, seed: Optional[int] = None) -> Any:
        batch = self.env.reset(seed)
        self.frames, self._recording = [], True
        self._keep(batch)
        return batch

    def step(self, actions: np.ndarray) -> Any:
        res = self.env.step(actions)
        if res.real_episode_end[0]:
            self._recording = False  # res.batch already shows the next game
        self._keep(res.batch)
        return res

    def close(self) -> None:
        self.env.close()


def screen_recorder(env: Any, max_frames: int, seed: Optional[int]) -> Any:
    """A VectorEnv pass-through that renders env 0's first episode (see
    :attr:`lz_tune.checkpoint_eval.CheckpointEvaluation.rendered`): exposes ``frames``, ``episode``
    and ``fps``. RenderError if this env cannot render."""
    if isinstance(env, AtariVectorEnv):
        return AtariScreenRecorder(env, max_frames)
    if isinstance(env, GymVectorEnv):
        return GymScreenRecorder(env, max_frames, seed)
    raise RenderError(
        f"render: env {getattr(env, 'env_id', type(env).__name__)!r} ({type(env).__name__}) "
        "has no RGB rendering; only gymnasium envs and Atari can be recorded"
    )


class EpisodeFrames:
    """Frames of one episode: ``frames`` (at most ``max_frames``), ``episode`` (return, length:
    set when it ended), ``fps``."""

    def __init__(self, max_frames: int, fps: float) -> None:
        self.max_frames = max_frames
        self.fps = fps
        self.frames: list[np.ndarray] = []
        self.episode: Optional[dict[str, Any]] = None
        self.state = "idle"  # -> "recording" at the first reset -> "done" when that episode ends
        self._return, self._length = 0.0, 0

    def keep(self, frame: Any) -> None:  # what render() returned; checked here
        if len(self.frames) < self.max_frames:
            frame = np.asarray(frame)
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
                raise RuntimeError(f"render: expected uint8 [H, W, 3] RGB frames, got {frame.dtype} {frame.shape}")
            self.frames.append(np.array(frame, copy=True))

    def stepped(self, reward: SupportsFloat, ended: bool) -> None:
        self._return += float(reward)
        self._length += 1
        if ended:
            self.state = "done"
            self.episode = {"return": self._return, "length": self._length}


class GymScreenRecorder(EpisodeFrames):
    """Gymnasium envs: env 0 of the GymVectorEnv is made again from its own spec with
    ``render_mode="rgb_array"`` (same id, kwargs, time limit and seeding) and wrapped so that it
    renders after its reset and after every step, before the vector env's autoreset: the frames
    show the very env whose observations the search saw and whose actions it took."""

    def __init__(self, env: Any, max_frames: int, seed: Optional[int]) -> None:
        inner = getattr(env, "gym_envs", None)
        if not inner or getattr(inner[0], "spec", None) is None:
            raise RenderError(f"render: cannot rebuild env 0 of {env.env_id!r} with render_mode='rgb_array'")
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # headless pygame: no "XDG_RUNTIME_DIR" noise
        try:
            renderable = gymnasium.make(inner[0].spec, render_mode="rgb_array")
        except Exception as e:  # noqa: BLE001 - gymnasium raises many kinds
            raise RenderError(
                f"render: {env.env_id} cannot be made with render_mode='rgb_array' ({type(e).__name__}: {e})"
            ) from None
        try:  # a first frame now, so that a missing renderer fails before any episode is played
            renderable.reset(seed=seed)
            probe = renderable.render()
        except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
            renderable.close()
            hint = "" if "pip install" in str(e) else '; classic control: pip install "gymnasium[classic-control]"'
            raise RenderError(
                f"render: rendering {env.env_id} needs a package that is not installed: {e}{hint}"
            ) from None
        except Exception as e:  # noqa: BLE001 - e.g. MuJoCo without an OpenGL context (set MUJOCO_GL=egl)
            renderable.close()
            raise RenderError(f"render: {env.env_id} cannot render ({type(e).__name__}: {e})") from None
        if not isinstance(probe, np.ndarray) or probe.ndim != 3:
            renderable.close()
            raise RenderError(f"render: {env.env_id} renders {type(probe).__name__}, not an RGB array")
        super().__init__(max_frames, float(renderable.metadata.get("render_fps") or 30))
        self.env = env
        inner[0].close()
        inner[0] = RenderOnStep(renderable, self)  # stepped and seeded by the vector env as before

    def __getattr__(self, name: str) -> Any:  # num_envs, action_space_size, shapes ...
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: Optional[int] = None) -> Any:
        return self.env.reset(seed)

    def step(self, actions: np.ndarray) -> Any:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()


class RenderOnStep(gymnasium.Wrapper):
    """Env 0 of a :class:`GymScreenRecorder`: renders into ``sink`` after the first reset and after
    every step of that episode (so the last frame is the episode's end, not the vector env's
    autoreset)."""

    def __init__(self, env: Any, sink: EpisodeFrames) -> None:
        super().__init__(env)
        self.sink = sink

    def reset(self, **kwargs: Any) -> Any:
        out = self.env.reset(**kwargs)
        if self.sink.state == "idle":
            self.sink.state = "recording"
            self.sink.keep(self.env.render())
        return out

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        if self.sink.state == "recording":
            self.sink.keep(self.env.render())
            self.sink.stepped(out[1], bool(out[2] or out[3]))
        return out


class AtariScreenRecorder(EpisodeFrames):
    """Atari: ALE's C++ vector env serves only the preprocessed (e.g. 64x64 gray) frames, so env 0's
    first game is mirrored by a one-game ALE vector env with the same game, seed, sticky actions,
    no-op starts, fire reset, frame skip and frame cap, fed the same actions, that keeps the full
    RGB screen (210x160x3, no max-pool: what ``render_mode="rgb_array"`` shows). ALE is
    deterministic given the seed and the actions, so both play the same game frame for frame
    (``tests/test_cli_evaluate.py`` checks it bit for bit); each step's reward and end are compared
    and a difference raises RuntimeError.

    ``make_mirror(env)`` builds the mirror (default: :func:`full_screen_mirror`)."""

    def __init__(self, env: Any, max_frames: int, make_mirror: Optional[Callable[[Any], Any]] = None) -> None:
        super().__init__(max_frames, 60.0 / env.options.frame_skip)
        self.env = env
        self.make_mirror = make_mirror or full_screen_mirror
        self._mirror: Any = None

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: Optional[int] = None) -> Any:
        mirror_seed = seed if seed is not None else self.env.pending_seed
        batch = self.env.reset(seed)
        if self.state == "idle":
            self._mirror = self.make_mirror(self.env)
            obs, _ = self._mirror.reset(seed=mirror_seed)
            self.state = "recording"
            self.keep(obs[0, -1])
        return batch

    def step(self, actions: np.ndarray) -> Any:
        res = self.env.step(actions)
        if self.state == "recording":
            obs, reward, terminated, truncated, info = self._mirror.step(np.asarray(actions, np.int64)[:1])
            ended = bool(terminated[0] or truncated[0])
            if float(reward[0]) != float(res.reward[0]) or ended != bool(res.real_episode_end[0]):
                self._close_mirror()
                raise RuntimeError(
                    f"render: the mirrored game of {self.env.env_id} left env 0's game at step "
                    f"{len(self.frames)} (reward {reward[0]} vs {res.reward[0]}, end {ended} vs "
                    f"{bool(res.real_episode_end[0])})"
                )
            self.keep((info["final_obs"] if ended and "final_obs" in info else obs)[0, -1])
            self.stepped(float(reward[0]), ended)
            if ended:
                self._close_mirror()
        return res

    def _close_mirror(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
            self._mirror = None

    def close(self) -> None:
        self._close_mirror()
        self.env.close()


def full_screen_mirror(env: AtariVectorEnv) -> Any:
    """A one-game ``ale_py`` vector env that plays env 0's game of ``env`` and shows the full RGB
    screen (:func:`lz_tune.envs.atari_vector.make_ale_vector_env` with ``screen=True``)."""
    return make_ale_vector_env(env.env_id, 1, env.options, num_threads=1, screen=True)


def write_gif(frames: Any, path: str | os.PathLike, *, fps: float) -> Path:
    """Write uint8 ``[T, H, W, 3]`` RGB frames as a looping GIF of exactly T frames, atomically (a
    temporary file in the same folder, then a rename). Each frame has its own palette: exact when
    it has at most 256 colours (classic control, Atari), else Pillow's median cut. Delays are whole
    centiseconds, at least 2 (the shortest browsers play), so the speed is ``fps`` rounded to that.

    Pillow's ``save(save_all=True)`` would fold a frame identical to the previous one into a longer
    delay (CartPole's first steps often move the cart less than a pixel), so frame i would no longer
    be step i; the frames are written one by one with Pillow's GIF encoder instead."""
    import numpy as np

    try:
        from PIL import GifImagePlugin, Image
    except ImportError as e:  # the `analysis` extra
        from lz_tune.extras import missing_extra

        raise missing_extra("write_gif (evaluate --video)", "analysis", e) from e

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"write_gif: expected uint8 [T, H, W, 3] frames, got {frames.dtype} {frames.shape}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    delay_ms = max(20, int(round(100.0 / fps)) * 10)

    def paletted(frame: Any) -> Any:
        image = Image.fromarray(frame)
        colors = image.getcolors(256)
        if colors is None:  # more than 256 colours (e.g. MuJoCo): Pillow's median cut
            return image.convert("P", palette=Image.Palette.ADAPTIVE, colors=256)
        # few colours (classic control, Atari): an exact palette, each pixel its own colour
        keys = np.sort(np.array([(r << 16) | (g << 8) | b for _, (r, g, b) in colors], np.uint32))  # type: ignore[misc]  # RGB: tuples
        packed = (frame[..., 0].astype(np.uint32) << 16) | (frame[..., 1].astype(np.uint32) << 8) | frame[..., 2]
        out = Image.frombytes("P", image.size, np.searchsorted(keys, packed).astype(np.uint8).tobytes())
        out.putpalette(np.stack([keys >> 16, (keys >> 8) & 255, keys & 255], axis=1).astype(np.uint8).tobytes())
        return out

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            header, _ = GifImagePlugin.getheader(paletted(frames[0]), info={"loop": 0})
            f.write(b"".join(header))
            for frame in frames:
                f.write(b"".join(GifImagePlugin.getdata(paletted(frame), duration=delay_ms, include_color_table=True)))
            f.write(b";")  # GIF trailer
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
