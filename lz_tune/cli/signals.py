"""SIGINT / SIGTERM for ``python -m lz_tune``: one :class:`SignalGuard` for the process (signal
handlers are per process), used by the ``train`` command and the process's own start and end.

What it guarantees:

- a Ctrl-C or SIGTERM (``timeout``, containers, batch schedulers) while training closes the run's
  workers and exits with 130 / 143 and one line, keeping what was written;
- a signal whose exception was swallowed where it landed (inside a C callback: numba's compiler
  cache, via ctypes, prints "Exception ignored" and goes on) is still acted on at the next
  :meth:`SignalGuard.check`;
- while the run closes, a further signal prints a notice instead of cutting the close short;
- once the command is over, a further signal ends the process at once with the command's code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional

__all__ = ["Terminated", "SignalGuard", "SIGNALS", "flush_streams"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C."""


class SignalGuard:
    """The process's SIGINT / SIGTERM handling (module docstring).

    Attributes:
      sigterm_seen: True once a SIGTERM arrived (since the last :meth:`during_command`).
      signal_seen: True once a SIGINT or SIGTERM arrived.
      running_as_cli: True in ``python -m lz_tune``: after a command, a further signal ends the
        process at once (in a library call the previous handlers are given back instead).
    """

    def __init__(self) -> None:
        self.sigterm_seen = False
        self.signal_seen = False
        self.running_as_cli = False
        self._previous_unraisablehook: Optional[Callable[[Any], Any]] = None

    @property
    def exit_code(self) -> int:
        """143 after a SIGTERM, else 130 (the shell's codes for the two signals)."""
        return 143 if self.sigterm_seen else 130

    def install(self) -> None:
        """SIGTERM raises :class:`Terminated`, SIGINT KeyboardInterrupt; both are recorded, and a
        KeyboardInterrupt swallowed inside a C callback prints no traceback. Main thread only."""

        def on_term(signum, frame):
            self.sigterm_seen = self.signal_seen = True
            raise Terminated()

        def on_int(signum, frame):
            self.signal_seen = True
            raise KeyboardInterrupt()

        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_int)
        if sys.unraisablehook != self._quiet_interrupts:
            self._previous_unraisablehook = sys.unraisablehook
            sys.unraisablehook = self._quiet_interrupts

    def _quiet_interrupts(self, unraisable) -> None:
        """A signal's KeyboardInterrupt swallowed inside a C callback: no traceback (the signal is
        recorded and :meth:`check` raises it); anything else as Python reports it."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            return
        (self._previous_unraisablehook or sys.__unraisablehook__)(unraisable)

    def check(self) -> None:
        """Raise now for a signal whose exception was swallowed where it landed."""
        if self.signal_seen:
            raise Terminated() if self.sigterm_seen else KeyboardInterrupt()

    @contextlib.contextmanager
    def during_command(self) -> Iterator["SignalGuard"]:
        """While a command trains: both signals raise (so the run closes its workers and exits with
        a clear line, keeping what is written). Afterwards the previous handlers come back, or, in
        ``python -m lz_tune``, a further signal ends the process at once."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        self.sigterm_seen = self.signal_seen = False
        self.install()
        try:
            yield self
        finally:
            if self.running_as_cli:  # the process ends after this command: no handler to give back
                self.exit_at_once_on_a_signal(self.exit_code if self.signal_seen else 0)
            else:
                signal.signal(signal.SIGTERM, previous[0])
                signal.signal(signal.SIGINT, previous[1])

    @contextlib.contextmanager
    def deferred_while(self, what: str) -> Iterator[None]:
        """While the run closes (workers, Ray, logs: bounded by ``async_pipeline.shutdown_timeout_s``),
        a further SIGTERM / Ctrl-C (``timeout`` forwarding its own, a second Ctrl-C) prints a notice
        instead of raising: an exception there would cut the close short, skip the log and Ray
        shutdown, and could leave the process waiting on a thread that was never stopped."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

        def notice(signum, frame):
            print(f"still {what}; it ends by itself (SIGKILL stops it at once)", file=sys.stderr, flush=True)

        signal.signal(signal.SIGTERM, notice)
        signal.signal(signal.SIGINT, notice)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGINT, previous[1])

    def exit_at_once_on_a_signal(self, code: int) -> None:
        """After the command's close: a SIGTERM / Ctrl-C during the teardown that follows ends the
        process at once with ``code`` (or 143 / 130 after a clean run), rather than with the default
        handler's raw signal status or a traceback from a half-torn-down interpreter."""

        def exit_now(signum, frame):
            flush_streams()
            os._exit(code if code else (143 if signum == signal.SIGTERM else 130))

        signal.signal(signal.SIGTERM, exit_now)
        signal.signal(signal.SIGINT, exit_now)


SIGNALS = SignalGuard()
"""The process's guard (signal handlers belong to the process, so there is one)."""


def flush_streams() -> None:
    """Flush stdout and stderr before ``os._exit``; a closed or broken pipe, or a reentrant flush
    (a signal that landed inside a write), is skipped."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
