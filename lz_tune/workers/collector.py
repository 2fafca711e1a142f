"""SegmentCollector: steps a vector of envs with the batched search and cuts game segments.

The collector keeps its envs AND one :class:`~lz_tune.buffer.segment.SegmentBuilder` per env
across ``collect()`` calls, so an episode that is running when a collect returns simply goes
on in the next call: no transition is dropped, and no segment is padded with steps that do
not follow it (bugs 1 of the original). Weights are loaded only between collects
(:meth:`load_snapshot`), so one collect runs with one policy version.

For stateful policies the collector tells the policy when env i's episode ends
(``policy.reset([i])``) and passes every env's previous action to ``act`` (-1 right after a
reset); both carry across collects exactly like the envs do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lz_tune.algos import get_algorithm
from lz_tune.algos.base import Policy, Temperature
from lz_tune.buffer.segment import GameSegment, SegmentBuilder
from lz_tune.config import Config
from lz_tune.envs import VectorEnv
from lz_tune.envs.types import EnvBatch
from lz_tune.workers.common import WeightSnapshot, carry_previous_action, env_spec_for, make_env, no_previous_action
from lz_tune.workers.exploration import EpsilonGreedy


@dataclass(frozen=True)
class CollectResult:
    """What one collect returns to the driver."""

    segments: list[GameSegment]
    """Completed segments, in the order they were completed."""
    priorities: Optional[list[np.ndarray]]
    """Initial priorities per segment ([num_owned] each), or None for "max priority"."""
    env_steps: int
    """Env steps taken during this collect (every env, every step)."""
    policy_version: int
    """Version of the weights used for the whole collect."""
    policy_train_iter: int
    """Learner updates behind those weights (for policy-lag accounting)."""
    episode_returns: list[float] = field(default_factory=list)
    """Raw returns of the real episodes that ended during this collect."""
    episode_lengths: list[int] = field(default_factory=list)
    """Lengths of those episodes."""
    steps_in_progress: int = 0
    """Steps taken (in this or earlier collects) that are not yet in a returned segment."""
    collect_time_s: float = 0.0
    """Wall time of the collect (seconds)."""
    started_at: float = 0.0
    """``time.time()`` (seconds since the epoch, the worker's clock) when the collect began stepping
    its envs: the driver measures the policy lag at this real start (a collect may wait in an
    actor's queue after its launch)."""
    worker_id: int = 0
    """Which collector produced it."""

    @property
    def num_transitions(self) -> int:
        """Owned positions in the returned segments."""
        return sum(s.num_owned for s in self.segments)


def temperature_at(cfg: Config, train_iter: int) -> float:
    """Visit-count temperature for collection (fixed, or 1.0/0.5/0.25 by training progress)."""
    c = cfg.collector
    if not c.manual_temperature_decay:
        return c.temperature
    frac = train_iter / c.threshold_training_steps_for_final_temperature
    return 1.0 if frac < 0.5 else 0.5 if frac < 0.75 else 0.25


def step_temperatures(cfg: Config, temperature: float, timestep: np.ndarray) -> Temperature:
    """The temperature of each env's next step: ``temperature`` for all (collector.temperature_moves
    None), else [N] ``temperature`` for envs in their first ``temperature_moves`` steps (``timestep``
    [N], the step within the episode) and 0 (the most visited action) for the others."""
    moves = cfg.collector.temperature_moves
    if moves is None:
        return temperature
    return np.where(np.asarray(timestep) < moves, temperature, 0.0)


def epsilon_at(cfg: Config, env_steps: int) -> float:
    """Epsilon-greedy probability for collection after ``env_steps`` env steps of all collectors:
    linear from ``collector.eps_greedy_start`` to ``eps_greedy_end`` over ``eps_greedy_decay_env_steps``."""
    c = cfg.collector
    frac = min(1.0, max(0, env_steps) / c.eps_greedy_decay_env_steps)
    return c.eps_greedy_start + (c.eps_greedy_end - c.eps_greedy_start) * frac


class SegmentCollector:
    """One collector: its own envs, collect policy and segment builders."""

    def __init__(
        self, cfg: Config, *, seed: int, worker_id: int = 0, device: str = "cpu", env: Optional[VectorEnv] = None
    ) -> None:
        self.cfg = cfg
        self.worker_id = worker_id
        self.seed = seed
        self.env = (
            env if env is not None else make_env(cfg, num_envs=cfg.env.collector_env_num, seed=seed, mode="collect")
        )
        self.spec = env_spec_for(cfg)
        algo = get_algorithm(cfg.policy_type)
        self.policy: Policy = algo.make_policy(cfg, self.spec, device=device)
        step_columns = algo.step_columns(cfg, self.spec)
        self._column_names = tuple(c.name for c in step_columns)
        self.policy_version = -1
        self.policy_train_iter = 0
        self.rng = np.random.default_rng(seed + 7)
        # its own random stream: exploration draws leave the search's stream unchanged
        self.exploration = EpsilonGreedy(
            num_envs=self.env.num_envs,
            continuous=self.spec.is_continuous,
            max_duration=cfg.collector.eps_greedy_max_duration,
            rng=np.random.default_rng([seed, 0xE95]),
        )
        b = cfg.buffer
        self.builders = [
            SegmentBuilder(
                segment_length=b.game_segment_length,
                num_unroll_steps=b.num_unroll_steps,
                td_steps=b.td_steps,
                frame_stack=self.env.frame_stack,
                action_space_size=self.env.action_space_size,
                step_columns=step_columns,
                policy_target_size=algo.policy_target_size(cfg, self.spec),
                action_dim=self.spec.action_dim,
            )
            for _ in range(self.env.num_envs)
        ]
        self._batch: Optional[EnvBatch] = None
        self._previous_action = no_previous_action(self.env.num_envs, self.spec.action_dim)
        self.total_env_steps = 0

    def load_snapshot(self, snapshot: WeightSnapshot) -> None:
        """Take new weights (between collects only). Same version: nothing to do."""
        if snapshot.version != self.policy_version:
            self.policy.load_weights(snapshot.weights)
            self.policy_version = snapshot.version
            self.policy_train_iter = snapshot.train_iter

    def _step_extras(self, from_policy, res) -> dict:
        """The type's step columns of this step ``{name: [N, ...]}``: what the policy's search
        returned, completed by what the env reports (``res.info_columns``, e.g. the true chance
        outcome); a declared column that neither gives fails in the segment builder."""
        if not self._column_names:
            return from_policy
        extras = dict(from_policy)
        info = getattr(res, "info_columns", None) or {}
        for name in self._column_names:
            if name not in extras and name in info:
                extras[name] = np.asarray(info[name])
        return extras

    @staticmethod
    def _next_frame(res, i: int):
        """The frame after env ``i``'s step: the next observation's, the last observation's of
        a truncated episode (so its value targets bootstrap from it), None after a terminal one."""
        if not res.done[i]:
            return res.batch.frame[i]
        if res.truncated[i] and not res.terminated[i] and res.final_frame is not None:
            return res.final_frame[i]
        return None

    def _stack_frames(self, observation: np.ndarray) -> np.ndarray:
        """[S, *frame_shape] frames of one stacked observation."""
        return observation.reshape(self.env.frame_stack, *self.env.frame_shape)

    @property
    def steps_in_progress(self) -> int:
        return sum(b.num_steps_in_progress for b in self.builders)

    def collect(self, *, temperature: float, epsilon: float = 0.0, num_segments: Optional[int] = None) -> CollectResult:
        """Step all envs until at least ``num_segments`` segments are done (default:
        collector.segments_per_collect, else one per env); ``epsilon``: see :func:`epsilon_at` and
        :class:`~lz_tune.workers.exploration.EpsilonGreedy`."""
        target = num_segments or self.cfg.collector.segments_per_collect or self.env.num_envs
        start, started_at = time.perf_counter(), time.time()
        if self._batch is None:
            self._batch = self.env.reset(seed=self.seed)
            self.exploration.end_episodes(np.ones(self.env.num_envs, bool))
            self.policy.reset(np.arange(self.env.num_envs))
            self._previous_action = no_previous_action(self.env.num_envs, self.spec.action_dim)
            for i, builder in enumerate(self.builders):
                builder.begin_episode(self._stack_frames(self._batch.observation[i]))
        segments: list[GameSegment] = []
        returns: list[float] = []
        lengths: list[int] = []
        steps = 0
        use_max = self.cfg.buffer.use_max_priority_for_new_data
        while len(segments) < target:
            batch = self._batch
            act = self.policy.act(
                batch,
                mode="collect",
                temperature=step_temperatures(self.cfg, temperature, batch.timestep),
                rng=self.rng,
                previous_action=self._previous_action.copy(),
            )
            action = self.exploration.apply(act.action, batch.action_mask, epsilon)
            res = self.env.step(action)
            done = res.done
            step_extras = self._step_extras(act.extras, res)
            self._previous_action = carry_previous_action(action, done)
            self.exploration.end_episodes(done)
            for i, builder in enumerate(self.builders):
                segments.extend(
                    builder.add_step(
                        action=action[i],
                        reward=float(res.reward[i]),
                        root_value=float(act.root_value[i]),
                        pred_value=float(act.pred_value[i]),
                        policy_target=act.policy_target[i],
                        action_mask=batch.action_mask[i],
                        to_play=int(batch.to_play[i]),
                        timestep=int(batch.timestep[i]),
                        next_frame=self._next_frame(res, i),
                        done=bool(done[i]),
                        truncated=bool(res.truncated[i] and not res.terminated[i]),
                        extras={k: v[i] for k, v in step_extras.items()},
                    )
                )
                if done[i]:
                    builder.begin_episode(self._stack_frames(res.batch.observation[i]))
                if res.real_episode_end[i]:
                    returns.append(float(res.episode_return[i]))
                    lengths.append(int(res.episode_length[i]))
            if done.any():
                self.policy.reset(np.flatnonzero(done))
            steps += self.env.num_envs
            self._batch = res.batch
        self.total_env_steps += steps
        priorities = None if use_max else [s.initial_priorities() for s in segments]
        return CollectResult(
            segments=segments,
            priorities=priorities,
            env_steps=steps,
            policy_version=self.policy_version,
            policy_train_iter=self.policy_train_iter,
            episode_returns=returns,
            episode_lengths=lengths,
            steps_in_progress=self.steps_in_progress,
            collect_time_s=time.perf_counter() - start,
            started_at=started_at,
            worker_id=self.worker_id,
        )

    def close(self) -> None:
        self.env.close()
