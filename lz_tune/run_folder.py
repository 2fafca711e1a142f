"""The layout of a ``train`` run folder, and its writer. One place names every file, so that the
driver that writes a run, ``--resume`` that continues it and :mod:`lz_tune.analysis` that reads it
agree::

    <run folder>/
      config.json        the whole Config, nested (CONFIG_FILE)
      params.json        the Config as flat dotted keys, like a Tune trial's (PARAMS_FILE)
      result.json        one JSON row per evaluation, Tune's result format (RESULT_FILE; appended
                         by a resumed run)
      tb/                TensorBoard scalars (TB_DIR)
      ckpt/              checkpoints (CKPT_DIR): ckpt_latest.pt, the latest evaluated snapshot and
                         what --resume loads; ckpt_best.pt, the best evaluated one; the replay
                         buffer's manifests and chunks beside them (lz_tune.pipeline.buffer_checkpoint)

A Tune trial's folder uses the same names for what Tune writes itself (``params.json``,
``result.json``); its checkpoints are Tune's ``checkpoint_00000N/`` folders instead of ``ckpt/``.
This module imports nothing from lz_tune.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

__all__ = ["CONFIG_FILE", "PARAMS_FILE", "RESULT_FILE", "TB_DIR", "CKPT_DIR", "LATEST_CHECKPOINT",
           "BEST_CHECKPOINT", "RunFolder"]

CONFIG_FILE = "config.json"
PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"
TB_DIR = "tb"
CKPT_DIR = "ckpt"
LATEST_CHECKPOINT = "ckpt_latest.pt"
BEST_CHECKPOINT = "ckpt_best.pt"


class RunFolder:
    """The files of one run (module docstring), or none when ``path`` is None.

    ``write_files=False`` (a Tune trial, a benchmark): only TensorBoard goes to ``path``; no
    config, result rows or checkpoints (the Trainable writes Tune's).

    Attributes:
      path: the folder (None: nothing is written).
      ckpt_dir: ``path/ckpt`` where checkpoints go (None when they are not written).
      tb_dir: ``path/tb`` (None without a folder).
    """

    def __init__(self, path: Optional[str], *, write_files: bool = True) -> None:
        self.path = path
        self.write_files = bool(path) and write_files
        self.ckpt_dir = os.path.join(path, CKPT_DIR) if self.write_files else None
        self.tb_dir = os.path.join(path, TB_DIR) if path else None

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
        if not self.write_files:
            return
        with open(os.path.join(self.path, RESULT_FILE), "a") as f:
            f.write(json.dumps(row) + "\n")
