"""``python -m lz_tune export CHECKPOINT OUT``: one checkpoint as a self-contained folder.

A Tune checkpoint folder holds only the small manifest of its replay buffer; the chunks live in
its trial's ``lz_tune/buffer_store/`` (:mod:`lz_tune.tune.trial_storage`), and a train run's
checkpoint shares ``ckpt/buffer_store/`` with the run's other checkpoints. Copied away alone, such
a checkpoint restores without its buffer once the store it names is pruned. ``export`` copies
the checkpoint's files and exactly the chunks its manifest names into ``OUT`` (``OUT/buffer_store``),
points the manifest at that folder (relative), and verifies the result (as ``verify`` does).

    python -m lz_tune export ~/lz_results/cp/MuZeroTrainable_7c65e_00000_0_.../checkpoint_000004 ./cp_best
    python -m lz_tune export runs/cartpole_muzero_seed0_20261207-101500 ./cartpole_latest
    python -m lz_tune train --resume ./cartpole_latest/ckpt_latest.pt      # weights, optimizer and buffer
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

__all__ = ["add_parser", "export_checkpoint", "run"]

#: the chunk folder inside an exported folder, beside the manifest
EXPORT_STORE = "buffer_store"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export",
        help="copy one checkpoint and the replay-buffer chunks it needs into a self-contained folder",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "path",
        metavar="CHECKPOINT",
        help="a Tune checkpoint folder (checkpoint_00000N/), a train run folder (its ckpt_latest.pt), "
        "or a checkpoint file",
    )
    p.add_argument("out", metavar="OUT", help="the folder to create (must not exist, or be empty)")
    return p


def _source_files(path: Path) -> tuple[Path, list[Path]]:
    """The checkpoint's folder and the files to copy from it: a Tune checkpoint folder's files; a run
    folder's ckpt_latest.pt; a checkpoint file alone. Manifests are added by the caller."""
    from lz_tune.checkpoint import CheckpointError
    from lz_tune.run_folder import CKPT_DIR, LATEST_CHECKPOINT

    if path.is_file():
        return path.parent, [path]
    if (path / CKPT_DIR / LATEST_CHECKPOINT).is_file():
        return path / CKPT_DIR, [path / CKPT_DIR / LATEST_CHECKPOINT]
    files = sorted(f for f in path.iterdir() if f.is_file() and f.suffix in (".pt", ".json"))
    if not any(f.suffix == ".pt" for f in files):
        raise CheckpointError(f"{path}: no checkpoint here (a Tune checkpoint folder, a run folder or a .pt file)")
    return path, files


def export_checkpoint(path: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Copy the checkpoint at ``path`` into ``out`` with the chunks of every replay-buffer manifest
    it names; returns the checkpoint files written. CheckpointError when the checkpoint or a chunk
    does not read (nothing is left in ``out`` then)."""
    from lz_tune.buffer.chunk_store import ChunkError, LocalChunkStore
    from lz_tune.buffer.snapshot import ManifestError, read_manifest, state_digest
    from lz_tune.checkpoint import CheckpointError, load_checkpoint
    from lz_tune.cli.verify import TUNE_MANIFEST
    from lz_tune.pipeline.buffer_checkpoint import find_store

    src, files = _source_files(Path(path))
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CheckpointError(f"{target}: exists and is not an empty folder")
    manifests: list[Path] = []
    for f in files:
        if f.suffix == ".pt":
            name = load_checkpoint(f).get("buffer_manifest")  # verifies the file's digest too
            if name and (src / name).is_file():
                manifests.append(src / name)
    if (src / TUNE_MANIFEST).is_file():
        manifests.append(src / TUNE_MANIFEST)
    target.mkdir(parents=True, exist_ok=True)
    try:
        written = []
        for f in files:
            if f.suffix == ".pt":
                shutil.copy2(f, target / f.name)
                written.append(target / f.name)
        store = LocalChunkStore(target / EXPORT_STORE)
        for manifest_path in dict.fromkeys(manifests):
            manifest = read_manifest(str(manifest_path))
            if manifest.get("digest") is not None and state_digest(manifest["state"]) != manifest["digest"]:
                raise CheckpointError(f"{manifest_path}: the manifest's contents do not match its digest (damaged)")
            source = find_store(manifest, str(manifest_path))
            for name in manifest.get("chunks") or ():
                if name not in store.names():
                    store.put(name, source.get(name))  # (verified below: reading re-hashes each chunk)
            manifest["store"] = {"filesystem": "local", "path": None, "relative": EXPORT_STORE}
            (target / manifest_path.name).write_text(json.dumps(manifest))
        store.sync()
    except (ManifestError, ChunkError, OSError, CheckpointError) as e:
        shutil.rmtree(target, ignore_errors=True)
        raise CheckpointError(f"export {path}: {e}") from e
    return written


def run(args: argparse.Namespace) -> int:
    from lz_tune.cli.verify import verify_checkpoint

    written = export_checkpoint(args.path, args.out)
    problems = [(f, verify_checkpoint(f)) for f in written]
    for f, problem in problems:
        print(f"{'ok     ' if not problem else 'DAMAGED'} {f}" + (f": {problem}" if problem else ""), flush=True)
    chunks = len(list((Path(args.out) / EXPORT_STORE).glob("*"))) if (Path(args.out) / EXPORT_STORE).is_dir() else 0
    print(f"exported {len(written)} checkpoint file(s) and {chunks} replay-buffer chunk(s) to {args.out}")
    return 0 if not any(p for _, p in problems) else 1
