"""Evaluator: plays full episodes with one immutable weight snapshot, no root noise, greedy
(most-visited) actions, raw game scores (no reward clipping, no episodic life).

Episodes are spread over the envs by a fixed quota per env (env i plays episodes i, i+N, ...),
so the mean is not biased toward short episodes the way "the first n that finish" would be.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np

from lz_tune.algos import get_algorithm
from lz_tune.algos.base import Policy
from lz_tune.config import Config
from lz_tune.envs import VectorEnv
from lz_tune.envs.openspiel_env import SEAT_COLUMN
from lz_tune.workers.common import WeightSnapshot, carry_previous_action, env_spec_for, make_env, no_previous_action
from lz_tune.workers.match_stats import LOSS_RATE, match_rates


@dataclass(frozen=True)
class EvalResult:
    """Scores of one evaluation of one snapshot."""

    version: int
    """The snapshot version that was evaluated."""
    train_iter: int
    """Learner updates behind that snapshot."""
    reward_mean: float
    reward_std: float
    reward_min: float
    reward_max: float
    episode_length_mean: float
    num_episodes: int
    env_steps: int
    """Env steps the evaluation took (not counted as training env steps)."""
    eval_time_s: float
    stop: bool
    """reward_mean reached evaluator.stop_value, or the loss rate evaluator.stop_loss_rate (over
    the confirmation episodes too, where evaluator.stop_confirm_episodes played them)."""
    returns: tuple[float, ...] = ()
    match: Mapping[str, float] = field(default_factory=dict)
    """Two-player games against a bot: the agent's win / draw / loss rates
    (:data:`lz_tune.metrics.MATCH_RATES` names -> rates); empty for other envs."""


#: env seed offset of the confirmation episodes (``evaluator.stop_confirm_episodes``): other games
CONFIRM_SEED_OFFSET = 7_919


class _Played(NamedTuple):
    """What :meth:`Evaluator._play` saw: one entry per episode, and the env steps it took."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    seats: tuple[int, ...]
    env_steps: int

    def joined(self, more: "_Played") -> "_Played":
        """These episodes, then ``more``."""
        return _Played(
            self.returns + more.returns,
            self.lengths + more.lengths,
            self.seats + more.seats,
            self.env_steps + more.env_steps,
        )


class Evaluator:
    """One evaluator: its own envs and eval policy."""

    def __init__(self, cfg: Config, *, seed: int, device: str = "cpu", env: Optional[VectorEnv] = None) -> None:
        self.cfg = cfg
        self.seed = seed
        self.env = env if env is not None else make_env(cfg, num_envs=cfg.env.evaluator_env_num, seed=seed, mode="eval")
        self.spec = env_spec_for(cfg)
        self.policy: Policy = get_algorithm(cfg.policy_type).make_policy(cfg, self.spec, device=device)
        self.rng = np.random.default_rng(seed + 11)
        self.num_evaluations = 0

    def evaluate(
        self, snapshot: WeightSnapshot, *, n_episodes: Optional[int] = None, confirm_stop: bool = True
    ) -> EvalResult:
        """Play ``n_episodes`` (default evaluator.n_evaluator_episode) episodes with ``snapshot``.

        When they meet the stop condition, ``evaluator.stop_confirm_episodes`` is set and
        ``confirm_stop`` (training; ``evaluate`` of a checkpoint plays exactly ``n_episodes``),
        that many more episodes (other env seeds) are played with the same weights, and the result
        (scores, rates and ``stop``) covers all of them: a stop then rests on the larger count."""
        n = n_episodes or self.cfg.evaluator.n_evaluator_episode
        self.policy.load_weights(snapshot.weights)
        self.num_evaluations += 1
        start = time.perf_counter()
        played = self._play(n, seed=self.seed)  # same episodes every time: scores comparable across snapshots
        confirm = self.cfg.evaluator.stop_confirm_episodes
        if confirm and confirm_stop and self._meets_stop(played):
            played = played.joined(self._play(confirm, seed=self.seed + CONFIRM_SEED_OFFSET))
        arr = np.asarray(played.returns, np.float64)
        return EvalResult(
            version=snapshot.version,
            train_iter=snapshot.train_iter,
            reward_mean=float(arr.mean()),
            reward_std=float(arr.std()),
            reward_min=float(arr.min()),
            reward_max=float(arr.max()),
            episode_length_mean=float(np.mean(played.lengths)),
            num_episodes=len(played.returns),
            env_steps=played.env_steps,
            eval_time_s=time.perf_counter() - start,
            stop=self._meets_stop(played),
            returns=played.returns,
            match=self._match(played),
        )

    def _play(self, n: int, *, seed: int) -> "_Played":
        """``n`` greedy episodes with the loaded weights, the envs reset with ``seed``."""
        num_envs = self.env.num_envs
        quota = np.array([n // num_envs + (1 if i < n % num_envs else 0) for i in range(num_envs)])
        finished = np.zeros(num_envs, np.int64)
        returns: list[float] = []
        lengths: list[int] = []
        seats: list[int] = []  # two-player games against a bot: the agent's seat in each game
        batch = self.env.reset(seed=seed)
        self.policy.reset(np.arange(num_envs))  # every evaluation episode starts with fresh inference state
        previous_action = no_previous_action(num_envs, self.spec.action_dim)
        steps = 0
        while (finished < quota).any():
            act = self.policy.act(batch, mode="eval", temperature=1.0, rng=self.rng, previous_action=previous_action)
            res = self.env.step(act.action)
            previous_action = carry_previous_action(act.action, res.done)
            if res.done.any():
                self.policy.reset(np.flatnonzero(res.done))
            steps += num_envs
            for i in np.flatnonzero(res.real_episode_end):
                if finished[i] < quota[i]:
                    returns.append(float(res.episode_return[i]))
                    lengths.append(int(res.episode_length[i]))
                    if SEAT_COLUMN in res.info_columns:
                        seats.append(int(res.info_columns[SEAT_COLUMN][i]))
                    finished[i] += 1
            batch = res.batch
        return _Played(tuple(returns), tuple(lengths), tuple(seats), steps)

    @staticmethod
    def _match(played: "_Played") -> Mapping[str, float]:
        return match_rates(list(played.returns), list(played.seats)) if played.seats else {}

    def _meets_stop(self, played: "_Played") -> bool:
        """The mean return reached evaluator.stop_value, or the loss rate evaluator.stop_loss_rate."""
        stop_value = self.cfg.evaluator.stop_value
        mean = float(np.mean(played.returns))
        return (stop_value is not None and mean >= stop_value) or self._no_more_losses(self._match(played))

    def _no_more_losses(self, match: Mapping[str, float]) -> bool:
        """Two-player games: the loss rate reached evaluator.stop_loss_rate."""
        limit = self.cfg.evaluator.stop_loss_rate
        return bool(match) and limit is not None and match[LOSS_RATE] <= limit

    def close(self) -> None:
        self.env.close()
