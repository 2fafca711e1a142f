"""A folder of content-addressed, compressed chunk files: where replay-buffer checkpoints keep
their arrays so that a save writes only what no earlier save of the same folder wrote.

A chunk is the raw bytes of a C-contiguous numpy array slice; its name is the blake2b-128
hash of those bytes (with dtype and shape), hex, so two saves of the same rows share one file
and a file is never rewritten in place. File contents: one codec byte (``z``: zlib level 1,
``r``: raw, for data that does not compress), the CRC-32 of the raw bytes (4 bytes, big
endian), then the payload; a damaged file is detected on read.

Two back-ends share the interface: :class:`LocalChunkStore` (a local or mounted folder: write
to a temporary name, fsync, rename; readers never see half a file) and
:class:`ArrowChunkStore` (any ``pyarrow.fs`` file system, e.g. the S3 / GCS storage of a Tune
experiment: an object appears whole when its upload completes). One process writes a store
at a time (the trial that owns it); any number may read.
"""

from __future__ import annotations

import abc
import hashlib
import os
import zlib
from typing import Any, Iterable

import numpy as np

from lz_tune.atomic_file import TMP_PREFIX, atomic_write, sync_dir

__all__ = [
    "ChunkError",
    "ChunkStore",
    "LocalChunkStore",
    "ArrowChunkStore",
    "chunk_name",
    "encode_chunk",
    "decode_chunk",
    "open_store",
]

#: suffix of every chunk file (anything else in a store folder is not a chunk)
SUFFIX = ".chunk"
#: compressed payloads larger than this share of the raw bytes are stored raw
_RAW_IF_RATIO_ABOVE = 0.9


class ChunkError(RuntimeError):
    """A chunk is missing, damaged or not what its name says. The message names the file."""


def chunk_name(array: np.ndarray) -> str:
    """Content address of ``array`` (C-contiguous): 32 hex digits of blake2b over dtype,
    shape and bytes."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).data.cast("B"))
    return h.hexdigest()


def encode_chunk(array: np.ndarray) -> bytes:
    """File contents for ``array``: codec byte, CRC-32 of the raw bytes, then the zlib (level 1)
    payload, or the raw bytes where compression saves less than 10%."""
    raw = np.ascontiguousarray(array).tobytes()
    crc = zlib.crc32(raw).to_bytes(4, "big")
    packed = zlib.compress(raw, 1)
    if len(packed) > _RAW_IF_RATIO_ABOVE * len(raw):
        return b"r" + crc + raw
    return b"z" + crc + packed


def decode_chunk(data: bytes, *, dtype: np.dtype, shape: tuple[int, ...], where: str) -> np.ndarray:
    """Inverse of :func:`encode_chunk`: a writable array ``[*shape]`` of ``dtype``; raises
    ChunkError naming ``where`` on a damaged file or a size that does not match."""
    codec, crc, payload = data[:1], data[1:5], data[5:]
    try:
        if codec == b"z":
            raw = zlib.decompress(payload)
        elif codec == b"r":
            raw = payload
        else:
            raise ChunkError(f"{where}: unknown chunk codec {codec!r} (not an lz_tune chunk file)")
    except zlib.error as e:
        raise ChunkError(f"{where}: damaged chunk file ({e})") from e
    expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if len(raw) != expected:
        raise ChunkError(f"{where}: chunk holds {len(raw)} bytes, the manifest expects {expected}")
    if zlib.crc32(raw).to_bytes(4, "big") != crc:
        raise ChunkError(f"{where}: damaged chunk file (checksum mismatch)")
    return np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


class ChunkStore(abc.ABC):
    """Interface of a chunk folder. ``names()`` is listed once and then kept up to date by this
    object's own writes and deletes (one writer per store; ``put`` of different names may run
    in parallel threads)."""

    location: str
    """Human-readable place of the folder (a path or ``fs-type:path``), for messages."""

    def __init__(self) -> None:
        self._names: set[str] | None = None

    # -- what back-ends implement ---------------------------------------------------------
    @abc.abstractmethod
    def _list(self) -> Iterable[str]:
        """File names in the folder (chunks and temporary files)."""

    @abc.abstractmethod
    def _write(self, name: str, data: bytes) -> None:
        """Write ``data`` to the file ``name`` atomically."""

    @abc.abstractmethod
    def _read(self, name: str) -> bytes:
        """The bytes of the file ``name``."""

    @abc.abstractmethod
    def _delete(self, name: str) -> None:
        """Delete the file ``name``."""

    @abc.abstractmethod
    def exists(self) -> bool:
        """Whether the folder exists."""

    # -- shared logic -----------------------------------------------------------------------
    def names(self) -> set[str]:
        """Chunk names in the folder (without suffix)."""
        if self._names is None:
            self._names = {n[: -len(SUFFIX)] for n in self._list() if n.endswith(SUFFIX)}
        return self._names

    def put(self, name: str, data: bytes) -> int:
        """Store ``data`` under ``name`` unless present; returns the bytes written (0 if present)."""
        if name in self.names():
            return 0
        self._write(name + SUFFIX, data)
        self.names().add(name)
        return len(data)

    def get(self, name: str) -> bytes:
        if not (len(name) == 32 and all(c in "0123456789abcdef" for c in name)):  # never a path
            raise ChunkError(f"{self.location}: {name!r} is not a chunk name")
        try:
            return self._read(name + SUFFIX)
        except (FileNotFoundError, OSError) as e:
            raise ChunkError(
                f"{self.location}/{name}{SUFFIX}: chunk file missing or unreadable ({type(e).__name__}: {e})"
            ) from e

    def remove_except(self, keep: set[str], *, spare_since: float | None = None) -> int:
        """Delete every chunk not in ``keep`` and leftover temporary files; returns the number
        of chunk files deleted. ``spare_since`` (seconds since the epoch): files modified at or
        after it are kept whatever ``keep`` says (a grace period: they may belong to a save that
        has not written its manifest yet)."""
        removed = 0
        for file in list(self._list()):
            garbage = file.startswith(TMP_PREFIX) or (file.endswith(SUFFIX) and file[: -len(SUFFIX)] not in keep)
            if not garbage:
                continue
            if spare_since is not None:
                mtime = self._mtime(file)
                if mtime is None or mtime >= spare_since:
                    continue
            self._delete(file)
            if file.endswith(SUFFIX):
                self.names().discard(file[: -len(SUFFIX)])
                removed += 1
        return removed

    def _mtime(self, name: str) -> float | None:
        """Modification time of the file ``name`` (seconds since the epoch; None: not known)."""
        return None

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Where the store is, as a JSON-able dict recorded in manifests."""


