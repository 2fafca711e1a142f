"""Writing a file so that a crash at any moment (SIGKILL, power cut) leaves either the old file or
the complete new one, never a torn one: a temporary file in the same folder, flushed and
fsynced, then renamed over the target (and the folder fsynced, so the rename itself survives)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = ["atomic_write", "make_dirs", "remove_leftover_temporaries", "sync_dir", "TMP_PREFIX"]

#: prefix of the temporary files (they end in ".tmp"; a killed writer leaves one behind, the next
#: writer may delete it)
TMP_PREFIX = ".tmp-"


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object], *, sync_folder: bool = True) -> Path:
    """Create ``path`` (its folder too) with the bytes ``write(f)`` writes to a binary file object.
    ``sync_folder=False`` skips the folder's fsync (the caller syncs once after many files)."""
    path = Path(path)
    make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        if sync_folder:
            sync_dir(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def make_dirs(folder: str | os.PathLike) -> None:
    """``mkdir -p folder``, and fsync the parent of every folder it creates (a new folder's entry
    in its parent survives a power cut, as a renamed file's does)."""
    folder = Path(folder)
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:  # (made meanwhile by another thread: a store's parallel writes)
            pass
        sync_dir(new.parent)


def remove_leftover_temporaries(folder: str | os.PathLike) -> int:
    """Delete the temporary files a killed writer left in ``folder`` (call only as its one
    writer); returns how many."""
    removed = 0
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if name.startswith(TMP_PREFIX) and name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(folder, name))
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


def sync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder: the renames into it survive a power cut."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
