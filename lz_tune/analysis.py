"""Read a Ray Tune experiment of :class:`lz_tune.tune.MuZeroTrainable` into tidy pandas tables.

Works in a fresh process on the files alone (no Ray cluster, Ray is not even imported)::

    from lz_tune.analysis import load_experiment, evaluate_checkpoint
    exp = load_experiment("~/lz_results/cartpole_muzero")
    exp.summary()                                   # one row per trial, searched params + scores
    trial = exp.best_trial(mode="max")              # by evaluation/env_runners/episode_return_mean
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

import functools
import json
import math
import os
import re
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from lz_tune.checkpoint import CheckpointError, load_checkpoint
from lz_tune.metrics import EVAL_RETURN, RENAMED

#: the evaluated snapshot inside a Tune checkpoint folder (lz_tune.tune.trainable.CHECKPOINT_FILE)
CHECKPOINT_FILE = "lz_tune_checkpoint.pt"
#: the learner's state at the save inside a Tune checkpoint folder (lz_tune.tune.trainable.STATE_FILE)
STATE_FILE = "lz_tune_state.pt"
#: the evaluation return (lz_tune.metrics.EVAL_RETURN), what "best" means by default
EVAL_METRIC = EVAL_RETURN
STEPS = "num_env_steps_sampled_lifetime"
EVAL_TRAIN_ITER = "evaluation/train_iter"
EVAL_ENV_STEPS = "evaluation/num_env_steps_sampled_lifetime"
#: names of experiments written before lz_tune.metrics, read under the current ones
LEGACY_NAMES = {**{old: new for old, new in RENAMED.items() if old != new},
                "eval/reward_mean": EVAL_RETURN, "eval/train_iter": EVAL_TRAIN_ITER, "eval/env_steps": EVAL_ENV_STEPS,
                "driver_step_s": "perf/driver_step_s", "driver_setup_s": "perf/driver_setup_s"}
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

    ``path`` may also be ONE trial's folder, or a ``python -m lz_tune train`` run folder (its
    ``result.json`` holds one row per evaluation, its checkpoints are ``ckpt/*.pt``): then it is
    read as an experiment of that one trial.

    Raises FileNotFoundError (missing folder) or ValueError (a folder without trials, e.g. the
    storage path above the experiment), naming the path.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: experiment folder not found")
        if not self.path.is_dir():
            raise ValueError(f"{self.path}: not a folder (pass a Tune experiment folder)")
        self.trials: list[TrialInfo] = [self._trial_info(d) for d in sorted(self.path.iterdir())
                                        if d.is_dir() and any((d / f).is_file() for f in _TRIAL_FILES)]
        if not self.trials and any((self.path / f).is_file() for f in _TRIAL_FILES):
            self.trials = [self._trial_info(self.path)]  # one trial's folder, or a CLI run folder
        if not self.trials:
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
        (``training_iteration``, ``time_total_s``, ``num_env_steps_sampled_lifetime``,
        ``train_iter``, ``evaluation/env_runners/episode_return_mean``, ...; names of older
        experiments are read under today's, :data:`LEGACY_NAMES`) and ``config/<key>`` for each Tune config key."""
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
            # experiments written before lz_tune.metrics: their keys under today's names
            renames: dict[str, str] = {}
            for old, new in LEGACY_NAMES.items():
                if old in df.columns and new not in df.columns and new not in renames.values():
                    renames[old] = new
            df = df.rename(columns=renames)
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
        ``training_iteration``, ``num_env_steps_sampled_lifetime``, ``train_iter``, ``time_total_s``), plus
        ``<EVAL_METRIC>_last`` / ``<EVAL_METRIC>_best`` (last and best evaluation reported),
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
        :meth:`rank_trials`), ``training_iteration``, ``num_env_steps_sampled_lifetime``, ``train_iter``,
        ``time_total_s``, ``<EVAL_METRIC>_last`` and ``<EVAL_METRIC>_best``."""
        ranked = self.rank_trials(metric, mode, scope).set_index("trial_id")["score"]
        res = self.results().set_index("trial_id")
        cols = [c for c in ["training_iteration", STEPS, "train_iter", "time_total_s", EVAL_METRIC + "_last",
                            EVAL_METRIC + "_best"] if c in res.columns]
        table = res[["config/" + p for p in self.searched_params()] + cols].copy()
        table.columns = [c.removeprefix("config/") for c in table.columns]
        table.insert(len(self.searched_params()), "score", ranked)
        return table.sort_values("score", ascending=mode == "min", na_position="last").reset_index()

    # ------------------------------------------------------------------------------ derived tables

    def throughput(self) -> pd.DataFrame:
        """Speed over wall time, one row per (trial_id, training_iteration). Columns:
        ``trial_id``, ``training_iteration``, ``time_total_s``, ``num_env_steps_sampled_lifetime``, ``train_iter``,
        ``num_env_steps_sampled_lifetime_per_second`` / ``num_updates_per_second`` (as reported:
        average since the trial's process
        started) and ``env_steps_per_s_iter`` / ``updates_per_s_iter`` (within that iteration:
        counter delta / ``time_this_iter_s``; NaN where a restore moved the counters back)."""
        df = self.progress[[c for c in ["trial_id", "training_iteration", "time_total_s", "time_this_iter_s",
                                        STEPS, "train_iter", STEPS + "_per_second", "num_updates_per_second"]
                            if c in self.progress.columns]].copy()
        for counter, col in ((STEPS, "env_steps_per_s_iter"), ("train_iter", "updates_per_s_iter")):
            if counter in df.columns and "time_this_iter_s" in df.columns:
                delta = df.groupby("trial_id")[counter].diff().fillna(df[counter])
                df[col] = (delta / df["time_this_iter_s"]).where(delta >= 0)
        return df.drop(columns=["time_this_iter_s"], errors="ignore")

    def policy_lag(self) -> pd.DataFrame:
        """Policy lag (learner updates between the weights a collect used and the learner) per
        result row. Columns: ``trial_id``, ``training_iteration``, ``time_total_s`` and those of
        ``policy_lag/{launch,start,return}_{mean,max}`` that were reported: at the collect's launch,
        at its real start in the actor (later than the launch for a collect queued behind another)
        and when its result is consumed (all 0 for the sync pipeline)."""
        cols = ["trial_id", "training_iteration", "time_total_s"] + sorted(
            c for c in self.progress.columns if c.startswith("policy_lag/"))
        return self.progress[[c for c in cols if c in self.progress.columns]].copy()

    def eval_curve(self) -> pd.DataFrame:
        """One row per evaluation: ``trial_id``, ``training_iteration``, ``time_total_s``,
        ``num_env_steps_sampled_lifetime`` behind the evaluated snapshot (older results: at the
        first result that reported it), ``train_iter`` at that result, ``evaluation/train_iter``
        (updates behind the evaluated weights) and the evaluation return. Results carry the last
        evaluation forward; a new one is a change of ``evaluation/train_iter`` within a trial."""
        p = self.progress
        if EVAL_METRIC not in p.columns:
            return pd.DataFrame(columns=["trial_id", "training_iteration", "time_total_s", STEPS,
                                         "train_iter", EVAL_TRAIN_ITER, EVAL_METRIC])
        key = EVAL_TRAIN_ITER if EVAL_TRAIN_ITER in p.columns else EVAL_METRIC
        new = p[key].ne(p.groupby("trial_id")[key].shift())
        df = p[new & p[EVAL_METRIC].notna()].copy()
        if EVAL_ENV_STEPS in df.columns:  # exact: env steps behind the evaluated snapshot
            exact = df[EVAL_ENV_STEPS].where(df[EVAL_ENV_STEPS] >= 0)
            df[STEPS] = exact.fillna(df[STEPS]).astype(df[STEPS].dtype)
        cols = ["trial_id", "training_iteration", "time_total_s", STEPS, "train_iter", EVAL_TRAIN_ITER,
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
        the evaluation return; the state file when the trial had no evaluation yet); ``state_path``:
        the learner's state at the save (what a restore loads; None in folders of older versions);
        ``evaluation/env_runners/episode_return_mean`` and ``evaluation/train_iter`` (NaN / -1 without an evaluation);
        ``train_iter`` and ``num_env_steps_sampled_lifetime`` of the state. Unreadable checkpoints
        are skipped with a warning."""
        trials = [self.trial(trial_id)] if trial_id is not None else self.trials
        rows = [row for t in trials for row in _checkpoint_rows(t)]
        return pd.DataFrame(rows, columns=_CHECKPOINT_COLUMNS)

    def best_checkpoint(self, trial_id: Optional[str] = None, *, mode: str = "max") -> Path:
        """Path of the checkpoint file with the best evaluation return (``mode``) of
        ``trial_id`` (default: :meth:`best_trial` by that metric, scope ``"all"``); on ties the
        later checkpoint. FileNotFoundError naming the trial folder if it has no evaluated one."""
        _check_choice("mode", mode, MODES)
        trial = self.trial(trial_id if trial_id is not None else self.best_trial(EVAL_METRIC, mode, "all"))
        best = _best_evaluated(self.checkpoints(trial.trial_id), mode)
        if best is None:
            raise FileNotFoundError(f"{trial.path}: no checkpoint with an evaluation "
                                    f"(checkpoint_*/{CHECKPOINT_FILE})")
        return Path(best["path"])


