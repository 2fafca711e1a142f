"""A checkpoint fuzzer: bit flips and truncations of a checkpoint file, and random edits of a
replay buffer manifest (names, shapes, rows), each give CheckpointError or an exact load, nothing
else (no other exception, no silently different weights, no file read outside the store)."""

from __future__ import annotations

import json

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lz_tune.checkpoint import CheckpointError, content_digest, load_checkpoint, save_checkpoint  # noqa: E402

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tiny_cfg):
    from lz_tune.algos import get_algorithm
    from lz_tune.workers import env_spec_for

    cfg = tiny_cfg()
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, env_spec_for(cfg))
    path = tmp_path_factory.mktemp("fuzz") / "ckpt.pt"
    save_checkpoint(
        path,
        {
            "policy_type": cfg.policy_type,
            "config": cfg.to_dict(),
            "learner": learner.state_dict(),
            "counters": {"env_steps": 10, "train_iter": 2},
            "eval": None,
        },
    )
    return path.read_bytes(), content_digest(load_checkpoint(path))


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips_give_an_error_or_the_exact_checkpoint(checkpoint, tmp_path, flips):
    data, digest = checkpoint
    damaged = bytearray(data)
    for offset, bit in flips:
        damaged[offset % len(damaged)] ^= 1 << bit
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(damaged))
    try:
        loaded = load_checkpoint(path)
    except CheckpointError:
        return
    assert content_digest(loaded) == digest  # it loaded: then it is exactly the checkpoint


@FUZZ
@given(keep=st.floats(min_value=0.0, max_value=0.9999))
def test_truncations_are_errors(checkpoint, tmp_path, keep):
    data, _ = checkpoint
    path = tmp_path / "truncated.pt"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


@pytest.fixture(scope="module")
def saved_buffer(tmp_path_factory, tiny_cfg):
    """A replay buffer saved as a manifest + chunk store, and a buffer of the same shape to load into."""
    from lz_tune.buffer.chunk_store import LocalChunkStore
    from lz_tune.pipeline.buffer_checkpoint import BufferCheckpointer
    from tests.test_buffer_checkpoint import SMALL_CFG, image_buffer, image_segments

    folder = tmp_path_factory.mktemp("fuzz_buffer")
    buffer = image_buffer()
    buffer.push(image_segments(8))
    checkpointer = BufferCheckpointer(tiny_cfg(SMALL_CFG), LocalChunkStore(folder / "store"), relative="store")
    assert checkpointer.save(buffer, str(folder / "m.json"))
    (folder / "outside.chunk").write_bytes(b"secret")
    return folder, checkpointer, json.loads((folder / "m.json").read_text()), buffer.num_transitions


def _entries(state, out=None):
    out = [] if out is None else out
    if isinstance(state, dict):
        if "chunks" in state and "shape" in state:
            out.append(state)
        for v in state.values():
            _entries(v, out)
    elif isinstance(state, list):
        for v in state:
            _entries(v, out)
    return out


EDITS = st.one_of(
    st.tuples(
        st.just("name"),
        st.one_of(st.text(max_size=40), st.sampled_from(["../outside", "/etc/passwd", "..", "a" * 32, "0" * 32])),
    ),
    st.tuples(st.just("shape"), st.lists(st.integers(min_value=-5, max_value=10**13), max_size=4)),
    st.tuples(st.just("row0"), st.integers(min_value=-5, max_value=10**9)),
    st.tuples(st.just("rows"), st.tuples(st.integers(-3, 10**6), st.integers(-3, 10**6))),
    st.tuples(st.just("dtype"), st.sampled_from(["<f4", "|O", "object", "zz", "<u8", "|b1"])),
)


@FUZZ
@given(which=st.integers(min_value=0), edit=EDITS)
def test_manifest_edits_give_an_error_or_the_exact_buffer(saved_buffer, tmp_path, which, edit):
    from lz_tune.buffer.snapshot import state_digest
    from tests.test_buffer_checkpoint import image_buffer

    folder, checkpointer, manifest, transitions = saved_buffer
    manifest = json.loads(json.dumps(manifest))
    entries = _entries(manifest["state"])
    entry = entries[which % len(entries)]
    kind, value = edit
    if kind == "name":
        entry["chunks"][0][0] = value
    elif kind == "rows":
        entry["chunks"][0][1:3] = list(value)
    else:
        entry[kind] = value
    manifest["digest"] = state_digest(manifest["state"])  # (an attacker rewrites the digest too)
    path = folder / "edited.json"
    path.write_text(json.dumps(manifest))
    target = image_buffer(seed=1)
    try:
        checkpointer.load(target, str(path))
    except CheckpointError:
        return
    assert target.num_transitions == transitions  # it loaded: the edit changed nothing that matters
