"""Board games end to end through the CLI (issue 38): a tiny tic-tac-toe self-play run, its
evaluations against an OpenSpiel bot as win / draw / loss rates (console, result.json), then
``evaluate`` with the MCTS bot and ``--video`` of env 0's first game; a bad game is refused
before anything is written. Slow: every policy type trains through the sync and async pipelines."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lz_tune.metrics import MATCH_RATES
from tests.conftest import REPO_ROOT, run_cli

ZOO = os.path.join("zoo", "board_games", "tictactoe_muzero.py")
TINY = [
    "env.collector_env_num=2",
    "env.evaluator_env_num=2",
    "evaluator.n_evaluator_episode=4",
    "evaluator.opponent=random",
    "evaluator.stop_loss_rate=None",
    "evaluator.eval_freq=4",
    "max_train_iter=8",
    "mcts.num_simulations=4",
    "learner.batch_size=8",
    "learner.update_per_collect=4",
    "model.latent_dim=16",
    "model.hidden_sizes=(16,)",
    "model.projection_dim=16",
    "model.projection_hidden_dim=16",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from lz_tune.__main__ import main  # capsys is function-scoped: a module fixture calls main directly

    exp = tmp_path_factory.mktemp("ttt") / "run"
    before = os.getcwd()
    os.chdir(REPO_ROOT)
    try:
        assert main(["train", ZOO, *TINY, "--exp-dir", str(exp), "--quiet"]) == 0
    finally:
        os.chdir(before)
    return exp


def test_training_evaluations_report_win_draw_loss_rates(run_dir):
    rows = [json.loads(line) for line in (run_dir / "result.json").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        rates = {k: row[k] for k in MATCH_RATES}
        assert rates["evaluation/env_runners/win_rate"] + rates["evaluation/env_runners/draw_rate"] + rates[
            "evaluation/env_runners/loss_rate"
        ] == pytest.approx(1.0)
        # 4 games on 2 envs: each env plays one game per seat
        w, lo = rates["evaluation/env_runners/win_rate"], rates["evaluation/env_runners/loss_rate"]
        assert row["evaluation/env_runners/episode_return_mean"] == pytest.approx(w - lo)


def test_match_rates_by_seat():
    from lz_tune.workers.match_stats import format_match, match_rates

    rates = match_rates([1.0, 0.0, -1.0, 1.0], [0, 0, 1, 0])
    assert rates["evaluation/env_runners/win_rate"] == 0.5 and rates["evaluation/env_runners/loss_rate"] == 0.25
    assert rates["evaluation/env_runners/win_rate_as_first"] == pytest.approx(2 / 3)
    assert rates["evaluation/env_runners/loss_rate_as_second"] == 1.0
    assert format_match(rates) == "W/D/L 0.50/0.25/0.25 (first 0.67/0.33/0.00, second 0.00/0.00/1.00)"
    only_first = match_rates([0.0], [0])
    assert np.isnan(only_first["evaluation/env_runners/draw_rate_as_second"])


def test_evaluate_against_the_mcts_bot_with_a_text_video(run_dir, tmp_path, capsys):
    from PIL import Image

    gif = tmp_path / "ttt.gif"
    code, out, err = run_cli(
        capsys,
        "evaluate",
        str(run_dir),
        "--episodes",
        "6",
        "--video",
        str(gif),
        "evaluator.opponent=mcts",
        "evaluator.opponent_mcts_simulations=50",
    )
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("against mcts(50 simulations): W/D/L "))
    assert "first " in line and "second " in line
    frames = []
    with Image.open(gif) as im:
        for i in range(im.n_frames):
            im.seek(i)
            frames.append(np.asarray(im.convert("RGB")))
    assert len(frames) >= 3 and len({f.shape for f in frames}) == 1  # reset + every agent move, one size
    assert "video:" in out


def test_an_unsupported_game_is_refused_before_anything_is_written(tmp_path, capsys):
    exp = tmp_path / "never"
    code, out, err = run_cli(capsys, "train", ZOO, *TINY, "env.env_id=openspiel:leduc_poker", "--exp-dir", str(exp))
    assert code == 2
    assert "env.env_id" in err and "leduc_poker has imperfect information" in err
    assert not exp.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy_type",
    [
        "muzero",
        "efficientzero",
        "gumbel_muzero",
        "sampled_muzero",
        "sampled_efficientzero",
        "stochastic_muzero",
        "muzero_context",
        "muzero_rnn_full_obs",
        "unizero",
        "sampled_unizero",
        "alphazero",
    ],
)
@pytest.mark.parametrize("pipeline", ["sync", "async"])
def test_every_policy_type_trains_on_tic_tac_toe(policy_type, pipeline, tmp_path, capsys, request):
    if pipeline == "async":
        request.getfixturevalue("ray_cluster")  # one Ray for all of them; the driver joins it
    extra = ["sampled.num_samples=5"] if policy_type.startswith("sampled") else []
    extra += (
        ["--async-pipeline", "async_pipeline.collector_num_cpus=0.5", "async_pipeline.evaluator_num_cpus=0.5"]
        if pipeline == "async"
        else []
    )
    code, out, err = run_cli(
        capsys, "train", ZOO, *TINY, f"policy_type={policy_type}", *extra, "--exp-dir", str(tmp_path / "run"), "--quiet"
    )
    assert code == 0, err[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "result.json").read_text().splitlines()]
    assert rows and all(k in rows[-1] for k in MATCH_RATES)
