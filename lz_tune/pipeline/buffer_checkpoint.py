"""The replay buffer in checkpoints: when it is saved, where its chunks live, how it comes back.

A checkpoint's buffer is a manifest file (JSON, :mod:`lz_tune.buffer.snapshot`) beside the
checkpoint, whose chunks live in one chunk store per run (``train``: ``ckpt/buffer_store/``;
Tune: ``<trial folder>/lz_tune/buffer_store/`` in the experiment's storage). Segments never
change once pushed, so a save writes only the rows pushed since the previous save plus the
small mutable columns (priorities, reanalysed targets, per-segment counters): see
:class:`BufferCheckpointer`.

The rule for "cost fits": the buffer is saved when ``buffer.save_in_checkpoint`` is on (the
default) and its arrays hold at most ``buffer.checkpoint_max_gb`` GB (raw, before compression;
default 16); a checkpoint that leaves it out says so in the log, with the reason. Per save the
cost is proportional to the data collected since the last one (``benchmarks/buffer_checkpoint.py``).

Chunks are shared between the checkpoints of one run and deleted when no live manifest refers
to them any more (:meth:`BufferCheckpointer.collect_garbage`); the caller says which manifests
are live (the ``train`` run's latest/best/pending ones, the trial's checkpoint folders that Tune
still keeps).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any, Callable, Optional

from lz_tune.buffer.buffer_state import APPEND_ONLY
from lz_tune.buffer.chunk_store import ChunkError, ChunkStore, LocalChunkStore, open_store
from lz_tune.buffer.game_buffer import GameBuffer
from lz_tune.buffer.snapshot import (
    ManifestError,
    SaveStats,
    SnapshotWriter,
    read_manifest,
    read_state,
    referenced_chunks,
    state_digest,
    write_manifest,
)
from lz_tune.checkpoint import CheckpointError
from lz_tune.config import Config

__all__ = ["BufferCheckpointer", "BufferLoad", "STORE_DIR", "for_run", "find_store", "live_bytes"]

_log = logging.getLogger(__name__)

#: the chunk folder's name (beside a train run's checkpoints; in a Tune trial's lz_tune/ folder)
STORE_DIR = "buffer_store"
#: a train run's manifest of the buffer at the launch of the evaluation of weight version N
#: a run's manifests: the snapshot version and the writing process's own token (every process
#: counts versions from the same start, so a run resumed from an older checkpoint into its own
#: folder would otherwise write, and at close delete, the names its newer checkpoints refer to)
RUN_MANIFEST = "replay_buffer.v{version}.{writer}.json"
RUN_MANIFEST_PATTERN = re.compile(r"replay_buffer\.v\d+(\.[0-9a-f]{8})?\.json")  # (also the names before the token)
_GB = 1e9
_UNKNOWN = object()


class BufferLoad:
    """What a restore read: ``transitions`` (positions loaded), ``digest`` of the contents,
    ``seconds`` it took."""

    def __init__(self, transitions: int, digest: str, seconds: float) -> None:
        self.transitions = transitions
        self.digest = digest
        self.seconds = seconds


class BufferCheckpointer:
    """Saves and loads the replay buffer of one run through its chunk store.

    ``store``: where this run writes chunks (None: this checkpointer only loads); ``relative``: the store's path
    relative to the folder a manifest will finally live in (what a reader tries first, so a run folder moved or
    copied as a whole still restores); ``log``: where "left out because ..." lines go.
    """

    def __init__(
        self,
        cfg: Config,
        store: Optional[ChunkStore],
        *,
        relative: Optional[str] = None,
        log: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.relative = relative
        self.writer_id = secrets.token_hex(4)  # this writer's manifest names (RUN_MANIFEST)
        self.log = log or _log.warning
        self.writer = SnapshotWriter(
            store, append_only=APPEND_ONLY, chunk_bytes=max(1, int(cfg.buffer.checkpoint_chunk_mb * 2**20))
        )
        self.last_save: Optional[SaveStats] = None
        self.last_skip_reason: Optional[str] = None
        self._best_manifest: Any = _UNKNOWN

    # -- save -----------------------------------------------------------------------------
    def skip_reason(self, buffer: GameBuffer) -> Optional[str]:
        """Why a checkpoint now would leave the buffer out (None: it is saved)."""
        b = self.cfg.buffer
        if not b.save_in_checkpoint:
            return "buffer.save_in_checkpoint=False"
        size = live_bytes(buffer)
        if size > b.checkpoint_max_gb * _GB:
            return (
                f"its arrays hold {size / _GB:.2f} GB > buffer.checkpoint_max_gb={b.checkpoint_max_gb:g} "
                f"(raise it, or set it to the size you accept per run on disk before compression)"
            )
        return None

    def save(self, buffer: GameBuffer, manifest_path: str, *, extra: Optional[dict[str, Any]] = None) -> bool:
        """Write the buffer's new chunks and then ``manifest_path`` (atomically). Returns False,
        with one log line saying why, when the rule leaves the buffer out (nothing is written)."""
        reason = self.skip_reason(buffer)
        if reason is not None:
            if self.cfg.buffer.save_in_checkpoint:  # an explicit off switch is not news at every save
                self.log(
                    f"[{self.cfg.exp_name}] checkpoint without the replay buffer: {reason}; "
                    f"a restore from it starts with an empty buffer"
                )
            self.last_skip_reason, self.last_save = reason, None
            return False
        if self.store is None:
            raise RuntimeError("BufferCheckpointer: no chunk store to save into (a run without an exp dir)")
        encoded, names, stats = self.writer.write(buffer.state_dict(copy=False))
        start = time.perf_counter()
        write_manifest(
            manifest_path,
            {
                "state": encoded,
                "chunks": sorted(set(names)),
                "digest": state_digest(encoded),
                "transitions": buffer.num_transitions,
                "chunk_bytes": self.writer.chunk_bytes,
                "store": {**self.store.describe(), "relative": self.relative},
                "written_at": time.time(),
                "stats": asdict(stats),
                **(extra or {}),
            },
        )
        stats.seconds += time.perf_counter() - start
        self.last_save, self.last_skip_reason = stats, None
        return True

    # -- load -----------------------------------------------------------------------------
    def load(self, buffer: GameBuffer, manifest_path: str, *, filesystem: Any = None) -> BufferLoad:
        """Replace ``buffer``'s contents with the snapshot of ``manifest_path``. ``filesystem``:
        the pyarrow file system of a store that is not a local folder (a Tune trial's cloud
        storage). CheckpointError naming the file on a missing / damaged manifest or chunk, or a
        buffer that does not fit this config; the buffer is left as it was then."""
        start = time.perf_counter()
        try:
            manifest = read_manifest(manifest_path)
            digest = manifest.get("digest")
            if digest is not None and state_digest(manifest["state"]) != digest:
                raise ManifestError(f"{manifest_path}: the manifest's contents do not match its digest (damaged)")
            store = find_store(manifest, manifest_path, filesystem=filesystem)
            # a manifest is input: its arrays may not ask for more memory than twice the size a save
            # would write (what a save measures and what it writes differ a little)
            cap = self.cfg.buffer.checkpoint_max_gb
            state = read_state(manifest["state"], store, max_bytes=int(2 * cap * _GB) if cap > 0 else None)
        except (ManifestError, ChunkError) as e:
            raise CheckpointError(str(e)) from e
        try:
            buffer.load_state_dict(state, copy=False)  # the arrays were just read: no second copy
        except (KeyError, ValueError, TypeError) as e:
            raise CheckpointError(f"{manifest_path}: replay buffer does not fit this config: {e}") from e
        self.writer.forget()  # other rows now: what it knew about the old ones no longer holds
        self.writer.remember(manifest["state"])  # skipped at the next save only if this run's store has them
        return BufferLoad(buffer.num_transitions, str(manifest.get("digest", "")), time.perf_counter() - start)

    # -- a train run's ckpt/ folder ------------------------------------------------------------
    def save_for_evaluation(self, buffer: GameBuffer, ckpt_dir: str, version: int) -> Optional[str]:
        """At an evaluation's launch: the buffer of that moment as ``ckpt_dir/replay_buffer.v<version>.json``
        (its path), or None when the rule leaves it out. Referenced by the checkpoint the
        evaluation's result writes (``buffer_manifest``), deleted with :meth:`commit_run_files`
        once no checkpoint refers to it."""
        path = os.path.join(ckpt_dir, RUN_MANIFEST.format(version=version, writer=self.writer_id))
        return path if self.save(buffer, path) else None

    def commit_run_files(
        self, ckpt_dir: str, *, latest: Optional[str], best: bool, pending: Iterable[Optional[str]]
    ) -> None:
        """After ``ckpt_latest.pt`` (and ``ckpt_best.pt`` when ``best``) were written with
        ``buffer_manifest=latest``: delete the run's manifests that neither of them nor an
        evaluation still running (``pending`` paths) refers to, then the chunks only those used."""
        if best:
            self._best_manifest = latest
        elif self._best_manifest is _UNKNOWN:  # a resumed run: what its ckpt_best.pt refers to
            self._best_manifest = _manifest_of(os.path.join(ckpt_dir, "ckpt_best.pt"))
        keep = {latest, self._best_manifest} | {os.path.basename(p) for p in pending if p}
        keep.discard(None)
        for name in os.listdir(ckpt_dir):
            if RUN_MANIFEST_PATTERN.fullmatch(name) and name not in keep:
                os.unlink(os.path.join(ckpt_dir, name))
        self.collect_garbage(
            os.path.join(ckpt_dir, name) for name in sorted(keep) if os.path.isfile(os.path.join(ckpt_dir, name))
        )

    # -- garbage ----------------------------------------------------------------------------
    def collect_garbage(self, live_manifests: Iterable[dict[str, Any] | str]) -> Optional[int]:
        """Delete the store's chunks that no live manifest (a dict, or the path of a local file)
        refers to. If a live manifest cannot be read, nothing is deleted (None): a chunk is lost
        only when it is certainly unused. Returns the number of chunk files deleted."""
        keep: set[str] = set()
        written: list[float] = []
        for manifest in live_manifests:
            if isinstance(manifest, str):
                try:
                    manifest = read_manifest(manifest)
                except ManifestError as e:
                    self.log(f"[{self.cfg.exp_name}] replay buffer chunks kept: {e}")
                    return None
            keep |= set(manifest.get("chunks", ())) | referenced_chunks(manifest["state"])
            if isinstance(manifest.get("written_at"), (int, float)):
                written.append(float(manifest["written_at"]))
        # grace period: files written after the newest live manifest are spared: no manifest of this
        # writer can name them, so they are another writer's save in progress (a Tune trial's old
        # process behind a partition). (Sparing everything newer than the OLDEST live manifest would
        # keep every superseded chunk since an early ckpt_best: the store would grow without bound.)
        if self.store is None:
            raise RuntimeError("BufferCheckpointer: no chunk store to collect (a run without an exp dir)")
        return self.store.remove_except(keep, spare_since=max(written) if written else None)


def for_run(cfg: Config, ckpt_dir: Optional[str], *, log: Optional[Callable[[str], None]] = None) -> BufferCheckpointer:
    """The checkpointer of a ``train`` run: chunks in ``ckpt_dir/buffer_store`` (None: load only)."""
    store = LocalChunkStore(os.path.join(ckpt_dir, STORE_DIR)) if ckpt_dir else None
    return BufferCheckpointer(cfg, store, relative=STORE_DIR if ckpt_dir else None, log=log)


def _manifest_of(checkpoint_path: str) -> Optional[str]:
    """The ``buffer_manifest`` a checkpoint file refers to (None if it has none or is unreadable)."""
    from lz_tune.checkpoint import load_checkpoint

    if not os.path.isfile(checkpoint_path):
        return None
    try:
        return load_checkpoint(checkpoint_path).get("buffer_manifest")
    except CheckpointError:
        return None


def live_bytes(buffer: GameBuffer) -> int:
    """Raw bytes of the buffer's live rows (what a checkpoint holds before compression)."""
    return sum(array.nbytes for array in _arrays(buffer.state_dict(copy=False)))


