"""Ray back-end of the driver loop: collectors and evaluators as Ray actors (the async pipeline).

Each actor owns its envs and policy (a :class:`SegmentCollector` or :class:`Evaluator`) and
receives immutable weight snapshots: the driver ``ray.put``s one snapshot per version and
reuses that ObjectRef for every launch with the same version. A collector fetches the
snapshot only when the version differs from the one it holds, and only between collects.

Inside a Ray Tune trial (a placement group is current), actor i is pinned explicitly to
bundle i+1 of the trial's group (bundle 0 is the driver): collectors first, then
evaluators. Outside Tune actors are scheduled normally.

A failed collect or evaluation (actor died, exception inside) is reported to the driver as a
failure; the actor is restarted with a new seed in the same bundle, up to
``async_pipeline.max_actor_restarts`` times per run.

``async_pipeline.ray_local_mode`` (:class:`LocalActorBackend`) runs the same actor classes,
:class:`CollectorWorker` and :class:`EvaluatorWorker`, as plain objects in the driver's
process, with work at launch like the sync pipeline; snapshots, constructor arguments and
results go through :class:`LocalObjectStore`, a pickling stand-in for ``ray.put`` /
``ray.get``, so that what would not survive the trip to a Ray actor fails there too. Ray need
not be installed.
"""

from __future__ import annotations

import pickle
import time
import weakref
from typing import Any, Optional

import numpy as np

from lz_tune.config import Config
from lz_tune.pipeline.backends import COLLECTOR_SEED_STRIDE, EVALUATOR_SEED_OFFSET, PollResult, WorkerBackend
from lz_tune.ray_auth import join_ray
from lz_tune.workers import WeightSnapshot
from lz_tune.workers.common import StoredWeights

#: weight snapshots whose ObjectRef the driver keeps for reuse (the newest; a launched task holds
#: its own ref, so dropping one never frees weights an actor still needs)
_KEPT_SNAPSHOT_REFS = 4

RAY_MISSING = (
    "the async pipeline needs Ray, which is not installed: pip install 'ray[tune,train]' "
    "(or run without --async-pipeline / async_pipeline.enabled=False for the sync pipeline)"
)

#: the Ray versions lz-tune supports, [low, high): 2.59 turned token authentication on for the
#: local clusters ray.init() starts (what docs/clusters_and_security.md relies on); 2.61 changes
#: ``ray start`` and every cluster's authentication, and the learner group uses Ray internals, so a
#: minor version the tests have not run is refused rather than half working (pyproject.toml says
#: the same)
SUPPORTED_RAY = ((2, 59), (2, 61))


class UnsupportedRayError(ImportError):
    """The installed Ray is outside :data:`SUPPORTED_RAY`; the message names the range and the fix."""


def check_ray_version(version: str) -> None:
    """UnsupportedRayError naming the supported range when Ray ``version`` ("2.60.0") is outside it."""
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        found = (0, 0)
    (lo, hi) = SUPPORTED_RAY
    if not lo <= found < hi:
        raise UnsupportedRayError(
            f"lz-tune needs Ray >= {lo[0]}.{lo[1]} and < {hi[0]}.{hi[1]}, found {version}: "
            f"pip install 'ray[tune,train]>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}'"
        )


def import_ray():
    """Import ray or raise a clear ImportError naming the fix (Ray missing, or a version outside
    :data:`SUPPORTED_RAY`)."""
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised by a test that hides ray
        raise ImportError(RAY_MISSING) from e
    check_ray_version(ray.__version__)
    return ray


def async_actor_demand(cfg: Config, resource: str) -> float:
    """The ``"CPU"`` or ``"GPU"`` the async pipeline's collector and evaluator actors ask for
    together (0 for the sync pipeline and for Ray's local mode, which start no actors)."""
    ap = cfg.async_pipeline
    if not ap.enabled or ap.ray_local_mode:
        return 0.0
    if resource == "CPU":
        return ap.num_collector_actors * ap.collector_num_cpus + ap.num_evaluator_actors * ap.evaluator_num_cpus
    return ap.num_collector_actors * ap.collector_num_gpus + ap.num_evaluator_actors * ap.evaluator_num_gpus


