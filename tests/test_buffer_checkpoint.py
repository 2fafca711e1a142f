"""The replay buffer in checkpoints: exact round trips, incremental chunk files, garbage
collection, damaged files, the size rule, a save killed mid-write, and training at once after
a restore (no cold start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lz_tune.buffer import GameBuffer, SegmentBuilder, snapshot
from lz_tune.buffer.buffer_state import APPEND_ONLY
from lz_tune.buffer.chunk_store import SUFFIX, ArrowChunkStore, LocalChunkStore
from lz_tune.buffer.snapshot import SnapshotWriter, read_manifest, read_state, state_digest
from lz_tune.checkpoint import CheckpointError, load_checkpoint
from lz_tune.pipeline import Driver
from lz_tune.pipeline.buffer_checkpoint import BufferCheckpointer
from tests.buffer_states import assert_buffer_states_equal
from tests.conftest import REPO_ROOT

A = 3
FRAMES = ("tables", "frames", "columns", "frame")


def image_segments(num_episodes: int, *, seed: int = 0, length=(5, 40)) -> list:
    """Segments of random episodes with uint8 image frames [1, 8, 8] (S = 2, L = 10, U = T = 2)."""
    rng = np.random.default_rng(seed)
    builder = SegmentBuilder(segment_length=10, num_unroll_steps=2, td_steps=2, frame_stack=2, action_space_size=A)
    out = []
    for _ in range(num_episodes):
        builder.begin_episode(rng.integers(0, 255, (2, 1, 8, 8), dtype=np.uint8))
        n = int(rng.integers(*length))
        for i in range(n):
            out += builder.add_step(
                action=int(rng.integers(A)),
                reward=float(rng.normal()),
                root_value=float(rng.normal()),
                pred_value=float(rng.normal()),
                policy_target=rng.dirichlet(np.ones(A)).astype(np.float32),
                action_mask=np.ones(A, bool),
                to_play=-1,
                timestep=i,
                next_frame=rng.integers(0, 255, (1, 8, 8), dtype=np.uint8),
                done=i == n - 1,
            )
    return out


def image_buffer(seed: int = 0) -> GameBuffer:
    return GameBuffer(
        capacity_transitions=400,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=2,
        action_space_size=A,
        seed=seed,
    )


#: 1 KiB chunks (16 frames of 64 B): a few hundred transitions span many chunks
SMALL = 1024
SMALL_CFG = f"buffer.checkpoint_chunk_mb={SMALL / 2**20}"


def test_snapshot_round_trip_is_exact_and_writes_only_new_rows(tmp_path, monkeypatch):
    """Push, sample, write priorities back, evict, mutate stored targets: every save reads back
    identical (every array, clock, RNG); a later save writes the new frame rows and the small
    mutable columns, reuses the frame chunks in between and hashes no frame row twice."""
    buffer = image_buffer()
    segments = image_segments(80)
    store = LocalChunkStore(tmp_path / "store")
    writer = SnapshotWriter(store, append_only=APPEND_ONLY, chunk_bytes=SMALL)
    hashed_frame_rows = []
    name_of = snapshot.chunk_name
    monkeypatch.setattr(
        snapshot, "chunk_name", lambda a: (hashed_frame_rows.append(a.shape[0]) if a.ndim == 4 else None) or name_of(a)
    )
    buffer.push(segments[:30])
    first, _, stats1 = writer.write(buffer.state_dict(copy=False))
    assert stats1.chunks_written > 10
    frames_first = sum(hashed_frame_rows)
    assert frames_first == buffer.state_dict()["tables"]["frames"]["columns"]["frame"].shape[0]

    buffer.push(segments[30:60])  # evicts the oldest segments (capacity 400)
    assert buffer.clear_time > 0
    index = buffer.sample(16)
    buffer.update_priorities(index, np.linspace(0.1, 3.0, 16))
    buffer.tables.steps.live("root_value")[:5] += 1.0  # what a reanalysis does to stored targets
    expected = buffer.state_dict()
    hashed_frame_rows.clear()
    second, names, stats2 = writer.write(buffer.state_dict(copy=False))
    frame_rows = expected["tables"]["frames"]["columns"]["frame"].shape[0]
    assert 0 < sum(hashed_frame_rows) < frame_rows  # only rows not stored before (and the cut ends)
    assert stats2.chunks_reused > 0 and stats2.new_raw_bytes < stats2.raw_bytes

    restored = image_buffer(seed=99)
    restored.load_state_dict(read_state(second, store))
    assert_buffer_states_equal(restored.state_dict(), expected)
    restored.check_invariants()
    # the digest identifies the contents: the same for the restored buffer, another for the first save
    again, _, _ = SnapshotWriter(None, chunk_bytes=SMALL).write(restored.state_dict())
    assert state_digest(again) == state_digest(second) != state_digest(first)
    # the next sample is the same draw in both (sampling RNG and clocks came back)
    a, b = buffer.sample(8), restored.sample(8)
    np.testing.assert_array_equal(a.segment_ids, b.segment_ids)
    np.testing.assert_array_equal(a.positions, b.positions)
    assert a.make_time == b.make_time


def test_damaged_or_missing_chunk_is_a_clear_error_and_the_buffer_is_unchanged(tiny_cfg, tmp_path):
    buffer = image_buffer()
    buffer.push(image_segments(20))
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(tmp_path / "store"), relative="store")
    manifest = str(tmp_path / "m.json")
    assert checkpointer.save(buffer, manifest)
    target = image_buffer(seed=3)
    target.push(image_segments(3, seed=5))
    before = target.state_dict()
    chunk = next(iter(sorted((tmp_path / "store").iterdir())))
    data = chunk.read_bytes()
    chunk.write_bytes(data[:1] + bytes(b ^ 0xFF for b in data[1:9]) + data[9:])
    with pytest.raises(CheckpointError, match=chunk.name[: len(chunk.name) - len(SUFFIX)]):
        checkpointer.load(target, manifest)
    chunk.unlink()
    with pytest.raises(CheckpointError, match="missing"):
        checkpointer.load(target, manifest)
    (tmp_path / "bad.json").write_text('{"format": "lz_tune.buffer_snap')
    with pytest.raises(CheckpointError, match="bad.json"):
        checkpointer.load(target, str(tmp_path / "bad.json"))
    assert_buffer_states_equal(target.state_dict(), before)


def test_garbage_collection_deletes_only_chunks_no_live_manifest_uses(tiny_cfg, tmp_path):
    buffer = image_buffer()
    segments = image_segments(80)
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(tmp_path / "store"), relative="store")
    paths = []
    for i, chunk in enumerate((segments[:30], segments[30:60], segments[60:])):
        buffer.push(chunk)
        paths.append(str(tmp_path / f"m{i}.json"))
        checkpointer.save(buffer, paths[-1])
    (tmp_path / "store" / ".tmp-left-by-a-killed-save").write_bytes(b"half")
    before = read_manifest(paths[2])["written_at"] - 60  # (killed before the live manifest was written)
    os.utime(tmp_path / "store" / ".tmp-left-by-a-killed-save", (before, before))
    in_use = set(read_manifest(paths[2])["chunks"])
    removed = checkpointer.collect_garbage([paths[2]])
    assert removed and {p.name[: -len(SUFFIX)] for p in (tmp_path / "store").iterdir()} == in_use
    restored = image_buffer(seed=1)
    checkpointer.load(restored, paths[2])
    assert_buffer_states_equal(restored.state_dict(), buffer.state_dict())
    (tmp_path / "unreadable.json").write_text("{")
    assert checkpointer.collect_garbage([paths[2], str(tmp_path / "unreadable.json")]) is None  # nothing deleted


def test_store_on_a_pyarrow_file_system(tmp_path):
    """The cloud path (S3 / GCS are pyarrow file systems): the same chunks through pyarrow.fs."""
    import pyarrow.fs

    fs = pyarrow.fs.SubTreeFileSystem(str(tmp_path), pyarrow.fs.LocalFileSystem())
    store = ArrowChunkStore(fs, "bucket/exp/trial/lz_tune/buffer_store")
    buffer = image_buffer()
    buffer.push(image_segments(30))
    encoded, _, stats = SnapshotWriter(store, append_only=APPEND_ONLY, chunk_bytes=SMALL).write(
        buffer.state_dict(copy=False)
    )
    assert stats.chunks_written and (tmp_path / "bucket/exp/trial/lz_tune/buffer_store").is_dir()
    fresh = ArrowChunkStore(fs, "bucket/exp/trial/lz_tune/buffer_store")  # another process: lists the folder
    assert fresh.names() == set(snapshot.referenced_chunks(encoded))
    restored = image_buffer(seed=2)
    restored.load_state_dict(read_state(encoded, fresh))
    assert_buffer_states_equal(restored.state_dict(), buffer.state_dict())


def test_size_rule_leaves_the_buffer_out_and_says_why(tiny_cfg, tmp_path):
    buffer = image_buffer()
    buffer.push(image_segments(10))
    lines = []
    checkpointer = BufferCheckpointer(
        tiny_cfg("buffer.checkpoint_max_gb=1e-6"), LocalChunkStore(tmp_path / "s"), log=lines.append
    )
    assert not checkpointer.save(buffer, str(tmp_path / "m.json"))
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "s").exists()
    assert len(lines) == 1 and "buffer.checkpoint_max_gb" in lines[0] and "empty buffer" in lines[0]
    off = BufferCheckpointer(
        tiny_cfg("buffer.save_in_checkpoint=False"), LocalChunkStore(tmp_path / "s"), log=lines.append
    )
    assert not off.save(buffer, str(tmp_path / "m.json")) and len(lines) == 1  # switched off: no news


# ---------------------------------------------------------------------------------------------
# driver level: train runs


def _quiet(cfg, **kwargs) -> Driver:
    return Driver(cfg, print_fn=None, **kwargs)


def test_restore_trains_before_collecting_and_takes_config_hyperparameters(tiny_cfg, tmp_path):
    """A resumed run whose checkpoint holds a trainable buffer makes its first update before it
    collects a single env step (restore/env_steps_before_first_update = 0); the optimizer takes
    the config's weight decay, not the checkpoint's (torch's load_state_dict would restore the old one)."""
    cfg = tiny_cfg("max_env_step=80")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "exp"))
    driver.run()
    driver.close()
    latest = tmp_path / "exp" / "ckpt" / "ckpt_latest.pt"
    saved = load_checkpoint(latest)
    resumed = _quiet(
        cfg.with_overrides(["max_env_step=200", "learner.weight_decay=0.02"]),
        exp_dir=str(tmp_path / "exp"),
        resume_from=str(latest),
    )
    seen = []
    learn = resumed.learner.learn
    resumed.learner.learn = lambda *a, **k: (seen.append(resumed.counters.env_steps), learn(*a, **k))[1]
    try:
        assert resumed.trainable and resumed.restore_report.buffer_transitions == resumed.buffer.num_transitions > 0
        assert len(resumed.budgets) == 1  # the sync checkpoint had none queued: one collect's budget
        resumed.step(max_seconds=0.0)
        assert seen and seen[0] == saved["counters"]["env_steps"]
        assert resumed.metrics()["restore_env_steps_before_first_update"] == 0
        assert saved["learner"]["optimizer"]["param_groups"][0]["weight_decay"] != 0.02
        assert resumed.learner.optimizer.param_groups[0]["weight_decay"] == 0.02
    finally:
        resumed.close()


_KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from lz_tune.buffer import chunk_store
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.config_loader import load_config_module
    from lz_tune.pipeline import Driver
    from tests.conftest import TINY_OVERRIDES

    cfg = load_config_module({zoo!r}).with_overrides(list(TINY_OVERRIDES) + ["max_env_step=100000"])
    driver = Driver(cfg, exp_dir={exp!r}, print_fn=None)
    latest = os.path.join({exp!r}, "ckpt", "ckpt_latest.pt")
    while driver.counters.evaluations < 3:
        driver.step(max_seconds=0.2)
    print("COMMITTED", load_checkpoint(latest)["buffer_manifest"], flush=True)
    write = chunk_store.LocalChunkStore._write

    def write_half_then_die(self, name, data):  # SIGKILL in the middle of the next save's chunk file
        with open(os.path.join(self.path, ".tmp-half"), "wb") as f:
            f.write(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)

    chunk_store.LocalChunkStore._write = write_half_then_die
    while True:
        driver.step(max_seconds=0.2)
""")


def test_save_killed_mid_write_leaves_the_previous_checkpoint_loadable(tiny_cfg, tmp_path):
    """SIGKILL while a save writes its chunks: the previous checkpoint and the manifest it names
    load, and the buffer is exactly the one that manifest recorded (its content digest)."""
    exp = str(tmp_path / "exp")
    script = _KILLED_SAVE.format(
        repo=REPO_ROOT, zoo=os.path.join(REPO_ROOT, "zoo/classic_control/cartpole_muzero.py"), exp=exp
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert run.returncode == -signal.SIGKILL, run.stdout[-2000:] + run.stderr[-3000:]
    committed = run.stdout.split("COMMITTED")[1].split()[0]
    ckpt_dir = tmp_path / "exp" / "ckpt"
    assert (ckpt_dir / "buffer_store" / ".tmp-half").is_file()  # the torn file is there, under no chunk name
    latest = load_checkpoint(ckpt_dir / "ckpt_latest.pt")
    assert latest["buffer_manifest"] == committed
    manifest = read_manifest(ckpt_dir / committed)
    resumed = _quiet(tiny_cfg("max_env_step=100000"), exp_dir=exp, resume_from=str(ckpt_dir / "ckpt_latest.pt"))
    try:
        encoded, _, _ = SnapshotWriter(None, chunk_bytes=manifest["chunk_bytes"]).write(resumed.buffer.state_dict())
        assert resumed.buffer.num_transitions == manifest["transitions"] > 0
        assert state_digest(encoded) == manifest["digest"]
        start = resumed.counters.evaluations
        while resumed.counters.evaluations <= start:  # the run goes on and its next save cleans up
            resumed.step(max_seconds=0.2)
        assert not (ckpt_dir / "buffer_store" / ".tmp-half").exists()
    finally:
        resumed.close()


@pytest.mark.slow  # ~60 s: a 15-s CartPole trial and a small Pong buffer
def test_benchmark_prints_save_costs_and_shares():
    import json

    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/buffer_checkpoint.py",
            "--parts",
            "cartpole,pong",
            "--cartpole-seconds",
            "15",
            "--pong-env-steps",
            "3000",
            "--pong-new-env-steps",
            "1000",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    out = json.loads(lines[-1])
    cartpole, pong = out["cartpole"], out["pong"]
    assert cartpole["saves"] >= 1 and 0 < cartpole["buffer_share"] <= cartpole["share"] < 1
    assert 0 < pong["next_buffer_bytes"] < pong["next_save_bytes"] and pong["store_bytes"] < pong["buffer_raw_bytes"]
    assert pong["buffer_transitions"] >= 2000 and pong["load_s"] > 0


def test_trial_store_on_cloud_like_storage_restores_a_downloaded_checkpoint(tiny_cfg, tmp_path):
    """A Tune trial whose storage is not a local folder (S3 / GCS: a pyarrow file system): chunks
    go to <trial>/lz_tune/buffer_store in that storage, the checkpoint folder Tune uploads holds
    only the manifest, and a restore from a downloaded copy of it (another local folder, as
    Checkpoint.as_directory gives) finds the chunks through the storage file system."""
    import shutil
    import types

    import pyarrow.fs

    from lz_tune.tune.trial_storage import MANIFEST_FILE, TrialStorage

    fs = pyarrow.fs.SubTreeFileSystem(str(tmp_path / "bucket"), pyarrow.fs.LocalFileSystem())
    storage = types.SimpleNamespace(trial_fs_path="exp/trial_0", storage_filesystem=fs)
    trial = TrialStorage(storage, fallback_dir=str(tmp_path / "unused"))
    checkpointer = trial.checkpointer(tiny_cfg(SMALL_CFG))
    buffer = image_buffer()
    segments = image_segments(40)
    for i, part in enumerate((segments[:40], segments[40:])):
        buffer.push(part)
        local = tmp_path / f"tmp_ckpt_{i}"  # Tune's temporary folder, then "uploaded"
        assert checkpointer.save(buffer, str(local / MANIFEST_FILE), extra={"trial_id": "trial_0"})
        shutil.copytree(local, tmp_path / "bucket" / "exp" / "trial_0" / f"checkpoint_00000{i}")
        shutil.rmtree(local)
    assert (tmp_path / "bucket/exp/trial_0/lz_tune/buffer_store").is_dir()
    live = trial.live_manifests()
    assert len(live) == 2 and live[-1]["transitions"] == buffer.num_transitions
    assert checkpointer.collect_garbage(live[-1:]) > 0  # the first folder "deleted by Tune"
    downloaded = tmp_path / "download"
    shutil.copytree(tmp_path / "bucket" / "exp" / "trial_0" / "checkpoint_000001", downloaded)
    restored = image_buffer(seed=4)
    reader = trial.checkpointer(tiny_cfg(SMALL_CFG))
    reader.load(restored, str(downloaded / MANIFEST_FILE), filesystem=fs)
    assert_buffer_states_equal(restored.state_dict(), buffer.state_dict())
    assert trial.newest_file(MANIFEST_FILE) == (downloaded / MANIFEST_FILE).read_bytes()


def test_a_manifest_is_input_checked_before_anything_is_read_or_allocated(tiny_cfg, tmp_path):
    """Manifests are input: a chunk name that is not a content hash (a path outside the store), a
    shape that asks for unbounded memory, a state edited after its digest was written, and a chunk
    file replaced by another well-formed chunk each give CheckpointError naming what is wrong; the
    buffer is unchanged, and no file outside the store is opened."""
    import json

    from lz_tune.buffer.chunk_store import decode_chunk, encode_chunk

    buffer = image_buffer()
    buffer.push(image_segments(20))
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(tmp_path / "store"), relative="store")
    manifest_path = tmp_path / "m.json"
    assert checkpointer.save(buffer, str(manifest_path))
    good = json.loads(manifest_path.read_text())
    target = image_buffer(seed=3)
    target.push(image_segments(3, seed=5))
    before = target.state_dict()

    def first_array(state):
        for _, entry in snapshot._walk_arrays(state, ()):
            if entry["shape"]:
                return entry

    def load_edited(edit, *, redigest=True):
        manifest = json.loads(json.dumps(good))
        edit(manifest)
        if redigest:
            manifest["digest"] = state_digest(manifest["state"])
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(manifest))
        checkpointer.load(target, str(path))

    secret = tmp_path / "secret"
    secret.write_text("not a chunk")
    with pytest.raises(CheckpointError, match="not a content hash"):
        load_edited(lambda m: first_array(m["state"])["chunks"][0].__setitem__(0, "../../secret"))
    with pytest.raises(CheckpointError, match="refusing to allocate"):
        load_edited(lambda m: first_array(m["state"]).__setitem__("shape", [10**12, 84, 84]))
    with pytest.raises(CheckpointError, match="not a valid entry"):
        load_edited(lambda m: first_array(m["state"]).__setitem__("shape", [-1]))
    with pytest.raises(CheckpointError, match="digest"):
        load_edited(
            lambda m: first_array(m["state"]).__setitem__("row0", first_array(m["state"])["row0"] + 1), redigest=False
        )
    # a chunk file swapped for another well-formed one of the same size (its CRC is right)
    entry = first_array(good["state"])
    name, lo, hi = entry["chunks"][0]
    file = tmp_path / "store" / (name + SUFFIX)
    rows = decode_chunk(
        file.read_bytes(), dtype=np.dtype(entry["dtype"]), shape=(hi - lo, *entry["shape"][1:]), where=""
    )
    file.write_bytes(encode_chunk(rows + 1 if rows.dtype != np.bool_ else ~rows))
    with pytest.raises(CheckpointError, match="do not match its name"):
        checkpointer.load(target, str(manifest_path))
    assert_buffer_states_equal(target.state_dict(), before)


def test_run_manifest_names_are_unique_per_writer(tiny_cfg, tmp_path):
    """Every process counts snapshot versions from the same start: two writers of one run folder
    (a run, then its resume from an older checkpoint) saving the same version get different files,
    so neither overwrites nor, when it discards a pending one, deletes the other's."""
    from lz_tune.pipeline.buffer_checkpoint import RUN_MANIFEST_PATTERN, for_run

    buffer = image_buffer()
    buffer.push(image_segments(5))
    cfg = tiny_cfg(SMALL_CFG)
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    first, second = for_run(cfg, str(ckpt_dir)), for_run(cfg, str(ckpt_dir))
    a = first.save_for_evaluation(buffer, str(ckpt_dir), 1_000_007)
    b = second.save_for_evaluation(buffer, str(ckpt_dir), 1_000_007)
    assert a != b and os.path.isfile(a) and os.path.isfile(b)
    assert all(RUN_MANIFEST_PATTERN.fullmatch(os.path.basename(p)) for p in (a, b, "replay_buffer.v7.json"))
    os.unlink(b)  # the second writer discards its pending evaluation's file: the first's stays
    assert read_manifest(a)["transitions"] == buffer.num_transitions


