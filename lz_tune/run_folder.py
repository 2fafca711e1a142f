"""The layout of a ``train`` run folder, and its writer. One place names every file, so that the
driver that writes a run, ``--resume`` that continues it and :mod:`lz_tune.analysis` that reads it
agree::

    <run folder>/
      config.json        the whole Config, nested (CONFIG_FILE)
      params.json        the Config as flat dotted keys, like a Tune trial's (PARAMS_FILE)
      result.json        one JSON row per evaluation, Tune's result format (RESULT_FILE; appended
                         by a resumed run)
      tb/                TensorBoard scalars against env steps (TB_DIR)
      tb_train_iter/     the same against learner updates (TB_TRAIN_ITER_DIR)
      ckpt/              checkpoints (CKPT_DIR): ckpt_latest.pt, the latest evaluated snapshot and
                         what --resume loads; ckpt_best.pt, the best evaluated one; the replay
                         buffer's manifests and chunks beside them (lz_tune.pipeline.buffer_checkpoint)
      .lock              held (flock) by the one process that writes the run (LOCK_FILE); says who

One writer per run: a second process that would write the same folder (two ``train --resume`` of
one run after a scheduler requeue) is refused with :class:`RunFolderInUseError` naming the holder,
before it writes or deletes anything. The lock is ``fcntl.flock`` on ``.lock``: the kernel drops
it when its process ends, however it ends, so a crashed run never leaves a stale lock. (On a
network file system without flock support the lock is not taken and a warning says so.)

A Tune trial's folder uses the same names for what Tune writes itself (``params.json``,
``result.json``); its checkpoints are Tune's ``checkpoint_00000N/`` folders instead of ``ckpt/``.
This module imports nothing from lz_tune but lz_tune.atomic_file.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from typing import Any, Optional

__all__ = [
    "CONFIG_FILE",
    "PARAMS_FILE",
    "RESULT_FILE",
    "TB_DIR",
    "TB_TRAIN_ITER_DIR",
    "CKPT_DIR",
    "LATEST_CHECKPOINT",
    "BEST_CHECKPOINT",
    "LOCK_FILE",
    "RunFolder",
    "RunFolderInUseError",
]

CONFIG_FILE = "config.json"
PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"
TB_DIR = "tb"
TB_TRAIN_ITER_DIR = "tb_train_iter"
CKPT_DIR = "ckpt"
LATEST_CHECKPOINT = "ckpt_latest.pt"
BEST_CHECKPOINT = "ckpt_best.pt"
LOCK_FILE = ".lock"


class RunFolderInUseError(RuntimeError):
    """Another process writes this run folder; the message names it (pid, host, since when)."""


class RunFolder:
    """The files of one run (module docstring), or none when ``path`` is None.

    ``write_files=False`` (a Tune trial, a benchmark): only TensorBoard goes to ``path``; no
    config, result rows or checkpoints (the Trainable writes Tune's).

    Attributes:
      path: the folder (None: nothing is written).
      ckpt_dir: ``path/ckpt`` where checkpoints go (None when they are not written).
      tb_dir: ``path/tb``, TensorBoard against env steps (None without a folder).
      tb_train_iter_dir: ``path/tb_train_iter``, the same scalars against updates (None without a folder).
    """

    def __init__(self, path: Optional[str], *, write_files: bool = True) -> None:
        self.path = path
        self.write_files = bool(path) and write_files
        self.ckpt_dir = os.path.join(path, CKPT_DIR) if path and self.write_files else None
        self.tb_dir = os.path.join(path, TB_DIR) if path else None
        self.tb_train_iter_dir = os.path.join(path, TB_TRAIN_ITER_DIR) if path else None
        self._lock_fd: Optional[int] = None

    def lock(self) -> None:
        """Become the run's one writer (module docstring): creates the folder, takes the lock and
        records this process in ``.lock``; RunFolderInUseError when another process holds it.
        Nothing to do without the run's files, or when this object holds it already."""
        if not self.write_files or self._lock_fd is not None:
            return
        assert self.path is not None and self.ckpt_dir is not None  # the run's files have a folder
        import fcntl

        os.makedirs(self.path, exist_ok=True)
        path = os.path.join(self.path, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "(no details)"
            os.close(fd)
            raise RunFolderInUseError(
                f"{self.path}: another process is writing this run ({holder}); two writers "
                f"would delete each other's replay-buffer files. Wait for it to end, or "
                f"stop it, or use another folder"
            ) from None
        except OSError as e:  # a file system without flock
            warnings.warn(
                f"{self.path}: could not lock the run folder ({e}); make sure one process writes it", stacklevel=2
            )
            os.close(fd)
            return
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            ).encode(),
        )
        self._lock_fd = fd
        from lz_tune.atomic_file import remove_leftover_temporaries

        for folder in (self.path, self.ckpt_dir):  # what a writer killed mid-save left (the store cleans its own)
            remove_leftover_temporaries(folder)

    def unlock(self) -> None:
        """Give the lock up (at close; the kernel also drops it when the process ends)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def checkpoint_path(self, name: str) -> str:
        """``ckpt/<name>`` (:data:`LATEST_CHECKPOINT`, :data:`BEST_CHECKPOINT`); only when checkpoints
        are written."""
        if self.ckpt_dir is None:
            raise RuntimeError("this run writes no checkpoints")
        return os.path.join(self.ckpt_dir, name)

    def write_config(self, config: dict[str, Any], flat: dict[str, Any]) -> None:
        """``config.json`` (nested; whenever there is a folder) and ``params.json`` (flat dotted keys;
        with the run's files). Creates the folder."""
        if not self.path:
            return
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, CONFIG_FILE), "w") as f:
            json.dump(config, f, indent=2)
        if self.write_files:
            with open(os.path.join(self.path, PARAMS_FILE), "w") as f:
                json.dump(flat, f, indent=2)

    def append_result(self, row: dict[str, Any]) -> None:
        """One row of ``result.json`` (appended: a resumed run continues the file); nothing without
        the run's files."""
        if not self.write_files or self.path is None:  # (the run's files have a folder)
            return
        with open(os.path.join(self.path, RESULT_FILE), "a") as f:
            f.write(json.dumps(row) + "\n")
