"""The driver loop: the single owner of the learner and the replay buffer.

One loop serves sync and async training; only the worker back-end differs
(:mod:`lz_tune.pipeline.backends`). Each iteration::

    maybe launch an evaluation          (due every eval_freq updates; sync: only between budgets;
                                         async: also checked after every update of the chunk)
    consume finished results            (push segments, enqueue one train budget per collect,
                                         save the evaluated snapshot as a checkpoint; waits up to
                                         poll_interval_s only when there is nothing else to do;
                                         then an evaluation that waited for a busy evaluator)
    launch collects on idle workers     (snapshot per the weight-sync rule; backpressure on the
                                         budget queue once the buffer is trainable)
    train a chunk                       (<= max_train_chunk_steps updates of the head budget)

With the in-process back-end, one collector and a budget-queue cap of 1, this is exactly the
sync order: collect, train the whole budget, evaluate when due, collect again.

All buffer mutation, sampling, reanalyze and priority write-back happen here, in one
process; workers only get immutable weight snapshots and return data (the single-owner boundary). The driver
knows no policy type: the learner builds its own training batch (``learner.make_batch``) and
the buffer is built from the type's declared step columns.

Why one file: the loop's stages, their metrics and the checkpoint/restore paths
share the counters and the pending-evaluation states; kept together, the order of the loop and
what a checkpoint holds read in one place.
"""

from __future__ import annotations

import copy
import errno
import logging
import math
import os
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch

from lz_tune.algos import get_algorithm
from lz_tune.buffer.reanalysis import segments_for_sequences
from lz_tune.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from lz_tune.config import Config, ConfigError
from lz_tune.logger import ScalarLogger
from lz_tune.metrics import EVAL_FIELDS, learner_metrics, public_metrics
from lz_tune.parallel import make_learner
from lz_tune.pipeline import buffer_checkpoint
from lz_tune.pipeline.backends import InProcessBackend, PollResult, WorkerBackend
from lz_tune.pipeline.budget import TrainBudgetQueue, updates_for_collect
from lz_tune.pipeline.policy_lag import PolicyLag
from lz_tune.pipeline.replay_buffer import make_game_buffer
from lz_tune.pipeline.restore import RestoreReport, budgets_after_restore, with_config_hyperparameters
from lz_tune.pipeline.snapshot import SnapshotPublisher
from lz_tune.run_folder import BEST_CHECKPOINT, LATEST_CHECKPOINT, RunFolder
from lz_tune.workers import CollectResult, EvalResult, env_spec_for, epsilon_at, temperature_at
from lz_tune.workers.match_stats import format_match

_log = logging.getLogger(__name__)


class TrainingDivergedError(RuntimeError):
    """Updates kept producing non-finite losses (learner.max_nonfinite_updates_in_a_row)."""


class DiskFullError(RuntimeError):
    """Checkpoint saves kept failing for lack of disk space (evaluator.max_failed_saves_in_a_row)."""


#: errors of a save that a later save may not meet (space freed): the run goes on without it
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass
class Counters:
    """Monotone run counters (restored on resume)."""

    env_steps: int = 0
    collects: int = 0
    episodes: int = 0
    evaluations: int = 0
    nonfinite_updates: int = 0
    failed_saves: int = 0
    cold_start_collects: int = 0
    budgets_enqueued: int = 0
    updates_enqueued: int = 0
    buffer_reanalyzes: int = 0


@dataclass
class TimeShares:
    """Seconds spent per stage (sync: wall time; async: worker-side time of each stage)."""

    collect: float = 0.0
    train: float = 0.0
    eval: float = 0.0


@dataclass
class StopReason:
    reached_stop_value: bool = False
    max_env_step: bool = False
    max_train_iter: bool = False

    def __bool__(self) -> bool:
        return self.reached_stop_value or self.max_env_step or self.max_train_iter

    def describe(self) -> str:
        if self.reached_stop_value:
            return "stop value reached"
        if self.max_env_step:
            return "max_env_step reached"
        if self.max_train_iter:
            return "max_train_iter reached"
        return "running"


def learner_threads(cfg: Config) -> int:
    """learner.num_threads, capped so that the learner and the collector actors together do not
    ask for more cores than the machine has (oversubscribed OpenMP threads spin and crawl)."""
    ap = cfg.async_pipeline
    if not ap.enabled or ap.ray_local_mode:
        return cfg.learner.num_threads
    spare = (os.cpu_count() or 1) - ap.num_collector_actors * ap.collector_num_cpus
    return max(1, min(cfg.learner.num_threads, int(spare)))


def make_backend(cfg: Config) -> WorkerBackend:
    """In-process workers for sync; for ray_local_mode the actor classes themselves, in-process and
    sequential, with the snapshot transport (no Ray needed); Ray actors for the async pipeline."""
    ap = cfg.async_pipeline
    if not ap.enabled:
        return InProcessBackend(cfg)
    if ap.ray_local_mode:
        from lz_tune.pipeline.ray_backend import LocalActorBackend

        return LocalActorBackend(cfg, num_collectors=ap.num_collector_actors, num_evaluators=1)
    from lz_tune.pipeline.ray_backend import RayBackend

    return RayBackend(cfg)


