"""Data-parallel learner (``learner.num_workers >= 2``, lz_tune/parallel/).

- the shard split and its loss scaling reproduce the global loss exactly, for uneven shards;
- GlobalBatchNorm over two gloo processes equals one BatchNorm over the whole batch (outputs,
  gradients, running statistics);
- N = 2 learner workers against the in-process learner on the same ten global batches: priorities,
  weights, target weights and optimizer state equal to float tolerance, for an MLP whose BatchNorm
  is unused (ssl off) and for one whose projector BatchNorm runs with ``learner.sync_batchnorm``;
  the same comparison with the shards' loss scaling removed fails; the IS weights are not uniform;
- bad input: clear errors naming the key before any learner worker starts.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

from lz_tune.buffer import SampledIndex, TrainBatch
from lz_tune.config import ConfigError
from lz_tune.parallel.shards import merge_logs, shard_bounds, shard_loss_scales, split_batch


def _batch(b: int, u: int = 2, seed: int = 0) -> TrainBatch:
    rng = np.random.default_rng(seed)
    index = SampledIndex(
        segment_ids=np.arange(b),
        positions=np.zeros(b, np.int64),
        weights=rng.uniform(0.2, 1.0, b).astype(np.float32),
        make_time=3,
    )
    return TrainBatch(
        obs=rng.normal(size=(b, u + 1, 4)).astype(np.float32),
        actions=rng.integers(0, 2, (b, u)),
        target_value=rng.normal(size=(b, u + 1)).astype(np.float32),
        target_reward=rng.normal(size=(b, u)).astype(np.float32),
        target_policy=np.full((b, u + 1, 2), 0.5, np.float32),
        mask=np.ones((b, u + 1), np.float32),
        weights=index.weights.copy(),
        to_play=np.full((b, u + 1), -1),
        action_mask=np.ones((b, u + 1, 2), bool),
        timesteps=np.zeros((b, u + 1), np.int64),
        index=index,
        num_reanalyzed=5,
        extras={"x": np.arange(b * 3).reshape(b, 3)},
    )


def test_shard_bounds_cover_the_batch_with_sizes_differing_by_at_most_one():
    assert shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert shard_bounds(8, 2) == [(0, 4), (4, 8)]
    with pytest.raises(ValueError, match="num_workers"):
        shard_bounds(2, 3)


@pytest.mark.parametrize("b,n", [(15, 2), (10, 3), (16, 4), (7, 7)])
def test_scaled_shard_losses_average_to_the_global_loss(b, n):
    batch = _batch(b)
    per_sample = np.random.default_rng(1).uniform(0, 3, b)
    shards = split_batch(batch, n)
    scales = shard_loss_scales([len(s) for s in shards])
    starts = [s for s, _ in shard_bounds(b, n)]
    ddp_mean = np.mean(
        [
            sc * np.mean(s.weights.astype(np.float64) * per_sample[st : st + len(s)])
            for s, sc, st in zip(shards, scales, starts)
        ]
    )
    assert ddp_mean == pytest.approx(np.mean(batch.weights.astype(np.float64) * per_sample), rel=1e-12)
    # the IS weights travel as sampled (the scale is a float64 number on each rank's loss)
    assert np.array_equal(np.concatenate([s.weights for s in shards]), batch.weights)
    assert all(isinstance(sc, float) for sc in scales)
    # rows, index and extras follow the rows; num_reanalyzed counts inside each shard
    assert np.array_equal(np.concatenate([s.obs for s in shards]), batch.obs)
    assert np.array_equal(np.concatenate([s.index.segment_ids for s in shards]), batch.index.segment_ids)
    assert np.array_equal(np.concatenate([s.extras["x"] for s in shards]), batch.extras["x"])
    assert sum(s.num_reanalyzed for s in shards) == batch.num_reanalyzed
    assert all(s.index.make_time == 3 for s in shards)


def test_merge_logs_weights_per_sample_means_by_shard_size_and_averages_the_global_loss():
    logs = [{"loss/total": 2.0, "loss/value": 1.0}, {"loss/total": 4.0, "loss/value": 4.0}]
    merged = merge_logs(logs, [3, 1])
    assert merged["loss/total"] == pytest.approx(3.0)
    assert merged["loss/value"] == pytest.approx((3 * 1.0 + 4.0) / 4)


# ---------------------------------------------------------------------------------- GlobalBatchNorm


def _bn_rank(rank: int, world: int, port: int, x: torch.Tensor, grad_out: torch.Tensor, bounds, out_dir: str):
    import torch.distributed as dist

    from lz_tune.parallel.sync_batchnorm import convert_to_global_batchnorm

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    net = convert_to_global_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm2d(3)))
    start, stop = bounds[rank]
    xs = x[start:stop].clone().requires_grad_(True)
    out = net(xs)
    # the global objective sum(out * grad_out) / world per rank, as DDP's gradient mean
    (out * grad_out[start:stop]).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    for g in grads:
        dist.all_reduce(g)
    torch.save(
        {"out": out.detach(), "xgrad": xs.grad, "pgrad": grads, "state": net.state_dict()},
        os.path.join(out_dir, f"rank{rank}.pt"),
    )
    dist.barrier()
    dist.destroy_process_group()


def test_global_batchnorm_over_two_processes_equals_batchnorm_on_the_whole_batch(tmp_path):
    import socket

    import torch.multiprocessing as mp

    torch.manual_seed(3)
    x = torch.randn(7, 3, 4, 4) * 2 + 1
    grad_out = torch.randn(7, 3, 4, 4)
    bounds = [(0, 4), (4, 7)]  # uneven shards
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_bn_rank, args=(2, port, x, grad_out, bounds, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]

    torch.manual_seed(0)
    ref = torch.nn.BatchNorm2d(3)
    xr = x.clone().requires_grad_(True)
    out = ref(xr)
    (out * grad_out).sum().backward()
    torch.testing.assert_close(torch.cat([r["out"] for r in ranks]), out.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat([r["xgrad"] for r in ranks]), xr.grad, rtol=1e-5, atol=1e-5)
    for r in ranks:
        for got, want in zip(r["pgrad"], [ref.weight.grad, ref.bias.grad]):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for key, value in ref.state_dict().items():
            torch.testing.assert_close(r["state"][f"0.{key}"], value, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------- N = 2 vs N = 1


def _filled_buffer(cfg):
    """A sync Driver that only collects (no update before 10^9 env steps): its buffer and spec."""
    from lz_tune.pipeline.driver import Driver

    collect_only = cfg.with_overrides(
        [
            "learner.train_start_after_envsteps=1000000000",
            "max_env_step=300",
            "learner.num_workers=1",
            "learner.sync_batchnorm=False",
        ]
    )
    driver = Driver(collect_only, print_fn=None)
    driver.run()
    driver.close()
    return driver


def _assert_state_close(a, b, rtol, atol):
    for key in ("network", "target_network"):
        assert a[key].keys() == b[key].keys()
        for name in a[key]:
            torch.testing.assert_close(
                b[key][name], a[key][name], rtol=rtol, atol=atol, msg=lambda m, k=f"{key}.{name}": f"{k}: {m}"
            )
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for pid in sa:
        for slot, value in sa[pid].items():
            if torch.is_tensor(value):
                torch.testing.assert_close(
                    sb[pid][slot], value, rtol=rtol, atol=atol, msg=lambda m, k=f"optimizer {pid}.{slot}": f"{k}: {m}"
                )
    assert a["train_iter"] == b["train_iter"]


def _compare(cfg, learner, batches, *, rtol=1e-5, atol=1e-7):
    """One in-process learner and ``learner`` (N workers), both from the same state, over
    ``batches``: priorities after each update, then the whole learner state. Both in float64:
    in float32 the summation order of a shard flips near-ties in the latent's min-max
    normalisation (its gradient goes to the arg-max element) and Adam scales the float noise of
    gradients that are 0 in exact arithmetic (a bias before a BatchNorm) up to steps of ~lr, so
    two float32 runs of one process drift apart over ten updates as well."""
    from lz_tune.algos import get_algorithm
    from lz_tune.parallel.learner import mirror_config

    reference = get_algorithm(cfg.policy_type).make_learner(mirror_config(cfg), learner._spec)
    from lz_tune.parallel.worker import to_float64

    to_float64(reference)
    learner.group.apply(to_float64)
    reference.load_state_dict(learner.state_dict())
    # PER's importance weights are part of what is compared: they must not be uniform
    assert any(np.ptp(b.weights) > 0.05 for b in batches), "the batches' IS weights are all equal"
    batches = [dataclasses.replace(b, obs=b.obs.astype(np.float64)) for b in batches]
    for i, batch in enumerate(batches):
        logs_a, prio_a = reference.learn(batch, train_iter=reference.train_iter)
        logs_b, prio_b = learner.learn(batch, train_iter=learner.train_iter)
        np.testing.assert_allclose(prio_b, prio_a, rtol=rtol, atol=atol, err_msg=f"priorities of update {i}")
        assert logs_b["loss/total"] == pytest.approx(logs_a["loss/total"], rel=rtol, abs=atol), f"loss of update {i}"
        assert logs_b["loss/value"] == pytest.approx(logs_a["loss/value"], rel=rtol, abs=atol)
    _assert_state_close(reference.state_dict(), learner.state_dict(), rtol, atol)


def _data_parallel(cfg, driver):
    from lz_tune.parallel import make_learner

    learner = make_learner(cfg, driver.spec)
    learner.start()
    return learner


def _ten_batches(cfg, driver):
    rng = np.random.default_rng(0)
    # spread the priorities (new data starts at the buffer's max priority: uniform IS weights
    # would leave the shards' weighting unchecked)
    for _ in range(4):
        index = driver.buffer.sample(64)
        driver.buffer.update_priorities(index, rng.uniform(0.05, 3.0, 64).astype(np.float32))
    batches = []
    for _ in range(10):
        index = driver.buffer.sample(cfg.learner.batch_size)
        batches.append(driver.learner.make_batch(driver.buffer, index, rng=rng))
    return batches


@pytest.fixture(scope="module")
def equivalence_cfg(tiny_cfg):
    # an uneven global batch (8 + 7): the IS-weight scaling matters
    return tiny_cfg(
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
        "learner.batch_size=15",
        "learner.target_update_freq=4",
        "learner.learning_rate=0.05",
    )


def test_two_workers_equal_one_process_on_ten_batches_without_batchnorm(ray_cluster, equivalence_cfg, monkeypatch):
    cfg = equivalence_cfg.with_overrides(["learner.ssl_loss_weight=0"])  # the projector's BatchNorm unused
    driver = _filled_buffer(cfg)
    batches = _ten_batches(cfg, driver)
    learner = _data_parallel(cfg, driver)
    try:
        initial = learner.state_dict()
        _compare(cfg, learner, batches)

        # the same with the shards' loss scaling removed: DDP's mean of shard means is not the
        # global mean for uneven shards, and the comparison catches it
        import lz_tune.parallel.learner as parallel_learner

        monkeypatch.setattr(parallel_learner, "shard_loss_scales", lambda sizes: [1.0] * len(sizes))
        learner.load_state_dict(initial)
        with pytest.raises(AssertionError):
            _compare(cfg, learner, batches)
    finally:
        learner.close()


def test_two_workers_with_sync_batchnorm_equal_one_process_on_ten_batches(ray_cluster, equivalence_cfg):
    # SGD: the projector's last BatchNorm bias feeds the predictor's BatchNorm, so its gradient is 0
    # in exact arithmetic and rounding noise otherwise; Adam scales that noise up to steps of ~lr/10
    # (in one process as in two), SGD keeps it at the noise level. A step size of 0.02: at 0.1 this
    # network's normalisations amplify float64 rounding (1e-15) ~100x per update, past any tolerance
    # in ten updates, in one process against itself with another summation order as well.
    # Uneven shards (8 + 7): the shards' loss scale 16/15, 14/15 matters.
    cfg = equivalence_cfg.with_overrides(
        [
            "learner.ssl_loss_weight=2.0",
            "learner.sync_batchnorm=True",
            "learner.optim_type=sgd",
            "learner.learning_rate=0.02",
        ]
    )
    driver = _filled_buffer(cfg)
    from lz_tune.parallel.sync_batchnorm import has_batchnorm

    assert has_batchnorm(driver.learner.policy.network)  # the SSL projector's BatchNorm1d runs in every update
    batches = _ten_batches(cfg, driver)
    learner = _data_parallel(cfg, driver)
    try:
        _compare(cfg, learner, batches, atol=1e-6)
    finally:
        learner.close()


def test_two_unizero_workers_with_encoder_clip_and_adaptive_alpha_equal_one_process(ray_cluster, equivalence_cfg):
    """UniZero's steps decided by statistics of the batch (the encoder clip by the largest latent
    norm, the adaptive alpha by the mean entropy) are taken on the whole batch's statistics by
    every worker: the same ten updates as one process, alpha included, with the clip threshold
    falling 4.5 -> 2 (latent norms ~4) so that it clips at every update."""
    cfg = equivalence_cfg.with_overrides(
        [
            "policy_type=unizero",
            "unizero.embed_dim=16",
            "unizero.num_heads=2",
            "unizero.infer_context_length=2",
            "unizero.use_encoder_clip_annealing=true",
            "unizero.encoder_clip_anneal_type=linear",
            "unizero.encoder_clip_start_value=4.5",
            "unizero.encoder_clip_end_value=2",
            "unizero.encoder_clip_anneal_steps=10",
            "unizero.use_adaptive_entropy_weight=true",
            "unizero.adaptive_entropy_alpha_lr=0.1",
            "unizero.monitor_norm_freq=4",
            # SGD: the zero-initialised policy head's hidden layer gets gradients of ~0, whose float
            # noise Adam would scale up to steps of ~lr (see the sync_batchnorm test)
            "learner.optim_type=sgd",
            "learner.learning_rate=0.1",
        ]
    )
    driver = _filled_buffer(cfg)
    batches = _ten_batches(cfg, driver)
    learner = _data_parallel(cfg, driver)
    try:
        _compare(cfg, learner, batches)
        from lz_tune.algos import get_algorithm

        one = get_algorithm("unizero").make_learner(cfg, driver.spec)
        one.load_state_dict(learner.state_dict())
        assert float(one.log_alpha.detach()) < -0.5  # ten steps of lr 0.1 down from 0: alpha moved and was carried
    finally:
        learner.close()


def test_a_two_worker_state_restores_into_three_workers_with_one_process_s_next_updates(ray_cluster, equivalence_cfg):
    """Five updates on 2 workers, their state into 3 workers (shards of 5 + 5 + 5) and into one
    process: the next five updates agree (float64), so a run restores onto another worker count."""
    cfg = equivalence_cfg.with_overrides(["learner.ssl_loss_weight=0"])
    driver = _filled_buffer(cfg)
    batches = _ten_batches(cfg, driver)
    two = _data_parallel(cfg, driver)
    try:
        from lz_tune.parallel.worker import to_float64

        two.group.apply(to_float64)
        for batch in batches[:5]:
            two.learn(dataclasses.replace(batch, obs=batch.obs.astype(np.float64)), train_iter=two.train_iter)
        state = two.state_dict()
    finally:
        two.close()
    assert state["train_iter"] == 5
    three = _data_parallel(cfg.with_overrides(["learner.num_workers=3"]), driver)
    try:
        three.group.apply(to_float64)
        three.load_state_dict(state)
        assert three.train_iter == 5
        _compare(cfg, three, batches[5:])
    finally:
        three.close()


# ---------------------------------------------------------------------------------- bad input


def test_config_errors_name_the_key(tiny_cfg):
    with pytest.raises(ConfigError, match="learner.num_workers"):
        tiny_cfg("learner.num_workers=0")
    with pytest.raises(ConfigError, match="learner.num_workers"):
        tiny_cfg("learner.num_workers=17")  # more workers than samples in a batch of 16
    with pytest.raises(ConfigError, match="learner.sync_batchnorm"):
        tiny_cfg("learner.sync_batchnorm=True")  # one worker: nothing to synchronise
    with pytest.raises(ConfigError, match="learner.worker_num_gpus"):
        tiny_cfg("learner.num_workers=2", "learner.worker_num_gpus=1")  # learner.device=cpu
    with pytest.raises(ConfigError, match="learner.worker_num_gpus.*whole GPU"):
        tiny_cfg("learner.num_workers=2", "learner.device='cuda'", "learner.worker_num_gpus=0.5")
    with pytest.raises(ConfigError, match="learner.worker_num_gpus.*raise learner.num_workers"):
        tiny_cfg("learner.num_workers=2", "learner.device='cuda'", "learner.worker_num_gpus=2")


def test_global_batchnorm_with_momentum_none_keeps_a_cumulative_average_as_torch_does():
    """One process (no process group: the layer is a BatchNorm), and the same layer forced onto
    the global path with a one-rank group: running statistics follow torch's cumulative average."""
    import torch.distributed as dist

    from lz_tune.parallel.sync_batchnorm import convert_to_global_batchnorm

    torch.manual_seed(1)
    ref = torch.nn.BatchNorm1d(4, momentum=None)
    net = convert_to_global_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(4, momentum=None)))
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        for _ in range(3):
            x = torch.randn(8, 4) * 3 + 2
            ref(x)
            net(x)
    finally:
        dist.destroy_process_group()
    layer = net[0]
    torch.testing.assert_close(layer.running_mean, ref.running_mean)
    torch.testing.assert_close(layer.running_var, ref.running_var)
    assert int(layer.num_batches_tracked) == 3


