"""The update of an unrolled-model learner, and its optimizer state: shared by MuZero's
(:class:`lz_tune.algos.muzero.MuZeroLearner`) and UniZero's
(:class:`lz_tune.algos.unizero.UniZeroLearner`) learners through these functions, not a base
class. What :func:`unrolled_update` reads of the learner is declared by
:class:`lz_tune.algos.base.UpdateHooks`.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional, TypeVar

import numpy as np
import torch
from torch.profiler import record_function

from lz_tune.algos.base import Policy, UpdateHooks
from lz_tune.algos.common import learner_autocast, make_optimizer, require_device, use_channels_last
from lz_tune.buffer import TrainBatch
from lz_tune.config import Config
from lz_tune.envs.types import EnvSpecInfo
from lz_tune.models.support import scalar_to_support

__all__ = [
    "build_learner_networks",
    "unrolled_update",
    "one_unroll_path_notice",
    "run_forward",
    "learner_state",
    "load_learner_state",
]


PolicyT = TypeVar("PolicyT", bound=Policy)


def build_learner_networks(
    cfg: Config, spec: EnvSpecInfo, make_policy: Callable[..., PolicyT]
) -> tuple[PolicyT, PolicyT, torch.optim.Optimizer]:
    """The learner's policy on ``learner.device``, its target policy (a deep copy of the network)
    and the optimizer (``learner.optim_type``; the fused kernel and channels-last conv weights
    under ``learner.update_path=fused``)."""
    device = str(require_device(cfg.learner.device, "learner.device"))
    policy = make_policy(cfg, spec, device=device)
    if cfg.learner.update_path == "fused":
        use_channels_last(policy.network)  # conv networks: NHWC layout (a layout; same values)
    target_policy = make_policy(cfg, spec, device=device, network=copy.deepcopy(policy.network))
    optimizer = make_optimizer(cfg, policy.network.parameters(), fused=cfg.learner.update_path == "fused")
    return policy, target_policy, optimizer


#: the loss terms of :func:`unrolled_update` in the order of ``learner.unroll_losses``' output
#: (the last, the predicted root value, is not a loss)
LOSS_TERM_NAMES = ("policy", "value", "reward", "ssl", "policy_entropy")


def first_nonfinite_term(terms: tuple, extra: dict) -> Optional[str]:
    """The name of the first loss term with a NaN or infinite entry (None: all finite)."""
    named = [*zip(LOSS_TERM_NAMES, terms), *((name, term) for name, (_, term) in extra.items())]
    for name, term in named:
        if not bool(torch.isfinite(term.detach()).all()):
            return name
    return None


def unrolled_update(learner: UpdateHooks, batch: TrainBatch) -> tuple[dict[str, float], np.ndarray]:
    """One update of ``learner`` on ``batch``: support targets (label-smoothed by
    ``learner.value_reward_label_smoothing``), ``learner.unroll_losses`` weighted by the
    ``learner.*_loss_weight`` keys and the type's ``extra_losses``, PER importance weights and
    1/U, backward, ``before_optimizer_step``, gradient clipping, optimizer step, then
    ``update_target``. Returns (scalar logs, new priorities [B] float32: |predicted root value -
    target value| + 1e-6).

    A non-finite loss or gradient norm skips the optimizer step (the weights, and the network's
    buffers such as BatchNorm statistics, stay as they were before the update): the logs carry
    ``learner/nonfinite_update`` 1.0 and ``learner.nonfinite_term`` names the first non-finite
    loss term; the driver counts these and stops a run that only makes them. With learner
    workers the decision follows the all-reduced gradient norm, the same on every rank."""
    cfg, lc = learner.cfg, learner.cfg.learner
    net = learner.policy.network
    buffers = [b.detach().clone() for b in net.buffers()]  # (a skipped update restores BatchNorm's statistics)
    net.train()
    dev = learner.device
    obs = torch.from_numpy(batch.obs).to(dev)  # [B, U+1, *obs]
    actions = torch.from_numpy(batch.actions).to(dev)  # [B, U] ([B, U, D] continuous)
    target_value = torch.from_numpy(batch.target_value).to(dev)  # [B, U+1]
    target_reward = learner.reward_targets(batch)  # [B, U]
    target_policy = learner.policy_targets(batch)  # [B, U+1, ...], tensor or tuple
    mask = torch.from_numpy(batch.mask).to(dev)  # [B, U+1]
    weights = torch.from_numpy(batch.weights).to(dev)  # [B]
    num_unroll = batch.actions.shape[1]
    vs, rs = cfg.model.value_support_size, cfg.model.reward_support_size

    value_t = scalar_to_support(target_value, vs)  # [B, U+1, 2vs+1]
    reward_t = scalar_to_support(target_reward, rs)  # [B, U, 2rs+1]
    eps = learner.value_reward_label_smoothing
    if eps > 0:  # (1 - eps) two_hot + eps / K over the K bins
        value_t = (1.0 - eps) * value_t + eps / value_t.shape[-1]
        reward_t = (1.0 - eps) * reward_t + eps / reward_t.shape[-1]

    def forward():
        with record_function("learn/forward"), learner_autocast(cfg, dev):  # learner.precision
            terms = tuple(  # half-precision terms (autocast) summed in float32; float64 stays float64
                t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                for t in learner.unroll_losses(net, obs, actions, value_t, reward_t, target_policy, mask)
            )
            policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, _ = terms
            per_sample = (
                lc.policy_loss_weight * policy_loss
                + lc.value_loss_weight * value_loss
                + learner.reward_loss_weight * reward_loss
                + lc.ssl_loss_weight * ssl_loss
                - learner.policy_entropy_weight_now() * policy_entropy
            )
            extra = learner.extra_losses(batch)  # the type's own terms of this forward pass
            for weight, term in extra.values():
                per_sample = per_sample + weight * term
            return (weights * per_sample).mean() / max(num_unroll, 1), terms, extra

    loss, terms, extra = learner.run_forward(forward)
    policy_loss, value_loss, reward_loss, ssl_loss, policy_entropy, pred_value0 = terms

    for group in learner.optimizer.param_groups:
        group["lr"] = learner.learning_rate
    with record_function("learn/backward"):
        learner.optimizer.zero_grad(set_to_none=True)
        loss.backward()
    with record_function("learn/optimizer"):
        learner.before_optimizer_step()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            net.parameters(), lc.grad_clip_value, foreach=lc.update_path == "fused"
        )
        in_process = not learner.collective.distributed  # (ranks' losses differ; their grads do not)
        finite = bool(torch.isfinite(grad_norm)) and (not in_process or bool(torch.isfinite(loss.detach())))
        if finite:
            learner.optimizer.step()
        else:
            learner.optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for saved, current in zip(buffers, net.buffers()):
                    current.copy_(saved)
            learner.nonfinite_term = first_nonfinite_term(terms, extra) or "gradient"
    learner.train_iter += 1
    net.eval()
    learner.policy.on_weights_loaded()  # the learner's own weights changed
    learner.update_target()

    with torch.no_grad():  # one host sync for all the scalar logs
        priorities = (pred_value0 - target_value[:, 0]).abs().cpu().numpy().astype(np.float32) + 1e-6
        scalars = torch.stack(
            [
                loss.detach(),
                policy_loss.mean(),
                value_loss.mean(),
                reward_loss.mean(),
                ssl_loss.mean(),
                policy_entropy.mean(),
                grad_norm.to(loss.dtype),
                target_value[:, 0].mean(),
                pred_value0.mean(),
                *(term.detach().mean() for _, term in extra.values()),
            ]
        ).tolist()
    names = [
        "loss/total",
        "loss/policy",
        "loss/value",
        learner.reward_loss_name,
        learner.ssl_loss_name,
        "policy/entropy",
        "learner/grad_norm",
        "learner/target_value_mean",
        "learner/pred_value_mean",
        *extra,
    ]
    logs = dict(zip(names, scalars))
    logs["learner/lr"] = learner.optimizer.param_groups[0]["lr"]
    logs["learner/nonfinite_update"] = 0.0 if finite else 1.0  # (the driver then keeps the old priorities)
    return logs, priorities


def one_unroll_path_notice(cfg: Config) -> Optional[str]:
    """The start-of-run notice of a type whose unroll has one path when ``learner.update_path=fused``
    is asked for (it gets the fused optimizer kernel and conv layout only); None otherwise."""
    if cfg.learner.update_path != "fused":
        return None
    return (
        f"policy_type={cfg.policy_type} has one unroll path: learner.update_path=fused gives it the "
        "fused optimizer kernel (and channels-last conv weights) but not the batched unroll"
    )


def run_forward(learner: Any, forward: Callable[[], Any]) -> Any:
    """Run ``forward`` (the closure computing ``(loss, terms, extra)`` of one update from the
    learner network) through the learner's collective: in one process it is called; on a
    data-parallel rank (lz_tune.parallel) it runs through DDP, so the backward pass all-reduces
    the gradients over the ranks."""
    return learner.collective.run_forward(forward)


def learner_state(learner: Any) -> dict[str, Any]:
    """Weights, target weights, optimizer state and train_iter of ``learner``."""
    return {
        "network": learner.policy.network.state_dict(),
        "target_network": learner.target_policy.network.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        "train_iter": learner.train_iter,
    }


def load_learner_state(learner: Any, state: dict[str, Any]) -> None:
    """Inverse of :func:`learner_state` (optimizer moments in their parameter's layout, whichever
    update path wrote the checkpoint)."""
    learner.policy.load_weights(state["network"])
    learner.target_policy.load_weights(state["target_network"])
    learner.optimizer.load_state_dict(state["optimizer"])
    for param, slots in learner.optimizer.state.items():  # moments in their parameter's layout
        for key, value in slots.items():  # (a checkpoint of the other update path)
            if torch.is_tensor(value) and value.shape == param.shape and value.stride() != param.stride():
                slots[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)
    learner.train_iter = int(state["train_iter"])