def test_a_store_is_chosen_only_if_it_holds_every_chunk(tiny_cfg, tmp_path):
    """A checkpoint folder copied elsewhere next to a pruned (here: empty) store: the manifest's
    recorded store, which holds every chunk, is read instead of failing on the copy's."""
    import shutil

    buffer = image_buffer()
    buffer.push(image_segments(6))
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(tmp_path / "a" / "store"), relative="store")
    assert checkpointer.save(buffer, str(tmp_path / "a" / "m.json"))
    (tmp_path / "b" / "store").mkdir(parents=True)
    shutil.copy(tmp_path / "a" / "m.json", tmp_path / "b" / "m.json")
    target = image_buffer(seed=4)
    checkpointer.load(target, str(tmp_path / "b" / "m.json"))
    assert_buffer_states_equal(target.state_dict(), buffer.state_dict())


def test_garbage_collection_spares_files_newer_than_the_newest_live_manifest(tiny_cfg, tmp_path):
    """A chunk (or temporary file) written after the newest live manifest may be another writer's
    save in progress: garbage collection leaves it; an unreferenced chunk older than that manifest
    goes."""
    import time

    buffer = image_buffer()
    buffer.push(image_segments(4))
    store_dir = tmp_path / "store"
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(store_dir), relative="store")
    assert checkpointer.save(buffer, str(tmp_path / "m.json"))
    written = json.loads((tmp_path / "m.json").read_text())["written_at"]
    old, new, tmp = (
        store_dir / f"{'a' * 32}{SUFFIX}",
        store_dir / f"{'b' * 32}{SUFFIX}",
        store_dir / ".tmp-x.chunk.y.tmp",
    )
    for f in (old, new, tmp):
        f.write_bytes(b"z")
    os.utime(old, (written - 60, written - 60))
    future = time.time() + 60
    os.utime(new, (future, future))
    os.utime(tmp, (future, future))
    assert checkpointer.collect_garbage([str(tmp_path / "m.json")]) == 1
    assert not old.exists() and new.exists() and tmp.exists()
    target = image_buffer(seed=2)
    checkpointer.load(target, str(tmp_path / "m.json"))  # what the manifest names is all there
    assert_buffer_states_equal(target.state_dict(), buffer.state_dict())


