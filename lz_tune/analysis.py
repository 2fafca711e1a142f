"""Read a Ray Tune experiment of :class:`lz_tune.tune.MuZeroTrainable` into tidy pandas tables.

Works in a fresh process on the files alone (no Ray cluster, Ray is not even imported; no torch
model is built)::

    from lz_tune.analysis import load_experiment
    exp = load_experiment("~/lz_results/cartpole_muzero")
    exp.summary()                                   # one row per trial, searched params + scores
    trial = exp.best_trial(mode="max")              # by evaluation/env_runners/episode_return_mean
    exp.best_checkpoint(trial)                      # the file; play it: lz_tune.checkpoint_eval

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
from lz_tune.metrics import EVAL_RETURN
from lz_tune.run_folder import BEST_CHECKPOINT, CKPT_DIR, LATEST_CHECKPOINT, PARAMS_FILE, RESULT_FILE

#: the evaluated snapshot inside a Tune checkpoint folder (lz_tune.tune.trainable.CHECKPOINT_FILE)
CHECKPOINT_FILE = "lz_tune_checkpoint.pt"
#: the learner's state at the save inside a Tune checkpoint folder (lz_tune.tune.trainable.STATE_FILE)
STATE_FILE = "lz_tune_state.pt"
#: the evaluation return (lz_tune.metrics.EVAL_RETURN), what "best" means by default
EVAL_METRIC = EVAL_RETURN
STEPS = "num_env_steps_sampled_lifetime"
EVAL_TRAIN_ITER = "evaluation/train_iter"
EVAL_ENV_STEPS = "evaluation/num_env_steps_sampled_lifetime"
MODES = ("max", "min")
SCOPES = ("last", "all")
_TRIAL_ID = re.compile(r"_([0-9a-f]{5}_\d{5})(?:_|$)")
_TRIAL_FILES = (RESULT_FILE, "progress.csv", PARAMS_FILE)


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
        self.trials: list[TrialInfo] = [
            self._trial_info(d)
            for d in sorted(self.path.iterdir())
            if d.is_dir() and any((d / f).is_file() for f in _TRIAL_FILES)
        ]
        if not self.trials and any((self.path / f).is_file() for f in _TRIAL_FILES):
            self.trials = [self._trial_info(self.path)]  # one trial's folder, or a CLI run folder
        if not self.trials:
            inner = sorted({f.parent.parent.name for name in _TRIAL_FILES for f in self.path.glob(f"*/*/{name}")})
            hint = f"; it holds experiment folders, pass one of them: {', '.join(inner)}" if inner else ""
            raise ValueError(
                f"{self.path}: not a Tune experiment folder (no trial folder with {', '.join(_TRIAL_FILES)}){hint}"
            )

    def __repr__(self) -> str:
        return f"Experiment({str(self.path)!r}, {len(self.trials)} trials)"

    @staticmethod
    def _trial_info(d: Path) -> TrialInfo:
        params = json.loads((d / PARAMS_FILE).read_text()) if (d / PARAMS_FILE).is_file() else {}
        m = _TRIAL_ID.search(d.name)
        trial_id = m.group(1) if m else d.name
        if not m and (d / RESULT_FILE).is_file():  # a custom folder name: ask the results
            first = _read_json_lines(d / RESULT_FILE)[:1]
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
        ``train_iter``, ``evaluation/env_runners/episode_return_mean``, ...: :mod:`lz_tune.metrics`)
        and ``config/<key>`` for each Tune config key."""
        frames = []
        for t in self.trials:
            if (t.path / RESULT_FILE).is_file():
                df = pd.json_normalize(_read_json_lines(t.path / RESULT_FILE), sep="/")
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
        return sorted(
            c
            for c in self.progress.columns
            if c not in skip
            and not c.startswith("config/")
            and pd.api.types.is_numeric_dtype(self.progress[c])
            and not pd.api.types.is_bool_dtype(self.progress[c])
        )

    def _metric_column(self, metric: str) -> pd.Series:
        if metric not in set(self.metrics()) | {"training_iteration"}:
            raise ValueError(
                f"{self.path}: no numeric metric {metric!r} in the results (available: {', '.join(self.metrics())})"
            )
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
        cols = [
            c
            for c in [
                "training_iteration",
                STEPS,
                "train_iter",
                "time_total_s",
                EVAL_METRIC + "_last",
                EVAL_METRIC + "_best",
            ]
            if c in res.columns
        ]
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
        df = self.progress[
            [
                c
                for c in [
                    "trial_id",
                    "training_iteration",
                    "time_total_s",
                    "time_this_iter_s",
                    STEPS,
                    "train_iter",
                    STEPS + "_per_second",
                    "num_updates_per_second",
                ]
                if c in self.progress.columns
            ]
        ].copy()
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
            c for c in self.progress.columns if c.startswith("policy_lag/")
        )
        return self.progress[[c for c in cols if c in self.progress.columns]].copy()

    def eval_curve(self) -> pd.DataFrame:
        """One row per evaluation: ``trial_id``, ``training_iteration``, ``time_total_s``,
        ``num_env_steps_sampled_lifetime`` behind the evaluated snapshot (older results: at the
        first result that reported it), ``train_iter`` at that result, ``evaluation/train_iter``
        (updates behind the evaluated weights) and the evaluation return. Results carry the last
        evaluation forward; a new one is a change of ``evaluation/train_iter`` within a trial."""
        p = self.progress
        if EVAL_METRIC not in p.columns:
            return pd.DataFrame(
                columns=[
                    "trial_id",
                    "training_iteration",
                    "time_total_s",
                    STEPS,
                    "train_iter",
                    EVAL_TRAIN_ITER,
                    EVAL_METRIC,
                ]
            )
        key = EVAL_TRAIN_ITER if EVAL_TRAIN_ITER in p.columns else EVAL_METRIC
        new = p[key].ne(p.groupby("trial_id")[key].shift())
        df = p[new & p[EVAL_METRIC].notna()].copy()
        if EVAL_ENV_STEPS in df.columns:  # exact: env steps behind the evaluated snapshot
            exact = df[EVAL_ENV_STEPS].where(df[EVAL_ENV_STEPS] >= 0)
            df[STEPS] = exact.fillna(df[STEPS]).astype(df[STEPS].dtype)
        cols = ["trial_id", "training_iteration", "time_total_s", STEPS, "train_iter", EVAL_TRAIN_ITER, EVAL_METRIC]
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
        return out.sort_values("score", ascending=mode == "min", na_position="last", kind="stable", ignore_index=True)

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
            raise FileNotFoundError(f"{trial.path}: no checkpoint with an evaluation (checkpoint_*/{CHECKPOINT_FILE})")
        return Path(best["path"])