_CHECKPOINT_COLUMNS = ["trial_id", "checkpoint", "kind", "path", "state_path", EVAL_METRIC, EVAL_TRAIN_ITER,
                       "train_iter", STEPS]


def _checkpoint_rows(t: TrialInfo) -> list[dict[str, Any]]:
    """One row of :meth:`Experiment.checkpoints` per readable Tune checkpoint folder of trial ``t``."""
    rows = []
    for f in sorted((t.path / "ckpt").glob("ckpt_*.pt")):  # a CLI run: evaluated checkpoints only
        try:
            ck = load_checkpoint(f)
        except CheckpointError as e:
            warnings.warn(str(e), stacklevel=3)
            continue
        ev = ck.get("eval") or {}
        rows.append({"trial_id": t.trial_id, "checkpoint": f.stem, "kind": ck.get("checkpoint_kind", "evaluated"),
                     "path": f, "state_path": None, EVAL_METRIC: float(ev.get("reward_mean", math.nan)),
                     EVAL_TRAIN_ITER: int(ev.get("train_iter", -1)),
                     "train_iter": int(ck["counters"].get("train_iter", -1)),
                     STEPS: int(ck["counters"].get("env_steps", -1))})
    for d in sorted(t.path.glob("checkpoint_*")):
        evaluated, state = d / CHECKPOINT_FILE, d / STATE_FILE
        if not evaluated.is_file() and not state.is_file():
            continue
        try:
            ev_ck = load_checkpoint(evaluated) if evaluated.is_file() else None
            st_ck = load_checkpoint(state) if state.is_file() else ev_ck
        except CheckpointError as e:
            warnings.warn(str(e), stacklevel=3)
            continue
        ev = (ev_ck or {}).get("eval") or {}
        rows.append({"trial_id": t.trial_id, "checkpoint": d.name,
                     "kind": st_ck.get("checkpoint_kind", "evaluated" if ev else "current"),
                     "path": evaluated if ev_ck is not None else state,
                     "state_path": state if state.is_file() else None,
                     EVAL_METRIC: float(ev.get("reward_mean", math.nan)),
                     EVAL_TRAIN_ITER: int(ev.get("train_iter", -1)),
                     "train_iter": int(st_ck["counters"].get("train_iter", -1)),
                     STEPS: int(st_ck["counters"].get("env_steps", -1))})
    return rows