def test_sync_batchnorm_on_a_network_without_batchnorm_fails_before_any_worker(tiny_cfg, monkeypatch):
    from lz_tune.parallel import group
    from lz_tune.pipeline.driver import Driver

    def no_workers(*a, **k):
        raise AssertionError("a learner worker was started")

    monkeypatch.setattr(group, "LearnerGroup", no_workers)
    # an MLP network's only BatchNorm is in the SSL projector; UniZero's transformer has none
    cfg = tiny_cfg("policy_type=unizero", "learner.num_workers=2", "learner.sync_batchnorm=True")
    from lz_tune.algos import get_algorithm
    from lz_tune.parallel.sync_batchnorm import has_batchnorm
    from lz_tune.workers import env_spec_for

    assert not has_batchnorm(
        get_algorithm("unizero")
        .make_learner(cfg.with_overrides(["learner.num_workers=1", "learner.sync_batchnorm=False"]), env_spec_for(cfg))
        .policy.network
    )
    with pytest.raises(ConfigError, match="learner.sync_batchnorm"):
        Driver(cfg, print_fn=None)


def test_more_gpus_per_worker_than_the_cluster_has_is_refused_naming_the_key(tiny_cfg):
    from lz_tune.parallel.group import check_cluster_fits

    cfg = tiny_cfg("learner.num_workers=3", "learner.device='cuda'", "learner.worker_num_gpus=1")
    with pytest.raises(ConfigError, match="learner.worker_num_gpus: .*no node"):
        check_cluster_fits(cfg, [{"CPU": 8.0}, {"CPU": 8.0}])
    with pytest.raises(ConfigError, match="learner.num_workers / learner.worker_num_gpus: 3 workers x 1 GPU"):
        check_cluster_fits(cfg, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}])
    check_cluster_fits(cfg, [{"CPU": 8.0, "GPU": 2.0}, {"CPU": 8.0, "GPU": 1.0}])
    with pytest.raises(ConfigError, match="learner.num_workers / learner.worker_num_cpus"):
        check_cluster_fits(tiny_cfg("learner.num_workers=4", "learner.worker_num_cpus=1"), [{"CPU": 2.0}])
    check_cluster_fits(tiny_cfg("learner.num_workers=2", "learner.worker_num_cpus=1"), [{"CPU": 2.0}])