def init_ray(cfg: Config) -> bool:
    """Start or join Ray for a run outside Tune unless it is up already; True when this call
    started a local instance (its owner shuts it down at close). ``RAY_ADDRESS`` set: join that
    cluster (``ray start --head``; ``train --address``) with its resources. Otherwise a local Ray
    with enough CPUs for the run's actors (collectors, evaluators, learner workers) and the driver."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    import os

    lc = cfg.learner
    need = async_actor_demand(cfg, "CPU")
    if lc.num_workers > 1:
        need += lc.num_workers * lc.worker_num_cpus
    address = os.environ.get("RAY_ADDRESS")
    if address:
        join_ray(address, log_to_driver=True)
    else:
        ray.init(
            num_cpus=max(os.cpu_count() or 1, int(need + 0.999) + 1),
            include_dashboard=False,
            log_to_driver=True,
            configure_logging=False,
        )
    return True


def take_normal_priority() -> None:
    """Ray starts worker processes niced; a collector is as much on the critical path as the learner
    (the driver), so it takes back normal priority where allowed. On a 2-core box this moved
    the async benchmark from 78% to 87-89% of the ideal overlap bound."""
    import os

    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except (OSError, AttributeError):  # not permitted (non-root) or not POSIX: keep Ray's niceness
        pass


def _snapshot_to_store(snapshot: WeightSnapshot) -> WeightSnapshot:
    """The form a snapshot travels in: weights as numpy arrays. Ray stores numpy buffers
    out-of-band (one memcpy), while torch tensors go through torch's pickling: for CartPole's
    1.1 MB of weights ``ray.put`` took ~20 ms instead of ~2 ms and ``ray.get`` ~10 ms instead of
    ~0.5 ms, the put on the learner's critical path once per published version."""
    import torch

    if isinstance(snapshot.weights, StoredWeights):  # already in the store (put by a learner rank): the reference
        return snapshot
    weights = {
        k: v if v.dtype == torch.bfloat16 else v.detach().cpu().numpy()  # numpy has no bfloat16
        for k, v in snapshot.weights.items()
    }
    # the store form: numpy arrays in place of tensors (turned back by _snapshot_from_store)
    return WeightSnapshot(version=snapshot.version, train_iter=snapshot.train_iter, weights=weights)  # type: ignore[arg-type]


def _snapshot_from_store(snapshot: WeightSnapshot) -> WeightSnapshot:
    """Inverse of :func:`_snapshot_to_store` inside an actor: tensors viewing the object store's
    read-only buffers (``load_state_dict`` copies them, nothing writes to them)."""
    import warnings

    import torch

    if isinstance(snapshot.weights, StoredWeights):  # fetched when the policy loads them
        return snapshot
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        weights = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in snapshot.weights.items()}
    return WeightSnapshot(version=snapshot.version, train_iter=snapshot.train_iter, weights=weights)


def actor_device(num_gpus: float) -> str:
    """Torch device of an actor's policy: ``cuda`` when its Ray bundle reserves a GPU (Ray sets
    the actor's CUDA_VISIBLE_DEVICES, so ``cuda`` is that GPU), else ``cpu``."""
    return "cuda" if num_gpus > 0 else "cpu"