def _best_evaluated(ck: pd.DataFrame, mode: str) -> Optional[pd.Series]:
    """The row of a :meth:`Experiment.checkpoints` table with the best ``evaluation/env_runners/episode_return_mean``
    (``mode``), on ties the later one; None without an evaluated row."""
    ck = ck.dropna(subset=[EVAL_METRIC])
    if ck.empty:
        return None
    # best last: the metric (negated for "min") ascending, then train_iter ascending (ties: later one)
    key = ck[EVAL_METRIC] if mode == "max" else -ck[EVAL_METRIC]
    ck = ck.assign(_key=key).sort_values(["_key", EVAL_TRAIN_ITER, "train_iter"], kind="stable")
    return ck.iloc[-1]


# ---------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class CheckpointEvaluation:
    """What :func:`evaluate_checkpoint` returns.

    ``path``: the checkpoint file played, ``source``: how it was picked from the path given (see
    :func:`resolve_checkpoint`); ``eval``: the :class:`lz_tune.workers.EvalResult` of the new
    episodes (``reward_mean``, ``returns``, ...); ``recorded``: the checkpoint's own evaluation dict
    (``reward_mean``, ``train_iter``, ...; None without one); ``counters``: env_steps / train_iter at
    the checkpoint; ``config``: the :class:`lz_tune.config.Config` played; ``seed``: the seed of
    evaluator env 0 (env i: seed + i); ``frames``: Atari only, uint8 ``[T, H, W]`` (grayscale) or
    ``[T, H, W, 3]`` network-input frames of env 0's first game (else None); ``rendered``: with
    ``render=True``, uint8 RGB ``[T, H, W, 3]`` frames of env 0's first episode as the env renders
    it (gymnasium's ``render_mode="rgb_array"``; Atari: ALE's full 210x160 RGB screen): the reset
    frame, then one per step up to and including the last one, so ``T = length + 1`` (at most
    ``max_frames``); ``rendered_episode``: ``{"return", "length"}`` of that episode; ``render_fps``:
    the env's playback speed (gymnasium's ``metadata["render_fps"]``, Atari 60 / frame_skip).
    """

    path: Path
    eval: Any
    recorded: Optional[dict[str, Any]]
    counters: dict[str, Any]
    config: Any
    frames: Optional[np.ndarray]
    rendered: Optional[np.ndarray] = None
    rendered_episode: Optional[dict[str, Any]] = None
    render_fps: Optional[float] = None
    source: str = ""
    seed: Optional[int] = None


