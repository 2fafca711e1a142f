"""GPU wiring, checked on a CPU machine: an actor whose Ray bundle reserves a GPU builds its
policy on ``cuda`` (it used to reserve the GPU and run on the CPU), and says so clearly when torch
sees no GPU."""

from __future__ import annotations

import types

import pytest
import torch

from lz_tune.config import Config
from lz_tune.pipeline import ray_backend
from lz_tune.pipeline.ray_backend import CollectorWorker, EvaluatorWorker, RayBackend, actor_device


class _FakeRay:
    """Records the constructor arguments of every actor the backend would start."""

    def __init__(self):
        self.started = []

    def remote(self, cls):
        fake = self

        class _Cls:
            @staticmethod
            def options(**opts):
                return types.SimpleNamespace(remote=lambda *args: fake.started.append((cls, opts, args)))

        return _Cls


def _backend(**ap):
    cfg = Config().with_updates({f"async_pipeline.{k}": v for k, v in ap.items()})
    fake = types.SimpleNamespace(cfg=cfg, _cfg_dict=cfg.to_dict(), _spawn_count=0, ray=_FakeRay(), _pg=None)
    fake._options = types.MethodType(RayBackend._options, fake)
    return fake


def test_actor_device_follows_the_reserved_gpus():
    assert actor_device(0.0) == "cpu" and actor_device(0.25) == "cuda" and actor_device(1) == "cuda"


@pytest.mark.parametrize("gpus,device", [(0.0, "cpu"), (0.5, "cuda")])
def test_collectors_and_evaluators_get_the_device_of_their_bundle(gpus, device):
    fake = _backend(collector_num_gpus=gpus, evaluator_num_gpus=gpus)
    RayBackend._make_collector(fake, 0)
    RayBackend._make_evaluator(fake, 0)
    (c_cls, c_opts, c_args), (e_cls, e_opts, e_args) = fake.ray.started
    assert c_cls is CollectorWorker and c_opts["num_gpus"] == gpus and c_args[-1] == device
    assert e_cls is EvaluatorWorker and e_opts["num_gpus"] == gpus and e_args[-1] == device


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_a_gpu_actor_without_cuda_fails_with_a_clear_error():
    cfg = Config().with_updates({"mcts.num_simulations": 2, "model.latent_dim": 8, "model.hidden_sizes": (8,)})
    with pytest.raises(RuntimeError, match="collector_num_gpus"):
        CollectorWorker(cfg.to_dict(), 0, 0, 1, "cuda")
    with pytest.raises(RuntimeError, match="evaluator_num_gpus"):
        EvaluatorWorker(cfg.to_dict(), 0, 1, "cuda")
    assert ray_backend.actor_device(0) == "cpu"