def test_learner_workers_and_async_actors_that_exceed_the_cluster_together_are_refused(tiny_cfg):
    """Each fits, together they do not: the run would wait for the learner placement forever (a
    Ray started before the run, e.g. by a notebook, with fewer CPUs than the run asks for)."""
    from lz_tune.parallel.group import check_cluster_fits

    run = (
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
        "async_pipeline.num_collector_actors=2",
        "async_pipeline.collector_num_cpus=0.5",
        "async_pipeline.evaluator_num_cpus=0.5",
    )
    with pytest.raises(
        ConfigError,
        match=r"learner.num_workers / learner.worker_num_cpus with async_pipeline.*"
        r"ask for 2.5 CPU, but the cluster has 2 CPU",
    ):
        check_cluster_fits(tiny_cfg(*run, "async_pipeline.enabled=True"), [{"CPU": 2.0}])
    check_cluster_fits(tiny_cfg(*run, "async_pipeline.enabled=True"), [{"CPU": 2.0}, {"CPU": 1.0}])
    check_cluster_fits(tiny_cfg(*run), [{"CPU": 2.0}])  # sync: no collector or evaluator actors


# ---------------------------------------------------------------------------------- prepared ahead


def _batches_of_first_budget(cfg):
    """The (segment ids, positions, target values) of every batch the driver trains on in its
    first train budget, and how many it built while the previous update ran."""
    from lz_tune.pipeline.driver import Driver

    driver = Driver(cfg, print_fn=None)
    seen = []
    sample = driver._sample_batch

    def recording():
        index, batch = sample()
        values = getattr(batch, "target_value", None)  # (none when the ranks build the targets)
        seen.append((index.segment_ids.copy(), index.positions.copy(), None if values is None else values.copy()))
        return index, batch

    driver._sample_batch = recording
    try:
        driver.run()
        return seen, driver.batches_prepared_ahead
    finally:
        driver.close()