def resolve_checkpoint(path: str | Path, *, mode: str = "max") -> tuple[Path, str]:
    """The checkpoint file that ``path`` names, and a line saying how it was picked.

    ``path`` may be a checkpoint file; a ``train`` run folder (its ``ckpt/ckpt_best.pt``, else
    ``ckpt/ckpt_latest.pt``); a Tune checkpoint folder ``checkpoint_00000N/`` (its evaluated snapshot
    :data:`CHECKPOINT_FILE`, else the state :data:`STATE_FILE`); a Tune trial folder (its checkpoint
    with the best evaluation return by ``mode``, as :meth:`Experiment.best_checkpoint`;
    without any evaluated one, its latest checkpoint); or a Tune experiment folder (the checkpoint
    with the best evaluation of all its trials). The evaluations are those the checkpoint files
    hold. Raises CheckpointError naming the path when it holds none (the
    file itself is checked when loaded)."""
    _check_choice("mode", mode, MODES)
    path = Path(path).expanduser()
    if not path.exists():
        raise CheckpointError(f"{path}: no such file or folder")
    if not path.is_dir():
        return path, "checkpoint file"
    for name in (CHECKPOINT_FILE, STATE_FILE):
        if (path / name).is_file():
            what = "its evaluated snapshot" if name == CHECKPOINT_FILE else "no evaluated snapshot: the learner state"
            return path / name, f"Tune checkpoint folder: {name} ({what})"
    for name, what in (("ckpt_best.pt", "the best evaluation"), ("ckpt_latest.pt", "the latest evaluation; "
                                                                                      "no ckpt_best.pt")):
        if (path / "ckpt" / name).is_file():
            return path / "ckpt" / name, f"train run folder: ckpt/{name} ({what})"
    if any((path / f).is_file() for f in _TRIAL_FILES) or any(path.glob(f"checkpoint_*/{CHECKPOINT_FILE}")) \
            or any(path.glob(f"checkpoint_*/{STATE_FILE}")):
        trial = Experiment._trial_info(path)
        ck = pd.DataFrame(_checkpoint_rows(trial), columns=_CHECKPOINT_COLUMNS)
        if ck.empty:
            raise CheckpointError(f"{path}: Tune trial folder without a readable checkpoint "
                                  f"(checkpoint_*/{CHECKPOINT_FILE} or {STATE_FILE})")
        best = _best_evaluated(ck, mode)
        if best is not None:
            return Path(best["path"]), (f"Tune trial folder: {best['checkpoint']}/{Path(best['path']).name}, the "
                                        f"{'best' if mode == 'max' else 'lowest'} evaluated checkpoint "
                                        f"({EVAL_METRIC} {best[EVAL_METRIC]:g} at train_iter "
                                        f"{best[EVAL_TRAIN_ITER]})")
        latest = ck.sort_values(["train_iter", "checkpoint"], kind="stable").iloc[-1]
        return Path(latest["path"]), (f"Tune trial folder: {latest['checkpoint']}/{Path(latest['path']).name} "
                                      f"(no evaluated checkpoint: the latest state)")
    if any(d.is_dir() and any((d / f).is_file() for f in _TRIAL_FILES) for d in path.iterdir()):
        exp = Experiment(path)  # the checkpoints' own evaluations decide, not the reported metric names
        best = _best_evaluated(exp.checkpoints(), mode)
        if best is None:
            raise CheckpointError(f"{path}: Tune experiment folder without an evaluated checkpoint "
                                  f"(*/checkpoint_*/{CHECKPOINT_FILE})")
        return Path(best["path"]), (f"Tune experiment folder: trial {best['trial_id']}, {best['checkpoint']}/"
                                    f"{Path(best['path']).name}, the {'best' if mode == 'max' else 'lowest'} "
                                    f"evaluated checkpoint of all trials ({EVAL_METRIC} {best[EVAL_METRIC]:g} at "
                                    f"train_iter {best[EVAL_TRAIN_ITER]})")
    raise CheckpointError(f"{path}: no checkpoint in this folder (looked for a train run's ckpt/ckpt_best.pt or "
                          f"ckpt/ckpt_latest.pt, a Tune checkpoint folder's {CHECKPOINT_FILE} or {STATE_FILE}, and "
                          "a Tune trial folder's checkpoint_*/)")