class Driver:
    """Owns learner + buffer and runs the loop. ``run()`` trains to a stop criterion;
    ``step(max_seconds)`` advances a bounded slice (what a Tune trial calls).

    A context manager: ``with Driver(cfg, exp_dir=...) as d: ...`` closes the workers, the Ray
    instance the driver started and the run folder's lock on any exit (:meth:`close`)."""

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __init__(
        self,
        cfg: Config,
        *,
        exp_dir: Optional[str] = None,
        backend: Optional[WorkerBackend] = None,
        resume_from: Optional[str] = None,
        print_fn: Optional[Callable[[str], None]] = print,
        write_checkpoints: bool = True,
    ) -> None:
        # --- validate everything before creating anything (env id, policy type, checkpoint)
        get_algorithm(cfg.policy_type)  # an unknown type fails here, before anything starts
        try:
            self.spec = env_spec_for(cfg)
        except ValueError as e:
            raise ConfigError(f"env.env_id: {e}") from e
        ckpt = load_checkpoint(resume_from, policy_type=cfg.policy_type) if resume_from else None
        self.resume_from = resume_from
        if backend is None and cfg.async_pipeline.enabled and not cfg.async_pipeline.ray_local_mode:
            from lz_tune.pipeline.ray_backend import import_ray

            import_ray()  # clear error now if Ray is missing, before anything is written

        self.cfg = cfg
        self.print = print_fn or (lambda s: None)
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(learner_threads(cfg))
        self.rng = np.random.default_rng(cfg.seed + 31)
        self.learner = make_learner(cfg, self.spec)  # the type's own, or data-parallel over N workers
        notice = self.learner.update_path_notice()
        if notice:  # no type loses the fast path silently
            (self.print if print_fn else _log.warning)(f"[{cfg.exp_name}] note: {notice}")
        self.buffer = make_game_buffer(cfg, self.spec)
        ap = cfg.async_pipeline
        self.publisher = SnapshotPublisher(
            weight_sync_interval=ap.weight_sync_interval,
            max_policy_lag=ap.max_policy_lag,
            get_weights=lambda: self.learner.snapshot_weights(),
        )
        self.budgets = TrainBudgetQueue()
        self.counters = Counters()
        self.times = TimeShares()
        self.stop = StopReason()
        self.best_eval: Optional[EvalResult] = None
        self.best_reward_mean: Optional[float] = None
        self.last_eval: Optional[EvalResult] = None
        self.last_eval_env_steps: Optional[int] = None  # training env steps behind the last evaluated snapshot
        self.eval_history: deque[dict[str, Any]] = deque(maxlen=10_000)  # bounded for runs of weeks
        self._pending_eval_states: dict[int, dict[str, Any]] = {}
        self._last_eval_launch_iter: Optional[int] = None
        self.policy_lag = PolicyLag()
        self._recent_returns: list[float] = []
        self._last_logs: dict[str, float] = {}
        self._final_eval_launched = False
        self._final_eval_wanted = False
        self._nonfinite_in_a_row = 0  # updates skipped for a non-finite loss, in a row
        self._first_nonfinite_term = "unknown"  # the loss term of the first of them
        self._failed_saves_in_a_row = 0  # checkpoint saves skipped for a full disk, in a row
        self.collects_discarded_at_close = 0
        self._last_eval_payload: Optional[dict[str, Any]] = None
        #: set to a list to record the loop's events as ``(kind, info)``: "collect" (segments pushed),
        #: "budget" (queued), "reanalyze" (buffer reanalyze), "update", "publish" (a new snapshot for
        #: collectors), "eval" (an evaluation launched); what the semantic tests compare
        self.event_log: Optional[list[tuple[str, dict[str, Any]]]] = None
        #: saves / loads the replay buffer with checkpoints (a Tune trial gives it its trial's store)
        self.run_folder = RunFolder(exp_dir, write_files=write_checkpoints)
        self.buffer_checkpoints = buffer_checkpoint.for_run(cfg, self.run_folder.ckpt_dir, log=self.print)
        self.restore_report = RestoreReport()
        if ckpt is not None:
            assert resume_from is not None  # ckpt was loaded from it
            self._restore(ckpt)
            self._load_buffer_beside(resume_from, ckpt)

        self.exp_dir = exp_dir
        self.ckpt_dir = self.run_folder.ckpt_dir
        self.run_folder.lock()  # one writer per run folder: refused here, before anything is written
        try:
            self.run_folder.write_config(cfg.to_dict(), cfg.flat_dict())
            self.logger = ScalarLogger(self.run_folder.tb_dir, self.run_folder.tb_train_iter_dir)
        except BaseException:
            self.run_folder.unlock()
            raise
        self._prepared: Optional[tuple] = None  # (index, batch) built while the previous update ran
        self.batches_prepared_ahead = 0
        self._in_flight: Any = None  # the update of self._prepared, sent before the previous one returned
        self.updates_sent_ahead = 0
        self._started_ray = False
        workers = self.learner.runs_on_workers  # data-parallel learner workers (learner.num_workers >= 2)
        made_backend = None
        try:
            if workers:  # Ray up (the run's own, or the cluster) and the workers' resources checked before any actor
                from lz_tune.pipeline.ray_backend import init_ray

                self._started_ray = init_ray(cfg)
                self.learner.check_resources()
            if backend is None:
                backend = made_backend = make_backend(cfg)
            self.backend = backend
            if workers:  # now that everything was validated and the driver's own actors exist
                self.learner.start()
        except BaseException:
            if made_backend is not None:
                made_backend.close()
            self._shutdown_ray()
            self.run_folder.unlock()
            raise
        self._start_time = time.perf_counter()
        self._start_env_steps = self.counters.env_steps
        self._start_train_iter = self.learner.train_iter
        # eval_at_start (sync and async; never on a resume): launched by the first iteration, so that
        # a Tune trial taking over running workers has set its restore generation first, and
        # retried there until an evaluator takes it
        self._start_eval_wanted = ap.eval_at_start and ckpt is None

    # ------------------------------------------------------------------------------ state

    @property
    def train_iter(self) -> int:
        return self.learner.train_iter

    def train_iter_at(self, t: float) -> int:
        """The learner's train_iter at wall-clock time ``t`` (``time.time()``): updates finished
        after ``t`` are not counted (see :class:`~lz_tune.pipeline.policy_lag.PolicyLag`)."""
        return self.policy_lag.train_iter_at(t, self.train_iter)

    @property
    def trainable(self) -> bool:
        """Cold start is over: env steps exceed learner.train_start_after_envsteps and the buffer
        holds more than one batch of positions (LightZero's rule, strict in both)."""
        return (
            self.counters.env_steps > self.cfg.learner.train_start_after_envsteps
            and self.buffer.num_transitions > self.cfg.learner.batch_size
        )

    @property
    def budget_queue_cap(self) -> int:
        return self.cfg.async_pipeline.budget_queue_cap if self.cfg.async_pipeline.enabled else 1

    @property
    def collect_inflight_cap(self) -> int:
        return self.cfg.async_pipeline.collect_inflight if self.cfg.async_pipeline.enabled else 1

    @property
    def training_over(self) -> bool:
        """No update will follow: the stop value was reached or max_train_iter; or max_env_step
        was reached, no collect is still running (their env steps count and their segments are
        pushed, as LightZero waits for them) and every queued budget was trained (or the
        buffer cannot give a batch)."""
        stop = self.stop
        if stop.reached_stop_value or stop.max_train_iter:
            return True
        return stop.max_env_step and self.backend.collects_in_flight == 0 and not (len(self.budgets) and self.trainable)

    @property
    def done(self) -> bool:
        """Training is over and no evaluation is still in flight."""
        return self.training_over and self.backend.evals_in_flight == 0 and not self._final_eval_wanted

    # ------------------------------------------------------------------------------ loop

    def run(self) -> dict[str, Any]:
        """Train until a stop criterion; returns the final metrics."""
        while not self.done:
            self._iteration()
        self._consume_finished()
        return self.metrics()

    def _consume_finished(self) -> None:
        """Consume the work that has finished, without waiting: at the end of a run and at close,
        a collect that finished is counted and its segments kept rather than thrown away (a
        collect still running then is discarded: see :meth:`close`)."""
        self.consume_finished(wait_s=0.0)

    def consume_finished(self, *, wait_s: float = 0.0) -> None:
        """Take in the collects and evaluations that have finished, as the loop does: segments
        pushed to the buffer, budgets queued, evaluations recorded, failures reported. Waits up to
        ``wait_s`` seconds for the first one (0: only what is done now). Launches nothing; for
        callers that drive the backend themselves (benchmarks) between :meth:`step` calls."""
        self._consume(self.backend.poll(wait_s))

    def train_one_update(self) -> None:
        """One learner update exactly as the loop makes it (sample a batch, learn, write the
        priorities back, count it), without taking a queued budget; the buffer must hold a batch
        (:attr:`trainable`). For benchmarks that time updates alone."""
        self._train_one()

    def step(self, *, max_seconds: float = 1.0) -> dict[str, Any]:
        """Run the loop for about ``max_seconds`` (at least one iteration); returns metrics."""
        deadline = time.perf_counter() + max_seconds
        while not self.done:
            self._iteration()
            if time.perf_counter() >= deadline:
                break
        return self.metrics()

    def _iteration(self) -> None:
        if self._start_eval_wanted and self.backend.evals_in_flight < self.cfg.async_pipeline.max_eval_inflight:
            self._start_eval_wanted = not self._launch_eval()
        self._maybe_launch_eval()
        may_train = not (self.stop.reached_stop_value or self.stop.max_train_iter)
        has_work = may_train and self.budgets.take(1) > 0 and self.trainable
        can_launch = bool(self.backend.idle_collectors()) and not self.stop and not self._launch_blocked()
        wait = 0.0 if has_work or can_launch or not self.backend.concurrent else self.cfg.async_pipeline.poll_interval_s
        self._consume(self.backend.poll(wait))
        self._maybe_launch_eval()  # again: an evaluation taken in just now may have freed its evaluator
        if not self.stop:  # past max_env_step no collect starts; those running finish and are pushed
            self._launch_collects()  # right after consuming: a worker that just finished starts again at once
        if may_train and not self.stop.reached_stop_value:  # (an evaluation just taken in may have stopped it)
            self._train_chunk()  # ... and the queued budgets are trained to the end (LightZero's drain)
        self._check_limits()

    def _check_limits(self) -> None:
        if self.counters.env_steps >= self.cfg.max_env_step:
            self.stop.max_env_step = True
        if self.train_iter >= self.cfg.max_train_iter:
            self.stop.max_train_iter = True
        if self.training_over and not self.stop.reached_stop_value and not self._final_eval_launched:
            # one last evaluation of the final weights, unless that version was just evaluated
            self._final_eval_launched = True
            self._final_eval_wanted = self.last_eval is None or self.last_eval.train_iter != self.train_iter
        if self._final_eval_wanted and self.backend.evals_in_flight < self.cfg.async_pipeline.max_eval_inflight:
            self._final_eval_wanted = not self._launch_eval()  # no idle evaluator: try again next pass

    # ------------------------------------------------------------------------------ collect

    def _event(self, kind: str, **info: Any) -> None:
        if self.event_log is not None:
            self.event_log.append((kind, info))

    def _launch_blocked(self) -> bool:
        """No collect may start now: the in-flight cap is reached, or backpressure: the queued
        budgets reached max_train_budget_queue_size (only once the buffer is trainable, so cold
        start never starves). As in LightZero, collects in flight do not count toward the
        budget cap: the queue may exceed it by the collects that were running when it filled."""
        if self.backend.collects_in_flight >= self.collect_inflight_cap:
            return True
        if self.counters.env_steps >= self.cfg.max_env_step:
            return True  # (checked here too: a collect pushed just now may have reached it)
        return self.trainable and len(self.budgets) >= self.budget_queue_cap

    def _launch_collects(self) -> None:
        for worker_id in self.backend.idle_collectors():
            if self._launch_blocked():
                return
            published = self.publisher.num_published
            snapshot = self.publisher.for_collect(self.train_iter)
            if self.publisher.num_published != published:
                self._event("publish", train_iter=snapshot.train_iter)
            lag = self.train_iter - snapshot.train_iter
            self.policy_lag.record_launch(lag)
            self.backend.launch_collect(
                worker_id,
                snapshot,
                temperature_at(self.cfg, self.train_iter),
                epsilon=epsilon_at(self.cfg, self.counters.env_steps),
            )

    def _on_collect(self, result: CollectResult) -> None:
        c = self.counters
        c.env_steps += result.env_steps
        c.collects += 1
        c.episodes += len(result.episode_returns)
        self._recent_returns = (self._recent_returns + list(result.episode_returns))[-100:]
        self.policy_lag.record_return(
            started_at=result.started_at, policy_train_iter=result.policy_train_iter, train_iter=self.train_iter
        )
        self.times.collect += result.collect_time_s
        was_trainable = self.trainable
        if result.segments:
            self.buffer.push(result.segments, result.priorities)
        self._event("collect", env_steps=result.env_steps, segments=len(result.segments))
        freq = self.cfg.buffer.buffer_reanalyze_freq
        if 0 < freq < 1 and (c.collects - 1) % max(1, round(1 / freq)) == 0:
            self._buffer_reanalyze(at="collect")  # once every round(1/freq) collects, when the collect is pushed
        if was_trainable or self.trainable:
            updates = updates_for_collect(self.cfg, result.num_transitions)
            self.budgets.push(updates)
            self._event("budget", updates=updates)
            c.budgets_enqueued += 1
            c.updates_enqueued += updates
        else:
            c.cold_start_collects += 1

    # ------------------------------------------------------------------------------ train

    def _train_chunk(self) -> None:
        if not self.trainable:
            return
        n = self.budgets.take(self.cfg.async_pipeline.max_train_chunk_steps)
        start = time.perf_counter()
        for i in range(n):
            if self._reanalyze_due(self.budgets.head_done):
                self._buffer_reanalyze(at="budget")
            # the next update follows this one with no buffer change in between (same budget, below
            # max_train_iter, no buffer reanalyze before it): its batch may be prepared while this one
            # runs on learner workers
            self._train_one(
                next_follows=(
                    i + 1 < n
                    and self.train_iter + 1 < self.cfg.max_train_iter
                    and not self._reanalyze_due(self.budgets.head_done + 1)
                )
            )
            self.budgets.consumed()
            if self.train_iter >= self.cfg.max_train_iter:
                break
            if self.cfg.async_pipeline.enabled and self._evaluate_between_updates():
                break  # the stop value was reached: no further update
            if i + 1 < n and self.backend.concurrent and (self.backend.collect_ready() or self.backend.eval_ready()):
                break  # yield early: a finished collector restarts now, a finished evaluation is recorded now
        self.times.train += time.perf_counter() - start

    def _evaluate_between_updates(self) -> bool:
        """The async pipeline after every update, as LightZero's chunk loop: an evaluation that
        is due launches at exactly this train_iter. Workers that run at launch (``ray_local_mode``)
        have then finished it: its result is taken in at once (checkpoint, best, stop value), as
        LightZero's poll after every update would. True when the run must stop training."""
        launched = self._maybe_launch_eval()
        if launched and not self.backend.concurrent:
            self._consume(self.backend.poll(0.0))
        return bool(self.stop.reached_stop_value)

    def _sample_batch(self) -> tuple:
        index = self.buffer.sample(self.cfg.learner.batch_size)
        return index, self.learner.make_batch(self.buffer, index, rng=self.rng)  # the type's targets

    def _may_prepare_ahead(self) -> bool:
        """Whether the next batch may be sampled and built while the current update runs: the
        update in flight must leave the target network unchanged (the next batch's bootstrap
        values) and, with PER, its priorities are written back only after the next sample is
        drawn, which ``learner.prepare_ahead_with_lag`` must allow. Where the ranks build the
        targets at the update (``learner.targets_on_workers``), a target refresh does not matter."""
        lc = self.cfg.learner
        if self.cfg.buffer.use_priority and not lc.prepare_ahead_with_lag:
            return False
        return self.learner.targets_at_update or not self.learner.target_changes_at(self.train_iter)

    def _may_send_ahead(self) -> bool:
        """Whether the prepared next batch may go to the learner workers before the current update
        returns (two updates in flight: the workers do not wait for the driver's round trip).
        Exact where nothing between the two updates reads the workers' weights: the ranks build
        the targets at the update (``learner.targets_on_workers``) and the sync pipeline, whose
        updates of one train chunk follow each other with nothing in between (the async pipeline
        launches collects and evaluations between two updates, with the weights of the first)."""
        return self.learner.targets_at_update and not self.cfg.async_pipeline.enabled

    def _drop_in_flight(self) -> None:
        """Wait for an update sent ahead and drop its result (a restore replaces the learner state)."""
        pending, self._in_flight = self._in_flight, None
        if pending is not None:
            try:
                self.learner.finish_update(pending)
            except Exception as e:  # the workers failed: the restore starts from the checkpoint anyway
                self.print(f"[{self.cfg.exp_name}] an update sent ahead failed before the restore ({e})")

    def _train_one(self, *, next_follows: bool = False) -> None:
        b = self.cfg.buffer
        index, batch = self._prepared if self._prepared is not None else self._sample_batch()
        self._prepared = None
        if self.learner.runs_on_workers:  # learner workers: prepare the next batch meanwhile
            pending, self._in_flight = self._in_flight, None
            if pending is None:
                pending = self.learner.start_update(batch, train_iter=self.train_iter)
            if next_follows and self._may_prepare_ahead():
                self._prepared = self._sample_batch()
                self.batches_prepared_ahead += 1
                if self._may_send_ahead():  # the workers take it up the moment this one is done
                    self._in_flight = self.learner.start_update(self._prepared[1], train_iter=self.train_iter + 1)
                    self.updates_sent_ahead += 1
            logs, priorities = self.learner.finish_update(pending)
        else:
            logs, priorities = self.learner.learn(batch, train_iter=self.train_iter)
        self.policy_lag.record_update()
        self.restore_report.on_update(self.counters.env_steps)
        self._event("update", train_iter=self.train_iter)
        nonfinite = bool(logs.get("learner/nonfinite_update"))
        if b.use_priority and not nonfinite:
            self.buffer.update_priorities(index, priorities)
        self._count_nonfinite(nonfinite)
        self._last_logs = logs
        if self.train_iter % 10 == 0:
            self.logger.log(
                learner_metrics(self.cfg.policy_type, logs),
                env_steps=self.counters.env_steps,
                train_iter=self.train_iter,
            )
        if self.train_iter % self.cfg.async_pipeline.buffer_stats_interval == 0:
            self._log_throughput()

    def _count_nonfinite(self, nonfinite: bool) -> None:
        """Count a skipped non-finite update; learner.max_nonfinite_updates_in_a_row of them in a
        row end the run with TrainingDivergedError naming the first non-finite loss term."""
        if not nonfinite:
            self._nonfinite_in_a_row = 0
            return
        self.counters.nonfinite_updates += 1
        self._nonfinite_in_a_row += 1
        if self._nonfinite_in_a_row == 1:
            self._first_nonfinite_term = getattr(self.learner, "nonfinite_term", None) or "unknown"
            self.print(
                f"[{self.cfg.exp_name}] train_iter={self.train_iter}: non-finite loss "
                f"({self._first_nonfinite_term}); update skipped"
            )
        if self._nonfinite_in_a_row >= self.cfg.learner.max_nonfinite_updates_in_a_row:
            raise TrainingDivergedError(
                f"{self._nonfinite_in_a_row} updates in a row had a non-finite loss or gradient, the first in "
                f"the {self._first_nonfinite_term!r} loss term (train_iter {self.train_iter}); their steps were "
                f"skipped, so the checkpoints hold the last finite weights. Lower learner.learning_rate or "
                f"check the env's rewards and observations (learner.max_nonfinite_updates_in_a_row)"
            )

    def _log_throughput(self) -> None:
        """Counters, throughput, buffer statistics, time shares and policy lag to TensorBoard, under
        the names Tune results use (lz_tune.metrics; evaluations are logged when they arrive)."""
        scalars = {
            k: float(v)
            for k, v in public_metrics(self.metrics(), policy_type=self.cfg.policy_type, learner_logs={}).items()
            if not isinstance(v, bool) and not k.startswith("evaluation/")
        }
        self.logger.log(scalars, env_steps=self.counters.env_steps, train_iter=self.train_iter)

    def _reanalyze_due(self, done: int) -> bool:
        """buffer_reanalyze_freq >= 1: whether a buffer reanalyze comes before the update at
        progress ``done`` of the head budget of u updates, every max(1, u // freq) updates from 0
        (LightZero spreads them through the budget)."""
        freq = self.cfg.buffer.buffer_reanalyze_freq
        size = self.budgets.head_size
        if freq < 1 or done >= size:
            return False
        return done % max(1, int(size // freq)) == 0

    def _buffer_reanalyze(self, *, at: str) -> None:
        """One periodic buffer reanalyze (LightZero's): reanalyze_batch_size sequences, as whole
        segments among the oldest reanalyze_partition, the least reanalysed first, re-searched by
        the learner's target network; skipped while the buffer holds too few positions."""
        b = self.cfg.buffer
        if not self.buffer.enough_for_reanalysis(num_sequences=b.reanalyze_batch_size, partition=b.reanalyze_partition):
            return
        count = segments_for_sequences(
            b.reanalyze_batch_size, game_segment_length=b.game_segment_length, num_unroll_steps=b.num_unroll_steps
        )
        assert self._in_flight is None  # (an update is sent ahead only when no buffer reanalyze comes first)
        ids = self.buffer.choose_stale_segments(num_segments=count, partition=b.reanalyze_partition, rng=self.rng)
        self.learner.reanalyze_segments(self.buffer, ids, rng=self.rng)
        self._prepared = None  # a batch built before the reanalyze holds the old targets
        self.counters.buffer_reanalyzes += 1
        self._event("reanalyze", at=at, segments=len(ids), train_iter=self.train_iter, collects=self.counters.collects)

    # ------------------------------------------------------------------------------ eval

    def _maybe_launch_eval(self) -> bool:
        """An evaluation every evaluator.eval_freq updates, also while the last collects and budgets
        drain after max_env_step (LightZero keeps evaluating then); the final one is separate.
        Sync: checked between budgets (LightZero's sync entry evaluates before each collect);
        async: also after every update (:meth:`_evaluate_between_updates`). True when one launched."""
        if self.training_over or self.train_iter == 0:
            return False
        if not self.cfg.async_pipeline.enabled and len(self.budgets) > 0 and self.trainable:
            return False  # sync: evaluate between budgets only (the async pipeline: after every update)
        if self.backend.evals_in_flight >= self.cfg.async_pipeline.max_eval_inflight:
            return False
        last = self._last_eval_launch_iter if self._last_eval_launch_iter is not None else 0
        if self.train_iter - last >= self.cfg.evaluator.eval_freq:
            return self._launch_eval()
        return False

    def _launch_eval(self) -> bool:
        """Evaluate the current weights; False when no evaluator could take it (nothing is
        marked as launched then, so the caller tries again: with max_eval_inflight above the
        number of evaluator actors, an evaluation is never silently skipped)."""
        snapshot = self.publisher.current(self.train_iter)
        if snapshot.version in self._pending_eval_states:
            return True  # this version is being evaluated already
        # the checkpoint of this evaluation: exactly these weights + the learner state behind them;
        # states of evaluations that never came back (evaluator died) are dropped oldest first
        # (and the RNG state and replay buffer of this same moment, so that a resume from it
        # continues from one consistent point: nothing collected after it is in its buffer file)
        while len(self._pending_eval_states) > self.cfg.async_pipeline.max_eval_inflight:
            self._discard_pending(self._pending_eval_states.pop(next(iter(self._pending_eval_states))))
        state: dict[str, Any] = {
            "learner": copy.deepcopy(self.learner.state_dict()),
            "counters": asdict(self.counters) | {"train_iter": self.train_iter},
            "rng": {"torch": torch.get_rng_state(), "numpy": copy.deepcopy(self.rng.bit_generator.state)},
            "budgets": self.budgets.state_dict(),
        }
        if self.ckpt_dir:  # (Tune saves the current buffer instead)
            try:
                state["buffer_file"] = self.buffer_checkpoints.save_for_evaluation(
                    self.buffer, self.ckpt_dir, snapshot.version
                )
            except OSError as e:
                if e.errno not in _DISK_FULL:
                    raise
                state["save_failed"] = e  # this evaluation writes no checkpoint: the previous one stays
                state["buffer_file"] = None
        self._pending_eval_states[snapshot.version] = state
        if not self.backend.launch_eval(snapshot):
            self._discard_pending(self._pending_eval_states.pop(snapshot.version))
            return False
        self._last_eval_launch_iter = self.train_iter
        self._event("eval", train_iter=self.train_iter)
        return True

    def _on_eval(self, result: EvalResult) -> None:
        if self.publisher.generation_of(result.version) < self.publisher.generation:
            return  # launched before a checkpoint restore: scored weights this run no longer has
        self.counters.evaluations += 1
        self.times.eval += result.eval_time_s
        state = self._pending_eval_states.pop(result.version, None)
        self.last_eval = result
        is_best = self.best_reward_mean is None or result.reward_mean > self.best_reward_mean
        if is_best:
            self.best_eval = result
            self.best_reward_mean = result.reward_mean
        record: dict[str, Any] = {
            "train_iter": result.train_iter,
            "env_steps": state["counters"]["env_steps"] if state else None,
            "reward_mean": result.reward_mean,
            "reward_std": result.reward_std,
            "reward_max": result.reward_max,
            "reward_min": result.reward_min,
            "episode_length_mean": result.episode_length_mean,
            "num_episodes": result.num_episodes,
            "version": result.version,
            "wall_time_s": time.perf_counter() - self._start_time,
            "match": dict(result.match),
        }
        self.eval_history.append(record)
        self.last_eval_env_steps = record["env_steps"]
        # at the env steps and updates behind the evaluated snapshot (two-player games: win / draw / loss rates too)
        at: dict[str, Any] = {
            "env_steps": self.counters.env_steps if record["env_steps"] is None else record["env_steps"],
            "train_iter": result.train_iter,
        }
        self.logger.log({name: getattr(result, field) for field, name in EVAL_FIELDS.items()}, **at)
        self.logger.log(dict(result.match), **at)
        self._log_throughput()
        if state is not None:
            payload = self._checkpoint_payload(state, result)
            self._last_eval_payload = payload
            if self.ckpt_dir:
                self._save_evaluated(state, payload, is_best=is_best)
        if result.stop and result.train_iter > 0:  # (LightZero's evaluator: an untrained policy never stops a run)
            self.stop.reached_stop_value = True
        m = self.metrics()
        if self.run_folder.write_files:
            self._append_history(m, record)
        self.print(
            f"[{self.cfg.exp_name}] train_iter={result.train_iter} env_steps={m['env_steps']} "
            f"eval_return={result.reward_mean:.1f}±{result.reward_std:.1f} "
            + (f"{format_match(result.match)} " if result.match else "")
            + f"env_steps/s={m['env_steps_per_s']:.0f} updates/s={m['updates_per_s']:.1f} "
            f"wall={m['wall_time_s']:.0f}s"
        )

    def _save_evaluated(self, state: dict[str, Any], payload: dict[str, Any], *, is_best: bool) -> None:
        """ckpt_latest.pt (and ckpt_best.pt) of an evaluation, then the run's files no checkpoint
        refers to any more. A save that finds the disk full is skipped, the previous file staying
        (evaluator.max_failed_saves_in_a_row)."""
        assert self.ckpt_dir is not None  # called when the run writes checkpoints
        error, saved_latest, saved_best = state.get("save_failed"), False, False
        if error is None:
            try:
                save_checkpoint(self.run_folder.checkpoint_path(LATEST_CHECKPOINT), payload)
                saved_latest = True
                if is_best:
                    save_checkpoint(self.run_folder.checkpoint_path(BEST_CHECKPOINT), payload)
                    saved_best = True
            except OSError as e:
                if e.errno not in _DISK_FULL:
                    raise
                error = e
        if saved_latest:  # the buffer as it was when these weights were evaluated stays; older files go
            self.buffer_checkpoints.commit_run_files(
                self.ckpt_dir,
                latest=payload["buffer_manifest"],
                best=saved_best,
                pending=[s.get("buffer_file") for s in self._pending_eval_states.values()],
            )
        else:
            self._discard_pending(state)
        if error is None:
            self._failed_saves_in_a_row = 0
            return
        self.counters.failed_saves += 1
        self._failed_saves_in_a_row += 1
        limit = self.cfg.evaluator.max_failed_saves_in_a_row
        self.print(
            f"[{self.cfg.exp_name}] warning: checkpoint of train_iter {payload['counters']['train_iter']} "
            f"not saved ({error.strerror or error}); the previous checkpoint stays "
            f"({self._failed_saves_in_a_row} of {limit} in a row)"
        )
        if self._failed_saves_in_a_row >= limit:
            raise DiskFullError(
                f"{self._failed_saves_in_a_row} checkpoint saves in a row failed "
                f"({error.strerror or error}) in {self.ckpt_dir}; the last saved checkpoint is "
                f"kept: free space, then --resume (evaluator.max_failed_saves_in_a_row)"
            )

    def _append_history(self, m: dict[str, Any], record: dict[str, Any]) -> None:
        """One line of the run's evaluation history (appended: a resumed run continues the file)."""
        row = public_metrics(m, policy_type=self.cfg.policy_type, learner_logs=self._last_logs)
        row.update({name: record[field] for field, name in EVAL_FIELDS.items() if field in record})
        row.update(record.get("match") or {})
        row.update(
            {
                "training_iteration": self.counters.evaluations,
                "time_total_s": m["wall_time_s"],
                "trial_id": self.cfg.exp_name,
                "timestamp": int(time.time()),
                "evaluation/train_iter": record["train_iter"],
                "evaluation/num_env_steps_sampled_lifetime": record["env_steps"],
            }
        )
        self.run_folder.append_result(row)

    # ------------------------------------------------------------------------------ results

    def _consume(self, polled: PollResult) -> None:
        for kind, worker_id, error in polled.failures:
            self.print(
                f"[{self.cfg.exp_name}] {kind} {worker_id} failed, its result was discarded and the actor "
                f"restarted: {error.splitlines()[0] if error else ''}"
            )
        for r in polled.collects:
            self._on_collect(r)
        for e in polled.evals:
            self._on_eval(e)

    def metrics(self) -> dict[str, Any]:
        """Flat dict of everything worth reporting (what Tune and the CLI print)."""
        wall = max(time.perf_counter() - self._start_time, 1e-9)
        m: dict[str, Any] = {
            "env_steps": self.counters.env_steps,
            "train_iter": self.train_iter,
            "learning_rate": self.learner.learning_rate,  # what the next update uses (schedule, PBT)
            "collects": self.counters.collects,
            "episodes": self.counters.episodes,
            "evaluations": self.counters.evaluations,
            "wall_time_s": wall,
            "env_steps_per_s": (self.counters.env_steps - self._start_env_steps) / wall,
            "updates_per_s": (self.train_iter - self._start_train_iter) / wall,
            "buffer_transitions": self.buffer.num_transitions,
            "buffer_segments": self.buffer.num_segments,
            "buffer_bytes": self.buffer.nbytes,
            **self.policy_lag.metrics(),
            "time_share_collect": self.times.collect / wall,
            "time_share_train": self.times.train / wall,
            "time_share_eval": self.times.eval / wall,
            "actor_restarts": self.backend.actor_restarts if hasattr(self, "backend") else 0,
            "budget_queue_len": len(self.budgets),
            "updates_enqueued": self.budgets.total_enqueued,
            "buffer_reanalyzes": self.counters.buffer_reanalyzes,
            "nonfinite_updates": self.counters.nonfinite_updates,
            "failed_saves": self.counters.failed_saves,
            **self.restore_report.metrics(),
            "collect_return_mean": float(np.mean(self._recent_returns)) if self._recent_returns else math.nan,
            "stop_value_reached": self.stop.reached_stop_value,
            "done": self.done if hasattr(self, "backend") else False,
        }
        if self.best_reward_mean is not None:
            m["eval_reward_mean_best"] = self.best_reward_mean
        if self.last_eval is not None:
            m["eval_reward_mean_last"] = self.last_eval.reward_mean
            m["eval_train_iter_last"] = self.last_eval.train_iter
        for k, v in self._last_logs.items():
            m[k] = v
        return m

    # ------------------------------------------------------------------------------ checkpoints

    def _checkpoint_payload(self, state: dict[str, Any], result: Optional[EvalResult]) -> dict[str, Any]:
        return {
            # "evaluated": exactly the weights an evaluation scored (+ the learner state, counters,
            # RNG of the moment it was launched); "current": the learner as it is now (Tune's
            # pause / PBT / end-of-trial checkpoints: a restore from it loses no update)
            "checkpoint_kind": "current" if result is None else "evaluated",
            "policy_type": self.cfg.policy_type,
            "config": self.cfg.to_dict(),
            "learner": state["learner"],
            # counters of the launch moment, except evaluations: those finished, this one included
            "counters": state["counters"] | ({} if result is None else {"evaluations": self.counters.evaluations}),
            "eval": None
            if result is None
            else {
                "reward_mean": result.reward_mean,
                "reward_std": result.reward_std,
                "version": result.version,
                "train_iter": result.train_iter,
                "num_episodes": result.num_episodes,
                "reward_min": result.reward_min,
                "reward_max": result.reward_max,
                "episode_length_mean": result.episode_length_mean,
                "env_steps": result.env_steps,
            },
            "best_eval_reward_mean": self.best_reward_mean,
            "rng": state.get("rng") or {"torch": torch.get_rng_state(), "numpy": self.rng.bit_generator.state},
            # the replay buffer's manifest beside this file (None: none saved) and the queued train
            # budgets of the same moment (a restore that loads the buffer trains them first)
            "buffer_manifest": os.path.basename(state["buffer_file"]) if state.get("buffer_file") else None,
            "budgets": state.get("budgets"),
        }

    @staticmethod
    def _discard_pending(state: dict[str, Any]) -> None:
        path = state.get("buffer_file")
        if path and os.path.exists(path):
            os.remove(path)

    @property
    def last_learner_logs(self) -> dict[str, float]:
        """The logs of the latest learner update (internal names; lz_tune.metrics renames them)."""
        return dict(self._last_logs)

    @property
    def evaluated_payload(self) -> Optional[dict[str, Any]]:
        """The checkpoint of the latest finished evaluation: exactly the evaluated weights, with the
        learner state, counters and RNG of the moment it was launched (None before any)."""
        return self._last_eval_payload

    def current_state_payload(self) -> dict[str, Any]:
        """A checkpoint of the learner as it is now (weights, optimizer, train_iter, counters, RNG):
        a restore from it continues exactly here."""
        state = {
            "learner": copy.deepcopy(self.learner.state_dict()),
            "counters": asdict(self.counters) | {"train_iter": self.train_iter},
            "rng": {"torch": torch.get_rng_state(), "numpy": copy.deepcopy(self.rng.bit_generator.state)},
            "budgets": self.budgets.state_dict(),
        }
        return self._checkpoint_payload(state, None)

    def last_checkpoint_payload(self) -> dict[str, Any]:
        """:attr:`evaluated_payload`, or before any evaluation :meth:`current_state_payload`."""
        return self._last_eval_payload if self._last_eval_payload is not None else self.current_state_payload()

    def continue_weight_versions(self, previous: "Driver") -> None:
        """This driver took over ``previous``'s workers (``backend=previous.backend``): its weight
        versions go on after ``previous``'s (a new restore generation), so a worker never takes a
        new snapshot for one it holds. Call before the first :meth:`step`."""
        self.publisher.generation = previous.publisher.generation + 1

    @property
    def actor_restarts(self) -> int:
        """How many collector / evaluator actors were restarted so far (0 in process)."""
        return self.backend.actor_restarts

    def worker_placement(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Where the collector and evaluator actors run: ``actor_placement_group_ids`` and
        ``collector_node_ids`` / ``evaluator_node_ids`` (Ray hex ids; empty lists for in-process
        workers). Raises ``ray.exceptions.GetTimeoutError`` when an actor is not up within
        ``timeout`` seconds (restarted, waiting for room on a node)."""
        groups = self.backend.actor_placement_groups(timeout=timeout)
        nodes = self.backend.actor_node_ids(timeout=timeout)
        return {
            "actor_placement_group_ids": groups,
            "collector_node_ids": nodes["collectors"],
            "evaluator_node_ids": nodes["evaluators"],
        }

    def learner_placement(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Where the learner workers run (``learner.num_workers >= 2``): their placement groups and
        Ray nodes and process ids in rank order; empty lists when the learner is in this process."""
        group = getattr(self.learner, "group", None)
        empty: dict[str, list] = {"placement_group_ids": [], "node_ids": [], "pids": []}
        return group.placement(timeout=timeout) if group is not None else empty

    def reconfigure(self, cfg: Config) -> None:
        """Take a config that differs only in learner.* (not optimizer type, device, threads,
        momentum, weight decay) and evaluator.eval_freq: read live by the learner and the loop."""
        self.cfg = cfg
        self.learner.cfg = cfg

    def restore_from(
        self,
        ckpt: dict[str, Any],
        path: str,
        *,
        evaluated: Optional[dict[str, Any]] = None,
        filesystem: Any = None,
        weights_only_fallback: bool = False,
    ) -> None:
        """Load a checkpoint into a running driver (Tune's load_checkpoint, PBT exploit): learner
        state, counters, RNG. ``evaluated``: the evaluated checkpoint that goes with a "current"
        one (its evaluation becomes the latest known). Workers see a new weight version (new
        restore generation; evaluations still in flight are dropped when they return); the
        replay buffer and the workers' in-progress segments are kept, unless the checkpoint has a
        replay buffer beside it (and ``buffer.save_in_checkpoint`` is on): then that buffer and
        its queued budgets replace them (``filesystem``: the pyarrow file system of a buffer
        store in cloud storage). ``weights_only_fallback``: a replay buffer that does not load
        (a checkpoint folder copied away from a store that was since pruned, a damaged chunk) is
        said, counted in ``restore/weights_only`` and left out, the rest of the restore stands
        (a Tune trial's restore; ``train --resume`` falls back to an older checkpoint instead)."""
        self.resume_from = path
        self.last_eval = self.best_eval = None
        self.last_eval_env_steps = None
        self._last_eval_payload = None
        self.policy_lag.forget_update_times()  # train_iter jumps: lags at start count from here
        self._drop_in_flight()
        self._restore(ckpt)
        if evaluated is not None and ckpt.get("eval") is None:
            self._adopt_evaluation(evaluated)
        self._load_buffer_beside(path, ckpt, filesystem=filesystem, weights_only_fallback=weights_only_fallback)
        for state in self._pending_eval_states.values():
            self._discard_pending(state)
        self._pending_eval_states.clear()
        self._final_eval_launched = self._final_eval_wanted = self._start_eval_wanted = False
        self._prepared = None  # built from the weights before the restore
        self.stop = StopReason()

    def _load_buffer_beside(
        self, checkpoint_path: str, ckpt: dict[str, Any], *, filesystem: Any = None, weights_only_fallback: bool = False
    ) -> None:
        """The replay buffer a checkpoint refers to (its ``buffer_manifest``, in the same folder),
        unless ``buffer.save_in_checkpoint`` is off or the checkpoint names none.
        When it makes the buffer trainable, the checkpoint's queued train budgets come back (or
        one collect's budget): training resumes before any new env step."""
        folder = os.path.dirname(os.path.abspath(checkpoint_path))
        name = ckpt.get("buffer_manifest")
        path = os.path.join(folder, name) if name else ""
        loaded = self.cfg.buffer.save_in_checkpoint and bool(name)
        if loaded and filesystem is None and not os.path.isfile(path):
            # a checkpoint file copied away from its folder: its weights are still good
            self.print(
                f"[{self.cfg.exp_name}] note: {path} (the replay buffer of {checkpoint_path}) is not "
                f"there; the replay buffer is not restored"
            )
            loaded = False
        if loaded:
            try:
                self.load_buffer(path, filesystem=filesystem)  # (the buffer is unchanged when this raises)
            except CheckpointError as e:
                if not weights_only_fallback:
                    raise
                self.restore_report.weights_only += 1
                self.print(
                    f"[{self.cfg.exp_name}] warning: the replay buffer of {checkpoint_path} does not load ({e}); "
                    f"restored the weights, optimizer and counters without it (restore/weights_only). "
                    f"`python -m lz_tune export` makes a checkpoint folder that carries its buffer"
                )
                loaded = False
        self.restore_report.restored(
            buffer_transitions=self.buffer.num_transitions if loaded else 0, env_steps=self.counters.env_steps
        )
        if loaded and self.trainable:
            pending, head_done = budgets_after_restore(
                ckpt.get("budgets"), cfg=self.cfg, env_steps=self.counters.env_steps, collects=self.counters.collects
            )
            self.budgets.restore_pending(pending, head_done)
            self._prepared = None

    def load_buffer(self, path: str, *, filesystem: Any = None) -> None:
        """Replace the replay buffer with the one saved at ``path``: a buffer manifest (chunks in
        its run's store; ``filesystem``: the pyarrow file system of a store in cloud storage).
        CheckpointError naming the file if it is missing, damaged or does not fit this config
        (other unroll/td steps, frame stack, action space); the buffer is unchanged then."""
        self.buffer_checkpoints.load(self.buffer, path, filesystem=filesystem)

    def _restore(self, ckpt: dict[str, Any]) -> None:
        saved_env = ((ckpt.get("config") or {}).get("env") or {}).get("env_id")
        if saved_env is not None and saved_env != self.cfg.env.env_id:  # same shapes would load silently
            raise CheckpointError(
                f"{self.resume_from}: checkpoint was trained on env.env_id={saved_env!r}, the "
                f"config asks for {self.cfg.env.env_id!r}; its weights, counters and replay "
                f"buffer belong to that env (resume with the env it was trained on)"
            )
        saved = (ckpt.get("config") or {}).get("learner", {}).get("optim_type")
        if saved is not None and saved != self.cfg.learner.optim_type:  # torch would load it silently
            raise CheckpointError(
                f"{self.resume_from}: checkpoint was trained with learner.optim_type={saved!r}, "
                f"the config asks for {self.cfg.learner.optim_type!r}"
            )
        try:
            self.learner.load_state_dict(with_config_hyperparameters(ckpt["learner"], self.cfg))
        except (RuntimeError, KeyError, ValueError) as e:
            raise CheckpointError(
                f"{self.resume_from}: checkpoint does not fit this config "
                f"(network or optimizer shapes differ): {str(e).splitlines()[0]}"
            ) from e
        best = ckpt.get("best_eval_reward_mean")
        self.best_reward_mean = None if best is None else float(best)
        counters = dict(ckpt["counters"])
        counters.pop("train_iter", None)
        for k, v in counters.items():
            if hasattr(self.counters, k):
                setattr(self.counters, k, int(v))
        self.publisher.bump_generation()
        rng = ckpt.get("rng") or {}
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "numpy" in rng:
            self.rng.bit_generator.state = rng["numpy"]
        self._last_eval_launch_iter = self.train_iter
        if ckpt.get("eval") is not None:  # the evaluation this checkpoint holds is the latest one known
            self._adopt_evaluation(ckpt)

    def _adopt_evaluation(self, payload: dict[str, Any]) -> None:
        """Make the evaluation of an evaluated checkpoint payload the latest one known."""
        ev = payload["eval"]
        self.last_eval = EvalResult(
            version=int(ev["version"]),
            train_iter=int(ev["train_iter"]),
            reward_mean=float(ev["reward_mean"]),
            reward_std=float(ev["reward_std"]),
            reward_min=float(ev.get("reward_min", math.nan)),
            reward_max=float(ev.get("reward_max", math.nan)),
            episode_length_mean=float(ev.get("episode_length_mean", math.nan)),
            num_episodes=int(ev["num_episodes"]),
            env_steps=int(ev.get("env_steps", 0)),
            eval_time_s=0.0,
            stop=False,
        )
        self.last_eval_env_steps = int(payload["counters"]["env_steps"])
        self._last_eval_payload = {
            k: v for k, v in payload.items() if k not in ("format", "format_version", "content_digest")
        }

    def close(self, *, keep_backend: bool = False) -> None:
        """Shut the workers down (unless ``keep_backend``: a new Driver takes them over) and
        flush the TensorBoard files. A second call does nothing."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        close_learner = getattr(getattr(self, "learner", None), "close", None)
        if close_learner is not None:  # (also with keep_backend: a new Driver starts its own learner workers)
            try:
                close_learner()  # learner workers first: the backend may own the Ray instance
            except Exception as e:
                self.print(f"[{self.cfg.exp_name}] closing: learner workers ({type(e).__name__}: {e})")
        if hasattr(self, "backend") and not keep_backend:
            try:
                self._consume_finished()
                self._log_throughput()
            except Exception as e:  # closing after a failure: what can be kept was kept
                self.print(f"[{self.cfg.exp_name}] closing: finished work not consumed ({type(e).__name__}: {e})")
            self.collects_discarded_at_close = self.backend.collects_in_flight
            if self.collects_discarded_at_close:
                self.print(
                    f"[{self.cfg.exp_name}] closing: {self.collects_discarded_at_close} collect(s) still "
                    f"running discarded (their env steps are not counted)"
                )
            self.backend.close()
        for state in getattr(self, "_pending_eval_states", {}).values():
            self._discard_pending(state)
        if hasattr(self, "logger"):
            self.logger.flush()
            self.logger.close()
        if not keep_backend:
            self._shutdown_ray()
        if hasattr(self, "run_folder"):
            self.run_folder.unlock()

    def _shutdown_ray(self) -> None:
        """Shut down the Ray instance this driver started for its learner workers (if any)."""
        if getattr(self, "_started_ray", False):
            import ray

            ray.shutdown()
            self._started_ray = False
