"""The learner group's process group and placement (lz_tune/parallel/group.py) and the Ray
internals lz-tune relies on.

- ranks as Ray Train's executor orders them (node, then GPU id), one ``CUDA_VISIBLE_DEVICES``
  per node, each rank on its own GPU; bad placements refused;
- the backend string: composite ``cpu:gloo,cuda:nccl`` for GPU ranks, ``cpu:gloo`` on CPU; the
  workers' process group really is the composite one, and every collective the package issues
  (DDP's gradients, the unused-parameter probe, GlobalBatchNorm, UniZero's all-reduces) runs on
  tensors on the parameters' device (the equivalence tests in test_parallel_learner.py);
- a worker that dies: the error names it and the group closes at once (no wait for a
  collective that will never finish);
- canary: the one Ray internal the package calls still exists in the Ray installed, and no
  module reaches below Ray's public API otherwise.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import time

import pytest

from lz_tune.parallel.group import WorkerPlacement, assign_ranks, process_group_backend


def _p(node: str, *gpus: str, pid: int = 1) -> WorkerPlacement:
    return WorkerPlacement(node_id=node, node_ip=f"10.0.0.{node[-1]}", pid=pid, gpu_ids=tuple(gpus))


def test_ranks_are_sorted_by_node_then_gpu_and_share_one_visible_devices_list_per_node():
    placements = [_p("node-b", "3"), _p("node-a", "1"), _p("node-b", "0"), _p("node-a", "0")]
    ranks = assign_ranks(placements)
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    assert [r.actor_index for r in ranks] == [3, 1, 2, 0]  # node-a gpu 0, node-a gpu 1, node-b 0, node-b 3
    assert [r.cuda_visible_devices for r in ranks] == ["0,1", "0,1", "0,3", "0,3"]
    assert [r.local_device for r in ranks] == [0, 1, 0, 1]  # node-b's GPU 3 is cuda:1 among "0,3"


def test_gpu_ids_sort_as_numbers_and_cpu_ranks_get_no_device():
    ranks = assign_ranks([_p("n1", "10"), _p("n1", "2")])
    assert [r.actor_index for r in ranks] == [1, 0] and ranks[0].cuda_visible_devices == "2,10"
    cpu = assign_ranks([_p("n2"), _p("n1")])
    assert [r.actor_index for r in cpu] == [1, 0]
    assert all(r.cuda_visible_devices is None and r.local_device is None for r in cpu)


def test_a_rank_with_two_gpus_or_a_gpu_given_twice_is_refused():
    with pytest.raises(ValueError, match="one GPU per rank"):
        assign_ranks([_p("n1", "0", "1")])
    with pytest.raises(ValueError, match="GPU 0 of node n1 was given to two"):
        assign_ranks([_p("n1", "0"), _p("n1", "0")])


def test_backend_string_is_the_composite_form():
    assert process_group_backend(1.0) == "cpu:gloo,cuda:nccl"
    assert process_group_backend(0.0) == "cpu:gloo"


def _every_collective_kind() -> None:
    """All-reduce (sum, max), GlobalBatchNorm's differentiable all-reduce and DDP's gradient hook
    on the current one-rank process group; every object holding the group is freed on return."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from lz_tune.parallel.sync_batchnorm import convert_to_global_batchnorm
    from lz_tune.parallel.worker import DataParallelCollective, _Forward

    net = convert_to_global_batchnorm(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)))
    collective = DataParallelCollective(DistributedDataParallel(_Forward(net)), rank=0, world_size=1)
    collective.loss_scale = 0.5
    x = torch.randn(6, 3)
    (loss,) = collective.run_forward(lambda: (net(x).pow(2).mean(),))
    loss.backward()
    expected = net(x).pow(2).mean().item() * 0.5
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert all(p.grad is not None for p in net.parameters())
    t = torch.tensor([1.0, 5.0])
    assert collective.all_reduce(t, "max").tolist() == [1.0, 5.0]
    assert collective.all_reduce(t, "sum") is not t


