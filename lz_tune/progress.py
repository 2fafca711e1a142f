"""A live progress line for ``python -m lz_tune train``.

On a terminal one line is redrawn in place (about twice a second); elsewhere (a log file, a
batch job, a notebook cell's captured output) a plain line is written every ``plain_interval_s``
seconds. It moves during the cold start (env steps towards ``learner.train_start_after_envsteps``)
and between evaluations. Other messages go through :meth:`ProgressLine.print`, which keeps them
and the live line apart.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Optional, TextIO


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def format_progress(
    m: dict[str, Any], *, train_start_after_envsteps: int, trainable: bool, max_env_step: Optional[int] = None
) -> str:
    """One line from the driver's metrics (``Driver.metrics()``). With ``max_env_step`` the env
    steps show the share of that budget done and an ETA at the run's mean env steps per second
    (wall-clock ``h:mm:ss``; ``ETA n/a`` before any env step)."""
    steps, rate = m["env_steps"], m["env_steps_per_s"]
    if max_env_step:
        eta = _clock(max(0, max_env_step - steps) / rate) if rate > 0 else "n/a"
        done = min(100.0, 100.0 * steps / max_env_step)
        env = f"env steps {steps:,}/{max_env_step:,} ({done:.1f}%, {rate:.0f}/s, ETA {eta})"
    else:
        env = f"env steps {steps:,} ({rate:.0f}/s)"
    parts = [_clock(m.get("wall_time_s", 0.0)), env]
    if not trainable:
        parts.append(
            f"cold start {min(m['env_steps'], train_start_after_envsteps):,}/"
            f"{train_start_after_envsteps:,} env steps, {m['buffer_transitions']:,} transitions"
        )
    else:
        parts.append(f"updates {m['train_iter']:,} ({m['updates_per_s']:.1f}/s)")
    last = m.get("eval_reward_mean_last")
    if last is not None:
        parts.append(f"last eval {last:.1f} @ {m.get('eval_train_iter_last', 0):,} updates")
    else:
        parts.append("no evaluation yet")
    ret = m.get("collect_return_mean", math.nan)
    if isinstance(ret, float) and math.isfinite(ret):
        parts.append(f"collect return {ret:.1f}")
    parts.append(f"buffer {m['buffer_transitions']:,}")
    return " | ".join(parts)


class ProgressLine:
    """Draws :func:`format_progress` lines to ``stream`` (default stdout)."""

    def __init__(
        self,
        prefix: str,
        *,
        stream: Optional[TextIO] = None,
        live: Optional[bool] = None,
        live_interval_s: float = 0.5,
        plain_interval_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.live = bool(isatty and isatty()) if live is None else live
        self.interval_s = live_interval_s if self.live else plain_interval_s
        self._clock = clock
        self._last_draw: Optional[float] = None
        self._shown = False  # a live line is on screen

    def update(self, line: str, *, force: bool = False) -> None:
        """Show ``line`` if the interval has passed since the last one (or ``force``)."""
        now = self._clock()
        if not force and self._last_draw is not None and now - self._last_draw < self.interval_s:
            return
        self._last_draw = now
        text = f"[{self.prefix}] {line}"
        if self.live:
            self.stream.write("\r\033[K" + text)
            self._shown = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def print(self, message: str) -> None:
        """A message on its own line (the live line is cleared first and redrawn at the next update)."""
        if self.live and self._shown:
            self.stream.write("\r\033[K")
            self._shown = False
            self._last_draw = None
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the live line (so what follows starts on a new line)."""
        if self.live and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
