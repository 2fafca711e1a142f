"""A damaged newest checkpoint does not end a run: ``train --resume RUN`` falls back to the older
one that restores, says so and counts it; ``python -m lz_tune verify RUN`` checks every checkpoint,
manifest and chunk and says what is restorable."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import TINY_OVERRIDES, run_cli

from lz_tune.checkpoint import load_checkpoint

TRAIN = ["train", "zoo/classic_control/cartpole_muzero.py", *TINY_OVERRIDES, "evaluator.eval_freq=8", "--quiet"]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A finished tiny run whose ckpt_latest.pt and ckpt_best.pt are different evaluations."""
    import torch

    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("verify") / "run"
    for attempt in range(3):  # (the best evaluation is usually not the last one; retry with more steps if so)
        shutil.rmtree(run, ignore_errors=True)
        from lz_tune.cli.main import main

        assert main([*TRAIN, f"max_env_step={300 + 200 * attempt}", "--exp-dir", str(run)]) == 0
        latest = load_checkpoint(run / "ckpt" / "ckpt_latest.pt")["eval"]["train_iter"]
        best = load_checkpoint(run / "ckpt" / "ckpt_best.pt")["eval"]["train_iter"]
        if latest != best:
            return run, latest, best
    pytest.skip("every run's best evaluation was its last")


def _copy(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


def test_verify_a_sound_run(trained_run, capsys):
    run, _, _ = trained_run
    code, out, _ = run_cli(capsys, "verify", str(run))
    assert code == 0 and out.count("ok ") == 2 and "restorable:" in out and "ckpt_latest.pt" in out.splitlines()[-1]


def test_a_truncated_latest_checkpoint_falls_back_to_the_best_one(trained_run, tmp_path, capsys):
    run, latest, best = trained_run
    run = _copy(run, tmp_path)
    data = (run / "ckpt" / "ckpt_latest.pt").read_bytes()
    (run / "ckpt" / "ckpt_latest.pt").write_bytes(data[: len(data) // 2])
    code, out, _ = run_cli(capsys, "verify", str(run))
    assert (
        code == 1 and "DAMAGED" in out and "restorable:" in out and "ckpt_best.pt (the newer ones are damaged)" in out
    )
    code, out, err = run_cli(
        capsys, "train", "--resume", str(run), "max_env_step=2000", "max_train_iter=" + str(best + 8), "--quiet"
    )
    assert code == 0, err[-2000:]
    assert "does not restore" in err and "resuming from" in err and "ckpt_best.pt" in err
    rows = [json.loads(line) for line in (run / "result.json").read_text().splitlines()]
    assert rows[-1]["restore/fallbacks"] == 1 and rows[-1]["evaluation/train_iter"] > best


def test_a_damaged_chunk_is_named(trained_run, tmp_path, capsys):
    """A chunk of the latest checkpoint's replay buffer flipped (its CRC no longer matches): verify
    names the chunk file, marks that checkpoint damaged and points to the older one."""
    run, _, _ = trained_run
    run = _copy(run, tmp_path)
    chunks = [
        set(json.loads((run / "ckpt" / load_checkpoint(run / "ckpt" / f)["buffer_manifest"]).read_text())["chunks"])
        for f in ("ckpt_latest.pt", "ckpt_best.pt")
    ]
    name = sorted(chunks[0] - chunks[1])[0]  # rows only the latest checkpoint's buffer holds
    chunk = run / "ckpt" / "buffer_store" / f"{name}.chunk"
    data = chunk.read_bytes()
    chunk.write_bytes(data[:5] + bytes(b ^ 0x55 for b in data[5:]))
    code, out, _ = run_cli(capsys, "verify", str(run))
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("DAMAGED") and name in lines[0] and lines[1].startswith("ok")
    assert "ckpt_best.pt (the newer ones are damaged)" in lines[-1]


def test_verify_reads_the_manifest_name_tune_writes():
    from lz_tune.cli.verify import TUNE_MANIFEST
    from lz_tune.tune.trial_storage import MANIFEST_FILE

    assert TUNE_MANIFEST == MANIFEST_FILE
