"""Worker back-ends: who runs collects and evaluations for the driver loop.

The driver talks to one interface, :class:`WorkerBackend`. :class:`InProcessBackend` runs
the work right away in the driver's process (the sync pipeline); the Ray back-end
(:mod:`lz_tune.pipeline.ray_backend`) runs it in actors that overlap with learning, and its
``LocalActorBackend`` (``ray_local_mode``) runs those same actor classes in-process, with work at
launch like :class:`InProcessBackend`. Sync and async are therefore the same loop.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Optional

from lz_tune.config import Config
from lz_tune.workers import CollectResult, EvalResult, Evaluator, SegmentCollector, WeightSnapshot

#: seed offsets: collector k uses seed + COLLECTOR_SEED_STRIDE * k, evaluators seed + EVALUATOR_SEED_OFFSET
COLLECTOR_SEED_STRIDE = 1000
EVALUATOR_SEED_OFFSET = 100_000


@dataclass
class PollResult:
    collects: list[CollectResult] = field(default_factory=list)
    evals: list[EvalResult] = field(default_factory=list)
    #: (worker kind, worker id, error text) for work that failed and was discarded
    failures: list[tuple[str, int, str]] = field(default_factory=list)


class WorkerBackend(abc.ABC):
    #: True when collects / evals run concurrently with learning
    concurrent: bool = False

    @abc.abstractmethod
    def idle_collectors(self) -> list[int]:
        """Ids of collectors with no collect in flight."""

    @abc.abstractmethod
    def launch_collect(
        self, worker_id: int, snapshot: WeightSnapshot, temperature: float, *, epsilon: float = 0.0
    ) -> None:
        """Start one collect on collector ``worker_id`` with ``snapshot`` (visit ``temperature``,
        epsilon-greedy ``epsilon``)."""

    @property
    @abc.abstractmethod
    def collects_in_flight(self) -> int: ...

    @property
    @abc.abstractmethod
    def evals_in_flight(self) -> int: ...

    @abc.abstractmethod
    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        """Start an evaluation of ``snapshot`` on an idle evaluator; False if none is idle."""

    @abc.abstractmethod
    def poll(self, timeout_s: float) -> PollResult:
        """Finished work, waiting at most ``timeout_s`` for the first result."""

    def collect_ready(self) -> bool:
        """True when a collect in flight has finished (cheap, never waits). The driver checks it
        between updates so that an idle collector is relaunched without waiting for the rest of
        a train chunk. Backends that run work at launch have nothing in flight: False."""
        return False

    def eval_ready(self) -> bool:
        """True when an evaluation in flight has finished (cheap, never waits): the driver then
        leaves its train chunk to record it, and to launch the next one when that is due.
        Backends that run work at launch: False."""
        return False

    @property
    def actor_restarts(self) -> int:
        """Worker actors restarted so far (0: workers in this process)."""
        return 0

    def actor_placement_groups(self, timeout: Optional[float] = None) -> list:
        """Placement-group id of every collector and evaluator actor ([]: workers in this process)."""
        return []

    def actor_node_ids(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Ray node id of each actor, ``{"collectors": [...], "evaluators": [...]}`` (empty lists:
        workers in this process)."""
        return {"collectors": [], "evaluators": []}

    @abc.abstractmethod
    def close(self) -> None: ...


class InProcessBackend(WorkerBackend):
    """Collectors and evaluators as plain objects in this process; work runs at launch."""

    concurrent = False

    def __init__(self, cfg: Config, *, num_collectors: int = 1, num_evaluators: int = 1) -> None:
        self.collectors = [
            SegmentCollector(cfg, seed=cfg.seed + COLLECTOR_SEED_STRIDE * k, worker_id=k) for k in range(num_collectors)
        ]
        self.evaluators = [Evaluator(cfg, seed=cfg.seed + EVALUATOR_SEED_OFFSET + k) for k in range(num_evaluators)]
        self._done = PollResult()

    def idle_collectors(self) -> list[int]:
        return list(range(len(self.collectors)))

    def launch_collect(
        self, worker_id: int, snapshot: WeightSnapshot, temperature: float, *, epsilon: float = 0.0
    ) -> None:
        collector = self.collectors[worker_id]
        collector.load_snapshot(snapshot)
        self._done.collects.append(collector.collect(temperature=temperature, epsilon=epsilon))

    # Work runs at launch; results not yet polled count as "in flight" so that the driver
    # never finishes with an unread result.
    @property
    def collects_in_flight(self) -> int:
        return len(self._done.collects)

    @property
    def evals_in_flight(self) -> int:
        return len(self._done.evals)

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        self._done.evals.append(self.evaluators[0].evaluate(snapshot))
        return True

    def poll(self, timeout_s: float) -> PollResult:
        done, self._done = self._done, PollResult()
        return done

    def close(self) -> None:
        workers: list[SegmentCollector | Evaluator] = [*self.collectors, *self.evaluators]
        for w in workers:
            w.close()
