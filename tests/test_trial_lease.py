"""One writer per Tune trial: the lease file in the trial's storage (lz_tune.tune.trial_lease)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from lz_tune.run_folder import RunFolderInUseError
from lz_tune.tune.trial_lease import LEASE_FILE, LeaseLostError, TrialLease


def _lease(folder, **kw) -> TrialLease:
    return TrialLease(None, str(folder), **{"ttl_s": 0.6, "heartbeat_s": 0.05, **kw})


def _write(folder, record) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LEASE_FILE).write_text(json.dumps(record))


def test_the_holder_beats_and_a_second_writer_is_refused_naming_it(tmp_path):
    # a ttl far above the heartbeat: on a loaded 2-core box the holder's heartbeat thread can stall
    # for more than 0.6 s, and the lease then lapses before the second writer asks (seen once in CI)
    a = _lease(tmp_path / "lz_tune", ttl_s=5.0)
    a.acquire()
    try:
        first = a.read()["beat"]
        time.sleep(0.3)
        assert a.read()["owner"] == a.owner and a.read()["beat"] > first  # the heartbeat thread renews it
        b = _lease(tmp_path / "lz_tune", ttl_s=5.0)
        with pytest.raises(RunFolderInUseError, match=a.owner.replace(".", r"\.")):
            b.acquire()
        assert a.read()["owner"] == a.owner  # the refused one wrote nothing
        a.check()
    finally:
        a.release()
    assert a.read()["released"] is True


def test_a_released_lease_is_taken_at_once(tmp_path):
    a = _lease(tmp_path, ttl_s=30.0)
    a.acquire()
    a.release()
    b = _lease(tmp_path, ttl_s=30.0)
    start = time.monotonic()
    b.acquire()
    assert time.monotonic() - start < 5 and b.read()["owner"] == b.owner
    b.release()


def test_a_crashed_holder_on_this_host_is_taken_over_at_once(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    _write(tmp_path, {"owner": f"{socket.gethostname()}:{pid}:x", "host": socket.gethostname(), "pid": pid, "beat": 7})
    b = _lease(tmp_path, ttl_s=30.0)
    start = time.monotonic()
    b.acquire()
    assert time.monotonic() - start < 5 and b.read()["owner"] == b.owner
    b.release()


def test_a_lease_that_does_not_move_is_stale_after_the_ttl_and_taken(tmp_path):
    """A holder on another machine (no pid to check): watched for ttl_s of this process's clock."""
    _write(tmp_path, {"owner": "elsewhere:1:y", "host": "elsewhere", "pid": 1, "beat": 3, "since": 0})
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    b = TrialLease(None, str(tmp_path), ttl_s=30.0, heartbeat_s=5.0, clock=lambda: now[0], sleep=sleep)
    b.acquire()
    try:
        assert sum(slept) >= 30.0 and b.read()["owner"] == b.owner
    finally:
        b.release()


def test_a_process_that_lost_its_lease_stops_writing(tmp_path):
    """A stalls past the ttl (its heartbeat stops), B takes the trial over; A's next save checks
    the lease and stops with LeaseLostError instead of writing over B's files."""
    a = _lease(tmp_path)
    a.acquire()
    a._stop.set()  # A stalls: no more heartbeats
    a._thread.join()
    b = _lease(tmp_path)
    b.acquire()  # A's lease does not move for ttl_s: stale, taken
    try:
        with pytest.raises(LeaseLostError, match="another process"):
            a.check()
        assert b.read()["owner"] == b.owner  # A's failed check wrote nothing
        a.release()  # giving back a lost lease leaves B's alone
        assert b.read()["owner"] == b.owner and not b.read().get("released")
    finally:
        b.release()


def test_heartbeat_must_be_shorter_than_the_ttl(tmp_path):
    with pytest.raises(ValueError, match="heartbeat_s"):
        TrialLease(None, str(tmp_path), ttl_s=5.0, heartbeat_s=5.0)
