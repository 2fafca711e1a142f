"""Two driver/back-end rules: an evaluation that finds no idle evaluator is retried, not skipped
(max_eval_inflight above the number of evaluator actors, final evaluation included); the Ray
back-end keeps the NEWEST snapshot refs for reuse, one ray.put per version."""

from __future__ import annotations

import torch

from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import InProcessBackend
from lz_tune.pipeline.ray_backend import _KEPT_SNAPSHOT_REFS, RayBackend
from lz_tune.workers import WeightSnapshot


class BusyEvaluatorBackend(InProcessBackend):
    """The in-process back-end whose evaluator refuses every other launch (as a busy actor does)."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.refused = 0
        self._calls = 0

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        self._calls += 1
        if self._calls % 2 == 1:
            self.refused += 1
            return False
        return super().launch_eval(snapshot)


def test_a_refused_evaluation_is_retried_and_the_final_one_happens(tiny_cfg):
    cfg = tiny_cfg(
        "max_train_iter=10",
        "learner.update_per_collect=5",
        "evaluator.eval_freq=5",
        "async_pipeline.max_eval_inflight=2",
    )
    backend = BusyEvaluatorBackend(cfg)
    driver = Driver(cfg, backend=backend, print_fn=None)
    try:
        driver.run()
    finally:
        driver.close()
    assert backend.refused >= 2
    evaluated = [row["train_iter"] for row in driver.eval_history]
    assert 5 in evaluated and 10 in evaluated, evaluated  # the periodic one and the final one


class FakeRay:
    def __init__(self) -> None:
        self.puts = []

    def put(self, value):
        self.puts.append(value)
        return f"ref{len(self.puts)}"


def test_snapshot_refs_keep_the_newest_versions():
    backend = RayBackend.__new__(RayBackend)  # only the snapshot-ref bookkeeping, no actors
    backend.ray, backend._snapshot_refs, backend.snapshot_puts = FakeRay(), {}, 0
    weights = {"w": torch.zeros(2)}
    refs = {v: backend._snapshot_ref(WeightSnapshot(version=v, train_iter=v, weights=weights)) for v in range(1, 8)}
    assert backend.snapshot_puts == 7
    assert list(backend._snapshot_refs) == list(range(8 - _KEPT_SNAPSHOT_REFS, 8))  # the newest, oldest first
    for v in range(8 - _KEPT_SNAPSHOT_REFS, 8):  # reused: no second put of a kept version
        assert backend._snapshot_ref(WeightSnapshot(version=v, train_iter=v, weights=weights)) == refs[v]
    assert backend.snapshot_puts == 7
