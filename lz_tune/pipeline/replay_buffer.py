"""The replay buffer a run's config asks for: the driver's, and the read-only replica each
data-parallel learner rank builds its shard's targets from (:mod:`lz_tune.parallel.worker`)."""

from __future__ import annotations

from lz_tune.algos import get_algorithm
from lz_tune.buffer import GameBuffer
from lz_tune.config import Config

__all__ = ["make_game_buffer"]


def make_game_buffer(cfg: Config, spec) -> GameBuffer:
    """The `GameBuffer` of ``cfg.buffer`` for an env of ``spec`` (its RNG seeded by ``cfg.seed``)."""
    algo = get_algorithm(cfg.policy_type)
    b = cfg.buffer
    return GameBuffer(
        capacity_transitions=b.replay_buffer_size,
        num_unroll_steps=b.num_unroll_steps,
        td_steps=b.td_steps,
        discount=cfg.mcts.discount_factor,
        frame_stack=spec.frame_stack,
        action_space_size=spec.action_space_size,
        use_priority=b.use_priority,
        alpha=b.priority_prob_alpha,
        beta=b.priority_prob_beta,
        use_max_priority_for_new_data=b.use_max_priority_for_new_data,
        mini_infer_size=b.mini_infer_size,
        step_columns=algo.step_columns(cfg, spec),
        policy_target_size=algo.policy_target_size(cfg, spec),
        action_dim=spec.action_dim,
        seed=cfg.seed + 17,
    )
