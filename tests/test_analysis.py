"""lz_tune.analysis on ONE tiny real Tune experiment (2 trials, interrupted and resumed so that
result rows repeat), its plots, and both notebooks executed top to bottom with nbclient."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
from ray import tune  # noqa: E402
from test_tune import TINY  # noqa: E402  (the tiny CartPole config of the Tune tests)

from lz_tune.analysis import CHECKPOINT_FILE, load_experiment  # noqa: E402
from lz_tune.checkpoint_eval import evaluate_checkpoint  # noqa: E402
from lz_tune.tune import MuZeroTrainable as _MuZeroTrainable  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
# evaluations (hence checkpoints) every ~40 updates; iteration 3 is never checkpointed (below)
SPACE = {
    "config": "lz_tune.zoo.classic_control.cartpole_muzero",
    "step_seconds": 1.0,
    "driver_num_cpus": 1,
    **TINY,
    "evaluator.eval_freq": 40,
    "learner.learning_rate": tune.grid_search([1e-3, 3e-3]),
}
STOP = {"training_iteration": 6}


UNCHECKPOINTED_ITERATION = 3


def _trainable_with_an_uncheckpointed_result() -> type:
    """MuZeroTrainable whose result of iteration 3 never asks for a checkpoint (whether or not an
    evaluation finished in it), so that interrupting there always leaves a reported iteration
    newer than the trial's last checkpoint, however fast or slow this machine is. Defined in a
    function so that Ray pickles it by value into the trial processes."""

    class MuZeroTrainable(_MuZeroTrainable):
        def step(self):
            result = super().step()
            if self.iteration + 1 == UNCHECKPOINTED_ITERATION:
                result.pop("should_checkpoint", None)
            return result

    return MuZeroTrainable


class _InterruptAfterUncheckpointedResult(tune.Callback):
    """Interrupts tune.run (SIGUSR1, Tune's own 'stop and save state' signal) at the first result
    of iteration 3, which is never checkpointed: resuming then restores that trial from an older
    checkpoint (or restarts it) and it reports that iteration again."""

    def __init__(self) -> None:
        self.sent_at: tuple[str, int] | None = None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.sent_at is None and result["training_iteration"] == UNCHECKPOINTED_ITERATION:
            assert not result.get("should_checkpoint")
            self.sent_at = (trial.trial_id, result["training_iteration"])
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    """Two CartPole trials, interrupted mid-run and resumed with tune.run(resume=True)."""
    import torch

    torch.set_num_threads(1)
    storage = tmp_path_factory.mktemp("analysis")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        interrupt = _InterruptAfterUncheckpointedResult()
        trainable = _trainable_with_an_uncheckpointed_result()
        t0 = time.perf_counter()
        tune.run(
            trainable, config=SPACE, stop=STOP, storage_path=str(storage), name="exp", verbose=0, callbacks=[interrupt]
        )
        assert interrupt.sent_at is not None, "the first run finished without an uncheckpointed result"
        t1 = time.perf_counter()
        analysis = tune.run(
            trainable,
            config=SPACE,
            stop=STOP,
            storage_path=str(storage),
            name="exp",
            verbose=0,
            resume=True,
            raise_on_failed_trial=True,
        )
        assert all(t.status == "TERMINATED" for t in analysis.trials)
        print(
            f"experiment: interrupted at {interrupt.sent_at} after {t1 - t0:.1f}s, "
            f"resumed run {time.perf_counter() - t1:.1f}s"
        )
    finally:
        signal.signal(signal.SIGUSR1, previous)
        if started:
            ray.shutdown()  # the notebooks start their own Ray
    return storage / "exp"


def _raw_rows(exp_dir: Path) -> dict[str, list[dict]]:
    """result.json rows per trial_id, by hand."""
    out = {}
    for f in sorted(exp_dir.glob("*/result.json")):
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        out[rows[0]["trial_id"]] = rows
    return out


def _dedup_by_hand(rows: list[dict]) -> list[dict]:
    by_iter = {}
    for r in rows:
        by_iter[r["training_iteration"]] = r  # later rows win
    return [by_iter[k] for k in sorted(by_iter)]


def test_resumed_trial_rows_are_deduplicated(experiment):
    raw = _raw_rows(experiment)
    assert len(raw) == 2
    dup = {t: len(rows) - len({r["training_iteration"] for r in rows}) for t, rows in raw.items()}
    assert sum(dup.values()) > 0, "the resume did not repeat any training_iteration: nothing to deduplicate"
    exp = load_experiment(experiment)
    assert len(exp.raw_progress) == sum(len(rows) for rows in raw.values())
    p = exp.progress
    assert not p.duplicated(["trial_id", "training_iteration"]).any()
    for trial_id, rows in raw.items():
        expected = _dedup_by_hand(rows)
        got = p[p["trial_id"] == trial_id]
        assert got["training_iteration"].tolist() == [r["training_iteration"] for r in expected]
        assert got["timestamp"].tolist() == [r["timestamp"] for r in expected]
        assert got["train_iter"].tolist() == [r["train_iter"] for r in expected]
        assert got["training_iteration"].max() == STOP["training_iteration"]


@pytest.mark.parametrize(
    "metric", ["time_total_s", "num_env_steps_sampled_lifetime", "evaluation/env_runners/episode_return_mean"]
)
@pytest.mark.parametrize("scope", ["last", "all"])
def test_best_trial_follows_metric_mode_and_scope(experiment, metric, scope):
    exp = load_experiment(experiment)
    expected, scores = {}, {}
    for mode in ("max", "min"):
        scores[mode] = {}
        for trial_id, rows in _raw_rows(experiment).items():
            values = [r[metric] for r in _dedup_by_hand(rows) if r[metric] == r[metric]]  # drop NaN
            if values:
                scores[mode][trial_id] = values[-1] if scope == "last" else (max if mode == "max" else min)(values)
        expected[mode] = (max if mode == "max" else min)(scores[mode], key=scores[mode].get)
        assert exp.best_trial(metric, mode=mode, scope=scope) == expected[mode]
        ranked = exp.rank_trials(metric, mode=mode, scope=scope)
        assert ranked["score"].iloc[0] == scores[mode][expected[mode]]
    if scope == "last" and len(set(scores["max"].values())) == 2:  # different last values: max and min differ
        assert expected["max"] != expected["min"]
    if metric == "time_total_s" and scope == "last":  # two trials never end at the same float wall time
        assert len(set(scores["max"].values())) == 2


def test_tables_have_the_documented_columns(experiment):
    exp = load_experiment(experiment)
    assert exp.searched_params() == ["learner.learning_rate"]
    res = exp.results()
    assert len(res) == 2 and set(res["config/learner.learning_rate"]) == {1e-3, 3e-3}
    assert {
        "trial_id",
        "trial_name",
        "num_env_steps_sampled_lifetime",
        "train_iter",
        "time_total_s",
        "evaluation/env_runners/episode_return_mean_best",
    } <= set(res)
    summary = exp.summary()
    assert list(summary.columns[:3]) == ["trial_id", "learner.learning_rate", "score"]
    assert summary["score"].is_monotonic_decreasing
    thr = exp.throughput()
    assert {
        "num_env_steps_sampled_lifetime_per_second",
        "num_updates_per_second",
        "env_steps_per_s_iter",
        "updates_per_s_iter",
    } <= set(thr)
    assert (thr["env_steps_per_s_iter"].dropna() >= 0).all() and thr["env_steps_per_s_iter"].max() > 0
    assert {"policy_lag/launch_mean", "policy_lag/start_max", "policy_lag/return_max"} <= set(exp.policy_lag())
    curve = exp.eval_curve()
    assert set(curve["trial_id"]) == {t.trial_id for t in exp.trials}
    assert curve["evaluation/env_runners/episode_return_mean"].notna().all()
    assert not curve.duplicated(["trial_id", "evaluation/train_iter"]).any()


def test_best_checkpoint_is_evaluated_again(experiment):
    exp = load_experiment(experiment)
    best = exp.best_trial("evaluation/env_runners/episode_return_mean", "max", "all")
    ck = exp.checkpoints(best)
    assert len(ck) >= 1
    path = exp.best_checkpoint()
    assert path.name == CHECKPOINT_FILE and path.parent.parent == exp.trial(best).path
    assert (
        ck.loc[ck["path"] == path, "evaluation/env_runners/episode_return_mean"].item()
        == ck["evaluation/env_runners/episode_return_mean"].max()
    )
    run = evaluate_checkpoint(path, n_episodes=2)
    assert run.eval.num_episodes == 2 and run.eval.reward_mean > 0
    assert run.recorded["train_iter"] == run.eval.train_iter
    assert run.frames is None  # CartPole: no frames


@pytest.mark.parametrize("mode,expected", [("max", "c_late_best"), ("min", "c_late_worst")])
def test_best_checkpoint_picks_the_best_evaluation_and_the_later_on_ties(experiment, monkeypatch, mode, expected):
    """Golden table: unordered rows, a tie at both ends, one checkpoint without an evaluation."""
    import pandas as pd

    exp = load_experiment(experiment)
    trial_id = exp.trials[0].trial_id
    rows = [
        ("c_mid", 12.0, 30),
        ("c_late_best", 18.0, 50),
        ("c_none", float("nan"), 60),
        ("c_early_best", 18.0, 20),
        ("c_early_worst", 9.5, 10),
        ("c_late_worst", 9.5, 40),
    ]
    table = pd.DataFrame(
        {
            "trial_id": trial_id,
            "checkpoint": [r[0] for r in rows],
            "path": [Path(r[0]) / CHECKPOINT_FILE for r in rows],
            "evaluation/env_runners/episode_return_mean": [r[1] for r in rows],
            "evaluation/train_iter": [r[2] for r in rows],
            "train_iter": [r[2] for r in rows],
            "num_env_steps_sampled_lifetime": 0,
        }
    )
    monkeypatch.setattr(exp, "checkpoints", lambda trial=None: table)
    assert exp.best_checkpoint(trial_id, mode=mode) == Path(expected) / CHECKPOINT_FILE


def test_checkpoint_file_names_match_the_trainable():
    from lz_tune.analysis import STATE_FILE
    from lz_tune.tune.trainable import CHECKPOINT_FILE as TRAINABLE_FILE
    from lz_tune.tune.trainable import STATE_FILE as TRAINABLE_STATE

    assert CHECKPOINT_FILE == TRAINABLE_FILE and STATE_FILE == TRAINABLE_STATE


def test_atari_evaluation_returns_frames(tmp_path):
    """An untrained tiny Pong checkpoint: frames of env 0's first (capped) game come back."""
    from lz_tune.algos import get_algorithm
    from lz_tune.checkpoint import save_checkpoint
    from lz_tune.config_loader import load_config_module
    from lz_tune.workers import env_spec_for

    cfg = load_config_module(str(REPO_ROOT / "zoo/atari/pong_muzero.py")).with_overrides(
        [
            "env.evaluator_env_num=1",
            "evaluator.n_evaluator_episode=1",
            "env.max_episode_steps=12",
            "mcts.num_simulations=2",
            "model.num_channels=8",
            "model.value_support_size=5",
            "model.reward_support_size=5",
            "model.projection_dim=8",
            "learner.num_threads=1",
        ]
    )
    learner = get_algorithm("muzero").make_learner(cfg, env_spec_for(cfg))
    path = save_checkpoint(
        tmp_path / CHECKPOINT_FILE,
        {
            "policy_type": "muzero",
            "config": cfg.to_dict(),
            "learner": learner.state_dict(),
            "counters": {"env_steps": 0, "train_iter": 0},
            "eval": None,
        },
    )
    run = evaluate_checkpoint(tmp_path, n_episodes=1)
    assert run.eval.num_episodes == 1 and run.eval.episode_length_mean == 12
    assert run.frames is not None and run.frames.shape == (12, 64, 64) and run.frames.dtype.name == "uint8"
    assert evaluate_checkpoint(path, n_episodes=1, max_frames=5).frames.shape[0] == 5


def test_clear_errors(experiment, tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope"))):
        load_experiment(tmp_path / "nope")
    with pytest.raises(ValueError, match="not a Tune experiment folder"):
        load_experiment(tmp_path)
    trial_dir = next(p for p in experiment.iterdir() if (p / "params.json").is_file())
    assert len(load_experiment(trial_dir).trials) == 1  # one trial's folder reads as a one-trial experiment
    with pytest.raises(ValueError, match="pass one of them: exp"):
        load_experiment(experiment.parent)
    exp = load_experiment(experiment)
    with pytest.raises(ValueError, match=r"no numeric metric 'eval/reward'.*available: .*episode_return_mean"):
        exp.best_trial("eval/reward")
    with pytest.raises(ValueError, match="mode: must be one of"):
        exp.best_trial("train_iter", mode="maximum")
    with pytest.raises(ValueError, match="scope"):
        exp.rank_trials("train_iter", scope="best")
    with pytest.raises(ValueError, match="no trial 'zzz'"):
        exp.trial("zzz")


def test_plots_return_figures(experiment):
    from matplotlib.figure import Figure

    from lz_tune.analysis_plots import plot_eval_returns, plot_hyperparameters, plot_policy_lag, plot_throughput

    exp = load_experiment(experiment)
    best = exp.best_trial("evaluation/env_runners/episode_return_mean", "max", "all")
    figs = [plot_eval_returns(exp), plot_throughput(exp), plot_policy_lag(exp), plot_hyperparameters(exp)]
    for fig in figs:
        assert isinstance(fig, Figure)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        assert buf.getvalue()[:4] == b"\x89PNG"
    eval_ax = figs[0].axes[0]
    assert len(eval_ax.lines) == 2
    thick = max(eval_ax.lines, key=lambda line: line.get_linewidth())
    assert thick.get_label().startswith(f"best: {best}")
    assert len(figs[1].axes) == 2 and len(figs[3].axes) == 1
    assert figs[3].axes[0].get_xlabel() == "learner.learning_rate"
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_eval_returns(exp, ax=ax) is fig


# ------------------------------------------------------------------------------------ notebooks


def _execute(name: str, monkeypatch, **env: str):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = REPO_ROOT / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # committed without outputs
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path}: commit it without outputs"
    nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    pngs = sum("image/png" in o.get("data", {}) for o in outputs)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    return pngs, text


def test_analyze_notebook_runs_on_the_experiment(experiment, monkeypatch):
    pngs, text = _execute("analyze_experiment.ipynb", monkeypatch, LZ_EXPERIMENT=str(experiment), LZ_EVAL_EPISODES="2")
    assert pngs >= 4  # eval returns, throughput, policy lag, hyperparameters
    m = re.search(r"re-evaluated: mean return ([\d.]+) .* over 2 episodes", text)
    assert m and float(m.group(1)) > 0, text[-2000:]


@pytest.mark.slow  # ~45 s (a 2-trial search inside the notebook); the analysis notebook runs by default
def test_quickstart_notebook_runs_a_tiny_search(monkeypatch, tmp_path):
    if ray.is_initialized():  # the session's shared cluster (tests/conftest.py): the notebook starts its own
        ray.shutdown()
    pngs, text = _execute("quickstart.ipynb", monkeypatch, LZ_QUICKSTART_TINY="1", LZ_QUICKSTART_STORAGE=str(tmp_path))
    assert pngs >= 2
    assert re.search(r"re-evaluated: mean return [\d.]+ over 4 episodes", text), text[-2000:]
    assert re.search(r"max_env_step reached: best evaluation [\d.]+, \d+ env steps", text), text[-2000:]
    assert re.search(r"evaluated again: [\d.]+ \+- [\d.]+ over 4 episodes", text), text[-2000:]
    assert (tmp_path / "one_agent" / "ckpt" / "ckpt_latest.pt").is_file()  # lz_tune.train's run folder
    exp = load_experiment(tmp_path / "quickstart")
    assert len(exp.trials) == 2 and len(exp.eval_curve()) >= 2


# ------------------------------------------------------------------------------------ CLI runs


def test_a_train_run_folder_is_analysed_like_a_tune_trial(tmp_path):
    """`python -m lz_tune train` keeps its evaluation history (result.json, params.json): the run
    folder loads as a one-trial experiment, with its evaluation curve and its checkpoints."""
    from lz_tune.__main__ import main

    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "zoo/classic_control/cartpole_muzero.py",
                "--exp-dir",
                str(run),
                "--quiet",
                *[f"{k}={v!r}" for k, v in TINY.items()],
                "max_env_step=200",
            ]
        )
        == 0
    )
    exp = load_experiment(run)
    assert len(exp.trials) == 1 and exp.trials[0].params["mcts.num_simulations"] == 4
    curve = exp.eval_curve()
    evals = [json.loads(line) for line in (run / "result.json").read_text().splitlines()]
    assert len(curve) == len(evals) >= 2
    assert list(curve["evaluation/train_iter"]) == [e["evaluation/train_iter"] for e in evals]
    assert list(curve["evaluation/env_runners/episode_return_mean"]) == [
        e["evaluation/env_runners/episode_return_mean"] for e in evals
    ]
    ck = exp.checkpoints()
    assert set(ck["checkpoint"]) == {"ckpt_best", "ckpt_latest"}
    best = exp.best_checkpoint()
    score = ck.set_index("checkpoint")["evaluation/env_runners/episode_return_mean"]
    top = max(e["evaluation/env_runners/episode_return_mean"] for e in evals)
    assert score["ckpt_best"] == top
    # the chosen file holds the best return (ckpt_latest can tie with ckpt_best)
    assert best.name in ("ckpt_best.pt", "ckpt_latest.pt") and score[best.stem] == top
    # a resumed run appends to the same history
    assert (
        main(
            [
                "train",
                "zoo/classic_control/cartpole_muzero.py",
                "--resume",
                str(run),
                "--quiet",
                *[f"{k}={v!r}" for k, v in TINY.items()],
                "max_env_step=300",
            ]
        )
        == 0
    )
    again = load_experiment(run).eval_curve()
    assert len(again) > len(curve) and again["evaluation/train_iter"].is_monotonic_increasing


