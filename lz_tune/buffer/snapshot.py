"""Replay-buffer snapshots: a state dict (``GameBuffer.state_dict()``) as a small JSON manifest
plus content-addressed chunk files in a :mod:`~lz_tune.buffer.chunk_store`.

Generic over the state's layout: dicts, lists, tuples, scalars and numpy arrays at any depth
(so fields a later buffer version adds are saved without changes here). Every array is cut
along axis 0 into chunks of at most ~1 MiB (``chunk_bytes``, ``chunk_rows``); arrays of a FIFO table (a dict
with an int ``"first"`` and a dict ``"columns"``, :meth:`ColumnStore.state_dict`) are cut at
multiples of the chunk size in the table's *logical* row index, so a row keeps its chunk for
its whole life: after new pushes and evictions only the chunks at the two ends of a table
change, and the chunks in between have the same name as in the previous save and are not
written again.

Hashing costs ~1 GB/s; arrays named in ``append_only`` (whose rows never change once appended:
the frames) skip it for chunks this writer has already stored or loaded (it remembers their
names by logical row range), so a save hashes and compresses only new rows there.

Manifest (JSON)::

    {"format": "lz_tune.buffer_snapshot", "version": 1,
     "state": <the state, arrays replaced by {"__lz__": "ndarray", "dtype", "shape", "row0",
               "chunks": [[name, lo, hi], ...]}>,  # rows [lo, hi) of the logical index
     "chunks": [every chunk name referenced], "digest": hex (of "state": equal digests = equal contents),
     "stats": {...}, "store": {...}, ...}      # what the caller adds
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, cast

import numpy as np

from lz_tune.atomic_file import atomic_write

from .chunk_store import ChunkError, ChunkStore, chunk_name, decode_chunk, encode_chunk

__all__ = [
    "FORMAT",
    "CHUNK_BYTES",
    "SaveStats",
    "SnapshotWriter",
    "read_state",
    "referenced_chunks",
    "state_digest",
    "write_manifest",
    "read_manifest",
    "ManifestError",
]

FORMAT = "lz_tune.buffer_snapshot"
VERSION = 1
#: target raw size of one chunk
CHUNK_BYTES = 1 << 20
#: most rows in one chunk (narrow columns: a chunk at a table's end is rewritten on every save)
MAX_CHUNK_ROWS = 16384
_TAG = "__lz__"
_THREADS = 2  # zlib and blake2b release the GIL on large buffers

Path = tuple[str, ...]


class ManifestError(RuntimeError):
    """A manifest file is missing, truncated or not a buffer snapshot. Names the file."""


@dataclasses.dataclass
class SaveStats:
    """What one save cost: bytes are raw (uncompressed) array bytes unless named ``file``."""

    raw_bytes: int = 0
    """All array bytes in the state."""
    new_raw_bytes: int = 0
    """Raw bytes of the chunks this save wrote."""
    file_bytes: int = 0
    """Bytes written to chunk files (compressed)."""
    chunks_written: int = 0
    chunks_reused: int = 0
    seconds: float = 0.0


def chunk_rows(dtype: np.dtype, shape: tuple[int, ...], chunk_bytes: int = CHUNK_BYTES) -> int:
    """Rows per chunk for an array ``[N, *shape[1:]]``: a power of two, ~``chunk_bytes`` per
    chunk, between 1 and MAX_CHUNK_ROWS."""
    row = max(1, int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize)
    rows = 1 << max(0, (int(chunk_bytes) // row).bit_length() - 1)
    return int(min(MAX_CHUNK_ROWS, max(1, rows)))


def _pieces(array: np.ndarray, row0: int, chunk_bytes: int) -> list[tuple[int, int, np.ndarray]]:
    """``(lo, hi, rows)`` of the chunks of ``array`` whose row 0 has logical index ``row0``."""
    if array.ndim == 0:
        return [(0, 1, array.reshape(1))]
    n = array.shape[0]
    size = chunk_rows(array.dtype, array.shape, chunk_bytes)
    out = []
    lo = row0
    while lo < row0 + n:
        hi = min((lo // size + 1) * size, row0 + n)
        out.append((lo, hi, np.ascontiguousarray(array[lo - row0 : hi - row0])))
        lo = hi
    return out


class SnapshotWriter:
    """Writes states into one store (``store=None``: computes names only, see
    :func:`state_digest`). Keeps, for ``append_only`` arrays (paths of keys from the state's
    root), the chunk name of each logical row range it has stored or loaded."""

    def __init__(
        self, store: Optional[ChunkStore], *, append_only: Collection[Path] = (), chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
        self.store = store
        self.append_only = {tuple(p) for p in append_only}
        self.chunk_bytes = int(chunk_bytes)
        self._known: dict[tuple[Path, int, int], str] = {}

    def forget(self) -> None:
        """Drop what this writer knows about the rows of append-only arrays (call when the
        buffer was replaced: the same logical rows now hold other data)."""
        self._known.clear()

    def remember(self, encoded_state: Any) -> None:
        """Learn the chunk names of the append-only arrays of a state read from a manifest (the
        state the buffer now holds), so the next save need not hash those rows again."""
        for path, entry in _walk_arrays(encoded_state, ()):
            if path in self.append_only:
                for name, lo, hi in entry["chunks"]:
                    self._known[(path, int(lo), int(hi))] = name

    def write(self, state: Any) -> tuple[Any, list[str], SaveStats]:
        """Store the arrays of ``state``; returns (encoded state, chunk names, stats)."""
        start = time.perf_counter()
        stats = SaveStats()
        jobs: list[tuple[Path, int, int, np.ndarray]] = []
        encoded = self._encode(state, (), jobs)
        names = self._names(jobs, stats)
        for (path, lo, hi, _), name in zip(jobs, names):
            if path in self.append_only:
                self._known[(path, lo, hi)] = name
        it = iter(names)
        _fill_names(encoded, it)
        if self.store is not None and hasattr(self.store, "sync") and stats.chunks_written:
            self.store.sync()
        stats.seconds = time.perf_counter() - start
        return encoded, names, stats

    def _encode(self, obj: Any, path: Path, jobs: list, row0: int = 0) -> Any:
        """JSON-able copy of ``obj`` with each array replaced by its chunk list (names filled in
        later); ``row0``: logical index of an array's row 0 (a FIFO table's ``first``)."""
        if isinstance(obj, np.ndarray):
            chunks = []
            for lo, hi, rows in _pieces(obj, row0 if obj.ndim else 0, self.chunk_bytes):
                jobs.append((path, lo, hi, rows))
                chunks.append([None, lo, hi])
            return {
                _TAG: "ndarray",
                "dtype": obj.dtype.str,
                "shape": list(obj.shape),
                "row0": row0 if obj.ndim else 0,
                "chunks": chunks,
            }
        if isinstance(obj, dict):
            for k in obj:
                if not isinstance(k, str) or k == _TAG:
                    raise TypeError(f"buffer state key {'/'.join(path + (str(k),))}: keys must be str (not {_TAG!r})")
            first = obj.get("first")
            if isinstance(first, (int, np.integer)) and isinstance(obj.get("columns"), dict):  # a FIFO table
                return {
                    k: (
                        {c: self._encode(a, path + (k, c), jobs, int(first)) for c, a in v.items()}
                        if k == "columns"
                        else self._encode(v, path + (k,), jobs)
                    )
                    for k, v in obj.items()
                }
            return {k: self._encode(v, path + (k,), jobs) for k, v in obj.items()}
        if isinstance(obj, tuple):
            return {_TAG: "tuple", "items": [self._encode(v, path + (str(i),), jobs) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self._encode(v, path + (str(i),), jobs) for i, v in enumerate(obj)]
        if isinstance(obj, np.generic):
            return obj.item()
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        raise TypeError(f"buffer state {'/'.join(path)}: cannot save a {type(obj).__name__}")

    def _names(self, jobs: list, stats: SaveStats) -> list[str]:
        """Chunk names of all jobs; writes the chunks the store lacks."""
        stats.raw_bytes = sum(rows.nbytes for *_, rows in jobs)
        have = self.store.names() if self.store is not None else set()
        names: list[Optional[str]] = [None] * len(jobs)
        todo = []
        for i, (path, lo, hi, _) in enumerate(jobs):
            known = self._known.get((path, lo, hi)) if path in self.append_only else None
            if known is not None and (self.store is None or known in have):
                names[i] = known
            else:
                todo.append(i)
        with ThreadPoolExecutor(_THREADS) as pool:
            for i, name in zip(todo, pool.map(lambda i: chunk_name(jobs[i][3]), todo)):
                names[i] = name
            named = cast("list[str]", names)  # every job has its name now
            if self.store is None:
                return named
            new, seen = [], set()
            for i in range(len(jobs)):
                if names[i] not in have and names[i] not in seen:
                    new.append(i)
                    seen.add(names[i])
            store = self.store  # compress and write (each file fsynced) in the pool: the fsyncs overlap
            stats.file_bytes += sum(pool.map(lambda i: store.put(named[i], encode_chunk(jobs[i][3])), new))
            stats.new_raw_bytes += sum(jobs[i][3].nbytes for i in new)
        stats.chunks_written = len(new)
        stats.chunks_reused = len(jobs) - len(new)
        return named


def _fill_names(obj: Any, names) -> None:
    """Put the computed chunk names into the encoded state (the order of ``_encode``)."""
    if isinstance(obj, dict):
        if obj.get(_TAG) == "ndarray":
            for entry in obj["chunks"]:
                entry[0] = next(names)
            return
        for v in obj["items"] if obj.get(_TAG) == "tuple" else obj.values():
            _fill_names(v, names)
    elif isinstance(obj, list):
        for v in obj:
            _fill_names(v, names)


def _walk_arrays(obj: Any, path: Path):
    """``(path, array entry)`` of every array in an encoded state."""
    if isinstance(obj, dict):
        if obj.get(_TAG) == "ndarray":
            yield path, obj
            return
        if obj.get(_TAG) == "tuple":
            for i, v in enumerate(obj["items"]):
                yield from _walk_arrays(v, path + (str(i),))
            return
        for k, v in obj.items():
            yield from _walk_arrays(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk_arrays(v, path + (str(i),))


def referenced_chunks(encoded_state: Any) -> set[str]:
    """Every chunk name an encoded state refers to."""
    return {c[0] for _, entry in _walk_arrays(encoded_state, ()) for c in entry["chunks"]}


def state_digest(encoded_state: Any) -> str:
    """32 hex digits identifying the contents of an encoded state (its chunk names are content
    hashes): two states with the same arrays, clocks and scalars, cut into chunks of the same
    size, have the same digest."""
    canonical = json.dumps(encoded_state, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


#: what a chunk name is: 32 hex digits (a manifest is input: any other name is refused before a
#: file is opened, so no name can reach outside its store)
_CHUNK_NAME = re.compile(r"[0-9a-f]{32}")


def check_encoded_state(encoded_state: Any, *, max_bytes: Optional[int] = None) -> int:
    """Validate a manifest's encoded state before anything is read or allocated: every array's
    dtype, shape (non-negative ints), first row and chunk list (content-hash names, integer row
    bounds); ``max_bytes``: the arrays together may not be larger. Returns their total bytes;
    ManifestError naming the array otherwise."""
    total = 0
    for path, entry in _walk_arrays(encoded_state, ()):
        where = "/".join(path)
        try:
            dtype = np.dtype(entry["dtype"])
            shape = entry["shape"]
            row0 = entry["row0"]
            chunks = entry["chunks"]
            if dtype.hasobject:
                raise ValueError("object arrays are not data")
            if not (
                isinstance(shape, list)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
            ):
                raise ValueError(f"shape {shape!r}")
            if not (isinstance(row0, int) and row0 >= 0 and isinstance(chunks, list)):
                raise ValueError(f"row0 {row0!r} or chunks")
            for chunk in chunks:
                name, lo, hi = chunk
                if not (isinstance(name, str) and _CHUNK_NAME.fullmatch(name)):
                    raise ValueError(f"chunk name {name!r} is not a content hash")
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)):
                    raise ValueError(f"chunk rows {lo!r}, {hi!r}")
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"array {where}: not a valid entry ({e})") from None
        total += math.prod(shape) * dtype.itemsize  # (Python ints: a crafted shape cannot overflow)
        if max_bytes is not None and total > max_bytes:
            raise ManifestError(
                f"array {where}: the arrays would hold more than {max_bytes / 2**30:.2f} GB "
                f"(buffer.checkpoint_max_gb); refusing to allocate them"
            )
    return total


def read_state(encoded_state: Any, store: ChunkStore, *, max_bytes: Optional[int] = None) -> Any:
    """Rebuild the state from its encoding and the store's chunks (ChunkError naming the chunk
    file when one is missing, damaged or not what its name says, ManifestError when an entry is
    malformed, larger than ``max_bytes`` in all, or the chunks do not cover an array)."""
    check_encoded_state(encoded_state, max_bytes=max_bytes)
    entries = list(_walk_arrays(encoded_state, ()))
    try:
        with ThreadPoolExecutor(_THREADS) as pool:
            arrays = dict(
                zip((id(e) for _, e in entries), pool.map(lambda pe: _read_array(pe[1], pe[0], store), entries))
            )
    except (ValueError, MemoryError) as e:  # a shape numpy cannot allocate (no size cap configured)
        raise ManifestError(f"the manifest's arrays cannot be allocated ({type(e).__name__}: {e})") from None
    return _decode(encoded_state, arrays)


def _read_array(entry: dict, path: Path, store: ChunkStore) -> np.ndarray:
    dtype, shape, row0 = np.dtype(entry["dtype"]), tuple(entry["shape"]), int(entry["row0"])
    where = "/".join(path)
    if not shape:
        if len(entry["chunks"]) != 1:
            raise ManifestError(f"array {where}: a scalar needs one chunk, the manifest lists {len(entry['chunks'])}")
        ((name, _, _),) = entry["chunks"]
        return _verified_chunk(store, name, dtype, (1,), where).reshape(())
    out = np.empty(shape, dtype)
    expected = row0
    for name, lo, hi in entry["chunks"]:
        if lo != expected or hi <= lo or hi > row0 + shape[0]:
            raise ManifestError(f"array {where}: chunk rows [{lo}, {hi}) do not follow row {expected}")
        out[lo - row0 : hi - row0] = _verified_chunk(store, name, dtype, (hi - lo,) + shape[1:], where)
        expected = hi
    if expected != row0 + shape[0]:
        raise ManifestError(f"array {where}: chunks cover rows up to {expected}, the array ends at {row0 + shape[0]}")
    return out


def _verified_chunk(store: ChunkStore, name: str, dtype: np.dtype, shape: tuple[int, ...], where: str) -> np.ndarray:
    """The chunk ``name`` as ``[*shape]`` of ``dtype``, checked against its name (a content hash):
    a file that decodes but holds other rows (bit rot the CRC missed, a substituted file) is a
    ChunkError, never data."""
    file = f"{store.location}/{name} ({where})"
    array = decode_chunk(store.get(name), dtype=dtype, shape=shape, where=file)
    if chunk_name(array) != name:
        raise ChunkError(f"{file}: chunk contents do not match its name (damaged or replaced)")
    return array


def _decode(obj: Any, arrays: dict[int, np.ndarray]) -> Any:
    if isinstance(obj, dict):
        tag = obj.get(_TAG)
        if tag == "ndarray":
            return arrays[id(obj)]
        if tag == "tuple":
            return tuple(_decode(v, arrays) for v in obj["items"])
        return {k: _decode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, arrays) for v in obj]
    return obj


# ------------------------------------------------------------------------------- manifest files


def write_manifest(path: str | os.PathLike, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` (JSON) atomically (:func:`lz_tune.atomic_file.atomic_write`)."""
    data = json.dumps({"format": FORMAT, "version": VERSION, **manifest}, separators=(",", ":")).encode()
    atomic_write(path, lambda f: f.write(data))


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """Read a manifest; ManifestError naming the file if it is missing, truncated or foreign."""
    path = os.fspath(path)
    try:
        with open(path) as f:
            manifest = json.load(f)
    except FileNotFoundError as e:
        raise ManifestError(f"{path}: replay buffer manifest not found") from e
    except (OSError, ValueError) as e:
        raise ManifestError(f"{path}: not a readable replay buffer manifest ({type(e).__name__}: {e})") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ManifestError(f"{path}: not an lz_tune replay buffer manifest")
    if manifest.get("version") != VERSION:
        raise ManifestError(
            f"{path}: buffer manifest version {manifest.get('version')} is not supported "
            f"(this lz_tune reads version {VERSION})"
        )
    for key in ("state", "chunks"):
        if key not in manifest:
            raise ManifestError(f"{path}: manifest lacks {key!r}")
    return manifest
