"""The async pipeline's validation tests, under the name of the reference's own
(``python -m pytest -q tests/test_train_muzero_segment_async.py``): overlap on Ray, lag bound,
one ObjectRef per version, budget-locked replay, cold start, backpressure, the end-of-run drain,
no lost env step, exact evaluated checkpoints, missing Ray; and, without Ray, the semantic trace
(sync and async runs of the same data do the same training) and the reference's rules one by one."""

import dataclasses
import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lz_tune.buffer import Reanalysis
from lz_tune.checkpoint import load_checkpoint
from lz_tune.config_loader import load_config_module
from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import PollResult, WorkerBackend
from lz_tune.workers import EvalResult, WeightSnapshot

try:  # the Ray tests take the ray_cluster fixture; the semantic tests below need no Ray
    import ray
except ImportError:  # pragma: no cover
    ray = None

TINY = [
    "env.collector_env_num=2",
    "env.evaluator_env_num=2",
    "evaluator.n_evaluator_episode=2",
    "env.max_episode_steps=40",
    "mcts.num_simulations=4",
    "learner.batch_size=16",
    "buffer.game_segment_length=10",
    "buffer.num_unroll_steps=3",
    "buffer.td_steps=3",
    "model.latent_dim=16",
    "model.hidden_sizes=(16,)",
    "model.value_support_size=10",
    "model.reward_support_size=5",
    "model.projection_dim=16",
    "learner.num_threads=1",
    "async_pipeline.enabled=True",
    "async_pipeline.collector_num_cpus=0.5",
    "async_pipeline.evaluator_num_cpus=0.5",
]