_CHECKPOINT_COLUMNS = [
    "trial_id",
    "checkpoint",
    "kind",
    "path",
    "state_path",
    EVAL_METRIC,
    EVAL_TRAIN_ITER,
    "train_iter",
    STEPS,
]


def _checkpoint_rows(t: TrialInfo) -> list[dict[str, Any]]:
    """One row of :meth:`Experiment.checkpoints` per readable Tune checkpoint folder of trial ``t``."""
    rows = []
    for f in sorted((t.path / CKPT_DIR).glob("ckpt_*.pt")):  # a CLI run: evaluated checkpoints only
        try:
            ck = load_checkpoint(f)
        except CheckpointError as e:
            warnings.warn(str(e), stacklevel=3)
            continue
        ev = ck.get("eval") or {}
        rows.append(
            {
                "trial_id": t.trial_id,
                "checkpoint": f.stem,
                "kind": ck.get("checkpoint_kind", "evaluated"),
                "path": f,
                "state_path": None,
                EVAL_METRIC: float(ev.get("reward_mean", math.nan)),
                EVAL_TRAIN_ITER: int(ev.get("train_iter", -1)),
                "train_iter": int(ck["counters"].get("train_iter", -1)),
                STEPS: int(ck["counters"].get("env_steps", -1)),
            }
        )
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
        assert st_ck is not None  # one of the two files is there
        ev = (ev_ck or {}).get("eval") or {}
        rows.append(
            {
                "trial_id": t.trial_id,
                "checkpoint": d.name,
                "kind": st_ck.get("checkpoint_kind", "evaluated" if ev else "current"),
                "path": evaluated if ev_ck is not None else state,
                "state_path": state if state.is_file() else None,
                EVAL_METRIC: float(ev.get("reward_mean", math.nan)),
                EVAL_TRAIN_ITER: int(ev.get("train_iter", -1)),
                "train_iter": int(st_ck["counters"].get("train_iter", -1)),
                STEPS: int(st_ck["counters"].get("env_steps", -1)),
            }
        )
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
    for name, what in (
        (BEST_CHECKPOINT, "the best evaluation"),
        (LATEST_CHECKPOINT, f"the latest evaluation; no {BEST_CHECKPOINT}"),
    ):
        if (path / CKPT_DIR / name).is_file():
            return path / CKPT_DIR / name, f"train run folder: {CKPT_DIR}/{name} ({what})"
    if (
        any((path / f).is_file() for f in _TRIAL_FILES)
        or any(path.glob(f"checkpoint_*/{CHECKPOINT_FILE}"))
        or any(path.glob(f"checkpoint_*/{STATE_FILE}"))
    ):
        trial = Experiment._trial_info(path)
        ck = pd.DataFrame(_checkpoint_rows(trial), columns=_CHECKPOINT_COLUMNS)
        if ck.empty:
            raise CheckpointError(
                f"{path}: Tune trial folder without a readable checkpoint "
                f"(checkpoint_*/{CHECKPOINT_FILE} or {STATE_FILE})"
            )
        best = _best_evaluated(ck, mode)
        if best is not None:
            return Path(best["path"]), (
                f"Tune trial folder: {best['checkpoint']}/{Path(best['path']).name}, the "
                f"{'best' if mode == 'max' else 'lowest'} evaluated checkpoint "
                f"({EVAL_METRIC} {best[EVAL_METRIC]:g} at train_iter "
                f"{best[EVAL_TRAIN_ITER]})"
            )
        latest = ck.sort_values(["train_iter", "checkpoint"], kind="stable").iloc[-1]
        return Path(latest["path"]), (
            f"Tune trial folder: {latest['checkpoint']}/{Path(latest['path']).name} "
            f"(no evaluated checkpoint: the latest state)"
        )
    if any(d.is_dir() and any((d / f).is_file() for f in _TRIAL_FILES) for d in path.iterdir()):
        exp = Experiment(path)  # the checkpoints' own evaluations decide, not the reported metric names
        best = _best_evaluated(exp.checkpoints(), mode)
        if best is None:
            raise CheckpointError(
                f"{path}: Tune experiment folder without an evaluated checkpoint (*/checkpoint_*/{CHECKPOINT_FILE})"
            )
        return Path(best["path"]), (
            f"Tune experiment folder: trial {best['trial_id']}, {best['checkpoint']}/"
            f"{Path(best['path']).name}, the {'best' if mode == 'max' else 'lowest'} "
            f"evaluated checkpoint of all trials ({EVAL_METRIC} {best[EVAL_METRIC]:g} at "
            f"train_iter {best[EVAL_TRAIN_ITER]})"
        )
    raise CheckpointError(
        f"{path}: no checkpoint in this folder (looked for a train run's ckpt/ckpt_best.pt or "
        f"ckpt/ckpt_latest.pt, a Tune checkpoint folder's {CHECKPOINT_FILE} or {STATE_FILE}, and "
        "a Tune trial folder's checkpoint_*/)"
    )
