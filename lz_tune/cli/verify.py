"""``python -m lz_tune verify PATH``: check what in a run folder, a Tune trial or a checkpoint can
be restored, without restoring it.

For each checkpoint file found (``ckpt/ckpt_latest.pt``, ``ckpt/ckpt_best.pt`` of a run; every
``checkpoint_*/`` of a Tune trial; or the one file given), it loads the file (format, version,
``weights_only``) and, where the checkpoint names a replay buffer, reads that buffer's manifest,
checks its digest, validates every entry and reads every chunk it refers to, re-hashing each
against its name. Prints one line per checkpoint, then which one ``train --resume`` would use.
Exit code 0 when every checkpoint verifies, 1 when one does not (the lines say which), 2 when
there is nothing to verify.

    python -m lz_tune verify runs/cartpole_muzero_seed0_20261207-101500
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

#: the replay buffer manifest of a Tune checkpoint folder: lz_tune.tune.trial_storage.MANIFEST_FILE,
#: written again here because importing lz_tune.tune imports Ray (a test keeps the two equal)
TUNE_MANIFEST = "lz_tune_buffer.json"

__all__ = ["add_parser", "run", "verify_checkpoint", "checkpoints_in"]


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "verify",
        help="check every checkpoint, manifest and chunk of a run or trial",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "path", metavar="PATH", help="train run folder, Tune trial or checkpoint folder, or a checkpoint file"
    )
    return p


def checkpoints_in(path: str) -> list[Path]:
    """The checkpoint files under ``path``, newest first where the order is known: a run folder's
    ckpt_latest.pt then ckpt_best.pt; a Tune trial's checkpoint folders, last first; a file alone."""
    from lz_tune.analysis import CHECKPOINT_FILE, STATE_FILE
    from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT

    p = Path(path)
    if p.is_file():
        return [p]
    found = [p / CKPT_DIR / name for name in (LATEST_CHECKPOINT, BEST_CHECKPOINT) if (p / CKPT_DIR / name).is_file()]
    folders = sorted(p.glob("checkpoint_*"), reverse=True) if not (p / CHECKPOINT_FILE).exists() else [p]
    for folder in folders:
        found += [folder / name for name in (STATE_FILE, CHECKPOINT_FILE) if (folder / name).is_file()]
    return found


def verify_checkpoint(path: Path) -> str:
    """ "" when the checkpoint file and its replay buffer verify, else what is wrong."""
    from lz_tune.buffer.chunk_store import ChunkError
    from lz_tune.buffer.snapshot import ManifestError, read_manifest, read_state, state_digest
    from lz_tune.checkpoint import CheckpointError, load_checkpoint
    from lz_tune.pipeline.buffer_checkpoint import find_store

    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        return str(e)
    name = ckpt.get("buffer_manifest")
    if not name and (path.parent / TUNE_MANIFEST).is_file():
        name = TUNE_MANIFEST  # a Tune checkpoint folder: its buffer's manifest beside the state files
    if not name:
        return ""
    manifest_path = os.path.join(path.parent, name)
    try:
        manifest = read_manifest(manifest_path)
        if manifest.get("digest") is not None and state_digest(manifest["state"]) != manifest["digest"]:
            return f"{manifest_path}: the manifest's contents do not match its digest"
        read_state(manifest["state"], find_store(manifest, manifest_path))
    except (ManifestError, ChunkError, CheckpointError) as e:
        return str(e)
    return ""


def run(args: argparse.Namespace) -> int:
    files = checkpoints_in(args.path)
    if not files:
        print(
            f"error: {args.path}: no checkpoint found (a run folder's ckpt/, a Tune trial's checkpoint_*/, or a "
            f"checkpoint file)",
            flush=True,
        )
        return 2
    good = []
    for file in files:
        problem = verify_checkpoint(file)
        print(f"{'ok     ' if not problem else 'DAMAGED'} {file}" + (f": {problem}" if problem else ""), flush=True)
        if not problem:
            good.append(file)
    if good:
        print(f"restorable: {good[0]}" + ("" if good[0] == files[0] else " (the newer ones are damaged)"))
    else:
        print("restorable: nothing")
    return 0 if len(good) == len(files) else 1