def _check_device(device: str, key: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(
            f"async_pipeline.{key} > 0 reserves a GPU for this actor, but torch sees no CUDA device "
            f"here (CPU-only torch build, or no GPU on the node)"
        )


def _store_get(object_store: Optional["LocalObjectStore"], ref):
    """The object behind ``ref``: from ``object_store`` in-process (ray_local_mode), else ``ray.get``."""
    if object_store is not None:
        return object_store.get(ref)
    import ray

    return ray.get(ref)


class WorkerBody:
    """What every actor body answers besides its work: liveness, process, placement group and
    node (the last two None in-process, where ``object_store`` is set and there is no Ray)."""

    object_store: Optional["LocalObjectStore"]

    def ping(self) -> bool:
        return True

    def pid(self) -> int:
        """Id of the process this worker runs in."""
        import os

        return os.getpid()

    def placement_group_id(self):
        if self.object_store is not None:
            return None
        import ray

        return ray.get_runtime_context().get_placement_group_id()

    def node_id(self) -> Optional[str]:
        """Hex id of the Ray node this worker runs on (None in-process)."""
        if self.object_store is not None:
            return None
        import ray

        return ray.get_runtime_context().get_node_id()


class CollectorWorker(WorkerBody):
    """Body of a collector actor: a SegmentCollector plus snapshot caching.

    ``own_process`` (a Ray actor: True) lets the worker set its process's torch thread count and
    priority; in-process (ray_local_mode) it is False, and the driver's process, whose threads
    are the learner's, is left as it is. ``object_store``: where snapshot refs are resolved,
    None for Ray's object store.
    """

    def __init__(
        self,
        cfg_dict: dict,
        seed: int,
        worker_id: int,
        num_threads: int,
        device: str = "cpu",
        *,
        own_process: bool = True,
        object_store: Optional["LocalObjectStore"] = None,
    ) -> None:
        import torch

        from lz_tune.config import Config
        from lz_tune.workers import SegmentCollector

        if own_process:
            torch.set_num_threads(max(1, num_threads))
            take_normal_priority()
        _check_device(device, "collector_num_gpus")
        self.object_store = object_store
        self.collector = SegmentCollector(Config.from_dict(cfg_dict), seed=seed, worker_id=worker_id, device=device)

    def collect(self, version: int, snapshot_box: list, temperature: float, epsilon: float = 0.0):
        if version != self.collector.policy_version:
            self.collector.load_snapshot(_snapshot_from_store(_store_get(self.object_store, snapshot_box[0])))
        return self.collector.collect(temperature=temperature, epsilon=epsilon)

    def close(self) -> bool:
        self.collector.close()
        return True


class EvaluatorWorker(WorkerBody):
    """Body of an evaluator actor (``own_process``, ``object_store``: as for :class:`CollectorWorker`)."""

    def __init__(
        self,
        cfg_dict: dict,
        seed: int,
        num_threads: int,
        device: str = "cpu",
        *,
        own_process: bool = True,
        object_store: Optional["LocalObjectStore"] = None,
    ) -> None:
        import torch

        from lz_tune.config import Config
        from lz_tune.workers import Evaluator

        if own_process:
            torch.set_num_threads(max(1, num_threads))
        _check_device(device, "evaluator_num_gpus")
        self.object_store = object_store
        # evaluators keep Ray's lower priority: they use spare cycles instead of slowing collection
        self.evaluator = Evaluator(Config.from_dict(cfg_dict), seed=seed, device=device)

    def evaluate(self, snapshot_box: list):
        return self.evaluator.evaluate(_snapshot_from_store(_store_get(self.object_store, snapshot_box[0])))

    def close(self) -> bool:
        self.evaluator.close()
        return True


class _SnapshotRefs:
    """One stored snapshot per weight version: put once, its ref reused for every launch of that
    version; the newest :data:`_KEPT_SNAPSHOT_REFS` refs are kept. Needs ``_snapshot_refs`` (dict),
    ``snapshot_puts`` (int) and ``_put``."""

    _snapshot_refs: dict
    snapshot_puts: int

    def _put(self, value: Any) -> Any:
        raise NotImplementedError

    def _snapshot_ref(self, snapshot: WeightSnapshot):
        ref = self._snapshot_refs.get(snapshot.version)
        if ref is None:
            ref = self._put(_snapshot_to_store(snapshot))
            self.snapshot_puts += 1
            self._snapshot_refs[snapshot.version] = ref  # insertion order: oldest first
            while len(self._snapshot_refs) > _KEPT_SNAPSHOT_REFS:  # drop the OLDEST (in-flight tasks hold theirs)
                self._snapshot_refs.pop(next(iter(self._snapshot_refs)))
        return ref


class RayBackend(_SnapshotRefs, WorkerBackend):
    concurrent = True

    def __init__(self, cfg: Config) -> None:
        ray = import_ray()
        self.ray = ray
        self.cfg = cfg
        ap = cfg.async_pipeline
        self._started_ray = init_ray(cfg)
        self._cfg_dict = cfg.to_dict()
        self._pg = ray.util.get_current_placement_group()
        self._restarts = 0
        self._spawn_count = 0
        self.collectors: list[Any] = [self._make_collector(k) for k in range(ap.num_collector_actors)]
        self.evaluators: list[Any] = [self._make_evaluator(k) for k in range(ap.num_evaluator_actors)]
        self._collect_refs: dict[Any, tuple] = {}  # ObjectRef -> (collector id, actor handle it went to)
        self._eval_refs: dict[Any, int] = {}  # ObjectRef -> evaluator id
        self._launched_at: dict[Any, float] = {}  # ObjectRef -> time.monotonic() of its launch
        self._snapshot_refs: dict[int, Any] = {}  # version -> ObjectRef (one per version)
        self.snapshot_puts = 0

    # ------------------------------------------------------------------------------ actors

    def _options(self, bundle_index: int, num_cpus: float, num_gpus: float) -> dict[str, Any]:
        """Inside a Tune trial: bundle ``bundle_index`` of the trial's placement group (laid out by
        ``async_pipeline.placement_strategy``). Outside: Ray's default scheduling, or its SPREAD
        scheduling when the strategy is SPREAD / STRICT_SPREAD."""
        opts: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": 0}
        if self._pg is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self._pg,
                placement_group_bundle_index=bundle_index,
                placement_group_capture_child_tasks=True,
            )
        elif self.cfg.async_pipeline.placement_strategy in ("SPREAD", "STRICT_SPREAD"):
            opts["scheduling_strategy"] = "SPREAD"
        return opts

    def _make_collector(self, k: int):
        ap = self.cfg.async_pipeline
        seed = self.cfg.seed + COLLECTOR_SEED_STRIDE * k + 7919 * self._spawn_count
        self._spawn_count += 1
        cls = self.ray.remote(CollectorWorker).options(
            **self._options(1 + k, ap.collector_num_cpus, ap.collector_num_gpus)
        )
        return cls.remote(
            self._cfg_dict, seed, k, max(1, int(ap.collector_num_cpus)), actor_device(ap.collector_num_gpus)
        )

    def _make_evaluator(self, k: int):
        ap = self.cfg.async_pipeline
        seed = self.cfg.seed + EVALUATOR_SEED_OFFSET + k
        cls = self.ray.remote(EvaluatorWorker).options(
            **self._options(1 + ap.num_collector_actors + k, ap.evaluator_num_cpus, ap.evaluator_num_gpus)
        )
        return cls.remote(self._cfg_dict, seed, max(1, int(ap.evaluator_num_cpus)), actor_device(ap.evaluator_num_gpus))

    def _restart(self, kind: str, k: int) -> None:
        self._restarts += 1
        limit = self.cfg.async_pipeline.max_actor_restarts
        if self._restarts > limit:
            raise RuntimeError(
                f"{kind} actors failed {self._restarts} times, more than "
                f"async_pipeline.max_actor_restarts={limit}: giving up"
            )
        old = self.collectors[k] if kind == "collector" else self.evaluators[k]
        try:
            self.ray.kill(old, no_restart=True)
        except Exception:
            pass
        if kind == "collector":
            self.collectors[k] = self._make_collector(k)
        else:
            self.evaluators[k] = self._make_evaluator(k)

    @property
    def actor_restarts(self) -> int:
        return self._restarts

    def actor_placement_groups(self, timeout: Optional[float] = None) -> list:
        """Placement-group id (hex or None) of every collector and evaluator actor (raises Ray's
        GetTimeoutError after ``timeout`` seconds, e.g. while a restarted actor waits for room)."""
        return self.ray.get(
            [a.placement_group_id.remote() for a in [*self.collectors, *self.evaluators]], timeout=timeout
        )

    def actor_node_ids(self, timeout: Optional[float] = None) -> dict[str, list]:
        """Hex Ray node id of each actor: ``{"collectors": [...], "evaluators": [...]}`` (``timeout``:
        as for :meth:`actor_placement_groups`)."""
        ids = self.ray.get([a.node_id.remote() for a in [*self.collectors, *self.evaluators]], timeout=timeout)
        return {"collectors": ids[: len(self.collectors)], "evaluators": ids[len(self.collectors) :]}

    # ------------------------------------------------------------------------------ work

    def _put(self, value: Any) -> Any:
        return self.ray.put(value)

    @property
    def collect_queue_depth(self) -> int:
        """Collects one actor may hold at once: ceil(max_collect_inflight / num_collector_actors).

        1 by default. Above 1 the extra collect waits in the actor's mailbox (Ray runs an actor's
        calls one at a time, in order), so the actor starts it the moment the previous one ends
        instead of waiting for the driver to notice; its snapshot is the newest at launch time.
        """
        return -(-self.cfg.async_pipeline.collect_inflight // len(self.collectors))

    def idle_collectors(self) -> list[int]:
        """Collectors that can take one more collect now (fewer than collect_queue_depth in flight)."""
        in_flight = [0] * len(self.collectors)
        for k, _ in self._collect_refs.values():
            in_flight[k] += 1
        return [k for k, n in enumerate(in_flight) if n < self.collect_queue_depth]

    def launch_collect(
        self, worker_id: int, snapshot: WeightSnapshot, temperature: float, *, epsilon: float = 0.0
    ) -> None:
        actor = self.collectors[worker_id]
        ref = actor.collect.remote(snapshot.version, [self._snapshot_ref(snapshot)], temperature, epsilon)
        self._collect_refs[ref] = (worker_id, actor)
        self._launched_at[ref] = time.monotonic()

    @property
    def collects_in_flight(self) -> int:
        return len(self._collect_refs)

    @property
    def evals_in_flight(self) -> int:
        return len(self._eval_refs)

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        busy = set(self._eval_refs.values())
        idle = [k for k in range(len(self.evaluators)) if k not in busy]
        if not idle:
            return False
        ref = self.evaluators[idle[0]].evaluate.remote([self._snapshot_ref(snapshot)])
        self._eval_refs[ref] = idle[0]
        self._launched_at[ref] = time.monotonic()
        return True

    def collect_ready(self) -> bool:
        if not self._collect_refs:
            return False
        ready, _ = self.ray.wait(list(self._collect_refs), num_returns=1, timeout=0)
        return bool(ready)

    def eval_ready(self) -> bool:
        if not self._eval_refs:
            return False
        ready, _ = self.ray.wait(list(self._eval_refs), num_returns=1, timeout=0)
        return bool(ready)

    def poll(self, timeout_s: float) -> PollResult:
        out = PollResult()
        self._give_up_overdue(out)
        pending = [*self._collect_refs, *self._eval_refs]
        if not pending:
            if timeout_s > 0:
                time.sleep(timeout_s)
            return out
        ready, _ = self.ray.wait(pending, num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = self.ray.wait(pending, num_returns=len(pending), timeout=0)
        for ref in ready:
            self._launched_at.pop(ref, None)
            if ref in self._collect_refs:
                kind, (k, actor) = "collector", self._collect_refs.pop(ref)
            else:
                kind, k = "evaluator", self._eval_refs.pop(ref)
                actor = self.evaluators[k]
            try:
                value = self.ray.get(ref)
            except Exception as e:  # actor died (RayActorError) or raised inside (RayTaskError)
                out.failures.append((kind, k, f"{type(e).__name__}: {e}"))
                if kind == "evaluator" or self.collectors[k] is actor:  # queued collects of a dead actor
                    self._restart(kind, k)  # fail too: restart it only once
                continue
            (out.collects if kind == "collector" else out.evals).append(value)
        return out

    def _give_up_overdue(self, out: PollResult) -> None:
        """async_pipeline.collect_timeout_s / eval_timeout_s: a collect or evaluation in flight for
        longer is given up; its actor is killed and restarted, with every collect queued on it
        (their failures are reported in ``out``, nothing of them is kept)."""
        ap, now = self.cfg.async_pipeline, time.monotonic()
        if ap.collect_timeout_s is not None:
            for ref, (k, actor) in list(self._collect_refs.items()):
                if ref in self._collect_refs and now - self._launched_at.get(ref, now) > ap.collect_timeout_s:
                    for other, (_, same) in list(self._collect_refs.items()):
                        if same is actor:
                            del self._collect_refs[other]
                            self._launched_at.pop(other, None)
                    out.failures.append(
                        (
                            "collector",
                            k,
                            f"CollectTimeout: no result {ap.collect_timeout_s:g} s after "
                            f"its launch (async_pipeline.collect_timeout_s)",
                        )
                    )
                    if self.collectors[k] is actor:
                        self._restart("collector", k)
        if ap.eval_timeout_s is not None:
            for ref, k in list(self._eval_refs.items()):
                if now - self._launched_at.get(ref, now) > ap.eval_timeout_s:
                    del self._eval_refs[ref]
                    self._launched_at.pop(ref, None)
                    out.failures.append(
                        (
                            "evaluator",
                            k,
                            f"EvalTimeout: no result {ap.eval_timeout_s:g} s after "
                            f"its launch (async_pipeline.eval_timeout_s)",
                        )
                    )
                    self._restart("evaluator", k)

    def close(self) -> None:
        actors = [*self.collectors, *self.evaluators]
        refs = []
        for a in actors:
            try:
                refs.append(a.close.remote())
            except Exception:
                pass
        try:
            self.ray.wait(refs, num_returns=len(refs), timeout=self.cfg.async_pipeline.shutdown_timeout_s)
        except Exception:
            pass
        for a in actors:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:
                pass
        self._collect_refs.clear()
        self._eval_refs.clear()
        self._snapshot_refs.clear()
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False


# ---------------------------------------------------------------------------------- ray_local_mode


class LocalObjectRef:
    """A ref into a :class:`LocalObjectStore`; its object is dropped with the last reference to it
    (as Ray frees an object when no ObjectRef to it is left)."""

    __slots__ = ("key", "__weakref__")

    def __init__(self, key: int) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"LocalObjectRef({self.key})"


class LocalObjectStore:
    """In-process stand-in for Ray's object store. ``put`` pickles (protocol 5, numpy buffers out
    of band and copied, as ``ray.put`` does: later writes to the original do not show);
    ``get`` unpickles onto read-only buffers (``ray.get`` gives read-only numpy arrays). So an
    object that Ray could not ship, or code that writes into what it received, fails in local mode
    too. Plain :mod:`pickle`, not cloudpickle: lambdas and classes defined inside functions, which
    cloudpickle ships by value, do not travel here."""

    def __init__(self) -> None:
        self._objects: dict[int, tuple[bytes, list[bytes]]] = {}
        self._next_key = 0
        self.puts = 0
        self.gets = 0

    def put(self, value: Any) -> LocalObjectRef:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        ref = LocalObjectRef(self._next_key)
        self._next_key += 1
        self._objects[ref.key] = (data, [bytes(b.raw()) for b in buffers])
        weakref.finalize(ref, self._objects.pop, ref.key, None)
        self.puts += 1
        return ref

    def get(self, ref: LocalObjectRef) -> Any:
        data, buffers = self._objects[ref.key]
        self.gets += 1
        return pickle.loads(data, buffers=[memoryview(b) for b in buffers])  # bytes: read-only views

    def roundtrip(self, value: Any) -> Any:
        """``get(put(value))``: what the other side of a Ray call would receive."""
        return self.get(self.put(value))

    def __len__(self) -> int:
        return len(self._objects)


class LocalActorBackend(_SnapshotRefs, WorkerBackend):
    """``async_pipeline.ray_local_mode``: the actor classes (:class:`CollectorWorker`,
    :class:`EvaluatorWorker`) run as plain objects in the driver's process, work runs at launch
    (``concurrent = False``: the driver loop is the one of :class:`InProcessBackend`), and every
    argument and result crosses a :class:`LocalObjectStore` as it would cross Ray's: constructor
    arguments and results by pickle round trip, weight snapshots as one stored object per version
    (:func:`_snapshot_to_store` / :func:`_snapshot_from_store`, fetched by a collector only when
    its version changes). Seeds and worker ids are those of :class:`InProcessBackend`; workers
    run on the CPU, and do not touch the process's torch threads or priority (the learner's).
    Failures raise (no restarts): the point is a traceback in one process. Ray is not needed."""

    concurrent = False

    def __init__(self, cfg: Config, *, num_collectors: Optional[int] = None, num_evaluators: int = 1) -> None:
        ap = cfg.async_pipeline
        self.cfg = cfg
        self.store = LocalObjectStore()
        self._snapshot_refs: dict[int, LocalObjectRef] = {}
        self.snapshot_puts = 0
        n = ap.num_collector_actors if num_collectors is None else num_collectors
        cfg_dict = self.store.roundtrip(cfg.to_dict())
        common: dict[str, Any] = {"device": "cpu", "own_process": False, "object_store": self.store}
        self.collectors = [
            CollectorWorker(
                *self.store.roundtrip(
                    (cfg_dict, cfg.seed + COLLECTOR_SEED_STRIDE * k, k, max(1, int(ap.collector_num_cpus)))
                ),
                **common,
            )
            for k in range(n)
        ]
        self.evaluators = [
            EvaluatorWorker(
                *self.store.roundtrip(
                    (cfg_dict, cfg.seed + EVALUATOR_SEED_OFFSET + k, max(1, int(ap.evaluator_num_cpus)))
                ),
                **common,
            )
            for k in range(num_evaluators)
        ]
        self._done = PollResult()

    def _put(self, value: Any) -> LocalObjectRef:
        return self.store.put(value)

    def idle_collectors(self) -> list[int]:
        return list(range(len(self.collectors)))

    def launch_collect(
        self, worker_id: int, snapshot: WeightSnapshot, temperature: float, *, epsilon: float = 0.0
    ) -> None:
        version, box, temperature, epsilon = self.store.roundtrip(
            (snapshot.version, [self._snapshot_ref(snapshot)], temperature, epsilon)
        )
        result = self.collectors[worker_id].collect(version, box, temperature, epsilon)
        self._done.collects.append(self.store.roundtrip(result))

    # work runs at launch; results not yet polled count as "in flight" (as in InProcessBackend)
    @property
    def collects_in_flight(self) -> int:
        return len(self._done.collects)

    @property
    def evals_in_flight(self) -> int:
        return len(self._done.evals)

    def launch_eval(self, snapshot: WeightSnapshot) -> bool:
        box = self.store.roundtrip([self._snapshot_ref(snapshot)])
        self._done.evals.append(self.store.roundtrip(self.evaluators[0].evaluate(box)))
        return True

    def poll(self, timeout_s: float) -> PollResult:
        done, self._done = self._done, PollResult()
        return done

    def close(self) -> None:
        workers: list[CollectorWorker | EvaluatorWorker] = [*self.collectors, *self.evaluators]
        for w in workers:
            w.close()
        self._snapshot_refs.clear()