class LocalChunkStore(ChunkStore):
    """A folder on a local or mounted file system (created on the first write)."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__()
        self.path = os.path.abspath(os.fspath(path))
        self.location = self.path

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def _list(self) -> Iterable[str]:
        return os.listdir(self.path) if self.exists() else []

    def _write(self, name: str, data: bytes) -> None:
        atomic_write(os.path.join(self.path, name), lambda f: f.write(data), sync_folder=False)

    def _mtime(self, name: str) -> float | None:
        try:
            return os.stat(os.path.join(self.path, name)).st_mtime
        except FileNotFoundError:
            return None

    def _read(self, name: str) -> bytes:
        with open(os.path.join(self.path, name), "rb") as f:
            return f.read()

    def _delete(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.path, name))
        except FileNotFoundError:
            pass

    def sync(self) -> None:
        """fsync the folder, so that the renames of new chunks survive a power cut."""
        if self.exists():
            sync_dir(self.path)

    def describe(self) -> dict[str, Any]:
        return {"filesystem": "local", "path": self.path}


class ArrowChunkStore(ChunkStore):
    """A folder on a ``pyarrow.fs.FileSystem`` (cloud object stores included)."""

    def __init__(self, filesystem: Any, path: str) -> None:
        super().__init__()
        self.fs = filesystem
        self.path = path.rstrip("/")
        self.location = f"{filesystem.type_name}:{self.path}"

    def exists(self) -> bool:
        import pyarrow.fs

        return self.fs.get_file_info(self.path).type == pyarrow.fs.FileType.Directory

    def _list(self) -> Iterable[str]:
        import pyarrow.fs

        if not self.exists():
            return []
        infos = self.fs.get_file_info(pyarrow.fs.FileSelector(self.path, recursive=False))
        return [info.base_name for info in infos if info.type == pyarrow.fs.FileType.File]

    def _mtime(self, name: str) -> float | None:
        mtime = self.fs.get_file_info(f"{self.path}/{name}").mtime
        return None if mtime is None else mtime.timestamp()

    def _write(self, name: str, data: bytes) -> None:
        self.fs.create_dir(self.path, recursive=True)
        with self.fs.open_output_stream(f"{self.path}/{name}") as f:
            f.write(data)

    def _read(self, name: str) -> bytes:
        with self.fs.open_input_stream(f"{self.path}/{name}") as f:
            return f.read()

    def _delete(self, name: str) -> None:
        try:
            self.fs.delete_file(f"{self.path}/{name}")
        except FileNotFoundError:
            pass

    def describe(self) -> dict[str, Any]:
        return {"filesystem": self.fs.type_name, "path": self.path}


def open_store(filesystem: Any, path: str) -> ChunkStore:
    """The store for ``path`` on ``filesystem`` (None or a local pyarrow file system: a plain
    local folder)."""
    if filesystem is None:
        return LocalChunkStore(path)
    try:
        import pyarrow.fs

        if isinstance(filesystem, pyarrow.fs.LocalFileSystem):
            return LocalChunkStore(path)
    except ImportError:  # pragma: no cover - pyarrow ships with ray[tune]
        pass
    return ArrowChunkStore(filesystem, path)
