"""Matplotlib plots of an :class:`lz_tune.analysis.Experiment`.

Every function takes the experiment, draws on ``ax`` (or ``axes``) when given, otherwise on a new
figure, and returns the Figure. Figures are built with :class:`matplotlib.figure.Figure` directly
(no pyplot state), so they work under the Agg backend, in scripts and in Jupyter (``%matplotlib
inline``; a cell ending in the figure shows it; ``fig.savefig("x.png")`` exports it).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

try:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure
except ImportError as e:  # the `analysis` extra
    from lz_tune.extras import missing_extra

    raise missing_extra("lz_tune.analysis_plots (plots of an experiment)", "analysis", e) from e

from lz_tune.analysis import EVAL_METRIC, STEPS, Experiment


def _axes(ax: Optional[Axes], figsize: tuple[float, float]) -> tuple[Figure | SubFigure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _label(exp: Experiment, trial_id: str) -> str:
    """``trial_id`` plus the searched params of that trial (short)."""
    params = exp.searched_params()
    if not params:
        return trial_id
    hp = exp.hyperparameters.loc[trial_id]
    parts = [
        f"{p.split('.')[-1]}={hp[p]:.3g}" if isinstance(hp[p], float) else f"{p.split('.')[-1]}={hp[p]}"
        for p in params[:3]
    ]
    return f"{trial_id} ({', '.join(parts)})"


def plot_eval_returns(
    exp: Experiment, *, best: Optional[str] = None, mode: str = "max", ax: Optional[Axes] = None
) -> Figure | SubFigure:
    """Evaluation return (``evaluation/env_runners/episode_return_mean``) vs env steps, one line per trial; ``best``
    (default: the best trial by that metric, scope "all") drawn thick and labelled first."""
    fig, ax = _axes(ax, (7, 4))
    curve = exp.eval_curve()
    if best is None and not curve.empty:
        best = exp.best_trial(EVAL_METRIC, mode, "all")
    for trial_id, df in curve.groupby("trial_id", sort=True):
        is_best = trial_id == best
        ax.plot(
            df[STEPS],
            df[EVAL_METRIC],
            marker="o",
            markersize=3 if not is_best else 5,
            linewidth=2.8 if is_best else 1.0,
            alpha=1.0 if is_best else 0.55,
            zorder=3 if is_best else 2,
            label=("best: " if is_best else "") + _label(exp, str(trial_id)),
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (mean)")
    ax.set_title(f"Evaluation return per trial — {exp.path.name}")
    ax.grid(alpha=0.3)
    if not curve.empty:
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: not labels[i].startswith("best: "))
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize="small")
    else:
        ax.text(0.5, 0.5, "no evaluation yet", ha="center", va="center", transform=ax.transAxes)
    return fig


def plot_throughput(exp: Experiment, *, axes: Optional[Sequence[Axes]] = None) -> Figure | SubFigure:
    """Env steps/s (left) and learner updates/s (right) per Tune iteration vs the trial's wall time
    (``time_total_s``); one line per trial. ``axes``: two Axes to draw on."""
    fig: Figure | SubFigure  # (the figure of the axes given: a SubFigure's axes give it)
    if axes is None:
        fig = Figure(figsize=(10, 3.6), layout="constrained")
        axes = fig.subplots(1, 2)
    fig = axes[0].figure
    df = exp.throughput()
    for ax, col, title in (
        (axes[0], "env_steps_per_s_iter", "env steps / s"),
        (axes[1], "updates_per_s_iter", "learner updates / s"),
    ):
        for trial_id, t in df.groupby("trial_id", sort=True):
            if col in t.columns:
                ax.plot(t["time_total_s"], t[col], marker=".", label=str(trial_id))
        ax.set_xlabel("trial wall time (s)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize="small")
    return fig


def plot_policy_lag(
    exp: Experiment, *, column: str = "policy_lag/return_mean", ax: Optional[Axes] = None
) -> Figure | SubFigure:
    """Distribution of ``column`` (a :meth:`Experiment.policy_lag` column, in learner updates) over
    the results of each trial: one box per trial, points on top. All zeros for sync trials."""
    fig, ax = _axes(ax, (7, 3.6))
    df = exp.policy_lag()
    if column not in df.columns:
        raise ValueError(
            f"{exp.path}: no {column!r} in the results (policy lag columns: "
            f"{', '.join(c for c in df.columns if c.startswith('policy_lag/')) or 'none'})"
        )
    groups = [(str(k), g[column].dropna().to_numpy()) for k, g in df.groupby("trial_id", sort=True)]
    ax.boxplot([g for _, g in groups], showfliers=False)
    ax.set_xticks(range(1, len(groups) + 1), [k for k, _ in groups])
    rng = np.random.default_rng(0)
    for i, (_, values) in enumerate(groups, start=1):
        ax.scatter(i + rng.uniform(-0.12, 0.12, len(values)), values, s=8, alpha=0.5, zorder=3)
    ax.set_ylabel(f"{column} (updates)")
    ax.set_title("Policy lag per Tune iteration")
    ax.grid(alpha=0.3, axis="y")
    ax.tick_params(axis="x", labelrotation=20)
    return fig


def _looks_log(values: pd.Series) -> bool:
    """Positive numbers spanning at least a factor 10 (what loguniform ranges give)."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    return len(v) > 1 and bool((v > 0).all()) and v.max() / v.min() >= 10


def plot_hyperparameters(
    exp: Experiment,
    *,
    metric: str = EVAL_METRIC + "_best",
    params: Optional[list[str]] = None,
    log_x: Optional[dict[str, bool]] = None,
    axes: Optional[Sequence[Axes]] = None,
) -> Figure | SubFigure:
    """One panel per searched parameter (default :meth:`Experiment.searched_params`): the
    parameter's value vs ``metric`` (a column of :meth:`Experiment.results`), one point per trial.
    Numeric parameters get a log x axis when their values are positive and span >= 10x (override
    per key with ``log_x``); others are drawn as categories."""
    res = exp.results()
    if metric not in res.columns:
        raise ValueError(
            f"{exp.path}: no {metric!r} in the final results "
            f"(choose one of: {', '.join(c for c in res.columns if not c.startswith('config/'))})"
        )
    params = exp.searched_params() if params is None else params
    fig: Figure | SubFigure
    if axes is None:
        n = max(len(params), 1)
        cols = min(n, 3)
        fig = Figure(figsize=(4.2 * cols, 3.4 * math.ceil(n / cols)), layout="constrained")
        axes = list(np.atleast_1d(fig.subplots(math.ceil(n / cols), cols)).ravel())
        for extra in axes[len(params) :]:
            extra.set_visible(len(params) == 0)
    fig = axes[0].figure
    if not params:
        axes[0].text(
            0.5, 0.5, "no parameter varies between trials", ha="center", va="center", transform=axes[0].transAxes
        )
        axes[0].set_axis_off()
        return fig
    for ax, p in zip(axes, params):
        x: Any = res["config/" + p]
        numeric = pd.api.types.is_numeric_dtype(x) and not pd.api.types.is_bool_dtype(x)
        if not numeric:
            cats = sorted(x.astype(str).unique())
            x = x.astype(str).map({c: i for i, c in enumerate(cats)})
            ax.set_xticks(range(len(cats)), cats)
        ax.scatter(x, res[metric], s=30)
        if numeric and (log_x or {}).get(p, _looks_log(x)):
            ax.set_xscale("log")
        ax.set_xlabel(p)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    return fig


__all__ = ["plot_eval_returns", "plot_throughput", "plot_policy_lag", "plot_hyperparameters"]