def test_batches_prepared_ahead_are_the_batches_of_the_in_order_run(ray_cluster, tiny_cfg):
    """Without PER, the driver builds the next batch while two workers run the current update,
    except across a target-network refresh (every 2nd update here): the batches are those of the
    in-process learner, bootstrap values included (a batch prepared across the refresh would
    carry the old target network's values). Where the ranks build the targets at the update
    (``learner.targets_on_workers``, the default), batches are prepared across refreshes too."""
    cfg = tiny_cfg(
        "buffer.use_priority=False",
        "learner.target_update_freq=2",
        "learner.update_per_collect=6",
        "max_train_iter=6",
        "evaluator.eval_freq=100",
    )
    in_order, ahead_1 = _batches_of_first_budget(cfg)
    two = ["learner.num_workers=2", "learner.worker_num_cpus=0.5", "learner.sync_batchnorm=True"]
    parallel, ahead_2 = _batches_of_first_budget(cfg.with_overrides([*two, "learner.targets_on_workers=False"]))
    # the updates 0 -> 1, 2 -> 3 and 4 -> 5 leave the target network as it is: batches 1, 3 and 5 were
    # built while they ran; 1 -> 2 and 3 -> 4 refresh it, so batches 2 and 4 waited for them
    assert ahead_1 == 0 and ahead_2 == 3
    assert len(in_order) == len(parallel) == 6
    for (s1, p1, v1), (s2, p2, v2) in zip(in_order, parallel):
        assert np.array_equal(s1, s2) and np.array_equal(p1, p2)
        np.testing.assert_allclose(v2, v1, rtol=1e-5, atol=1e-6)
    # targets on the ranks: every batch but the first of a train chunk (max_train_chunk_steps=4: updates
    # 0-3, 4-5) is prepared while the previous update runs, and the same positions are drawn (the ranks'
    # targets are checked in tests/test_rank_targets.py)
    on_ranks, ahead_3 = _batches_of_first_budget(cfg.with_overrides(two))
    assert ahead_3 == 4
    for (s1, p1, _), (s3, p3, _) in zip(in_order, on_ranks):
        assert np.array_equal(s1, s3) and np.array_equal(p1, p3)


