"""The async_pipeline.* parameters of the README table, each pinned by a deterministic test:

* weight_sync_interval / max_policy_lag: the SnapshotPublisher rule (one publish per version);
* max_train_budget_queue_size: backpressure blocks launches at the cap once trainable, and only then;
* max_train_chunk_steps: the driver polls the back-end after at most that many updates;
* eval_at_start: the initial weights are evaluated exactly once (sync and concurrent), never on resume;
* exact evaluated checkpoints in the middle of a run (evaluations that return several polls later);
* evaluation results of an older restore generation are ignored.

No Ray: a fake concurrent back-end wraps real in-process collectors / evaluators (so every result is
real), holds their results for a number of polls chosen by the test, and records what the driver did.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from lz_tune.checkpoint import load_checkpoint
from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import COLLECTOR_SEED_STRIDE, EVALUATOR_SEED_OFFSET, PollResult, WorkerBackend
from lz_tune.pipeline.snapshot import SnapshotPublisher
from lz_tune.workers import Evaluator, SegmentCollector, WeightSnapshot

#: the async pipeline switched on (so its caps apply), with a fake back-end passed in: no Ray
ASYNC = ("async_pipeline.enabled=True",)


# ---------------------------------------------------------------------------------------------
# helpers


class FakeConcurrentBackend(WorkerBackend):
    """Concurrent back-end under the test's control: a collect's (real) result comes back at the
    ``collect_polls``-th poll after its launch, an evaluation's at the ``eval_polls``-th. Records
    every launch (with the driver's state at that moment) and the learner's train_iter at every poll."""

    concurrent = True

    def __init__(
        self,
        cfg,
        *,
        num_collectors: int = 1,
        num_evaluators: int = 1,
        collect_polls: int = 1,
        eval_polls: int = 1,
        ready_hint: bool = True,
    ) -> None:
        self.collectors = [
            SegmentCollector(cfg, seed=cfg.seed + COLLECTOR_SEED_STRIDE * k, worker_id=k) for k in range(num_collectors)
        ]
        self.evaluator = Evaluator(cfg, seed=cfg.seed + EVALUATOR_SEED_OFFSET)
        self.num_evaluators = num_evaluators
        self.collect_polls, self.eval_polls, self.ready_hint = collect_polls, eval_polls, ready_hint
        self._collects: dict[int, list] = {}  # worker id -> [polls left, result]
        self._evals: list[list] = []  # [polls left, result]
        self.driver: Driver | None = None  # set by the test right after the Driver is built
        self.collect_launches: list[dict] = []
        self.eval_launches: list[dict] = []
        self.polls: list[int] = []  # learner train_iter at every poll
        self.released_evals: list[int] = []  # versions, in the order they came back

    def _train_iter(self):
        return None if self.driver is None else self.driver.train_iter

    def idle_collectors(self) -> list[int]:
        return [k for k in range(len(self.collectors)) if k not in self._collects]

    @property
    def collects_in_flight(self) -> int:
        return len(self._collects)

    @property
    def evals_in_flight(self) -> int:
        return len(self._evals)

    def launch_collect(
        self, worker_id: int, snapshot: WeightSnapshot, temperature: float, *, epsilon: float = 0.0
    ) -> None:
        assert worker_id not in self._collects, "collect launched on a busy collector"
        d = self.driver
        self.collect_launches.append(
            {
                "worker": worker_id,
                "train_iter": self._train_iter(),
                "snapshot_train_iter": snapshot.train_iter,
                "in_flight": self.collects_in_flight,
                "budgets": None if d is None else len(d.budgets),
                "trainable": None if d is None else d.trainable,
                "epsilon": epsilon,
                "env_steps": None if d is None else d.counters.env_steps,
            }
        )
        collector = self.collectors[worker_id]
        collector.load_snapshot(snapshot)
        self._collects[worker_id] = [self.collect_polls, collector.collect(temperature=temperature, epsilon=epsilon)]

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        if len(self._evals) >= self.num_evaluators:
            return False  # as a busy evaluator actor: the driver retries later
        self.eval_launches.append(
            {
                "version": snapshot.version,
                "snapshot_train_iter": snapshot.train_iter,
                "train_iter": self._train_iter(),
                "weights": {k: v.clone() for k, v in snapshot.weights.items()},
            }
        )
        self._evals.append([self.eval_polls, self.evaluator.evaluate(snapshot)])
        return True

    def collect_ready(self) -> bool:
        return self.ready_hint and any(left <= 1 for left, _ in self._collects.values())

    def poll(self, timeout_s: float) -> PollResult:  # never waits: the test decides what is done
        self.polls.append(self._train_iter())
        out = PollResult()
        for worker_id in list(self._collects):
            entry = self._collects[worker_id]
            entry[0] -= 1
            if entry[0] <= 0:
                out.collects.append(self._collects.pop(worker_id)[1])
        still = []
        for entry in self._evals:
            entry[0] -= 1
            if entry[0] <= 0:
                out.evals.append(entry[1])
                self.released_evals.append(entry[1].version)
            else:
                still.append(entry)
        self._evals = still
        return out

    def close(self) -> None:
        for w in [*self.collectors, self.evaluator]:
            w.close()


def fake_driver(cfg, *, exp_dir=None, resume_from=None, **backend_kwargs):
    backend = FakeConcurrentBackend(cfg, **backend_kwargs)
    driver = Driver(cfg, exp_dir=exp_dir, backend=backend, resume_from=resume_from, print_fn=None)
    backend.driver = driver
    return driver, backend


def iterate(driver: Driver, n: int, until=None) -> int:
    """Run up to ``n`` loop iterations (stopping early once ``until()`` holds); returns how many ran."""
    for i in range(n):
        if until is not None and until():
            return i
        driver._iteration()
    return n


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------------------------
# 1. SnapshotPublisher: weight_sync_interval, max_policy_lag, one publish per version


class CountingWeights:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, torch.Tensor]:
        self.calls += 1
        return {"w": torch.tensor([float(self.calls)])}


def publish_log(publisher: SnapshotPublisher, train_iters):
    """for_collect at each train_iter: (train_iters where a new snapshot was published, lags at launch)."""
    published, lags, seen = [], [], set()
    for t in train_iters:
        s = publisher.for_collect(t)
        if s.version not in seen:
            seen.add(s.version)
            published.append(s.train_iter)
            assert s.train_iter == t, "a new snapshot must be of the current train_iter"
        lags.append(t - s.train_iter)
    return published, lags


@pytest.mark.parametrize("steps", [list(range(0, 41)), [0, 1, 2, 3, 4, 6, 7, 8, 13, 14, 15, 16, 20, 30, 31, 33]])
def test_publisher_interval_without_lag_bound(steps):
    weights = CountingWeights()
    p = SnapshotPublisher(weight_sync_interval=5, max_policy_lag=-1, get_weights=weights)  # negative: unbounded
    published, lags = publish_log(p, steps)
    gaps = [b - a for a, b in zip(published, published[1:])]
    assert all(g >= 5 for g in gaps), published  # only the interval publishes
    # and it publishes as soon as the interval is reached: the first call >= 5 past the last one
    expected, last = [], None
    for t in steps:
        if last is None or t - last >= 5:
            expected.append(t)
            last = t
    assert published == expected
    assert max(lags) == 4  # the lag was not bounded by 0 (a negative bound is no bound)
    assert weights.calls == p.num_published == len(published)


def test_publisher_negative_lag_is_unbounded():
    weights = CountingWeights()
    p = SnapshotPublisher(weight_sync_interval=50, max_policy_lag=-1, get_weights=weights)
    published, lags = publish_log(p, range(0, 120))
    assert published == [0, 50, 100]
    assert max(lags) == 49
    assert weights.calls == 3


@pytest.mark.parametrize(
    "lag_bound,steps",
    [(2, list(range(0, 41))), (3, list(range(0, 41))), (2, [0, 1, 2, 5, 6, 7, 8, 9, 17, 18, 19, 20, 21])],
)
def test_publisher_lag_bound_forces_publishes(lag_bound, steps):
    interval = 10
    assert interval > lag_bound + 1  # so that the bound, not the interval, decides
    weights = CountingWeights()
    p = SnapshotPublisher(weight_sync_interval=interval, max_policy_lag=lag_bound, get_weights=weights)
    published, lags = publish_log(p, steps)
    assert max(lags) <= lag_bound, lags  # never above the bound at launch
    assert max(lags) == lag_bound  # ... and no publish earlier than needed (steps of 1 reach the bound)
    # every publish after the first is justified: the interval was reached, or the bound forced it
    for a, b in zip(published, published[1:]):
        assert b - a >= interval or b - a > lag_bound, published
    assert weights.calls == p.num_published == len(published)


def test_publisher_one_publish_per_version():
    weights = CountingWeights()
    p = SnapshotPublisher(weight_sync_interval=4, max_policy_lag=-1, get_weights=weights)
    s0 = p.for_collect(0)
    assert p.for_collect(0) is s0 and p.for_collect(2) is s0 and weights.calls == 1
    assert p.current(0) is s0 and weights.calls == 1  # the eval of train_iter 0 reuses the published one
    # an evaluation takes exactly its train_iter, even inside the interval ...
    s3 = p.current(3)
    assert (s3.train_iter, s3.version) == (3, p.version_of(3)) and weights.calls == 2
    assert p.current(3) is s3 and weights.calls == 2  # ... once
    # ... and does not move the collectors' reference point (the reference puts evaluated weights
    # beside the published ones): collects keep s0 until the interval counts 4 from train_iter 0
    assert p.for_collect(3) is s0 and p.num_published == 1
    s4 = p.for_collect(4)
    assert s4.train_iter == 4 and weights.calls == 3 and p.num_published == 2
    assert p.for_collect(7) is s4 and weights.calls == 3
    s8 = p.for_collect(8)
    assert s8.train_iter == 8 and weights.calls == 4
    assert p.current(8) is s8 and p.for_collect(8) is s8 and weights.calls == 4  # one snapshot per version
    e12 = p.current(12)
    assert weights.calls == 5 and p.for_collect(12) is e12 and weights.calls == 5  # publish reuses the eval's
    versions = [s0.version, s3.version, s4.version, s8.version, e12.version]
    assert len(set(versions)) == 5 and p.num_published == 4
    # a restore: new generation, so the same train_iter is a new version, published once
    p.bump_generation()
    r3 = p.for_collect(3)
    assert r3.version not in versions and r3.train_iter == 3 and weights.calls == 6
    assert p.current(3) is r3 and weights.calls == 6
    assert p.generation_of(r3.version) == 1 == p.generation
    assert all(p.generation_of(v) == 0 for v in versions)


# ---------------------------------------------------------------------------------------------
# 2. max_train_budget_queue_size: backpressure


def record_launch_passes(driver: Driver, backend: FakeConcurrentBackend) -> list[dict]:
    """Wrap Driver._launch_collects: for every call, the state before it and how many it launched."""
    passes: list[dict] = []
    original = driver._launch_collects

    def launch_collects():
        before = len(backend.collect_launches)
        state = {
            "idle": len(backend.idle_collectors()),
            "budgets": len(driver.budgets),
            "in_flight": backend.collects_in_flight,
            "trainable": driver.trainable,
            "stop": bool(driver.stop),
            "train_iter": driver.train_iter,
        }
        original()
        state["launched"] = len(backend.collect_launches) - before
        passes.append(state)

    driver._launch_collects = launch_collects
    return passes


def test_backpressure_blocks_launches_at_the_cap_once_trainable(tiny_cfg):
    cap = 3
    cfg = tiny_cfg(
        *ASYNC,
        "async_pipeline.num_collector_actors=2",
        f"async_pipeline.max_train_budget_queue_size={cap}",
        "learner.update_per_collect=6",
        "async_pipeline.max_train_chunk_steps=1",
        "learner.train_start_after_envsteps=0",
        "evaluator.eval_freq=100000",
    )
    driver, backend = fake_driver(cfg, num_collectors=2, collect_polls=1)  # collects beat the learner
    passes = record_launch_passes(driver, backend)
    queue_lens = []
    try:
        for _ in range(25):
            driver._iteration()
            queue_lens.append(len(driver.budgets))
    finally:
        driver.close()
    assert driver.train_iter > 0 and driver.counters.budgets_enqueued > cap
    trainable_launches = [c for c in backend.collect_launches if c["trainable"]]
    assert trainable_launches
    # the cap counts queued budgets only (the reference's max_train_budget_queue_size): every launch
    # happens below it, and collects in flight do not count toward it
    for c in trainable_launches:
        assert c["budgets"] < cap, c
    assert any(c["budgets"] + c["in_flight"] >= cap for c in trainable_launches), (
        "no launch with collects in flight filling the cap: they must not count"
    )
    blocked = [
        i for i, p in enumerate(passes) if p["trainable"] and not p["stop"] and p["idle"] > 0 and p["launched"] == 0
    ]
    assert blocked, "backpressure never blocked a launch although the learner was the bottleneck"
    for i in blocked:  # blocked by the cap and nothing else
        assert passes[i]["budgets"] >= cap, passes[i]
        assert passes[i]["in_flight"] < driver.collect_inflight_cap
    # launches resume once budgets drain, after each blocked stretch
    resumed = [i for i in range(blocked[0] + 1, len(passes)) if passes[i]["launched"] > 0]
    assert resumed, "launches never resumed after backpressure"
    assert passes[resumed[0]]["budgets"] < cap
    assert len(blocked) >= 2 and any(i > resumed[0] for i in blocked)  # blocked again later: a steady state
    # the queue exceeds the cap by at most the collects that were running when it filled
    assert max(queue_lens) <= cap - 1 + driver.collect_inflight_cap


def test_backpressure_inactive_during_cold_start(tiny_cfg):
    cap = 1
    cfg = tiny_cfg(
        *ASYNC,
        "async_pipeline.num_collector_actors=2",
        f"async_pipeline.max_train_budget_queue_size={cap}",
        "learner.update_per_collect=6",
        "async_pipeline.max_train_chunk_steps=1",
        "learner.train_start_after_envsteps=100000",
        "evaluator.eval_freq=100000",
    )
    driver, backend = fake_driver(cfg, num_collectors=2, collect_polls=2)
    passes = record_launch_passes(driver, backend)
    max_in_flight = 0
    try:
        for _ in range(6):
            driver._iteration()
            max_in_flight = max(max_in_flight, backend.collects_in_flight)
            assert len(driver.budgets) == 0 and driver.train_iter == 0 and not driver.trainable
    finally:
        driver.close()
    assert driver.buffer.num_transitions >= cfg.learner.batch_size  # only the env-step threshold holds training
    assert driver.counters.cold_start_collects == driver.counters.collects > cap
    assert len(backend.collect_launches) > cap
    # both collectors ran at once although the cap is 1: no backpressure before trainable
    assert max_in_flight == 2
    assert any(c["in_flight"] + c["budgets"] >= cap for c in backend.collect_launches)
    assert all(p["launched"] == p["idle"] for p in passes)  # every idle collector was launched, every time


def test_collects_get_the_epsilon_of_the_env_steps_collected_so_far(tiny_cfg):
    """Epsilon-greedy exploration decays with the env steps of ALL collectors (the driver's
    count when the collect is launched), not with one collector's own steps."""
    cfg = tiny_cfg(
        *ASYNC,
        "async_pipeline.num_collector_actors=2",
        "collector.eps_greedy_start=1.0",
        "collector.eps_greedy_end=0.1",
        "collector.eps_greedy_decay_env_steps=400",
        "evaluator.eval_freq=100000",
    )
    driver, backend = fake_driver(cfg, num_collectors=2, collect_polls=1)
    try:
        iterate(driver, 80, until=lambda: driver.counters.env_steps > 800)
    finally:
        driver.close()
    launches = backend.collect_launches
    assert launches[0]["epsilon"] == 1.0 and launches[0]["env_steps"] == 0
    for c in launches:
        assert c["epsilon"] == pytest.approx(1.0 - 0.9 * min(1.0, c["env_steps"] / 400))
    late = [c for c in launches if c["env_steps"] >= 400]
    assert late and all(c["epsilon"] == pytest.approx(0.1) for c in late)


# ---------------------------------------------------------------------------------------------
# 3. max_train_chunk_steps


def test_driver_polls_after_at_most_max_train_chunk_steps_updates(tiny_cfg):
    chunk, budget = 3, 10
    cfg = tiny_cfg(
        *ASYNC,
        f"async_pipeline.max_train_chunk_steps={chunk}",
        f"learner.update_per_collect={budget}",
        "learner.train_start_after_envsteps=0",
        "evaluator.eval_freq=100000",
    )
    driver, backend = fake_driver(cfg, collect_polls=3, ready_hint=False)  # collect_ready() never True
    try:
        iterate(driver, 14)
        backend.poll(0.0)  # close the last chunk
    finally:
        driver.close()
    assert driver.train_iter >= 2 * budget
    between = [b - a for a, b in zip(backend.polls, backend.polls[1:])]
    assert max(between) == chunk, between  # whole chunks, never more between two polls
    assert sum(between) == driver.train_iter


# ---------------------------------------------------------------------------------------------
# 4. eval_at_start


SYNC_RUN = ("max_env_step=60", "evaluator.eval_freq=3", "learner.update_per_collect=3")


@pytest.fixture(scope="module")
def sync_run_with_eval_at_start(tiny_cfg, tmp_path_factory):
    """A short sync run (default in-process back-end) with eval_at_start: its driver and exp dir."""
    cfg = tiny_cfg(*SYNC_RUN, "async_pipeline.eval_at_start=True")
    exp_dir = str(tmp_path_factory.mktemp("eval_at_start") / "exp")
    driver = Driver(cfg, exp_dir=exp_dir, print_fn=None)
    try:
        driver.run()
    finally:
        driver.close()
    return driver, exp_dir


def test_eval_at_start_sync(sync_run_with_eval_at_start):
    driver, _ = sync_run_with_eval_at_start
    assert not driver.backend.concurrent
    iters = [r["train_iter"] for r in driver.eval_history]
    assert iters[0] == 0 and iters.count(0) == 1, iters
    assert driver.train_iter > 0 and len(iters) >= 2
    assert driver.backend.evaluators[0].num_evaluations == len(iters) == driver.counters.evaluations


def test_no_eval_at_start_sync(tiny_cfg):
    driver = Driver(tiny_cfg(*SYNC_RUN, "max_env_step=40"), print_fn=None)
    try:
        assert driver.backend.evals_in_flight == 0
        driver.run()
    finally:
        driver.close()
    iters = [r["train_iter"] for r in driver.eval_history]
    assert driver.train_iter > 0 and iters and 0 not in iters, iters


@pytest.mark.parametrize("at_start", [True, False])
def test_eval_at_start_concurrent(tiny_cfg, at_start):
    cfg = tiny_cfg(
        *ASYNC,
        f"async_pipeline.eval_at_start={at_start}",
        "learner.update_per_collect=4",
        "async_pipeline.max_train_chunk_steps=2",
        "evaluator.eval_freq=4",
    )
    driver, backend = fake_driver(cfg, eval_polls=3)
    try:
        if not at_start:
            assert backend.eval_launches == []
        iterate(driver, 16)
    finally:
        driver.close()
    if at_start:  # before any update, and the periodic evaluations happened as well
        assert backend.eval_launches[0]["snapshot_train_iter"] == 0
        assert backend.eval_launches[0]["train_iter"] in (None, 0)
        assert len(backend.eval_launches) > 1
    assert driver.train_iter > 0
    at_zero = [e for e in backend.eval_launches if e["snapshot_train_iter"] == 0]
    assert len(at_zero) == (1 if at_start else 0), backend.eval_launches
    iters = [r["train_iter"] for r in driver.eval_history]
    assert iters.count(0) == (1 if at_start else 0), iters
    if at_start:
        assert iters[0] == 0


@pytest.mark.parametrize("concurrent", [False, True])
def test_no_eval_at_start_on_resume(sync_run_with_eval_at_start, tiny_cfg, tmp_path, concurrent):
    _, exp_dir = sync_run_with_eval_at_start
    path = os.path.join(exp_dir, "ckpt", "ckpt_latest.pt")
    restored_iter = load_checkpoint(path)["counters"]["train_iter"]
    assert restored_iter > 0
    if concurrent:
        cfg = tiny_cfg(
            *ASYNC, "async_pipeline.eval_at_start=True", "learner.update_per_collect=3", "evaluator.eval_freq=3"
        )
        driver, backend = fake_driver(cfg, exp_dir=str(tmp_path / "r"), resume_from=path, eval_polls=2)
        try:
            assert driver.train_iter == restored_iter
            assert backend.eval_launches == [] and backend.evals_in_flight == 0
            iterate(driver, 14)
        finally:
            driver.close()
        launched = [e["snapshot_train_iter"] for e in backend.eval_launches]
    else:
        cfg = tiny_cfg(*SYNC_RUN, "max_env_step=100", "async_pipeline.eval_at_start=True")
        driver = Driver(cfg, exp_dir=str(tmp_path / "r"), resume_from=path, print_fn=None)
        try:
            assert driver.train_iter == restored_iter
            assert driver.backend.evals_in_flight == 0 and driver.backend.evaluators[0].num_evaluations == 0
            driver.run()
        finally:
            driver.close()
        launched = [r["train_iter"] for r in driver.eval_history]
    assert driver.train_iter > restored_iter and launched, launched  # it did train and evaluate afterwards
    assert all(t > restored_iter for t in launched), launched  # neither train_iter 0 nor the restored weights


# ---------------------------------------------------------------------------------------------
# 5. the checkpoint of an evaluation consumed in the middle of a run


def test_checkpoint_of_a_late_evaluation_holds_the_evaluated_weights(tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        *ASYNC,
        "learner.update_per_collect=6",
        "async_pipeline.max_train_chunk_steps=1",
        "learner.train_start_after_envsteps=0",
        "evaluator.eval_freq=3",
    )
    exp_dir = tmp_path / "exp"
    driver, backend = fake_driver(cfg, exp_dir=str(exp_dir), eval_polls=4)  # updates go on meanwhile
    seen = []
    on_eval = driver._on_eval
    ckpt_dir = exp_dir / "ckpt"

    def checking_on_eval(result):
        on_eval(result)
        launched = {e["version"]: e for e in backend.eval_launches}[result.version]
        latest = load_checkpoint(ckpt_dir / "ckpt_latest.pt", policy_type=cfg.policy_type)
        assert latest["eval"]["version"] == result.version
        assert latest["counters"]["train_iter"] == latest["learner"]["train_iter"] == result.train_iter
        assert same_weights(latest["learner"]["network"], launched["weights"]), "ckpt_latest: not the evaluated weights"
        is_best = driver.best_eval is result
        if is_best:
            best = load_checkpoint(ckpt_dir / "ckpt_best.pt", policy_type=cfg.policy_type)
            assert best["eval"]["version"] == result.version
            assert same_weights(best["learner"]["network"], launched["weights"]), "ckpt_best: not the evaluated weights"
        current = driver.learner.policy.network.state_dict()
        seen.append(
            {
                "train_iter_now": driver.train_iter,
                "evaluated": result.train_iter,
                "best": is_best,
                "differs": not same_weights(current, launched["weights"]),
            }
        )

    driver._on_eval = checking_on_eval
    try:
        iterate(driver, 30, until=lambda: len(seen) >= 3)
    finally:
        driver.close()
    assert len(seen) >= 3 and not driver.stop  # mid-run evaluations, not the final one
    assert seen[0]["best"]
    for s in seen:
        assert s["train_iter_now"] > s["evaluated"] > 0, s  # the learner had moved on ...
        assert s["differs"], s  # ... and its weights with it


# ---------------------------------------------------------------------------------------------
# 6. evaluation results queued behind a restore


def test_evaluation_launched_before_a_restore_is_ignored(tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        *ASYNC,
        "learner.update_per_collect=6",
        "async_pipeline.max_train_chunk_steps=1",
        "learner.train_start_after_envsteps=0",
        "evaluator.eval_freq=3",
    )
    exp_dir = tmp_path / "exp"
    driver, backend = fake_driver(cfg, exp_dir=str(exp_dir), eval_polls=3)
    latest = exp_dir / "ckpt" / "ckpt_latest.pt"
    try:
        # one evaluation consumed (a checkpoint to restore), the next one still in flight
        iterate(driver, 40, until=lambda: driver.counters.evaluations >= 1 and backend.evals_in_flight == 1)
        assert driver.counters.evaluations >= 1 and backend.evals_in_flight == 1
        stale = backend._evals[0][1]
        assert stale.version not in backend.released_evals and stale.train_iter > 0
        path = str(tmp_path / "restore.pt")
        shutil.copyfile(latest, path)  # (alone: its replay buffer manifest stays in the run's ckpt folder)
        transitions = driver.buffer.num_transitions
        driver.restore_from(load_checkpoint(path, policy_type=cfg.policy_type), path)
        assert driver.buffer.num_transitions == transitions > 0  # no buffer beside it: the buffer is kept
        assert driver.publisher.generation == 1
        assert driver.publisher.generation_of(stale.version) == 0
        before = {
            "last_eval": driver.last_eval,
            "best_eval": driver.best_eval,
            "best": driver.best_reward_mean,
            "evaluations": driver.counters.evaluations,
            "history": len(driver.eval_history),
            "stop": bool(driver.stop),
            "ckpt": latest.read_bytes(),
        }
        # the stale result comes back after the restore: it must change nothing
        iterate(driver, 10, until=lambda: stale.version in backend.released_evals)
        assert stale.version in backend.released_evals
        after = {
            "last_eval": driver.last_eval,
            "best_eval": driver.best_eval,
            "best": driver.best_reward_mean,
            "evaluations": driver.counters.evaluations,
            "history": len(driver.eval_history),
            "stop": bool(driver.stop),
            "ckpt": latest.read_bytes(),
        }
        assert after["last_eval"] is before["last_eval"] and after["best_eval"] is before["best_eval"]
        assert {k: v for k, v in after.items() if k not in ("last_eval", "best_eval")} == {
            k: v for k, v in before.items() if k not in ("last_eval", "best_eval")
        }
        # an evaluation launched after the restore is consumed as usual
        n = driver.counters.evaluations
        iterate(driver, 30, until=lambda: driver.counters.evaluations > n)
        assert driver.counters.evaluations == n + 1
        assert driver.publisher.generation_of(driver.last_eval.version) == 1
        assert load_checkpoint(latest)["eval"]["version"] == driver.last_eval.version
    finally:
        driver.close()


def test_eval_at_start_survives_a_worker_takeover(tiny_cfg):
    """What MuZeroTrainable._build does when a new trial takes over running actors: build the Driver
    on the old back-end, then move its publisher to a generation above the old driver's. The
    initial weights must still be evaluated (and under a version of the new generation)."""
    cfg = tiny_cfg(
        *ASYNC, "async_pipeline.eval_at_start=True", "learner.update_per_collect=4", "evaluator.eval_freq=1000"
    )
    driver, backend = fake_driver(cfg, eval_polls=2)
    driver.publisher.generation = 0 + 1  # the taken-over driver's generation + 1, as trainable._build sets it
    try:
        iterate(driver, 6)
    finally:
        driver.close()
    assert [r["train_iter"] for r in driver.eval_history][:1] == [0], driver.eval_history
    assert all(driver.publisher.generation_of(e["version"]) == 1 for e in backend.eval_launches)
