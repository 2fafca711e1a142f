"""One writer per Tune trial: a lease file with its owner and a heartbeat, in the trial's storage.

A train run folder is locked with ``fcntl.flock`` (:mod:`lz_tune.run_folder`); a Tune trial's
storage may be a cloud bucket, where no lock exists. Two processes may still write one trial (a
trial restarted while its old process lives on behind a network partition), and each would
garbage-collect the other's buffer chunks. So each trial process holds a lease:
``<trial>/lz_tune/lease.json`` = ``{"owner": "<host>:<pid>:<token>", "host", "pid", "beat": n,
"since": unix time}``, rewritten every ``heartbeat_s`` by a daemon thread (``beat`` counts up).

Taking the lease (:meth:`TrialLease.acquire`):

- no lease, our own, or one the holder released: take it;
- a holder on this host whose process is gone (a crash, the common case of a Tune restore): take it;
- otherwise watch it for ``ttl_s`` of this process's clock (no clock is compared across
  machines): a holder that beats in that time is alive, and the trial is refused with
  :class:`~lz_tune.run_folder.RunFolderInUseError` naming it; a lease that does not move is
  stale and is taken.

Every checkpoint save first checks the lease is still ours (:meth:`TrialLease.check`): a process
that lost it (it stalled for longer than ``ttl_s`` and another took the trial over) stops with
:class:`LeaseLostError` instead of writing over the new owner's files.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Optional

from lz_tune.run_folder import RunFolderInUseError

__all__ = ["LEASE_FILE", "LeaseLostError", "TrialLease"]

#: the lease inside the trial's ``lz_tune/`` folder
LEASE_FILE = "lease.json"


class LeaseLostError(RuntimeError):
    """Another process took over this trial's lease: this process must not write its files."""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


class TrialLease:
    """The lease of one trial folder (``folder``: ``<trial>/lz_tune`` on ``filesystem``, a pyarrow
    file system; None: the local one)."""

    def __init__(
        self,
        filesystem: Any,
        folder: str,
        *,
        ttl_s: float = 30.0,
        heartbeat_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import pyarrow.fs

        if not heartbeat_s < ttl_s:
            raise ValueError(f"heartbeat_s={heartbeat_s} must be shorter than ttl_s={ttl_s}")
        self.fs = filesystem if filesystem is not None else pyarrow.fs.LocalFileSystem()
        self.folder = folder.rstrip("/")
        self.path = f"{self.folder}/{LEASE_FILE}"
        self.ttl_s, self.heartbeat_s = float(ttl_s), float(heartbeat_s)
        self._clock, self._sleep = clock, sleep
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:12]}"
        self._beat = 0
        self._held = False
        self._lost: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    # -- files ----------------------------------------------------------------------------
    def read(self) -> Optional[dict[str, Any]]:
        """The lease as it is in storage (None: no lease, or one that does not parse)."""
        try:
            with self.fs.open_input_stream(self.path) as f:
                data = json.loads(f.read().decode())
        except (FileNotFoundError, OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("owner"), str) else None

    def _write(self) -> None:
        self._beat += 1
        record = {"owner": self.owner, "host": self.host, "pid": self.pid, "beat": self._beat, "since": time.time()}
        self.fs.create_dir(self.folder, recursive=True)
        with self.fs.open_output_stream(self.path) as f:
            f.write(json.dumps(record).encode())

    # -- taking, keeping, giving back -----------------------------------------------------------
    def acquire(self) -> None:
        """Take the lease (module docstring); RunFolderInUseError when a live holder beats."""
        current = self.read()
        if current is not None and current["owner"] != self.owner and not self._may_take(current):
            deadline = self._clock() + self.ttl_s
            while self._clock() < deadline:
                self._sleep(min(self.heartbeat_s / 2, max(0.0, deadline - self._clock())))
                now = self.read()
                if now is None:
                    break  # released meanwhile
                if now != current:
                    raise RunFolderInUseError(
                        f"{self.folder}: this Tune trial is being written by another process "
                        f"({now['owner']}, lease {self.path} renewed while we waited); a second writer "
                        f"would delete its replay-buffer chunks. Stop that process, or wait "
                        f"{self.ttl_s:.0f} s after it stops"
                    )
        with self._lock:
            self._write()
            self._held, self._lost = True, None
        self._start_heartbeat()

    def _may_take(self, current: dict[str, Any]) -> bool:
        """At once, without watching: the holder released it, or was a process of this host that is gone."""
        if current.get("released"):
            return True
        pid = current.get("pid")
        return current.get("host") == self.host and isinstance(pid, int) and not _process_alive(pid)

    def _start_heartbeat(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat_loop, name="lz_tune-trial-lease", daemon=True)
        self._thread.start()

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.renew()
            except LeaseLostError:
                return
            except OSError:  # storage briefly unreachable: the next beat tries again
                continue

    def renew(self) -> None:
        """One heartbeat: LeaseLostError (and no write) when another process holds the lease now."""
        with self._lock:
            if not self._held:
                return
            current = self.read()
            if current is not None and current["owner"] != self.owner:
                self._held = False
                self._lost = current["owner"]
                raise LeaseLostError(self._lost_message())
            self._write()

    def check(self) -> None:
        """Before writing the trial's files: LeaseLostError when the lease is no longer ours."""
        if self._lost is not None:
            raise LeaseLostError(self._lost_message())
        self.renew()

    def _lost_message(self) -> str:
        return (
            f"{self.folder}: another process ({self._lost}) took this Tune trial over while this one "
            f"stalled for over {self.ttl_s:.0f} s; this process stops writing it"
        )

    def release(self) -> None:
        """Stop the heartbeat and mark the lease released (if still ours), so the next process takes it at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 5)
        with self._lock:
            if not self._held:
                return
            self._held = False
            current = self.read()
            if current is None or current["owner"] == self.owner:
                try:
                    with self.fs.open_output_stream(self.path) as f:
                        f.write(json.dumps({"owner": self.owner, "released": True, "since": time.time()}).encode())
                except OSError:
                    pass
