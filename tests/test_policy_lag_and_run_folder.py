"""The driver's parts with one job each: policy-lag bookkeeping (lz_tune.pipeline.policy_lag) and
the run folder's layout (lz_tune.run_folder), against hand-computed values."""

from __future__ import annotations

import json
import os

import pytest

from lz_tune.pipeline.policy_lag import PolicyLag
from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT, PARAMS_FILE, RESULT_FILE, RunFolder


def test_policy_lag_counts_updates_between_launch_start_and_return():
    lag = PolicyLag(window=3)
    for t in (10.0, 11.0, 12.0, 13.0, 14.0):  # updates 1..5 finished at these times
        lag.record_update(t)
    assert lag.train_iter_at(12.5, train_iter=5) == 3  # updates 4 and 5 came after 12.5
    assert lag.train_iter_at(9.0, train_iter=5) == 0
    assert lag.train_iter_at(14.0, train_iter=5) == 5  # an update finishing at t counts at t
    lag.record_launch(2)
    lag.record_launch(7)
    lag.record_launch(1)
    lag.record_launch(0)  # the window of 3 drops the 2; the run's max stays 7
    # a collect on the weights of update 1, started at 12.5 (train_iter 3), consumed at train_iter 5
    lag.record_return(started_at=12.5, policy_train_iter=1, train_iter=5)
    m = lag.metrics()
    assert list(lag.launch) == [7, 1, 0] and m["policy_lag_launch_max"] == 7
    assert m["policy_lag_launch_mean"] == pytest.approx(8 / 3)
    assert m["policy_lag_start_max"] == 2 and m["policy_lag_return_max"] == 4
    lag.forget_update_times()  # a restore: train_iter jumped, earlier update times mean nothing
    assert lag.train_iter_at(0.0, train_iter=40) == 40


def test_policy_lag_before_any_collect_is_zero():
    assert set(PolicyLag().metrics().values()) == {0}


def test_run_folder_writes_the_documented_layout(tmp_path):
    run = RunFolder(str(tmp_path / "run"))
    run.write_config({"a": {"b": 1}}, {"a.b": 1})
    run.append_result({"training_iteration": 1})
    run.append_result({"training_iteration": 2})
    root = tmp_path / "run"
    assert json.loads((root / "config.json").read_text()) == {"a": {"b": 1}}
    assert json.loads((root / PARAMS_FILE).read_text()) == {"a.b": 1}
    rows = [json.loads(line) for line in (root / RESULT_FILE).read_text().splitlines()]
    assert [r["training_iteration"] for r in rows] == [1, 2]  # appended, as a resumed run continues it
    assert run.checkpoint_path(LATEST_CHECKPOINT) == str(root / CKPT_DIR / LATEST_CHECKPOINT)
    assert run.checkpoint_path(BEST_CHECKPOINT).endswith("ckpt/ckpt_best.pt")


def test_a_run_folder_without_its_files_writes_only_the_config(tmp_path):
    """A Tune trial's driver: Tune writes params.json / result.json and the checkpoints itself."""
    run = RunFolder(str(tmp_path / "trial"), write_files=False)
    run.write_config({"a": 1}, {"a": 1})
    run.append_result({"training_iteration": 1})
    assert sorted(p.name for p in (tmp_path / "trial").iterdir()) == ["config.json"]
    assert run.ckpt_dir is None and run.tb_dir == str(tmp_path / "trial" / "tb")
    with pytest.raises(RuntimeError, match="no checkpoints"):
        run.checkpoint_path(LATEST_CHECKPOINT)
    nowhere = RunFolder(None)
    nowhere.write_config({}, {})
    nowhere.append_result({})
    assert nowhere.tb_dir is None and nowhere.ckpt_dir is None


def test_one_writer_per_run_folder(tiny_cfg, tmp_path, capsys):
    """A second driver (or `train --resume`) on a run folder another one writes is refused before it
    writes or deletes anything, naming the holder; once the first closes, the folder is free; the
    first run's checkpoints and replay-buffer files are untouched by the refused one."""
    import json

    from lz_tune.cli.main import main
    from lz_tune.pipeline import Driver
    from lz_tune.run_folder import LOCK_FILE, RunFolderInUseError

    run = tmp_path / "run"
    cfg = tiny_cfg("max_env_step=200", "evaluator.eval_freq=4")
    first = Driver(cfg, exp_dir=str(run), print_fn=None)
    try:
        first.run()
        before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
        holder = json.loads((run / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid()
        with pytest.raises(RunFolderInUseError, match=f"another process is writing this run.*{os.getpid()}"):
            Driver(cfg, exp_dir=str(run), print_fn=None, resume_from=str(run / "ckpt" / "ckpt_latest.pt"))
        code = main(["train", "--resume", str(run), "max_env_step=400", "--quiet"])
        assert code == 2 and "another process is writing this run" in capsys.readouterr().err
        after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
        assert after == before
    finally:
        first.close()
    second = Driver(
        cfg.with_overrides(["max_env_step=300"]),
        exp_dir=str(run),
        print_fn=None,
        resume_from=str(run / "ckpt" / "ckpt_latest.pt"),
    )  # free again after close
    try:
        second.run()
    finally:
        second.close()


def test_the_writer_removes_what_a_killed_writer_left(tmp_path):
    """Temporary files of a save killed mid-write (SIGKILL) are deleted when the next writer takes
    the run; other files stay."""
    from lz_tune.atomic_file import TMP_PREFIX

    run = tmp_path / "run"
    (run / CKPT_DIR).mkdir(parents=True)
    left = [run / CKPT_DIR / f"{TMP_PREFIX}ckpt_latest.pt.x1.tmp", run / f"{TMP_PREFIX}config.json.x2.tmp"]
    kept = [run / CKPT_DIR / LATEST_CHECKPOINT, run / CKPT_DIR / "notes.tmp"]
    for p in left + kept:
        p.write_bytes(b"x")
    folder = RunFolder(str(run))
    folder.lock()
    try:
        assert not any(p.exists() for p in left) and all(p.exists() for p in kept)
    finally:
        folder.unlock()