def evaluate_checkpoint(path: str | Path, *, n_episodes: Optional[int] = None, seed: Optional[int] = None,
                        overrides: Sequence[str] = (), record_frames: Optional[bool] = None,
                        max_frames: int = 5000, device: str = "cpu", render: bool = False) -> CheckpointEvaluation:
    """Play ``n_episodes`` (default: the config's ``evaluator.n_evaluator_episode``) evaluation
    episodes with the checkpoint's weights, with the project's :class:`lz_tune.workers.Evaluator`
    (greedy search, raw scores). ``path``: anything :func:`resolve_checkpoint` takes (a checkpoint
    file, a train run folder, a Tune checkpoint / trial / experiment folder). ``overrides``:
    CLI-style config changes for the replay (e.g. ``"env.evaluator_env_num=1"``,
    ``"mcts.eval_num_simulations=50"``); the network keys must not change. ``seed`` (of evaluator
    env 0) defaults to the seed the training evaluator used. ``record_frames`` (default: Atari
    only) keeps up to ``max_frames`` network-input frames of env 0's first game; ``render`` keeps
    up to ``max_frames`` RGB frames of env 0's first episode as the env renders them
    (``rendered``; classic control needs pygame, ``pip install "gymnasium[classic-control]"``).
    Raises CheckpointError (no or a bad checkpoint) or ConfigError (bad override, an env that
    cannot render) before any episode is played."""
    from lz_tune.config import Config, ConfigError
    from lz_tune.pipeline.backends import EVALUATOR_SEED_OFFSET
    from lz_tune.workers import Evaluator, WeightSnapshot, env_spec_for, make_env

    path, source = resolve_checkpoint(path)
    ck = load_checkpoint(path)
    try:
        cfg = Config.from_dict(ck["config"])
    except ConfigError as e:
        raise CheckpointError(f"{path}: the checkpoint's config does not load ({e})") from None
    if overrides:
        changed = cfg.with_overrides(list(overrides))
        network = [k for k in _changed_keys(cfg.to_dict(), changed.to_dict()) if k.split(".")[0] in ("model",
                                                                                                     "policy_type")]
        if network:
            raise ConfigError(f"{network[0]}: cannot change the network of a checkpoint for its evaluation")
        cfg = changed
    seed = cfg.seed + EVALUATOR_SEED_OFFSET if seed is None else seed
    if record_frames is None:
        record_frames = env_spec_for(cfg).is_atari
    env = make_env(cfg, num_envs=cfg.env.evaluator_env_num, seed=seed, mode="eval")
    try:
        screen = _screen_recorder(env, max_frames, seed) if render else None
        recorder = _FrameRecorder(screen or env, max_frames) if record_frames else None
        evaluator = Evaluator(cfg, seed=seed, device=device, env=recorder or screen or env)
    except BaseException:
        env.close()
        raise
    try:
        try:
            train_iter = int(ck["learner"].get("train_iter", ck["counters"].get("train_iter", 0)))
            snapshot = WeightSnapshot(version=train_iter, train_iter=train_iter, weights=ck["learner"]["network"])
            evaluator.policy.load_weights(snapshot.weights)
        except (RuntimeError, KeyError) as e:  # the overrides or the file do not fit the network
            raise CheckpointError(f"{path}: its weights do not fit the network of its config "
                                  f"({type(e).__name__}: {str(e).splitlines()[0]})") from None
        result = evaluator.evaluate(snapshot, n_episodes=n_episodes)
    finally:
        evaluator.close()
    frames = np.stack(recorder.frames) if recorder is not None and recorder.frames else None
    rendered = np.stack(screen.frames) if screen is not None and screen.frames else None
    return CheckpointEvaluation(path=path, eval=result, recorded=ck.get("eval"), counters=dict(ck["counters"]),
                                config=cfg, frames=frames, rendered=rendered,
                                rendered_episode=screen.episode if screen is not None else None,
                                render_fps=screen.fps if screen is not None else None, source=source, seed=seed)