class Recorder:
    """Wraps a driver to record what happened, without changing behaviour."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.collects = []
        self.launch_versions = []
        self.eval_weights = {}
        self.overlapped_updates = 0
        self.max_queue_when_trainable = 0
        self.updates_before_cold_start_end = 0
        backend = driver.backend
        orig_launch, orig_eval = backend.launch_collect, backend.launch_eval
        orig_on_collect, orig_train_one = driver._on_collect, driver._train_one

        self.max_collects_in_flight = 0

        self.launches_at_full_queue = 0

        def launch_collect(worker_id, snapshot, temperature, **kwargs):
            self.launch_versions.append(snapshot.version)
            if driver.trainable and len(driver.budgets) >= driver.budget_queue_cap:
                self.launches_at_full_queue += 1  # backpressure broken
            out = orig_launch(worker_id, snapshot, temperature, **kwargs)
            self.max_collects_in_flight = max(self.max_collects_in_flight, backend.collects_in_flight)
            return out

        def launch_eval(snapshot):
            self.eval_weights[snapshot.version] = {k: v.clone() for k, v in snapshot.weights.items()}
            return orig_eval(snapshot)

        def on_collect(result):
            self.collects.append(result)
            orig_on_collect(result)
            if driver.trainable:
                self.max_queue_when_trainable = max(self.max_queue_when_trainable, len(driver.budgets))

        def train_one(**kwargs):
            if backend.collects_in_flight > 0:
                self.overlapped_updates += 1
            if driver.counters.env_steps <= driver.cfg.learner.train_start_after_envsteps:  # (training needs >)
                self.updates_before_cold_start_end += 1
            orig_train_one(**kwargs)

        backend.launch_collect, backend.launch_eval = launch_collect, launch_eval
        driver._on_collect, driver._train_one = on_collect, train_one


def run_async(tmp_path, extra):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(TINY + extra)
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    rec = Recorder(driver)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    return driver, rec, metrics


def test_async_pipeline_invariants(ray_cluster, tmp_path):
    driver, rec, m = run_async(
        tmp_path,
        [
            "async_pipeline.num_collector_actors=2",
            "async_pipeline.max_policy_lag=3",
            "async_pipeline.weight_sync_interval=2",
            "learner.update_per_collect=6",
            "learner.train_start_after_envsteps=60",
            "evaluator.eval_freq=15",
            "max_env_step=600",
        ],
    )
    # actors ran and overlapped with learning
    assert m["env_steps"] >= 600 and m["train_iter"] > 0
    assert rec.overlapped_updates > 0
    # lag at launch never above max_policy_lag
    assert max(driver.policy_lag.launch) <= 3 and driver.policy_lag.max_launch <= 3
    assert m["policy_lag_launch_max"] == driver.policy_lag.max_launch
    # one ObjectRef per published version, shared by every launch of it (the cold-start collects
    # all ran version 0: a put per launch would count more)
    assert driver.backend.snapshot_puts == len(set(rec.launch_versions) | set(rec.eval_weights))
    assert len(rec.launch_versions) + len(rec.eval_weights) > driver.backend.snapshot_puts
    # budget-locked replay ratio: updates == sum of budgets consumed; budgets only once trainable
    assert driver.train_iter == driver.budgets.total_consumed
    assert driver.budgets.total_enqueued == 6 * driver.counters.budgets_enqueued
    assert driver.budgets.total_enqueued - driver.budgets.remaining == driver.train_iter
    # cold start
    assert rec.updates_before_cold_start_end == 0
    assert driver.counters.cold_start_collects > 0
    # backpressure: no launch while the budget queue is at its cap (2 * num_collector_actors) once
    # trainable; collects in flight do not count toward it, and those running when it filled (at
    # most 2) may still add theirs
    assert rec.launches_at_full_queue == 0
    assert rec.max_queue_when_trainable <= 4 - 1 + 2
    # the end drains: every collect launched was pushed, every budget queued was trained
    assert len(rec.collects) == len(rec.launch_versions) and driver.collects_discarded_at_close == 0
    assert driver.budgets.remaining == 0 and driver.train_iter == driver.budgets.total_enqueued
    # every env step of every collector: in the buffer exactly once or still in progress
    steps = sum(r.env_steps for r in rec.collects)
    pushed = sum(r.num_transitions for r in rec.collects)
    last_in_progress = {}
    for r in rec.collects:
        last_in_progress[r.worker_id] = r.steps_in_progress
    assert steps == pushed + sum(last_in_progress.values())
    assert driver.buffer.num_transitions == pushed  # capacity not reached: nothing evicted
    driver.buffer.check_invariants()


def test_second_collect_queued_on_one_actor(ray_cluster, tmp_path):
    """max_collect_inflight=2 with one actor: the second collect waits in the actor's mailbox and
    runs right after the first, in launch order; every invariant of the one-in-flight case holds."""
    driver, rec, m = run_async(
        tmp_path,
        [
            "async_pipeline.num_collector_actors=1",
            "async_pipeline.max_collect_inflight=2",
            "async_pipeline.max_train_budget_queue_size=4",
            "learner.update_per_collect=4",
            "learner.train_start_after_envsteps=60",
            "evaluator.eval_freq=1000",
            "max_env_step=500",
        ],
    )
    assert driver.backend.collect_queue_depth == 2
    assert rec.max_collects_in_flight == 2  # the queue was used, never more
    assert m["env_steps"] >= 500 and m["train_iter"] > 0 and rec.overlapped_updates > 0
    # one actor runs its calls in order: results come back in launch order
    assert [r.policy_train_iter for r in rec.collects] == rec.launch_versions[: len(rec.collects)]
    assert driver.policy_lag.max_launch <= 0
    assert driver.train_iter == driver.budgets.total_consumed
    assert driver.budgets.total_enqueued - driver.budgets.remaining == driver.train_iter
    assert rec.max_queue_when_trainable <= 4 - 1 + 2
    assert driver.budgets.remaining == 0 and len(rec.collects) == len(rec.launch_versions)
    steps = sum(r.env_steps for r in rec.collects)
    pushed = sum(r.num_transitions for r in rec.collects)
    assert steps == pushed + rec.collects[-1].steps_in_progress
    assert driver.buffer.num_transitions == pushed
    driver.buffer.check_invariants()


def test_evaluated_checkpoint_holds_the_evaluated_weights(ray_cluster, tmp_path):
    driver, rec, m = run_async(
        tmp_path,
        [
            "learner.update_per_collect=4",
            "evaluator.eval_freq=8",
            "max_env_step=400",
        ],
    )
    assert m["evaluations"] >= 1
    ckpt = load_checkpoint(os.path.join(tmp_path, "ckpt", "ckpt_latest.pt"), policy_type="muzero")
    version = ckpt["eval"]["version"]
    assert version in rec.eval_weights
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]
    for k, v in rec.eval_weights[version].items():
        assert torch.equal(ckpt["learner"]["network"][k], v), k
    assert driver.last_eval is not None


def test_missing_ray_gives_a_clear_error(monkeypatch):
    from lz_tune.pipeline import ray_backend

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match="needs Ray"):
        ray_backend.import_ray()


def test_ray_local_mode_runs_the_actor_code_in_process(tmp_path):
    """ray_local_mode: the Ray actor classes themselves, in-process and sequential, snapshots through
    the pickling stand-in of the object store (tests/test_local_mode.py: in detail, and without Ray)."""
    from lz_tune.pipeline.ray_backend import CollectorWorker, EvaluatorWorker, LocalActorBackend

    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        TINY
        + [
            "async_pipeline.ray_local_mode=True",
            "async_pipeline.num_collector_actors=2",
            "learner.update_per_collect=3",
            "evaluator.eval_freq=6",
            "max_env_step=150",
        ]
    )
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    backend = driver.backend
    try:
        assert isinstance(backend, LocalActorBackend) and not backend.concurrent
        assert len(backend.collectors) == 2 and all(type(c) is CollectorWorker for c in backend.collectors)
        assert [type(e) for e in backend.evaluators] == [EvaluatorWorker]
        m = driver.run()
    finally:
        driver.close()
    assert m["env_steps"] >= 150 and m["train_iter"] > 0 and m["evaluations"] >= 1
    # both collectors were used, with distinct seeds
    collectors = [c.collector for c in backend.collectors]
    assert all(c.total_env_steps > 0 for c in collectors)
    assert collectors[0].seed != collectors[1].seed
    # weights went through the store, one put per published version, and newer ones reached the collectors
    assert backend.snapshot_puts >= 2 and all(c.policy_version > 0 for c in collectors)


def test_snapshot_travels_as_numpy_and_comes_back_exact(ray_cluster):
    from lz_tune.pipeline.ray_backend import _snapshot_from_store, _snapshot_to_store
    from lz_tune.workers import WeightSnapshot

    weights = {"a": torch.randn(3, 4), "b": torch.arange(5), "c": torch.randn(2).to(torch.bfloat16)}
    stored = ray.get(ray.put(_snapshot_to_store(WeightSnapshot(version=7, train_iter=3, weights=weights))))
    assert not isinstance(stored.weights["a"], torch.Tensor)  # numpy on the wire
    back = _snapshot_from_store(stored)
    assert (back.version, back.train_iter) == (7, 3)
    for k, v in weights.items():
        assert back.weights[k].dtype == v.dtype and torch.equal(back.weights[k], v), k
    net = torch.nn.Linear(4, 3)
    net.load_state_dict({"weight": back.weights["a"], "bias": torch.zeros(3)})  # read-only buffers are only read
    assert torch.equal(net.weight.detach(), weights["a"])


# ---------------------------------------------------------------------------------------------
# The reference's training semantics without Ray: scripted data, sync and concurrent back-ends


class ScriptedBackend(WorkerBackend):
    """Replays a fixed list of collect results, the same data whatever the weights, so that a sync
    and an async run see identical experience. ``concurrent=False``: work at launch (the sync
    pipeline); True: the n-th collect comes back ``collect_polls[n % len]`` polls after its launch,
    an evaluation the next poll. Evaluations score 0 and say "stop" when 0 reaches
    ``evaluator.stop_value`` (as the evaluator would; the driver decides what stops)."""

    def __init__(self, script, *, concurrent: bool, num_collectors: int = 1, collect_polls=(2,)) -> None:
        self.concurrent = concurrent
        self._script = iter(script)
        self.num_collectors, self.collect_polls = num_collectors, tuple(collect_polls)
        self._collects: dict[int, list] = {}  # worker -> [polls left, result]
        self._evals: list[EvalResult] = []
        self.launches = 0
        self.driver = None
        self.env_steps_at_launch: list[int] = []

    def idle_collectors(self):
        return [k for k in range(self.num_collectors) if k not in self._collects]

    @property
    def collects_in_flight(self):
        return len(self._collects)

    @property
    def evals_in_flight(self):
        return len(self._evals)

    def launch_collect(self, worker_id, snapshot: WeightSnapshot, temperature, *, epsilon=0.0):
        result = dataclasses.replace(
            next(self._script),
            policy_version=snapshot.version,
            policy_train_iter=snapshot.train_iter,
            started_at=time.time(),
            worker_id=worker_id,
        )
        polls = self.collect_polls[self.launches % len(self.collect_polls)]
        self._collects[worker_id] = [0 if not self.concurrent else polls, result]
        self.launches += 1
        self.env_steps_at_launch.append(self.driver.counters.env_steps)

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        self._evals.append(
            EvalResult(
                version=snapshot.version,
                train_iter=snapshot.train_iter,
                reward_mean=0.0,
                reward_std=0.0,
                reward_min=0.0,
                reward_max=0.0,
                episode_length_mean=1.0,
                num_episodes=1,
                env_steps=1,
                eval_time_s=0.0,
                stop=self._reaches_stop_value(),
            )
        )
        return True

    def _reaches_stop_value(self) -> bool:
        stop_value = self.driver.cfg.evaluator.stop_value if self.driver is not None else None
        return stop_value is not None and 0.0 >= stop_value

    def eval_ready(self):
        return self.concurrent and bool(self._evals)

    def collect_ready(self):
        return self.concurrent and any(left <= 1 for left, _ in self._collects.values())

    def poll(self, timeout_s):
        out = PollResult(evals=self._evals)
        self._evals = []
        for worker_id in sorted(self._collects):
            entry = self._collects[worker_id]
            entry[0] -= 1
            if entry[0] <= 0:
                out.collects.append(self._collects.pop(worker_id)[1])
        return out

    def close(self):
        pass


SEMANTIC = (
    "learner.batch_size=32",
    "learner.update_per_collect=5",
    "learner.train_start_after_envsteps=0",
    "evaluator.eval_freq=7",
    "buffer.reanalyze_batch_size=1",
    "buffer.reanalyze_partition=1.0",
)


@pytest.fixture(scope="module")
def script(tiny_cfg):
    """40 real collects of the tiny CartPole config with the initial weights (the same for every run)."""
    driver = Driver(tiny_cfg(*SEMANTIC), print_fn=None)
    try:
        collector = driver.backend.collectors[0]
        collector.load_snapshot(driver.publisher.for_collect(0))
        return [collector.collect(temperature=1.0, epsilon=0.0) for _ in range(40)]
    finally:
        driver.close()


def run_scripted(cfg, script, *, concurrent, backend_cls=None, **backend_kwargs):
    backend = (backend_cls or ScriptedBackend)(script, concurrent=concurrent, **backend_kwargs)
    driver = Driver(cfg, backend=backend, print_fn=None)
    backend.driver = driver
    driver.event_log = []
    try:
        driver.run()
    finally:
        driver.close()
    return driver, backend


def training_trace(driver):
    """What must not depend on sync or async: the collects pushed (in order), the budgets queued,
    every update and in-budget reanalyze as (budget index, progress within it), the reanalyzes at
    a collect by collect number, and the total."""
    events = driver.event_log
    budgets = [info["updates"] for kind, info in events if kind == "budget"]
    bounds = np.cumsum([0] + budgets)

    def place(train_iter):  # the budget an update number belongs to, and its progress in it
        k = int(np.searchsorted(bounds, train_iter, side="right")) - 1
        return k, train_iter - int(bounds[k])

    return {
        "collects": [(info["env_steps"], info["segments"]) for kind, info in events if kind == "collect"],
        "budgets": budgets,
        "updates": [place(info["train_iter"] - 1) for kind, info in events if kind == "update"],
        "reanalyze_in_budget": [
            place(info["train_iter"]) for kind, info in events if kind == "reanalyze" and info["at"] == "budget"
        ],
        "reanalyze_at_collect": [
            info["collects"] for kind, info in events if kind == "reanalyze" and info["at"] == "collect"
        ],
        "train_iter": driver.train_iter,
    }


@pytest.mark.parametrize("freq", [2.0, 0.5])
def test_sync_and_async_runs_of_the_same_data_train_the_same(tiny_cfg, script, freq):
    """The semantic trace: one collector, scripted data, max_env_step at the 10th collect. Sync (work
    at launch, a queue of one budget) and async (collects come back two polls later, overlapping
    updates; two budgets queued) push the same collects, queue the same budgets, do the same updates
    at the same budget positions with the same buffer reanalyzes, and end with the same total
    (every queued budget trained): only when the weights were published and evaluated differs."""
    max_env_step = sum(r.env_steps for r in script[:10])
    extra = (*SEMANTIC, f"buffer.buffer_reanalyze_freq={freq}", f"max_env_step={max_env_step}")
    sync, _ = run_scripted(tiny_cfg(*extra), script, concurrent=False)
    async_, backend = run_scripted(tiny_cfg(*extra, "async_pipeline.enabled=True"), script, concurrent=True)
    a, b = training_trace(sync), training_trace(async_)
    assert a == b
    assert len(a["collects"]) == 10 and backend.launches == 10
    assert a["train_iter"] == sum(a["budgets"]) == len(a["updates"]) > 0  # every queued budget trained
    cold = sync.counters.cold_start_collects
    assert cold >= 1 and len(a["budgets"]) == 10 - cold  # cold-start collects earn no budget, in both
    if freq >= 1:  # before progress 0, 2, 4 of every budget of 5 (interval 5 // 2)
        assert a["reanalyze_in_budget"] == [(k, p) for k in range(len(a["budgets"])) for p in (0, 2, 4)]
        assert a["reanalyze_at_collect"] == []
    else:  # at collects 1, 3, 5, ... (every round(1 / 0.5) = 2, from the first)
        assert a["reanalyze_in_budget"] == [] and a["reanalyze_at_collect"] == [1, 3, 5, 7, 9]
    # overlap happened in the async run: some update ran while a collect was in flight
    kinds = [k for k, _ in async_.event_log if k in ("collect", "update")]
    assert any(kinds[i] == "update" and kinds[i + 1] == "update" for i in range(len(kinds) - 1))
    # evaluations: every eval_freq updates in both, and the last one of the final weights
    for d in (sync, async_):
        evals = [info["train_iter"] for kind, info in d.event_log if kind == "eval"]
        assert evals and evals[-1] == d.train_iter
        assert all(later - earlier >= 7 for earlier, later in zip(evals[:-1], evals[1:-1]))


def test_end_of_run_waits_for_collects_in_flight_and_trains_every_queued_budget(tiny_cfg, script):
    """At max_env_step the reference stops launching, waits for the collects in flight (their env
    steps count, their segments are pushed) and trains every queued budget before it stops."""
    max_env_step = sum(r.env_steps for r in script[:4])
    cfg = tiny_cfg(
        *SEMANTIC,
        "async_pipeline.enabled=True",
        "async_pipeline.num_collector_actors=3",
        "async_pipeline.max_train_chunk_steps=2",
        f"max_env_step={max_env_step}",
    )
    driver, backend = run_scripted(cfg, script, concurrent=True, num_collectors=3, collect_polls=(2, 5, 9))
    pushed = [info for kind, info in driver.event_log if kind == "collect"]
    assert len(pushed) == backend.launches > 4  # the collects still running at max_env_step were pushed
    assert driver.counters.env_steps == sum(r.env_steps for r in script[: backend.launches]) > max_env_step
    assert driver.collects_discarded_at_close == 0
    assert all(steps < max_env_step for steps in backend.env_steps_at_launch)  # none launched after it
    assert driver.budgets.total_enqueued > 0
    assert driver.budgets.remaining == 0 and driver.train_iter == driver.budgets.total_enqueued
    last_push = max(i for i, (kind, _) in enumerate(driver.event_log) if kind == "collect")
    assert any(kind == "update" for kind, _ in driver.event_log[last_push:])  # trained after the last push


def test_buffer_reanalyze_period_has_no_float_floor_division_slip(tiny_cfg, script):
    """buffer_reanalyze_freq = 1/10 reanalyzes once every 10 collects (the reference's int(1 // 0.1)
    is 9), when the collect is pushed."""
    assert int(1 // (1 / 10)) == 9  # the reference's slip
    max_env_step = sum(r.env_steps for r in script[:21])
    driver, _ = run_scripted(
        tiny_cfg(*SEMANTIC, "buffer.buffer_reanalyze_freq=0.1", f"max_env_step={max_env_step}"),
        script,
        concurrent=False,
    )
    at = [info["collects"] for kind, info in driver.event_log if kind == "reanalyze"]
    assert at == [1, 11, 21] and driver.counters.buffer_reanalyzes == 3
    assert sorted(driver.buffer.reanalyze_counts().tolist(), reverse=True)[:1] == [1]  # the staleness count moved


def test_cold_start_needs_more_than_the_thresholds(tiny_cfg):
    """Training starts once env steps EXCEED train_start_after_envsteps and the buffer holds MORE
    than one batch (the reference's _can_start_training); equality is still cold start."""
    driver = Driver(tiny_cfg("learner.train_start_after_envsteps=100", "learner.batch_size=16"), print_fn=None)
    try:
        real = driver.buffer
        for env_steps, transitions, expected in [(100, 17, False), (101, 16, False), (101, 17, True), (0, 100, False)]:
            driver.counters.env_steps = env_steps
            driver.buffer = SimpleNamespace(num_transitions=transitions)
            assert driver.trainable is expected, (env_steps, transitions)
        driver.buffer = real
    finally:
        driver.close()


# ---------------------------------------------------------------------------------------------
# Evaluations: when they launch, what they may stop


def _local_mode_run(tmp_path, *extra):
    cfg = load_config_module("zoo/classic_control/cartpole_muzero.py").with_overrides(
        TINY
        + [
            "async_pipeline.ray_local_mode=True",
            "learner.update_per_collect=20",
            "async_pipeline.max_train_chunk_steps=4",
            "learner.train_start_after_envsteps=0",
            "evaluator.eval_freq=10",
            *extra,
        ]
    )
    driver = Driver(cfg, exp_dir=str(tmp_path), print_fn=None)
    driver.event_log = []
    try:
        metrics = driver.run()
    finally:
        driver.close()
    return driver, metrics


def test_local_mode_evaluates_inside_budgets_larger_than_the_chunk(tmp_path):
    """ray_local_mode with budgets of 20 updates, chunks of 4 and a queue of two budgets (the async
    cap): the queue is never empty between chunks, so an evaluation that waited for an empty queue
    never ran (only the final one did). The reference checks after every update: evaluations launch
    at exactly 10, 20, 30, ... and each writes its checkpoint while training goes on."""
    driver, m = _local_mode_run(tmp_path, "max_env_step=400")
    evals = [info["train_iter"] for kind, info in driver.event_log if kind == "eval"]
    periodic, final = evals[:-1], evals[-1]
    assert final == driver.train_iter and driver.train_iter >= 60
    assert periodic == list(range(10, driver.train_iter, 10))[: len(periodic)] and len(periodic) >= 5
    assert len(periodic) >= driver.train_iter // 10 - 1  # none skipped (the last may coincide with the final one)
    # each evaluation was taken in before the next update: the history has every one, with its own checkpoint
    assert [r["train_iter"] for r in driver.eval_history] == evals
    ckpt = load_checkpoint(os.path.join(str(tmp_path), "ckpt", "ckpt_latest.pt"))
    assert ckpt["eval"]["train_iter"] == final


def test_local_mode_stops_at_a_reached_stop_value_inside_a_budget(tmp_path):
    """A stop value the first trained evaluation reaches ends the run there (train_iter 10), not at
    max_env_step; the evaluation at start (train_iter 0) reaches it too but never stops a run (the
    reference's evaluator: ``stop_flag = ... and train_iter > 0``)."""
    driver, m = _local_mode_run(
        tmp_path, "max_env_step=100000", "evaluator.stop_value=0", "async_pipeline.eval_at_start=True"
    )
    evals = [info["train_iter"] for kind, info in driver.event_log if kind == "eval"]
    assert evals == [0, 10]
    assert driver.stop.reached_stop_value and driver.train_iter == 10
    assert 0 < m["env_steps"] < 100000 and m["stop_value_reached"]


def test_an_evaluation_at_train_iter_0_never_stops_the_run(tiny_cfg, script):
    """eval_at_start with a stop value the untrained policy reaches (here every score, 0 >= -1e9):
    training still starts; the first trained evaluation stops it (sync and async)."""
    max_env_step = sum(r.env_steps for r in script[:10])
    for extra in ((), ("async_pipeline.enabled=True",)):
        cfg = tiny_cfg(
            *SEMANTIC,
            *extra,
            "async_pipeline.eval_at_start=True",
            "evaluator.stop_value=-1e9",
            f"max_env_step={max_env_step}",
        )
        driver, _ = run_scripted(cfg, script, concurrent=bool(extra))
        evals = [info["train_iter"] for kind, info in driver.event_log if kind == "eval"]
        assert evals[0] == 0 and driver.train_iter > 0, extra
        assert driver.stop.reached_stop_value and evals[-1] == driver.train_iter >= 7, extra


@pytest.mark.parametrize("chunk", [1, 4, 6])
def test_async_evaluations_launch_at_exactly_every_eval_freq_updates(tiny_cfg, script, chunk):
    """The cadence: async evaluations launch at train_iter 7, 14, 21, ... exactly, whatever the chunk
    (the check runs after every update, as the reference's), not up to chunk - 1 updates late."""
    max_env_step = sum(r.env_steps for r in script[:12])
    cfg = tiny_cfg(
        *SEMANTIC,
        "async_pipeline.enabled=True",
        f"async_pipeline.max_train_chunk_steps={chunk}",
        f"max_env_step={max_env_step}",
    )
    driver, _ = run_scripted(cfg, script, concurrent=True)
    evals = [info["train_iter"] for kind, info in driver.event_log if kind == "eval"]
    periodic = [t for t in evals[:-1]]
    assert periodic == list(range(7, driver.train_iter + 1, 7))[: len(periodic)]
    assert len(periodic) >= driver.train_iter // 7 - 1 and driver.train_iter >= 30


# ---------------------------------------------------------------------------------------------
# Buffer reanalyze and the stored root values


def test_which_types_replace_root_values_in_a_buffer_reanalyze():
    """buffer.reanalyze_writes_root_values=None follows LightZero's buffer of each type: its
    EfficientZero / sampled buffers write ``root_value[current_index] = searched_value``, its MuZero
    buffer has that line commented out; an explicit value overrides it for every type."""
    from lz_tune.config import POLICY_TYPES, Config

    writes = {"efficientzero", "sampled_efficientzero", "sampled_muzero", "sampled_unizero"}
    for policy_type in POLICY_TYPES:
        cfg = Config(policy_type=policy_type)
        assert cfg.reanalyze_writes_root_values is (policy_type in writes), policy_type
        for explicit in (True, False):
            assert (
                cfg.with_overrides([f"buffer.reanalyze_writes_root_values={explicit}"]).reanalyze_writes_root_values
                is explicit
            )


@pytest.mark.parametrize("setting", [None, True, False])
def test_buffer_reanalyze_keeps_or_replaces_the_stored_root_values(tiny_cfg, script, setting):
    """muzero, buffer reanalyzes at every other collect, with a target search that answers policy
    [1, 0] and root value 42 everywhere: the reanalysed segments get that policy target either way;
    the root values the collecting search stored stay (default, as the reference's MuZero buffer)
    unless the key says to replace them. use_root_value targets read them, so this is training."""
    max_env_step = sum(r.env_steps for r in script[:8])
    extra = () if setting is None else (f"buffer.reanalyze_writes_root_values={setting}",)
    cfg = tiny_cfg(*SEMANTIC, *extra, "buffer.buffer_reanalyze_freq=0.5", f"max_env_step={max_env_step}")
    backend = ScriptedBackend(script, concurrent=False)
    driver = Driver(cfg, backend=backend, print_fn=None)
    backend.driver = driver
    learner = driver.learner

    def reanalyze(obs, action_mask, to_play, rng):
        k = obs.shape[0]
        return Reanalysis(np.tile(np.float32([1.0, 0.0]), (k, 1)), np.full(k, 42.0, np.float32))

    learner.target_policy.reanalyze = reanalyze  # (this object stays the target policy for the run)
    try:
        driver.run()
    finally:
        driver.close()
    assert driver.counters.buffer_reanalyzes >= 2
    pushed = [seg for r in script[: driver.counters.collects] for seg in r.segments]
    reanalysed = np.flatnonzero(driver.buffer.reanalyze_counts() > 0)
    assert len(reanalysed) >= 2
    for seg_id in reanalysed:
        stored, original = driver.buffer.get_segment(int(seg_id)), pushed[int(seg_id)]
        np.testing.assert_array_equal(stored.policy_targets, np.tile([1.0, 0.0], (len(stored.policy_targets), 1)))
        if setting:
            assert np.all(stored.root_values == 42.0)
        else:
            np.testing.assert_array_equal(stored.root_values, original.root_values)


# ---------------------------------------------------------------------------------------------
# Golden trace: the reference's loop, derived by hand from its source


class UpdateTimedEvalBackend(ScriptedBackend):
    """ScriptedBackend whose evaluations take ``eval_updates`` learner updates: one launched at
    train_iter t is finished once train_iter >= t + eval_updates (a duration measured in updates,
    which the reference's loop and ours both observe after every update), or once training is
    over (no update will come)."""

    def __init__(self, script, *, eval_updates: int, **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.eval_updates = eval_updates
        self._eval_started: list[int] = []

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        super().launch_eval(snapshot)
        self._eval_started.append(self.driver.train_iter)
        return True

    def _finished(self, started: int) -> bool:
        return self.driver.train_iter >= started + self.eval_updates or self.driver.training_over

    def eval_ready(self):
        return any(self._finished(t) for t in self._eval_started)

    def poll(self, timeout_s):
        evals, started = self._evals, self._eval_started
        self._evals, self._eval_started = [], []
        out = super().poll(timeout_s)
        for result, t in zip(evals, started):
            if self._finished(t):
                out.evals.append(result)
            else:
                self._evals.append(result)
                self._eval_started.append(t)
        return out


@pytest.mark.parametrize("max_train_iter", [None, 23])
def test_golden_trace_of_the_reference_loop(tiny_cfg, script, max_train_iter):
    """Golden data derived by hand from LightZero's ``lzero/entry/train_muzero_segment_async.py``
    @ 9f717c80, not from this driver. Scenario: one collector, 6 collects (max_env_step = their
    env steps), ``update_per_collect=5``, ``buffer_reanalyze_freq=2``, ``eval_freq=7``,
    ``eval_at_start=True``, ``max_eval_inflight=1``, every evaluation finishing 9 updates after its
    launch, the buffer trainable from the first collect (batch 8, train_start_after_envsteps=0).

    - Budgets (``process_collect_result``): one ``_TrainEpochBudget(update_per_collect=5,
      reanalyze_interval=_reanalyze_interval(5, 2.0) = max(1, int(5 // 2)) = 2)`` per collect:
      ``[5] * 6``; the loop drains them all after max_env_step (``if not train_budgets: break``).
    - Updates (``train_one_step``): FIFO, budget k progress 0..4, 30 in all; with max_train_iter=23
      the loop stops at once (``stop_requested = True; break``): 23 updates, budgets 0-3 whole,
      budget 4 up to progress 2.
    - Buffer reanalyze (``train_one_step``): before an update when ``budget.progress % 2 == 0`` and
      ``enough_for_reanalyze`` (transitions // 3 > int(1 / 1.0); true from the first collect): at
      progress 0, 2, 4 of every budget.
    - Evaluations (``maybe_launch_eval`` after every update and at each loop top, ``last_eval_iter``
      starting at -eval_freq with eval_at_start): ``_should_eval(0, -7, 7)`` -> launch at 0; the
      next is due at 7 but one is in flight (max_eval_inflight 1) until update 9, so it launches at
      9 (last_eval_iter = 9), then 18 (due at 16, busy until 18), 27 (due at 25, busy until 27); at
      30 nothing is due (30 - 27 < 7). With max_train_iter=23: 0, 9, 18; none launches after
      the stop. The reference has no final evaluation; lz-tune adds one of the last weights
      (README, "differs on purpose"), so the trace here ends with train_iter 30 / 23.
    """
    golden_updates = [(k, p) for k in range(6) for p in range(5)]
    golden_reanalyze = [(k, p) for k in range(6) for p in (0, 2, 4)]
    golden_evals = [0, 9, 18, 27]
    if max_train_iter is not None:
        golden_updates = golden_updates[:23]
        golden_reanalyze = [(k, p) for k, p in golden_reanalyze if 5 * k + p < 23]
        golden_evals = [0, 9, 18]
    max_env_step = sum(r.env_steps for r in script[:6])
    extra = [] if max_train_iter is None else [f"max_train_iter={max_train_iter}"]
    cfg = tiny_cfg(
        "learner.batch_size=8",
        "learner.update_per_collect=5",
        "learner.train_start_after_envsteps=0",
        "evaluator.eval_freq=7",
        "buffer.reanalyze_batch_size=1",
        "buffer.reanalyze_partition=1.0",
        "buffer.buffer_reanalyze_freq=2",
        "async_pipeline.enabled=True",
        "async_pipeline.eval_at_start=True",
        "async_pipeline.max_eval_inflight=1",
        f"max_env_step={max_env_step}",
        *extra,
    )
    driver, _ = run_scripted(
        cfg, script, concurrent=True, backend_cls=UpdateTimedEvalBackend, eval_updates=9, collect_polls=(3,)
    )
    trace = training_trace(driver)
    assert trace["budgets"] == [5] * 6 and driver.counters.collects == 6
    assert trace["updates"] == golden_updates
    assert trace["reanalyze_in_budget"] == golden_reanalyze and trace["reanalyze_at_collect"] == []
    evals = [info["train_iter"] for kind, info in driver.event_log if kind == "eval"]
    assert evals == golden_evals + [len(golden_updates)]  # + lz-tune's final evaluation