def test_composite_backend_runs_every_collective_kind_on_cpu_tensors():
    """A one-rank process group of the CPU ranks' backend string: all-reduce (sum, max), the
    differentiable all-reduce of GlobalBatchNorm and DDP's gradient hook all run on it. DDP's
    reducer is freed before the group is destroyed: freed after it, gloo's destructor can wait
    forever for its worker threads (seen once in a full run)."""
    import gc

    import torch.distributed as dist

    dist.init_process_group(process_group_backend(0.0), store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "cpu:gloo" or "gloo" in str(dist.get_backend())
        _every_collective_kind()
    finally:
        gc.collect()
        dist.destroy_process_group()


def test_learner_workers_use_the_composite_backend_and_close_fast_after_a_worker_dies(ray_cluster, tiny_cfg):
    from lz_tune.parallel import make_learner
    from lz_tune.parallel.group import LearnerWorkerError
    from lz_tune.workers import env_spec_for

    cfg = tiny_cfg("learner.num_workers=2", "learner.worker_num_cpus=0.5")
    learner = make_learner(cfg, env_spec_for(cfg))
    learner.start()
    try:
        group = learner.group
        backends = group.apply(lambda _: __import__("torch.distributed").distributed.get_backend())
        assert all("gloo" in str(b) for b in backends), backends
        # ranks' random streams differ (seed + rank: dropout masks differ per shard)
        draws = group.apply(lambda _: __import__("torch").rand(1).item())
        assert draws[0] != draws[1]
        os.kill(group.metadata[1].pid, signal.SIGKILL)
        with pytest.raises(LearnerWorkerError, match="learner worker 1"):
            group.get([w.state_dict.remote() for w in group.workers], "state_dict", timeout=60)
        assert group.failed
        start = time.monotonic()
        learner.close()
        assert time.monotonic() - start < 10.0  # no wait for the survivor's collective
    finally:
        learner.close()


def test_a_failure_names_the_worker_that_died_even_when_its_peer_raised_first(ray_cluster):
    """A killed rank makes its peer's collective raise (gloo: "Connection closed by peer"), often
    before Ray reports the death; the error must still name the rank that died, then the peer."""
    import ray

    from lz_tune.parallel.group import LearnerGroup, LearnerWorkerError

    @ray.remote(num_cpus=0.1)
    class Rank:
        def peer_of_the_dead(self) -> None:
            time.sleep(0.2)
            raise RuntimeError("Connection closed by peer [127.0.0.1]:1234")

        def dies(self) -> None:
            time.sleep(1.5)
            os._exit(1)

    ranks = [Rank.remote(), Rank.remote()]
    group = object.__new__(LearnerGroup)  # only what get() reads: the ray module and the failed flag
    group.ray, group._failed = ray, False
    with pytest.raises(LearnerWorkerError) as caught:
        group.get([ranks[0].peer_of_the_dead.remote(), ranks[1].dies.remote()], "update 3", timeout=60)
    message = str(caught.value)
    assert message.startswith("learner worker 1 died during update 3"), message
    assert "then learner worker 0 failed during update 3: RuntimeError: Connection closed by peer" in message
    assert isinstance(caught.value.__cause__, ray.exceptions.RayActorError)
    assert group.failed
    ray.kill(ranks[0])


# ---------------------------------------------------------------------------------- Ray internals

#: the Ray internals lz_tune calls, each with why: this test fails the day one moves
RAY_INTERNALS = {
    "ray._raylet": "Config.initialize: re-read RAY_AUTH_MODE after import (lz_tune/ray_auth.py)",
}


def test_the_ray_internals_lz_tune_calls_still_exist():
    import importlib

    raylet = importlib.import_module("ray._raylet")
    assert callable(getattr(getattr(raylet, "Config", None), "initialize", None)), RAY_INTERNALS["ray._raylet"]
    from ray.tune.search.sample import Domain  # the search-space types lz_tune's Tune spaces check

    assert isinstance(Domain, type)


def test_no_module_reaches_below_rays_public_api_except_the_listed_ones():
    root = pathlib.Path(__file__).resolve().parents[1] / "lz_tune"
    pattern = re.compile(r"\bray\.(?:[a-z_]+\.)*_[a-z]\w*")
    found = {}
    for path in root.rglob("*.py"):
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if ("import" in code or "modules.get" in code) and (m := pattern.search(code)):
                found.setdefault(m.group(0), []).append(str(path.relative_to(root)))
    assert set(found) <= set(RAY_INTERNALS), found
