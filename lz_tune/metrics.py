"""Public metric names: Tune result keys and TensorBoard tags are the same strings.

They follow RLlib's current names where the meaning matches (``num_env_steps_sampled_lifetime``,
``env_runners/episode_return_mean``, ``evaluation/env_runners/episode_return_mean``,
``learners/<policy type>/total_loss``, ...). :func:`public_metrics` turns the driver's internal
counters (:meth:`lz_tune.pipeline.Driver.metrics`) into them; the driver's TensorBoard scalars
are named by the same functions, so a curve in TensorBoard and a column of ``progress.csv``
carry one name. docs/metrics.md lists every key.
"""

from __future__ import annotations

import math
from typing import Any

#: the metric Tune searches, schedulers and "best checkpoint" use: the latest evaluation's mean return
EVAL_RETURN = "evaluation/env_runners/episode_return_mean"

#: Driver.metrics() key -> public name
RENAMED: dict[str, str] = {
    "env_steps": "num_env_steps_sampled_lifetime",
    "env_steps_per_s": "num_env_steps_sampled_lifetime_per_second",
    "train_iter": "train_iter",
    "updates_per_s": "num_updates_per_second",
    "wall_time_s": "wall_time_s",
    "episodes": "env_runners/num_episodes_lifetime",
    "collects": "env_runners/num_collects_lifetime",
    "collect_return_mean": "env_runners/episode_return_mean",
    "evaluations": "evaluation/num_evaluations_lifetime",
    "eval_reward_mean_last": EVAL_RETURN,
    "eval_reward_mean_best": "evaluation/env_runners/episode_return_mean_best",
    "eval_train_iter_last": "evaluation/train_iter",
    "buffer_transitions": "buffer/transitions",
    "buffer_bytes": "buffer/bytes",
    "buffer_segments": "buffer/segments",
    "policy_lag_launch_mean": "policy_lag/launch_mean",
    "policy_lag_launch_max": "policy_lag/launch_max",
    "policy_lag_start_mean": "policy_lag/start_mean",
    "policy_lag_start_max": "policy_lag/start_max",
    "policy_lag_return_mean": "policy_lag/return_mean",
    "policy_lag_return_max": "policy_lag/return_max",
    "time_share_collect": "time_share/collect",
    "time_share_train": "time_share/train",
    "time_share_eval": "time_share/eval",
    "actor_restarts": "pipeline/actor_restarts",
    "budget_queue_len": "pipeline/budget_queue_len",
    "updates_enqueued": "pipeline/updates_enqueued",
    "buffer_reanalyzes": "buffer/num_reanalyzes_lifetime",
    "nonfinite_updates": "learner/nonfinite_updates_lifetime",
    "failed_saves": "checkpoint/failed_saves_lifetime",
    "restore_buffer_transitions": "restore/buffer_transitions",
    "restore_fallbacks": "restore/fallbacks",
    "restore_weights_only": "restore/weights_only",
    "restore_env_steps_before_first_update": "restore/env_steps_before_first_update",
    "stop_value_reached": "stop_value_reached",
    "done": "done",
}

#: EvalResult field -> public name (logged at each evaluation)
EVAL_FIELDS: dict[str, str] = {
    "reward_mean": EVAL_RETURN,
    "reward_std": "evaluation/env_runners/episode_return_std",
    "reward_min": "evaluation/env_runners/episode_return_min",
    "reward_max": "evaluation/env_runners/episode_return_max",
    "episode_length_mean": "evaluation/env_runners/episode_len_mean",
    "num_episodes": "evaluation/env_runners/num_episodes",
}

#: two-player games against a bot (``EvalResult.match``): the agent's win / draw / loss rates over
#: all games of the evaluation, and over those it played as first / as second player
MATCH_RATES: tuple[str, ...] = tuple(
    f"evaluation/env_runners/{outcome}_rate{seat}"
    for outcome in ("win", "draw", "loss")
    for seat in ("", "_as_first", "_as_second")
)


def learner_metric(policy_type: str, key: str) -> str:
    """Public name of a learner log key: ``loss/value`` -> ``learners/muzero/value_loss``,
    ``loss/total`` -> ``learners/muzero/total_loss``, ``learner/lr`` ->
    ``learners/muzero/learning_rate``, ``policy/entropy`` -> ``learners/muzero/policy_entropy``."""
    group, _, name = key.partition("/")
    if not name:
        return f"learners/{policy_type}/{group}"
    if group == "loss":
        return f"learners/{policy_type}/{name}_loss"
    if group == "learner":
        return f"learners/{policy_type}/{'learning_rate' if name == 'lr' else name}"
    return f"learners/{policy_type}/{group}_{name}"


def learner_metrics(policy_type: str, logs: dict[str, float]) -> dict[str, float]:
    """A learner's logs under their public names."""
    return {learner_metric(policy_type, k): v for k, v in logs.items()}


def public_metrics(m: dict[str, Any], *, policy_type: str, learner_logs: dict[str, float]) -> dict[str, Any]:
    """The driver's metrics under their public names: numbers and flags only (what Tune reports),
    NaN left out (a metric is absent until it has a value: the collect return before any episode
    ended). ``evaluation/*`` keys appear once the run has an evaluation."""
    out: dict[str, Any] = {}
    for key, public in RENAMED.items():
        if key not in m:
            continue
        v = m[key]
        if isinstance(v, float) and not math.isfinite(v):
            continue
        out[public] = v
    out.update(learner_metrics(policy_type, learner_logs))
    if "learning_rate" in m:  # the rate the NEXT update uses (a PBT change shows at once)
        out[learner_metric(policy_type, "learner/lr")] = m["learning_rate"]
    return out