@pytest.mark.slow
def test_with_per_batches_are_prepared_ahead_only_when_the_lag_is_allowed(ray_cluster, tiny_cfg):
    cfg = tiny_cfg(
        "buffer.use_priority=True",
        "learner.target_update_freq=2",
        "learner.update_per_collect=6",
        "max_train_iter=6",
        "evaluator.eval_freq=100",
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
    )
    seen, ahead = _batches_of_first_budget(cfg)
    assert len(seen) == 6 and ahead == 0  # PER: the next sample waits for the current priorities
    seen, ahead = _batches_of_first_budget(cfg.with_overrides(["learner.prepare_ahead_with_lag=True"]))
    # every batch but the first of a train chunk (updates 0-3, 4-5): the ranks build the targets at
    # the update, so a target refresh does not hold a batch back
    assert len(seen) == 6 and ahead == 4
    seen, ahead = _batches_of_first_budget(
        cfg.with_overrides(["learner.prepare_ahead_with_lag=True", "learner.targets_on_workers=False"])
    )
    assert len(seen) == 6 and ahead == 3  # the driver builds them: not across the refreshes after updates 1 and 3


def test_a_gpu_worker_on_a_cluster_without_gpus_is_refused_before_any_actor(ray_cluster, tiny_cfg, monkeypatch):
    from lz_tune.parallel import group
    from lz_tune.pipeline import driver as driver_module

    started = []
    monkeypatch.setattr(driver_module, "make_backend", lambda cfg: started.append("collectors"))
    monkeypatch.setattr(group, "LearnerGroup", lambda *a, **k: started.append("learner workers"))
    cfg = tiny_cfg(
        "learner.num_workers=2", "learner.device=cuda", "learner.worker_num_gpus=1", "async_pipeline.enabled=True"
    )
    with pytest.raises(ConfigError, match="learner.worker_num_gpus"):
        driver_module.Driver(cfg, print_fn=None)
    assert started == []


