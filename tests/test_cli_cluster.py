"""Pointing the CLI at an existing Ray cluster (--address / RAY_ADDRESS) and Tune's FailureConfig
from `tune --max-failures`: the wiring, checked without starting a cluster."""

from __future__ import annotations

import os

import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402

from lz_tune.__main__ import main  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402


class Stop(Exception):
    pass


@pytest.fixture
def fake_tune(monkeypatch, tmp_path):
    """ray.init / Tuner replaced by recorders; returns what they saw."""
    seen: dict = {}
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda **kw: seen.setdefault("init", kw))
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr("lz_tune.tune.check_cluster_resources", lambda space: None)

    class FakeTuner:
        def __init__(self, trainable, **kw):
            seen["tuner"] = kw

        @staticmethod
        def can_restore(path):
            return False

        def fit(self):
            class NoResults(list):
                errors: list = []

            return NoResults()

    monkeypatch.setattr(tune, "Tuner", FakeTuner)
    return seen


def test_tune_sets_failure_config_and_connects_to_the_given_cluster(fake_tune, tmp_path):
    main(
        [
            "tune",
            "search_spaces/cartpole_muzero.py",
            "--storage-path",
            str(tmp_path),
            "--name",
            "x",
            "--address",
            "auto",
            "--max-failures",
            "5",
        ]
    )
    assert fake_tune["init"]["address"] == "auto" and "num_cpus" not in fake_tune["init"]
    assert fake_tune["tuner"]["run_config"].failure_config.max_failures == 5


def test_tune_default_is_a_local_ray_with_two_retries(fake_tune, tmp_path):
    main(
        ["tune", "search_spaces/cartpole_muzero.py", "--storage-path", str(tmp_path), "--name", "y", "--num-cpus", "2"]
    )
    assert fake_tune["init"]["num_cpus"] == 2 and "address" not in fake_tune["init"]
    assert fake_tune["tuner"]["run_config"].failure_config.max_failures == 2


def test_num_cpus_with_an_address_is_refused(fake_tune, tmp_path, capsys):
    code = main(
        [
            "tune",
            "search_spaces/cartpole_muzero.py",
            "--storage-path",
            str(tmp_path),
            "--name",
            "z",
            "--address",
            "auto",
            "--num-cpus",
            "2",
        ]
    )
    assert code == 2 and "--num-cpus" in capsys.readouterr().err
    assert "init" not in fake_tune


def test_the_ray_backend_joins_the_cluster_of_ray_address(monkeypatch, tiny_cfg):
    from lz_tune.pipeline.ray_backend import RayBackend

    seen = {}

    def init(**kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    with pytest.raises(Stop):
        RayBackend(tiny_cfg("async_pipeline.enabled=True"))
    assert seen["address"] == "10.0.0.1:6379" and "num_cpus" not in seen
    monkeypatch.delenv("RAY_ADDRESS")
    seen.clear()
    with pytest.raises(Stop):
        RayBackend(tiny_cfg("async_pipeline.enabled=True"))
    assert "address" not in seen and seen["num_cpus"] >= 1


def test_a_cloud_storage_uri_reaches_tune_unchanged(fake_tune, tmp_path, monkeypatch, capsys):
    main(["tune", "search_spaces/cartpole_muzero.py", "--storage-path", "s3://bucket/lz_results/", "--name", "u"])
    run_config = fake_tune["tuner"]["run_config"]
    assert run_config.storage_path == "s3://bucket/lz_results" and run_config.name == "u"
    assert "experiment: s3://bucket/lz_results/u" in capsys.readouterr().out
    # a local folder is made absolute (Tune's workers change directory)
    monkeypatch.chdir(tmp_path)
    main(["tune", os.path.join(REPO_ROOT, "search_spaces/cartpole_muzero.py"), "--storage-path", "rel", "--name", "v"])
    assert fake_tune["tuner"]["run_config"].storage_path == str(tmp_path / "rel")
    # --resume of a URI asks Tune whether there is an experiment there (none: a clear error)
    code = main(
        [
            "tune",
            os.path.join(REPO_ROOT, "search_spaces/cartpole_muzero.py"),
            "--storage-path",
            "gs://b/x",
            "--name",
            "w",
            "--resume",
        ]
    )
    assert code == 2 and "no experiment to resume at gs://b/x/w" in capsys.readouterr().err