def test_export_makes_a_self_contained_checkpoint_that_restores_with_its_buffer(tiny_cfg, tmp_path, capsys):
    """``python -m lz_tune export`` copies a run's latest checkpoint and exactly the chunks its
    manifest names; with the run folder gone, the export verifies and restores the same buffer."""
    import shutil

    from lz_tune.__main__ import main

    cfg = tiny_cfg("max_env_step=80")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "run"))
    driver.run()
    driver.close()
    saved_buffer = driver.buffer.state_dict()
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "ok      " in out and "exported 1 checkpoint file(s)" in out
    manifest_name = load_checkpoint(tmp_path / "out" / "ckpt_latest.pt")["buffer_manifest"]
    manifest = read_manifest(str(tmp_path / "out" / manifest_name))
    assert manifest["store"] == {"filesystem": "local", "path": None, "relative": "buffer_store"}
    chunks = {p.name[: -len(SUFFIX)] for p in (tmp_path / "out" / "buffer_store").iterdir()}
    assert chunks == set(manifest["chunks"])  # exactly its own, not the run's other checkpoints'
    shutil.rmtree(tmp_path / "run")  # nothing of the run is left
    resumed = _quiet(cfg, exp_dir=str(tmp_path / "again"), resume_from=str(tmp_path / "out" / "ckpt_latest.pt"))
    try:
        assert_buffer_states_equal(resumed.buffer.state_dict(), saved_buffer)
    finally:
        resumed.close()
    # an export into a folder that holds files is refused, and leaves it as it was
    assert main(["export", str(tmp_path / "out" / "ckpt_latest.pt"), str(tmp_path / "out")]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_a_buffer_that_does_not_load_falls_back_to_weights_only_where_asked(tiny_cfg, tmp_path):
    """A Tune restore (``weights_only_fallback``) of a checkpoint whose chunks are gone keeps the
    weights, optimizer and counters, says so and counts it in restore/weights_only; without the
    fallback (train --resume, which tries an older checkpoint instead) it is a CheckpointError."""
    import shutil

    cfg = tiny_cfg("max_env_step=80")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "run"))
    driver.run()
    driver.close()
    latest = tmp_path / "run" / "ckpt" / "ckpt_latest.pt"
    ckpt = load_checkpoint(latest)
    shutil.rmtree(tmp_path / "run" / "ckpt" / "buffer_store")
    lines: list[str] = []
    other = Driver(cfg, exp_dir=str(tmp_path / "other"), print_fn=lines.append)
    try:
        with pytest.raises(CheckpointError):
            other.restore_from(ckpt, str(latest))
        assert other.buffer.num_transitions == 0 and other.metrics()["restore_weights_only"] == 0
        other.restore_from(ckpt, str(latest), weights_only_fallback=True)
        assert other.metrics()["restore_weights_only"] == 1 and other.buffer.num_transitions == 0
        assert (
            other.train_iter == ckpt["learner"]["train_iter"]
            and other.counters.env_steps == ckpt["counters"]["env_steps"]
        )
        assert any("restored the weights, optimizer and counters without it" in line for line in lines), lines
        import torch

        net = other.learner.policy.weights()
        for key, value in ckpt["learner"]["network"].items():
            assert torch.equal(net[key].cpu(), value.cpu()), key
    finally:
        other.close()
