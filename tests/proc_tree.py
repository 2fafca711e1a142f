"""This run's own processes, read from /proc (Linux; psutil is not a dependency of the project):
the process tree under a pid, and waiting with a deadline until given processes are gone.

A process is named by (pid, start time) so that a pid reused by an unrelated process later never
counts as "still alive"; a zombie (exited, not yet reaped: e.g. an orphan whose new parent never
reaps) counts as gone.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterable, NamedTuple, Optional

import pytest


class Proc(NamedTuple):
    pid: int
    start: int  # clock ticks after boot (/proc/<pid>/stat field 22)


def require_proc() -> None:
    if not os.path.isfile("/proc/self/stat"):
        pytest.skip("needs Linux /proc")


def _stat(pid: int) -> Optional[tuple[str, int, int]]:
    """(state, parent pid, start time) of ``pid``, None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def proc(pid: int) -> Proc:
    """The running process ``pid``."""
    stat = _stat(pid)
    assert stat is not None, f"no process {pid}"
    return Proc(pid, stat[2])


def alive(p: Proc) -> bool:
    stat = _stat(p.pid)
    return stat is not None and stat[2] == p.start and stat[0] not in ("Z", "X")


def descendants(pid: int) -> list[Proc]:
    """Every live process below ``pid`` (children, their children, ...)."""
    children: dict[int, list[Proc]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[0] not in ("Z", "X"):
                children.setdefault(stat[1], []).append(Proc(int(name), stat[2]))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def cmdline(p: Proc) -> str:
    """Command line of ``p`` (what Ray's process titles show, e.g. ``ray::CollectorWorker``)."""
    try:
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def wait_until(condition: Callable[[], object], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``condition`` until it is true (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def wait_gone(procs: Iterable[Proc], timeout_s: float) -> list[Proc]:
    """Wait until every process of ``procs`` exited; the ones still alive at the deadline."""
    procs = list(procs)
    wait_until(lambda: not any(alive(p) for p in procs), timeout_s)
    return [p for p in procs if alive(p)]


def describe(procs: Iterable[Proc]) -> str:
    return "\n".join(f"{p.pid}: {cmdline(p)[:160]}" for p in procs)