def _changed_keys(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested config dicts."""
    out = []
    for k in a:
        key = f"{prefix}{k}"
        if isinstance(a[k], dict):
            out += _changed_keys(a[k], b[k], key + ".")
        elif a[k] != b[k]:
            out.append(key)
    return out


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


def _screen_recorder(env: Any, max_frames: int, seed: Optional[int]) -> Any:
    """A VectorEnv pass-through that renders env 0's first episode (see
    :attr:`CheckpointEvaluation.rendered`): exposes ``frames``, ``episode`` and ``fps``.
    ConfigError if this env cannot render."""
    from lz_tune.config import ConfigError
    from lz_tune.envs import AtariVectorEnv, GymVectorEnv

    if isinstance(env, AtariVectorEnv):
        return _AtariScreenRecorder(env, max_frames)
    if isinstance(env, GymVectorEnv):
        return _GymScreenRecorder(env, max_frames, seed)
    raise ConfigError(f"render: env {getattr(env, 'env_id', type(env).__name__)!r} ({type(env).__name__}) "
                      "has no RGB rendering; only gymnasium envs and Atari can be recorded")


class _EpisodeFrames:
    """Frames of one episode: ``frames`` (at most ``max_frames``), ``episode`` (return, length:
    set when it ended), ``fps``."""

    def __init__(self, max_frames: int, fps: float) -> None:
        self.max_frames = max_frames
        self.fps = fps
        self.frames: list[np.ndarray] = []
        self.episode: Optional[dict[str, Any]] = None
        self.state = "idle"  # -> "recording" at the first reset -> "done" when that episode ends
        self._return, self._length = 0.0, 0

    def keep(self, frame: np.ndarray) -> None:
        if len(self.frames) < self.max_frames:
            frame = np.asarray(frame)
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
                raise RuntimeError(f"render: expected uint8 [H, W, 3] RGB frames, got {frame.dtype} {frame.shape}")
            self.frames.append(np.array(frame, copy=True))

    def stepped(self, reward: float, ended: bool) -> None:
        self._return += float(reward)
        self._length += 1
        if ended:
            self.state = "done"
            self.episode = {"return": self._return, "length": self._length}


class _GymScreenRecorder(_EpisodeFrames):
    """Gymnasium envs: env 0 of the GymVectorEnv is made again from its own spec with
    ``render_mode="rgb_array"`` (same id, kwargs, time limit and seeding) and wrapped so that it
    renders after its reset and after every step, before the vector env's autoreset: the frames
    show the very env whose observations the search saw and whose actions it took."""

    def __init__(self, env: Any, max_frames: int, seed: Optional[int]) -> None:
        import gymnasium

        from lz_tune.config import ConfigError

        inner = getattr(env, "_envs", None)
        if not inner or getattr(inner[0], "spec", None) is None:
            raise ConfigError(f"render: cannot rebuild env 0 of {env.env_id!r} with render_mode='rgb_array'")
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # headless pygame: no "XDG_RUNTIME_DIR" noise
        try:
            renderable = gymnasium.make(inner[0].spec, render_mode="rgb_array")
        except Exception as e:  # noqa: BLE001 - gymnasium raises many kinds
            raise ConfigError(f"render: {env.env_id} cannot be made with render_mode='rgb_array' "
                              f"({type(e).__name__}: {e})") from None
        try:  # a first frame now, so that a missing renderer fails before any episode is played
            renderable.reset(seed=seed)
            probe = renderable.render()
        except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
            renderable.close()
            hint = "" if "pip install" in str(e) else '; classic control: pip install "gymnasium[classic-control]"'
            raise ConfigError(f"render: rendering {env.env_id} needs a package that is not installed: {e}{hint}") \
                from None
        except Exception as e:  # noqa: BLE001 - e.g. MuJoCo without an OpenGL context (set MUJOCO_GL=egl)
            renderable.close()
            raise ConfigError(f"render: {env.env_id} cannot render ({type(e).__name__}: {e})") from None
        if not isinstance(probe, np.ndarray) or probe.ndim != 3:
            renderable.close()
            raise ConfigError(f"render: {env.env_id} renders {type(probe).__name__}, not an RGB array")
        super().__init__(max_frames, float(renderable.metadata.get("render_fps") or 30))
        self.env = env
        inner[0].close()
        inner[0] = _render_on_step_class()(renderable, self)  # stepped and seeded by the vector env as before

    def __getattr__(self, name: str) -> Any:  # num_envs, action_space_size, shapes ...
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: Optional[int] = None) -> Any:
        return self.env.reset(seed)

    def step(self, actions: np.ndarray) -> Any:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()


@functools.lru_cache(maxsize=1)
def _render_on_step_class() -> type:
    """The gymnasium wrapper of env 0 (made on first use: this module does not import gymnasium)."""
    import gymnasium

    class _RenderOnStep(gymnasium.Wrapper):
        """Renders into ``sink`` after the first reset and after every step of that episode (so the
        last frame is the episode's end, not the vector env's autoreset)."""

        def __init__(self, env: Any, sink: _EpisodeFrames) -> None:
            super().__init__(env)
            self.sink = sink

        def reset(self, **kwargs: Any) -> Any:
            out = self.env.reset(**kwargs)
            if self.sink.state == "idle":
                self.sink.state = "recording"
                self.sink.keep(self.env.render())
            return out

        def step(self, action: Any) -> Any:
            out = self.env.step(action)
            if self.sink.state == "recording":
                self.sink.keep(self.env.render())
                self.sink.stepped(out[1], bool(out[2] or out[3]))
            return out

    return _RenderOnStep


class _AtariScreenRecorder(_EpisodeFrames):
    """Atari: ALE's C++ vector env serves only the preprocessed (e.g. 64x64 gray) frames, so env 0's
    first game is mirrored by a one-game ALE vector env with the same game, seed, sticky actions,
    no-op starts, fire reset, frame skip and frame cap, fed the same actions, that keeps the full
    RGB screen (210x160x3, no max-pool: what ``render_mode="rgb_array"`` shows). ALE is
    deterministic given the seed and the actions, so both play the same game frame for frame
    (``tests/test_cli_evaluate.py`` checks it bit for bit); each step's reward and end are compared
    and a difference raises RuntimeError."""

    def __init__(self, env: Any, max_frames: int) -> None:
        super().__init__(max_frames, 60.0 / env.options.frame_skip)
        self.env = env
        self._mirror: Any = None

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: Optional[int] = None) -> Any:
        mirror_seed = seed if seed is not None else getattr(self.env, "_initial_seed", None)
        batch = self.env.reset(seed)
        if self.state == "idle":
            self._mirror = _ale_mirror(self.env, screen=True)
            obs, _ = self._mirror.reset(seed=mirror_seed)
            self.state = "recording"
            self.keep(obs[0, -1])
        return batch

    def step(self, actions: np.ndarray) -> Any:
        res = self.env.step(actions)
        if self.state == "recording":
            obs, reward, terminated, truncated, info = self._mirror.step(np.asarray(actions, np.int64)[:1])
            ended = bool(terminated[0] or truncated[0])
            if float(reward[0]) != float(res.reward[0]) or ended != bool(res.real_episode_end[0]):
                self._close_mirror()
                raise RuntimeError(f"render: the mirrored game of {self.env.env_id} left env 0's game at step "
                                   f"{len(self.frames)} (reward {reward[0]} vs {res.reward[0]}, end {ended} vs "
                                   f"{bool(res.real_episode_end[0])})")
            self.keep((info["final_obs"] if ended and "final_obs" in info else obs)[0, -1])
            self.stepped(float(reward[0]), ended)
            if ended:
                self._close_mirror()
        return res

    def _close_mirror(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
            self._mirror = None

    def close(self) -> None:
        self._close_mirror()
        self.env.close()


def _ale_mirror(env: Any, *, screen: bool) -> Any:
    """A one-game ``ale_py`` vector env that plays like env 0 of the lz_tune AtariVectorEnv ``env``
    (same ROM, action set, seed handling, sticky actions, no-ops, fire reset, frame skip, frame
    cap; no episodic life, no reward clipping, same-step autoreset). ``screen``: observations are
    the full RGB screen without max-pool; else the same preprocessing as ``env``."""
    import ale_py
    from ale_py import roms
    from ale_py.vector_env import AtariVectorEnv as AleVectorEnv

    from lz_tune.envs.atari_vector import ALE_DEFAULT_MAX_FRAMES
    from lz_tune.envs.env_ids import resolve_env_id

    resolved = resolve_env_id(env.env_id)
    o = env.options
    if screen:
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # static: before the banner
        ale = ale_py.ALEInterface()
        ale.loadROM(roms.get_rom_path(resolved.atari_game))
        height, width = ale.getScreenDims()
        image = dict(img_height=int(height), img_width=int(width), grayscale=False, maxpool=False)
    else:
        image = dict(img_height=o.image_size, img_width=o.image_size, grayscale=o.grayscale, maxpool=True)
    return AleVectorEnv(resolved.atari_game, 1, num_threads=1,
                        max_num_frames_per_episode=o.max_episode_steps or ALE_DEFAULT_MAX_FRAMES,
                        repeat_action_probability=o.repeat_action_probability,
                        full_action_space=resolved.atari_full_action_space, autoreset_mode="SameStep",
                        stack_num=1, frameskip=o.frame_skip, noop_max=o.noop_max, episodic_life=False,
                        life_loss_info=False, reward_clipping=False, use_fire_reset=o.use_fire_reset, **image)