def test_an_update_sent_ahead_gives_the_in_order_run_s_weights(ray_cluster, tiny_cfg, monkeypatch):
    """Sync pipeline, targets on the ranks, no PER: the next update goes to the workers before the
    current one returns (two in flight); the first budget's sampled positions and the learner state
    after it are those of the run that waits for every update."""
    from lz_tune.pipeline.driver import Driver

    cfg = tiny_cfg(
        "buffer.use_priority=False",
        "learner.target_update_freq=2",
        "learner.update_per_collect=6",
        "max_train_iter=6",
        "evaluator.eval_freq=100",
        "learner.num_workers=2",
        "learner.worker_num_cpus=0.5",
    )

    def first_budget():
        driver = Driver(cfg, print_fn=None)
        try:
            seen = []
            sample = driver._sample_batch

            def recording():
                index, batch = sample()
                seen.append((index.segment_ids.copy(), index.positions.copy()))
                return index, batch

            driver._sample_batch = recording
            driver.run()
            return seen, driver.updates_sent_ahead, driver.learner.state_dict()
        finally:
            driver.close()

    seen_a, ahead, state_a = first_budget()
    assert ahead == 4  # every update but the first of a train chunk (updates 0-3, 4-5)
    monkeypatch.setattr(Driver, "_may_send_ahead", lambda self: False)
    seen_b, none, state_b = first_budget()
    assert none == 0 and len(seen_a) == len(seen_b) == 6
    for (s1, p1), (s2, p2) in zip(seen_a, seen_b):
        assert np.array_equal(s1, s2) and np.array_equal(p1, p2)
    _assert_state_close(state_a, state_b, rtol=1e-6, atol=1e-7)