def test_analyze_notebook_degrades_on_an_experiment_without_evaluations(tmp_path, monkeypatch):
    """A search stopped before any trial evaluated: the notebook shows what there is (results,
    throughput, configs) and says what is missing instead of stopping with an error."""
    exp_dir = tmp_path / "early"
    for k, lr in enumerate([1e-3, 3e-3]):
        trial = exp_dir / f"MuZeroTrainable_ab12c_0000{k}_{k}_lr={lr}"
        trial.mkdir(parents=True)
        (trial / "params.json").write_text(json.dumps({"learner.learning_rate": lr}))
        rows = [
            {
                "training_iteration": i,
                "time_total_s": 2.0 * i,
                "time_this_iter_s": 2.0,
                "train_iter": 0,
                "num_env_steps_sampled_lifetime": 40 * i,
                "trial_id": f"ab12c_0000{k}",
            }
            for i in (1, 2)
        ]
        (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pngs, text = _execute("analyze_experiment.ipynb", monkeypatch, LZ_EXPERIMENT=str(exp_dir), LZ_EVAL_EPISODES="2")
    assert "no trial has reported 'evaluation/env_runners/episode_return_mean' yet" in text
    assert "no evaluated checkpoint to play yet" in text
    assert pngs >= 1  # throughput still plotted
