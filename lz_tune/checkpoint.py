"""Checkpoint files: atomic writes, a format version, the config they were made with, and
loading with ``torch.load(weights_only=True)`` (no pickle code execution).

A checkpoint is a dict::

    {"format": "lz_tune.checkpoint", "format_version": 1,
     "policy_type": str, "config": nested dict,
     "learner": Learner.state_dict(),      # weights of the EVALUATED snapshot + optimizer, target, train_iter
     "counters": {"env_steps": int, "train_iter": int, "collects": int, "episodes": int, ...},
     "eval": {"reward_mean": float, "version": int, ...} or None,
     "rng": {"torch": ByteTensor, "numpy": dict},
     "buffer_manifest": str or None,     # the replay buffer's manifest in the same folder
     "budgets": TrainBudgetQueue.state_dict() or None,   # train budgets queued at that moment
     "content_digest": str}              # blake2b of everything above (checked on load)

The replay buffer itself is saved by :mod:`lz_tune.pipeline.buffer_checkpoint` (a manifest of
content-addressed chunks beside the checkpoint).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from lz_tune.atomic_file import atomic_write
from lz_tune.run_folder import CKPT_DIR, LATEST_CHECKPOINT

FORMAT = "lz_tune.checkpoint"
FORMAT_VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, foreign or incompatible. Names the file."""


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` atomically (temporary file in the same folder, fsync, rename).

    A crash at any moment leaves either the old file or the new one, never a torn file.
    """
    data = {"format": FORMAT, "format_version": FORMAT_VERSION, **payload}
    data["content_digest"] = content_digest(data)
    return atomic_write(path, lambda f: torch.save(data, f))


def content_digest(obj: Any) -> str:
    """32 hex digits of blake2b over a checkpoint's contents (every tensor's dtype, shape and
    bytes, every key and scalar, in key order), ``content_digest`` itself left out: a file whose
    bytes changed after it was written (bit rot, a bad copy) no longer matches. A zip record's
    own CRC is not checked by ``torch.load``."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)

    def walk(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            t = o.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif type(o).__module__ == "numpy" and hasattr(o, "tobytes"):
            h.update(f"N{o.dtype}{getattr(o, 'shape', ())}".encode())
            h.update(o.tobytes())
        elif isinstance(o, dict):
            h.update(b"{")
            for k in sorted(o, key=repr):
                if k == "content_digest":
                    continue
                h.update(repr(k).encode())
                walk(o[k])
            h.update(b"}")
        elif isinstance(o, (list, tuple)):
            h.update(b"[" if isinstance(o, list) else b"(")
            for v in o:
                walk(v)
            h.update(b"]")
        else:
            h.update(f"{type(o).__name__}:{o!r}".encode())

    walk(obj)
    return h.hexdigest()


def load_checkpoint(path: str | os.PathLike, *, policy_type: str | None = None) -> dict[str, Any]:
    """Load and check a checkpoint. Raises CheckpointError naming the file on any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, random bytes, pickled objects ...
        raise CheckpointError(f"{path}: not a readable lz_tune checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an lz_tune checkpoint (missing format marker)")
    if data.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {data.get('format_version')} is not supported "
            f"(this lz_tune reads version {FORMAT_VERSION})"
        )
    for key in ("policy_type", "config", "learner", "counters"):
        if key not in data:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    digest = data.get("content_digest")
    if digest is None or content_digest(data) != digest:
        raise CheckpointError(
            f"{path}: checkpoint contents do not match their digest (the file was damaged after it was written)"
        )
    if policy_type is not None and data["policy_type"] != policy_type:
        raise CheckpointError(
            f"{path}: checkpoint is for policy_type {data['policy_type']!r}, the config asks for {policy_type!r}"
        )
    return data


def find_latest_checkpoint(exp_dir: str | os.PathLike) -> Path | None:
    """``exp_dir/ckpt/ckpt_latest.pt`` if it exists (what ``--resume`` picks for a folder)."""
    p = Path(exp_dir) / CKPT_DIR / LATEST_CHECKPOINT
    return p if p.is_file() else None
