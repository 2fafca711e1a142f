"""A Tune trial's replay-buffer storage: one chunk store per trial, beside its checkpoints.

Tune copies each checkpoint folder the trainable writes (a temporary folder) into the trial's
folder in the experiment's storage (``<storage>/<exp>/<trial>/checkpoint_00000N``) and deletes
old ones (``CheckpointConfig(num_to_keep=K)``); a file outside the folder cannot be hard-linked
into it. So the buffer's chunks live in ``<trial>/lz_tune/buffer_store/`` in the same storage
(written directly there: a local path or a shared file system with plain files, a cloud URI
through pyarrow), every checkpoint folder holds only the small manifest
(``lz_tune_buffer.json``) naming its chunks, and each save deletes the chunks that no
checkpoint folder still present in the trial's storage refers to. A checkpoint folder is
therefore complete together with its trial folder: moving or syncing the whole experiment
keeps it loadable; copying one checkpoint folder alone does not (its manifest names the
store's original place, read through the experiment's storage file system when the relative
``../lz_tune/buffer_store`` is not there, e.g. after Tune downloaded a cloud checkpoint).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterator, Optional

from lz_tune.buffer.chunk_store import open_store
from lz_tune.config import Config
from lz_tune.pipeline.buffer_checkpoint import STORE_DIR, BufferCheckpointer

__all__ = ["TrialStorage", "MANIFEST_FILE"]

#: the replay buffer's manifest inside a Tune checkpoint folder
MANIFEST_FILE = "lz_tune_buffer.json"
_TRIAL_SUBDIR = "lz_tune"
_CHECKPOINT_PREFIX = "checkpoint_"


class TrialStorage:
    """Where one trial keeps its buffer chunks.

    ``storage``: Tune's ``StorageContext`` of the trial (None when the trainable runs outside
    Tune: the store is then ``fallback_dir/buffer_store`` and chunks are never deleted, as no
    one says which checkpoint folders are kept).
    """

    def __init__(self, storage: Any, *, fallback_dir: str) -> None:
        fs_path = getattr(storage, "trial_fs_path", None) if storage is not None else None
        self.filesystem = getattr(storage, "storage_filesystem", None) if fs_path else None
        self.trial_fs_path: Optional[str] = fs_path
        if fs_path:
            self.store_path = f"{fs_path.rstrip('/')}/{_TRIAL_SUBDIR}/{STORE_DIR}"
        else:
            self.store_path = os.path.join(fallback_dir, STORE_DIR)
        #: where the trial's lease lives (:mod:`lz_tune.tune.trial_lease`; None outside Tune)
        self.lease_folder: Optional[str] = f"{fs_path.rstrip('/')}/{_TRIAL_SUBDIR}" if fs_path else None

    def checkpointer(self, cfg: Config, *, log: Optional[Callable[[str], None]] = None) -> BufferCheckpointer:
        """The trial's buffer checkpointer (its manifests live in checkpoint folders next to the
        trial's ``lz_tune/`` folder: the relative path a reader tries first)."""
        relative = f"../{_TRIAL_SUBDIR}/{STORE_DIR}" if self.trial_fs_path else None
        return BufferCheckpointer(cfg, open_store(self.filesystem, self.store_path), relative=relative, log=log)

    def live_manifests(self) -> Optional[list[dict[str, Any]]]:
        """The manifests of the trial's checkpoint folders that are in storage now (None outside
        Tune: unknown). A folder without a readable manifest is skipped only if it has no
        manifest at all; an unreadable one raises (the caller then deletes nothing)."""
        if not self.trial_fs_path:
            return None
        return [json.loads(data) for data in self._read_all(MANIFEST_FILE)]

    def newest_file(self, name: str) -> Optional[bytes]:
        """The bytes of file ``name`` in the trial's newest checkpoint folder that has one (None
        outside Tune or if none has)."""
        if not self.trial_fs_path:
            return None
        import pyarrow.fs

        fs = self._fs()
        for folder in reversed(self._checkpoint_folders()):
            path = f"{folder}/{name}"
            if fs.get_file_info(path).type == pyarrow.fs.FileType.File:
                with fs.open_input_stream(path) as f:
                    return f.read()
        return None

    def _checkpoint_folders(self) -> list[str]:
        import pyarrow.fs

        fs = self._fs()
        try:
            infos = fs.get_file_info(pyarrow.fs.FileSelector(self.trial_fs_path, recursive=False))
        except FileNotFoundError:
            return []
        return sorted(
            i.path
            for i in infos
            if i.type == pyarrow.fs.FileType.Directory and i.base_name.startswith(_CHECKPOINT_PREFIX)
        )

    def _read_all(self, name: str) -> Iterator[bytes]:
        import pyarrow.fs

        fs = self._fs()
        for folder in self._checkpoint_folders():
            path = f"{folder}/{name}"
            if fs.get_file_info(path).type != pyarrow.fs.FileType.File:
                continue
            with fs.open_input_stream(path) as f:
                yield f.read()

    def _fs(self) -> Any:
        if self.filesystem is not None:
            return self.filesystem
        import pyarrow.fs

        return pyarrow.fs.LocalFileSystem()
