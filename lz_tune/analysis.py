"""Read a Ray Tune experiment of :class:`lz_tune.tune.MuZeroTrainable` into tidy pandas tables.

Works in a fresh process on the files alone (no Ray cluster, Ray is not even imported)::

    from lz_tune.analysis import load_experiment, evaluate_checkpoint
    exp = load_experiment("~/lz_results/cartpole_muzero")
    exp.summary()                                   # one row per trial, searched params + scores
    trial = exp.best_trial("eval/reward_mean", mode="max")
    run = evaluate_checkpoint(exp.best_checkpoint(trial), n_episodes=5)
    run.eval.reward_mean, run.frames                # frames: Atari only

Layout read (Ray 2.x): ``<experiment>/<trial folder>/{params.json, result.json, progress.csv,
checkpoint_00000N/{lz_tune_checkpoint.pt, lz_tune_state.pt}}`` (the latest evaluated snapshot,
and the learner's state at the save). Rows come from ``result.json`` (one JSON object per
Tune result); ``progress.csv`` is only a fallback, because Tune appends the rows of a resumed trial
to it under the header of the first run, which misaligns columns when the keys differ.

A resumed trial reports again the iterations after its last checkpoint; :attr:`Experiment.progress`
keeps one row per (trial_id, training_iteration), the last one written.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from lz_tune.checkpoint import CheckpointError, load_checkpoint

#: the evaluated snapshot inside a Tune checkpoint folder (lz_tune.tune.trainable.CHECKPOINT_FILE)
CHECKPOINT_FILE = "lz_tune_checkpoint.pt"
#: the learner's state at the save inside a Tune checkpoint folder (lz_tune.tune.trainable.STATE_FILE)
STATE_FILE = "lz_tune_state.pt"
EVAL_METRIC = "eval/reward_mean"
MODES = ("max", "min")
SCOPES = ("last", "all")
_TRIAL_ID = re.compile(r"_([0-9a-f]{5}_\d{5})(?:_|$)")
_TRIAL_FILES = ("result.json", "progress.csv", "params.json")


@dataclass(frozen=True)
class TrialInfo:
    """One trial folder: ``trial_id`` (Tune's, e.g. ``"7c65e_00000"``), folder ``name`` and ``path``,
    and ``params`` (its params.json: the sampled Tune config)."""

    trial_id: str
    name: str
    path: Path
    params: dict[str, Any]


def _read_json_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line of an interrupted run
                continue
    return rows


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def load_experiment(path: str | Path) -> "Experiment":
    """The experiment in folder ``path`` (``~`` is expanded). See :class:`Experiment`."""
    return Experiment(path)


class Experiment:
    """A Tune experiment folder read from disk (a snapshot: load again to see a running
    experiment's new results).

    Tables: :attr:`progress` (and :attr:`raw_progress`), :attr:`hyperparameters`,
    :meth:`results`, :meth:`summary`, :meth:`throughput`, :meth:`policy_lag`, :meth:`eval_curve`,
    :meth:`checkpoints`. Choices: :meth:`rank_trials`, :meth:`best_trial`, :meth:`best_checkpoint`.

    Raises FileNotFoundError (missing folder) or ValueError (a folder without trial folders,
    e.g. a single trial's folder or the storage path above the experiment), naming the path.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: experiment folder not found")
        if not self.path.is_dir():
            raise ValueError(f"{self.path}: not a folder (pass a Tune experiment folder)")
        self.trials: list[TrialInfo] = [self._trial_info(d) for d in sorted(self.path.iterdir())
                                        if d.is_dir() and any((d / f).is_file() for f in _TRIAL_FILES)]
        if not self.trials:
            hint = ""
            if any((self.path / f).is_file() for f in _TRIAL_FILES):
                hint = f"; this looks like one trial's folder, pass its parent {self.path.parent}"
            else:
                inner = sorted({f.parent.parent.name for name in _TRIAL_FILES for f in self.path.glob(f"*/*/{name}")})
                hint = f"; it holds experiment folders, pass one of them: {', '.join(inner)}" if inner else ""
            raise ValueError(f"{self.path}: not a Tune experiment folder (no trial folder with "
                             f"{', '.join(_TRIAL_FILES)}){hint}")

    def __repr__(self) -> str:
        return f"Experiment({str(self.path)!r}, {len(self.trials)} trials)"

    @staticmethod
    def _trial_info(d: Path) -> TrialInfo:
        params = json.loads((d / "params.json").read_text()) if (d / "params.json").is_file() else {}
        m = _TRIAL_ID.search(d.name)
        trial_id = m.group(1) if m else d.name
        if not m and (d / "result.json").is_file():  # a custom folder name: ask the results
            first = _read_json_lines(d / "result.json")[:1]
            trial_id = str(first[0].get("trial_id", d.name)) if first else d.name
        return TrialInfo(trial_id=trial_id, name=d.name, path=d, params=params)

    def trial(self, trial_id: str) -> TrialInfo:
        """The trial with this id (or folder name); ValueError listing the known ids otherwise."""
        for t in self.trials:
            if trial_id in (t.trial_id, t.name):
                return t
        raise ValueError(f"{self.path}: no trial {trial_id!r} (trials: {', '.join(t.trial_id for t in self.trials)})")

    # ------------------------------------------------------------------------------ progress

    @cached_property
    def raw_progress(self) -> pd.DataFrame:
        """Every result row as written, resumed duplicates included. Columns: ``trial_id``,
        ``trial_name``, ``row`` (position in the trial's file), every reported metric
        (``training_iteration``, ``time_total_s``, ``env_steps``, ``train_iter``,
        ``eval/reward_mean``, ...) and ``config/<key>`` for each Tune config key."""
        frames = []
        for t in self.trials:
            if (t.path / "result.json").is_file():
                df = pd.json_normalize(_read_json_lines(t.path / "result.json"), sep="/")
            elif (t.path / "progress.csv").is_file():
                df = pd.read_csv(t.path / "progress.csv")
            else:
                continue
            if df.empty:
                continue
            df.insert(0, "row", np.arange(len(df)))
            df.insert(0, "trial_name", t.name)
            df["trial_id"] = t.trial_id
            frames.append(df)
        if not frames:
            return pd.DataFrame(columns=["trial_id", "trial_name", "row", "training_iteration"])
        df = pd.concat(frames, ignore_index=True)
        return df[["trial_id"] + [c for c in df.columns if c != "trial_id"]]

    @cached_property
    def progress(self) -> pd.DataFrame:
        """:attr:`raw_progress` with one row per (trial_id, training_iteration): the last one
        written (after a resume, the resumed run's), sorted by trial and iteration."""
        df = self.raw_progress.drop_duplicates(["trial_id", "training_iteration"], keep="last")
        return df.sort_values(["trial_id", "training_iteration"], kind="stable").reset_index(drop=True)

    def metrics(self) -> list[str]:
        """Numeric columns of :attr:`progress` that can rank trials."""
        skip = {"row", "pid", "timestamp", "training_iteration"}
        return sorted(c for c in self.progress.columns if c not in skip and not c.startswith("config/")
                      and pd.api.types.is_numeric_dtype(self.progress[c]) and not
                      pd.api.types.is_bool_dtype(self.progress[c]))

    def _metric_column(self, metric: str) -> pd.Series:
        if metric not in set(self.metrics()) | {"training_iteration"}:
            raise ValueError(f"{self.path}: no numeric metric {metric!r} in the results "
                             f"(available: {', '.join(self.metrics())})")
        return self.progress[metric]

    # ------------------------------------------------------------------------------ hyperparameters

    @cached_property
    def hyperparameters(self) -> pd.DataFrame:
        """One row per trial (index ``trial_id``), one column per Tune config key (params.json;
        list values become tuples)."""
        rows = {t.trial_id: {k: _hashable(v) for k, v in t.params.items()} for t in self.trials}
        return pd.DataFrame.from_dict(rows, orient="index").rename_axis("trial_id")

    def searched_params(self) -> list[str]:
        """Config keys whose value differs between trials (what the search varied)."""
        hp = self.hyperparameters
        return [c for c in hp.columns if hp[c].astype(str).nunique() > 1]

    def results(self) -> pd.DataFrame:
        """Final result of every trial: the last row of :attr:`progress` (every metric, e.g.
        ``training_iteration``, ``env_steps``, ``train_iter``, ``time_total_s``), plus
        ``eval/reward_mean_last`` / ``eval/reward_mean_best`` (last and best evaluation reported),
        ``trial_name`` and ``config/<key>`` for every Tune config key (from the last result;
        params.json for a trial without results). One row per trial, column ``trial_id``."""
        last = self.progress.groupby("trial_id", sort=True).tail(1).set_index("trial_id")
        last = last.drop(columns=[c for c in last.columns if c.startswith("config/")] + ["row"], errors="ignore")
        if EVAL_METRIC in self.progress.columns:
            last[EVAL_METRIC + "_last"] = self.progress.groupby("trial_id")[EVAL_METRIC].last()
            last[EVAL_METRIC + "_best"] = self.progress.groupby("trial_id")[EVAL_METRIC].max()
        hp = self.hyperparameters.add_prefix("config/")
        cfg_cols = [c for c in self.progress.columns if c.startswith("config/")]
        if cfg_cols:
            reported = self.progress.groupby("trial_id").tail(1).set_index("trial_id")[cfg_cols]
            hp = reported.apply(lambda s: s.map(_hashable)).combine_first(hp)
        out = hp.join(last, how="left")
        out["trial_name"] = [self.trial(t).name for t in out.index]
        return out.reset_index()

    def summary(self, metric: str = EVAL_METRIC, mode: str = "max", scope: str = "all") -> pd.DataFrame:
        """Compact table, best first: ``trial_id``, the searched params, ``score`` (see
        :meth:`rank_trials`), ``training_iteration``, ``env_steps``, ``train_iter``,
        ``time_total_s``, ``eval/reward_mean_last`` and ``eval/reward_mean_best``."""
        ranked = self.rank_trials(metric, mode, scope).set_index("trial_id")["score"]
        res = self.results().set_index("trial_id")
        cols = [c for c in ["training_iteration", "env_steps", "train_iter", "time_total_s", EVAL_METRIC + "_last",
                            EVAL_METRIC + "_best"] if c in res.columns]
        table = res[["config/" + p for p in self.searched_params()] + cols].copy()
        table.columns = [c.removeprefix("config/") for c in table.columns]
        table.insert(len(self.searched_params()), "score", ranked)
        return table.sort_values("score", ascending=mode == "min", na_position="last").reset_index()

    # ------------------------------------------------------------------------------ derived tables

    def throughput(self) -> pd.DataFrame:
        """Speed over wall time, one row per (trial_id, training_iteration). Columns:
        ``trial_id``, ``training_iteration``, ``time_total_s``, ``env_steps``, ``train_iter``,
        ``env_steps_per_s`` / ``updates_per_s`` (as reported: average since the trial's process
        started) and ``env_steps_per_s_iter`` / ``updates_per_s_iter`` (within that iteration:
        counter delta / ``time_this_iter_s``; NaN where a restore moved the counters back)."""
        df = self.progress[[c for c in ["trial_id", "training_iteration", "time_total_s", "time_this_iter_s",
                                        "env_steps", "train_iter", "env_steps_per_s", "updates_per_s"]
                            if c in self.progress.columns]].copy()
        for counter, col in (("env_steps", "env_steps_per_s_iter"), ("train_iter", "updates_per_s_iter")):
            if counter in df.columns and "time_this_iter_s" in df.columns:
                delta = df.groupby("trial_id")[counter].diff().fillna(df[counter])
                df[col] = (delta / df["time_this_iter_s"]).where(delta >= 0)
        return df.drop(columns=["time_this_iter_s"], errors="ignore")

    def policy_lag(self) -> pd.DataFrame:
        """Policy lag (learner updates between the weights a collect used and the learner) per
        result row. Columns: ``trial_id``, ``training_iteration``, ``time_total_s`` and those of
        ``policy_lag_{launch,start,return}_{mean,max}`` that were reported: at the collect's launch,
        at its real start in the actor (later than the launch for a collect queued behind another)
        and when its result is consumed (all 0 for the sync pipeline)."""
        cols = ["trial_id", "training_iteration", "time_total_s"] + sorted(
            c for c in self.progress.columns if c.startswith("policy_lag_"))
        return self.progress[[c for c in cols if c in self.progress.columns]].copy()

    def eval_curve(self) -> pd.DataFrame:
        """One row per evaluation: ``trial_id``, ``training_iteration``, ``time_total_s``,
        ``env_steps`` behind the evaluated snapshot (``eval/env_steps``; older results: at the
        first result that reported it), ``train_iter`` at that result, ``eval/train_iter``
        (updates behind the evaluated weights) and ``eval/reward_mean``. Results carry the last
        evaluation forward; a new one is a change of ``eval/train_iter`` within a trial."""
        p = self.progress
        if EVAL_METRIC not in p.columns:
            return pd.DataFrame(columns=["trial_id", "training_iteration", "time_total_s", "env_steps",
                                         "train_iter", "eval/train_iter", EVAL_METRIC])
        key = "eval/train_iter" if "eval/train_iter" in p.columns else EVAL_METRIC
        new = p[key].ne(p.groupby("trial_id")[key].shift())
        df = p[new & p[EVAL_METRIC].notna()].copy()
        if "eval/env_steps" in df.columns:  # exact: env steps behind the evaluated snapshot
            exact = df["eval/env_steps"].where(df["eval/env_steps"] >= 0)
            df["env_steps"] = exact.fillna(df["env_steps"]).astype(df["env_steps"].dtype)
        cols = ["trial_id", "training_iteration", "time_total_s", "env_steps", "train_iter", "eval/train_iter",
                EVAL_METRIC]
        return df[[c for c in cols if c in df.columns]].reset_index(drop=True)

    # ------------------------------------------------------------------------------ best trial

    def rank_trials(self, metric: str = EVAL_METRIC, mode: str = "max", scope: str = "last") -> pd.DataFrame:
        """Trials ordered best first by ``metric``: columns ``trial_id``, ``score``.

        scope ``"last"``: the metric's last non-NaN value of each trial; ``"all"``: its best value
        over all results (max or min by ``mode``). Trials without a value come last (score NaN).
        """
        _check_choice("mode", mode, MODES)
        _check_choice("scope", scope, SCOPES)
        col = self._metric_column(metric)
        by = col.groupby(self.progress["trial_id"])
        score = by.last() if scope == "last" else (by.max() if mode == "max" else by.min())
        score = score.reindex([t.trial_id for t in self.trials])
        out = score.rename("score").rename_axis("trial_id").reset_index()
        return out.sort_values("score", ascending=mode == "min", na_position="last", kind="stable",
                               ignore_index=True)

    def best_trial(self, metric: str = EVAL_METRIC, mode: str = "max", scope: str = "last") -> str:
        """``trial_id`` of the best trial (see :meth:`rank_trials`); ValueError if no trial
        reported a value of ``metric``."""
        ranked = self.rank_trials(metric, mode, scope)
        if ranked.empty or pd.isna(ranked["score"].iloc[0]):
            raise ValueError(f"{self.path}: no trial reported a value of {metric!r} yet")
        return str(ranked["trial_id"].iloc[0])

    # ------------------------------------------------------------------------------ checkpoints

    def checkpoints(self, trial_id: Optional[str] = None) -> pd.DataFrame:
        """The lz_tune checkpoints of one trial (or all), one row per Tune checkpoint folder.

        Columns: ``trial_id``, ``checkpoint`` (folder name); ``kind``: ``"evaluated"`` (saved right
        after a new evaluation) or ``"current"`` (a save Tune asked for: pause, PBT,
        ``checkpoint_at_end``); ``path``: the evaluated snapshot (exactly the weights that earned
        ``eval/reward_mean``; the state file when the trial had no evaluation yet); ``state_path``:
        the learner's state at the save (what a restore loads; None in folders of older versions);
        ``eval/reward_mean`` and ``eval/train_iter`` (NaN / -1 without an evaluation);
        ``train_iter`` and ``env_steps`` of the state. Unreadable checkpoints are skipped with a warning."""
        trials = [self.trial(trial_id)] if trial_id is not None else self.trials
        rows = []
        for t in trials:
            for d in sorted(t.path.glob("checkpoint_*")):
                evaluated, state = d / CHECKPOINT_FILE, d / STATE_FILE
                if not evaluated.is_file() and not state.is_file():
                    continue
                try:
                    ev_ck = load_checkpoint(evaluated) if evaluated.is_file() else None
                    st_ck = load_checkpoint(state) if state.is_file() else ev_ck
                except CheckpointError as e:
                    warnings.warn(str(e), stacklevel=2)
                    continue
                ev = (ev_ck or {}).get("eval") or {}
                rows.append({"trial_id": t.trial_id, "checkpoint": d.name,
                             "kind": st_ck.get("checkpoint_kind", "evaluated" if ev else "current"),
                             "path": evaluated if ev_ck is not None else state,
                             "state_path": state if state.is_file() else None,
                             EVAL_METRIC: float(ev.get("reward_mean", math.nan)),
                             "eval/train_iter": int(ev.get("train_iter", -1)),
                             "train_iter": int(st_ck["counters"].get("train_iter", -1)),
                             "env_steps": int(st_ck["counters"].get("env_steps", -1))})
        return pd.DataFrame(rows, columns=["trial_id", "checkpoint", "kind", "path", "state_path", EVAL_METRIC,
                                           "eval/train_iter", "train_iter", "env_steps"])

    def best_checkpoint(self, trial_id: Optional[str] = None, *, mode: str = "max") -> Path:
        """Path of the checkpoint file with the best evaluated ``eval/reward_mean`` (``mode``) of
        ``trial_id`` (default: :meth:`best_trial` by that metric, scope ``"all"``); on ties the
        later checkpoint. FileNotFoundError naming the trial folder if it has no evaluated one."""
        _check_choice("mode", mode, MODES)
        trial = self.trial(trial_id if trial_id is not None else self.best_trial(EVAL_METRIC, mode, "all"))
        ck = self.checkpoints(trial.trial_id).dropna(subset=[EVAL_METRIC])
        if ck.empty:
            raise FileNotFoundError(f"{trial.path}: no checkpoint with an evaluation "
                                    f"(checkpoint_*/{CHECKPOINT_FILE})")
        # best last: the metric (negated for "min") ascending, then train_iter ascending (ties: later one)
        key = ck[EVAL_METRIC] if mode == "max" else -ck[EVAL_METRIC]
        ck = ck.assign(_key=key).sort_values(["_key", "eval/train_iter", "train_iter"], kind="stable")
        return Path(ck["path"].iloc[-1])


# ---------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class CheckpointEvaluation:
    """What :func:`evaluate_checkpoint` returns.

    ``eval``: the :class:`lz_tune.workers.EvalResult` of the new episodes (``reward_mean``,
    ``returns``, ...); ``recorded``: the checkpoint's own evaluation dict (``reward_mean``,
    ``train_iter``, ...; None without one); ``counters``: env_steps / train_iter at the checkpoint;
    ``config``: the :class:`lz_tune.config.Config` played; ``frames``: Atari only, uint8
    ``[T, H, W]`` (grayscale) or ``[T, H, W, 3]`` frames of env 0's first game (else None).
    """

    path: Path
    eval: Any
    recorded: Optional[dict[str, Any]]
    counters: dict[str, Any]
    config: Any
    frames: Optional[np.ndarray]


def evaluate_checkpoint(path: str | Path, *, n_episodes: Optional[int] = None, seed: Optional[int] = None,
                        overrides: Sequence[str] = (), record_frames: Optional[bool] = None,
                        max_frames: int = 5000, device: str = "cpu") -> CheckpointEvaluation:
    """Play ``n_episodes`` (default: the config's ``evaluator.n_evaluator_episode``) evaluation
    episodes with the checkpoint's weights, with the project's :class:`lz_tune.workers.Evaluator`
    (greedy search, raw scores). ``overrides``: CLI-style config changes for the replay (e.g.
    ``"env.evaluator_env_num=1"``, ``"mcts.eval_num_simulations=50"``); the network keys must not
    change. ``seed`` defaults to the seed the training evaluator used. ``record_frames``
    (default: Atari only) keeps up to ``max_frames`` frames of env 0's first game."""
    from lz_tune.config import Config
    from lz_tune.pipeline.backends import EVALUATOR_SEED_OFFSET
    from lz_tune.workers import Evaluator, WeightSnapshot, env_spec_for, make_env

    path = Path(path).expanduser()
    if path.is_dir():  # a Tune checkpoint folder: its evaluated snapshot (before any: the state)
        path = path / CHECKPOINT_FILE if (path / CHECKPOINT_FILE).is_file() or not (path / STATE_FILE).is_file() \
            else path / STATE_FILE
    ck = load_checkpoint(path)
    cfg = Config.from_dict(ck["config"])
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    seed = cfg.seed + EVALUATOR_SEED_OFFSET if seed is None else seed
    if record_frames is None:
        record_frames = env_spec_for(cfg).is_atari
    env = make_env(cfg, num_envs=cfg.env.evaluator_env_num, seed=seed, mode="eval")
    recorder = _FrameRecorder(env, max_frames) if record_frames else None
    evaluator = Evaluator(cfg, seed=seed, device=device, env=recorder or env)
    try:
        train_iter = int(ck["learner"].get("train_iter", ck["counters"].get("train_iter", 0)))
        snapshot = WeightSnapshot(version=train_iter, train_iter=train_iter, weights=ck["learner"]["network"])
        result = evaluator.evaluate(snapshot, n_episodes=n_episodes)
    finally:
        evaluator.close()
    frames = np.stack(recorder.frames) if recorder is not None and recorder.frames else None
    return CheckpointEvaluation(path=path, eval=result, recorded=ck.get("eval"), counters=dict(ck["counters"]),
                                config=cfg, frames=frames)


def _as_image(frame: np.ndarray) -> np.ndarray:
    """[C, H, W] -> [H, W] (one channel) or [H, W, C]; vectors stay as they are."""
    if frame.ndim == 3:
        return frame[0] if frame.shape[0] == 1 else np.moveaxis(frame, 0, -1)
    return frame


class _FrameRecorder:
    """A VectorEnv pass-through that keeps env 0's frames (``EnvBatch.frame``, the newest frame
    of the observation) from the reset until its first game ends, at most ``max_frames``."""

    def __init__(self, env: Any, max_frames: int) -> None:
        self.env = env
        self.max_frames = max_frames
        self.frames: list[np.ndarray] = []
        self._recording = False

    def __getattr__(self, name: str) -> Any:  # num_envs, action_space_size, shapes ...
        return getattr(self.env, name)

    def _keep(self, batch: Any) -> None:
        if self._recording and len(self.frames) < self.max_frames:
            self.frames.append(_as_image(np.array(batch.frame[0], copy=True)))

    def reset(self, seed: Optional[int] = None) -> Any:
        batch = self.env.reset(seed)
        self.frames, self._recording = [], True
        self._keep(batch)
        return batch

    def step(self, actions: np.ndarray) -> Any:
        res = self.env.step(actions)
        if res.real_episode_end[0]:
            self._recording = False  # res.batch already shows the next game
        self._keep(res.batch)
        return res

    def close(self) -> None:
        self.env.close()
