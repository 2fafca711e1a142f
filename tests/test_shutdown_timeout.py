"""async_pipeline.shutdown_timeout_s: RayBackend.close waits that long for the actors' close(),
then kills the ones that did not finish: a hung actor neither blocks the shutdown nor outlives it."""

from __future__ import annotations

import time

import pytest
from proc_tree import alive, proc, require_proc, wait_gone

ray = pytest.importorskip("ray")

from lz_tune.pipeline import ray_backend  # noqa: E402

HANG_S = 120.0


def test_an_actor_whose_close_hangs_is_killed_after_the_shutdown_timeout(ray_cluster, tiny_cfg):
    require_proc()

    class HangingCollector(ray_backend.CollectorWorker):  # defined here: pickled by value into the actor
        def close(self) -> bool:
            time.sleep(HANG_S)
            return super().close()

    cfg = tiny_cfg(
        "async_pipeline.enabled=True",
        "async_pipeline.num_collector_actors=1",
        "async_pipeline.num_evaluator_actors=1",
        "async_pipeline.collector_num_cpus=0.5",
        "async_pipeline.evaluator_num_cpus=0.5",
        "async_pipeline.shutdown_timeout_s=2",
    )
    backend = ray_backend.RayBackend(cfg)
    try:
        ray.kill(backend.collectors[0], no_restart=True)
        backend.collectors[0] = (
            ray.remote(HangingCollector).options(num_cpus=0.5, max_restarts=0).remote(cfg.to_dict(), cfg.seed, 0, 1)
        )
        hung, evaluator = (
            proc(p)
            for p in ray.get([backend.collectors[0].pid.remote(), backend.evaluators[0].pid.remote()], timeout=60)
        )
    except BaseException:
        backend.close()
        raise
    start = time.monotonic()
    backend.close()
    elapsed = time.monotonic() - start
    print(f"close() took {elapsed:.2f} s")
    assert 1.5 <= elapsed < 20, f"close took {elapsed:.1f}s with shutdown_timeout_s=2 and a close() of {HANG_S:.0f}s"
    left = wait_gone([hung, evaluator], timeout_s=30)
    assert not left, f"actor processes still alive 30 s after close: {left}"
    assert not alive(hung)