def _arrays(obj: Any):
    import numpy as np

    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)


def find_store(manifest: dict[str, Any], manifest_path: str, *, filesystem: Any = None) -> ChunkStore:
    """The chunk store a manifest refers to, of the places it may be: its path relative to the
    manifest's folder (a run or trial folder, also moved or copied whole), then its recorded place
    (a local folder, or a path on ``filesystem``: a Tune experiment's storage, where a downloaded
    checkpoint's manifest points back to its trial's store). The first that holds every chunk the
    manifest lists is taken (a copied folder whose store was pruned, or holds another run's
    chunks, is passed over); when none holds them all, the first that exists (the load then names
    the missing chunk)."""
    info = manifest.get("store") or {}
    needed = set(manifest.get("chunks") or ())
    tried: list[str] = []
    candidates: list[ChunkStore] = []
    if info.get("relative"):
        local = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(manifest_path)), info["relative"]))
        tried.append(local)
        if os.path.isdir(local):
            candidates.append(LocalChunkStore(local))
    path = info.get("path")
    if path:
        store = (
            LocalChunkStore(path)
            if info.get("filesystem") == "local" or filesystem is None
            else open_store(filesystem, path)
        )
        tried.append(store.location)
        if store.exists():
            candidates.append(store)
    for store in candidates:
        if needed <= store.names():
            return store
    if candidates:
        return candidates[0]
    raise ManifestError(
        f"{manifest_path}: the replay buffer's chunk folder is not there (looked in "
        f"{', '.join(tried) or 'nothing: the manifest names no store'})"
    )
