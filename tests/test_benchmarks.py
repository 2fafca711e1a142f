"""Smoke runs of the benchmark scripts on tiny budgets: each runs as a user would run it and
ends with ONE JSON line holding the keys the README and issues promise (figures themselves are
machine-dependent and not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT


def _last_json(args: list[str], timeout: int) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    run = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) > 2, "a readable table comes before the JSON line"
    return json.loads(lines[-1])


def test_mcts_speed_prints_sims_per_second():
    out = _last_json(["benchmarks/mcts_speed.py", "--repeats", "2"], timeout=300)
    for key in ("a2_b8_sims_per_s", "a18_b64_sims_per_s"):
        for suffix in ("", "_torch", "_gumbel_muzero", "_efficientzero"):
            assert out[key + suffix] > 0


@pytest.mark.slow  # ~150 s on the busy 2-core box: every policy type's search (UniZero's uncached reference most)
def test_mcts_speed_prints_every_type_and_its_ratio_to_muzero():
    out = _last_json(
        [
            "benchmarks/mcts_speed.py",
            "--repeats",
            "1",
            "--inference",
            "auto",
            "--types",
            "muzero,efficientzero,stochastic_muzero,muzero_rnn_full_obs,unizero,unizero_uncached,"
            "sampled_muzero,sampled_efficientzero",
        ],
        timeout=900,
    )
    for suffix in ("efficientzero", "stochastic_muzero", "muzero_rnn_full_obs", "unizero", "unizero_uncached"):
        assert out[f"a2_b8_sims_per_s_{suffix}"] > 0 and out[f"a18_b64_over_muzero_{suffix}"] > 0
    assert out["d6_k20_b8_over_muzero_sampled_efficientzero"] > 0


@pytest.mark.slow  # ~60 s: three CartPole collectors, each type with both inferences
def test_collect_speed_prints_env_steps_per_second_and_ratios():
    out = _last_json(
        [
            "benchmarks/collect_speed.py",
            "--task",
            "cartpole",
            "--rounds",
            "1",
            "--steps",
            "8",
            "env.collector_env_num=2",
            "mcts.num_simulations=4",
        ],
        timeout=600,
    )
    for key in (
        "muzero_env_steps_per_s",
        "unizero_env_steps_per_s_torch",
        "efficientzero_over_muzero",
        "unizero_over_muzero",
    ):
        assert out[key] > 0, key


@pytest.mark.slow  # ~20 s: a subprocess that builds and warms six searches
def test_inference_crossover_prints_engine_speedups():
    out = _last_json(
        [
            "benchmarks/inference_crossover.py",
            "--types",
            "efficientzero,unizero",
            "--widths",
            "32",
            "--batches",
            "4",
            "--repeats",
            "1",
        ],
        timeout=300,
    )
    assert out["efficientzero_w32_b4_engine_speedup"] > 0 and out["unizero_w32_b4_engine_speedup"] > 0


# ~50 s: two drivers, Ray, measurement windows; the pipeline itself: test_train_muzero_segment_async.py
@pytest.mark.slow
def test_async_vs_sync_prints_the_promised_keys():
    tiny = [
        "env.collector_env_num=2",
        "mcts.num_simulations=4",
        "learner.batch_size=16",
        "buffer.game_segment_length=10",
        "buffer.num_unroll_steps=3",
        "buffer.td_steps=3",
        "model.latent_dim=16",
        "model.hidden_sizes=(16,)",
        "model.value_support_size=10",
        "model.reward_support_size=5",
        "model.projection_dim=16",
        "env.max_episode_steps=30",
    ]
    out = _last_json(
        ["benchmarks/async_vs_sync.py", "--rounds", "2", "--window", "2", "--collects", "2", *tiny], timeout=400
    )
    for key in (
        "collect_only_env_steps_per_s",
        "train_only_updates_per_s",
        "sync_env_steps_per_s",
        "async_env_steps_per_s",
        "async_over_sync",
        "overlap_bound",
    ):
        assert out[key] > 0, key
    assert out["rounds"] == 2 and out["share_of_bound_min"] <= out["share_of_bound"] <= out["share_of_bound_max"]
    assert 1.0 <= out["overlap_bound"] <= 2.0
    for key in (
        "async_pipelined_env_steps_per_s",
        "share_of_bound_pipelined",
        "hardware_overlap_bound",
        "share_of_hardware_bound",
        "collect_s_sync",
        "update_s_async",
    ):
        assert out[key] > 0, key


@pytest.mark.slow
def test_tune_overhead_prints_time_to_first_result(tmp_path):
    out = _last_json(
        ["benchmarks/tune_overhead.py", "--iters", "2", "--step-seconds", "1", "--storage-path", str(tmp_path)],
        timeout=400,
    )
    assert out["time_to_first_result_s"] > 0 and 0 <= out["tune_overhead_share"] < 1
    assert len(out["trials"]) == 2


@pytest.mark.slow
def test_soak_prints_memory_figures():
    out = _last_json(["benchmarks/soak.py", "--minutes", "0.5", "--interval", "5"], timeout=400)
    assert out["rss_end_mb"] > 0 and out["env_steps"] > 0


def test_learner_speed_prints_updates_per_second():
    out = _last_json(
        ["benchmarks/learner_speed.py", "--configs", "cartpole", "--repeats", "1", "--updates", "1"], timeout=300
    )
    assert out["cartpole_updates_per_s"] > 0 and out["cartpole_updates_per_s_eager"] > 0
    assert set(out["cartpole_ms_per_update"]) >= {"forward", "backward", "optimizer", "targets_and_rest"}


@pytest.mark.slow  # ~30 s (Ray and two learner workers start); tests/test_parallel_*.py run the same path
def test_learner_scaling_prints_updates_per_second_for_one_and_two_workers():
    # ~25 s on the idle 2-core box: Ray, two learner workers with gloo, CartPole at a small batch
    out = _last_json(
        [
            "benchmarks/learner_scaling.py",
            "--configs",
            "cartpole",
            "--workers",
            "1",
            "2",
            "--threads",
            "1",
            "--updates",
            "2",
            "--repeats",
            "1",
            "--warmup",
            "1",
            "--fill",
            "300",
            "learner.batch_size=16",
        ],
        timeout=300,
    )
    rows = {(row["config"], row["workers"], row["targets"]): row for row in out["rows"]}
    assert set(rows) == {("cartpole", 1, None), ("cartpole", 2, "driver"), ("cartpole", 2, "ranks")}
    for row in rows.values():
        assert row["updates_per_s"] > 0 and row["batch_size"] == 16 and row["threads"] == 1
        assert set(row["ms_per_update"]) == {
            "prepare",
            "rank_targets",
            "transfer",
            "compute",
            "all_reduce",
            "priorities",
            "total",
        }
    driver, ranks = rows["cartpole", 2, "driver"], rows["cartpole", 2, "ranks"]
    assert driver["ms_per_update"]["all_reduce"] > 0 and driver["worker_num_cpus"] == 1
    assert ranks["ms_per_update"]["rank_targets"] > 0 and driver["ms_per_update"]["rank_targets"] == 0
    # per update: 16 rows of indices, weights and padding actions against 16 rows of observations and targets
    assert ranks["sent_mb_per_update"] < driver["sent_mb_per_update"]


@pytest.mark.slow  # ~40 s: Ray, four sync drivers with two learner workers each
def test_updates_in_flight_prints_both_variants():
    out = _last_json(["benchmarks/updates_in_flight.py", "--updates", "10", "--repeats", "1"], timeout=300)
    runs = {run["send_ahead"]: run for run in out["runs"]}
    assert set(runs) == {True, False} and all(run["updates"] == 20 for run in runs.values())
    assert runs[True]["updates_sent_ahead"] == 18 and runs[False]["updates_sent_ahead"] == 0


@pytest.mark.slow
def test_stochastic_2048_prints_scores_of_agent_and_baselines(tmp_path):
    out = _last_json(
        [
            "benchmarks/stochastic_2048.py",
            "--budget-s",
            "45",
            "--modes",
            "true",
            "--eval-games",
            "2",
            "--keep",
            str(tmp_path),
            "evaluator.eval_freq=10",
            "learner.update_per_collect=5",
            "mcts.num_simulations=4",
            "env.collector_env_num=2",
            "learner.batch_size=16",
        ],
        timeout=400,
    )
    assert out["random"]["mean"] > 0 and out["greedy"]["mean"] > 0
    agent = out["stochastic_muzero (true chance)"]
    assert agent["mean"] > 0 and agent["train_iter"] > 0 and agent["env_steps"] > 0


@pytest.mark.slow  # ~30 s: a real train run to a tiny budget, then `lz_tune evaluate` of its last weights
def test_solve_script_reports_a_held_out_final_evaluation():
    tiny = [
        "env.collector_env_num=2",
        "env.evaluator_env_num=2",
        "evaluator.n_evaluator_episode=2",
        "mcts.num_simulations=4",
        "learner.batch_size=16",
        "learner.update_per_collect=4",
        "evaluator.eval_freq=8",
        "buffer.game_segment_length=10",
        "buffer.num_unroll_steps=3",
        "buffer.td_steps=3",
        "model.latent_dim=16",
        "model.hidden_sizes=(16,)",
        "env.max_episode_steps=30",
    ]
    out = _last_json(
        [
            "benchmarks/cartpole_solve.py",
            "--variants",
            "muzero",
            "--seeds",
            "0",
            "--max-env-step",
            "200",
            "--final-eval-episodes",
            "4",
            "--set",
            *tiny,
        ],
        timeout=300,
    )
    run = out["runs"][0]
    assert run["final_eval_episodes"] == 4 and 1.0 <= run["final_eval"] <= 30.0  # CartPole: 1 per step, <= 30 steps
    assert out["summary"]["muzero"]["final_evals"] == [run["final_eval"]]


def _segment_carry():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "segment_carry", os.path.join(REPO_ROOT, "benchmarks", "segment_carry.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_segment_carry_rules_by_hand():
    """Two envs, L = 3, one padding step, a collect ends at 2 segments; env 0's episode ends after
    its 2nd step, env 1's never. lz-tune: t1 env 0 emits [2 steps]; t2 env 1 fills a segment
    (pending); t3 its padding step completes it: the collect ends at t3 with 4 x 2 = 8 env steps and
    2 + 3 = 5 transitions. The reference: t1 env 0 pools [2]; t2 env 1 is full (held); t4 env 0 is
    full (held); t5 env 1 is full again, its held segment goes to the pool: the collect ends at t5
    with 12 env steps and 5 transitions, and env 0's unfinished step (t5) is dropped."""
    import numpy as np

    sc = _segment_carry()
    done = np.zeros((6, 2), bool)
    done[1, 0] = True
    assert sc.lz_tune_collects(done, segment_length=3, num_padding=1, num_segments=2) == [sc.CollectCounts(8, 5)]
    assert sc.reference_collects(done, segment_length=3, num_segments=2) == [sc.CollectCounts(12, 5)]
    # no episode ends, lockstep: the reference drops nothing either (every env fills at once)
    calm = np.zeros((12, 2), bool)
    ref = sc.reference_collects(calm, segment_length=3, num_segments=2)
    assert ref == [sc.CollectCounts(12, 6), sc.CollectCounts(6, 6), sc.CollectCounts(6, 6)]  # t5, t8, t11


def test_segment_carry_simulation_matches_the_real_collector():
    """benchmarks/segment_carry.py --check on a short CartPole run: its lz-tune rule reproduces the
    real collector's env steps and transitions of every collect (it exits non-zero otherwise). The
    zoo config's envs and segments, a small network and search (the collects are what is checked)."""
    small = [
        "mcts.num_simulations=4",
        "model.latent_dim=16",
        "model.hidden_sizes=(16,)",
        "learner.batch_size=16",
        "learner.update_per_collect=2",
        "model.projection_dim=16",
        "learner.num_threads=1",
    ]
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/segment_carry.py",
            "--env",
            "cartpole",
            "--cartpole-env-steps",
            "1500",
            "--set",
            *small,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "lz-tune / reference at the same replay_ratio" in out.stdout


@pytest.mark.slow  # ~2 min: every 10th of ~50 injection points, ~5 s each
def test_crash_injection_at_every_write_restores_exactly():
    """benchmarks/crash_injection.py: the process killed at a file operation of a checkpoint save
    (every 10th point here; the benchmark runs them all); each time the run folder verifies and a
    resume restores exactly the previous or the new checkpoint (the script exits 1 otherwise)."""
    out = subprocess.run(
        [sys.executable, "benchmarks/crash_injection.py", "--every", "10"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 with problems" in out.stdout


@pytest.fixture(scope="module")
def tiny_tictactoe_run(tmp_path_factory):
    """The folder of a tiny tic-tac-toe alphazero run (150 env steps)."""
    run = tmp_path_factory.mktemp("tictactoe") / "run"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    train = subprocess.run(
        [
            sys.executable,
            "-m",
            "lz_tune",
            "train",
            "zoo/board_games/tictactoe_alphazero.py",
            "--exp-dir",
            str(run),
            "max_env_step=150",
            "env.collector_env_num=2",
            "env.evaluator_env_num=2",
            "evaluator.n_evaluator_episode=2",
            "evaluator.stop_confirm_episodes=None",
            "mcts.num_simulations=4",
            "learner.batch_size=8",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
    return run


def test_board_game_ladder_plays_every_snapshot_against_each_strength(tiny_tictactoe_run, tmp_path):
    """A tiny tic-tac-toe alphazero run, two copies of its checkpoint as snapshots: the ladder plays
    both against MCTS-2 and MCTS-4 (4 games each, half as first player), writes ladder.json and
    a plot, and a second call plays nothing again."""
    run = tiny_tictactoe_run
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for minutes in (5, 10):
        (snaps / f"min{minutes}.pt").write_bytes((run / "ckpt" / "ckpt_latest.pt").read_bytes())
    args = ["benchmarks/board_game_ladder.py", "ladder", str(snaps), "--sims", "2", "4", "--games", "4"]
    out = _last_json([*args, "--env-num", "2", "--plot", str(tmp_path / "ladder.png")], timeout=300)
    entries = {(e["minutes"], e["sims"]): e for e in out["entries"]}
    assert set(entries) == {(5, 2), (5, 4), (10, 2), (10, 4)}
    assert all(e["games"] == 4 and abs(e["win"] + e["draw"] + e["loss"] - 1) < 1e-6 for e in entries.values())
    assert (tmp_path / "ladder.png").stat().st_size > 0
    again = subprocess.run(
        [sys.executable, *args, "--env-num", "2"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert again.returncode == 0 and "MCTS-" not in again.stdout  # nothing played twice


def test_board_game_ladder_seeds_plots_one_strength_of_several_runs(tmp_path):
    """Two runs' ladder.json files: ``seeds`` keeps only the asked strength, sorted by minutes,
    one row list per label, and writes the plot; a run without that strength is an error."""

    def entry(minutes, sims, win):
        return {
            "minutes": minutes,
            "sims": sims,
            "games": 100,
            "train_iter": 10 * minutes,
            "env_steps": 100 * minutes,
            "win": win,
            "draw": 0.0,
            "loss": 1.0 - win,
        }

    for name, entries in {
        "s0": [entry(20, 100, 0.9), entry(10, 100, 0.5), entry(10, 1000, 0.1)],
        "s1": [entry(10, 100, 0.4)],
        "s2": [entry(10, 1000, 0.2)],
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "ladder.json").write_text(json.dumps({"entries": entries}))
    plot = tmp_path / "seeds.png"
    args = [
        "benchmarks/board_game_ladder.py",
        "seeds",
        str(tmp_path / "s0"),
        str(tmp_path / "s1"),
        "--sims",
        "100",
        "--x",
        "updates",
    ]
    out = _last_json([*args, "--labels", "a", "b", "--target", "0.95", "--plot", str(plot)], timeout=120)
    assert [r["minutes"] for r in out["a"]] == [10, 20] and [r["win"] for r in out["a"]] == [0.5, 0.9]
    assert [r["win"] for r in out["b"]] == [0.4] and plot.stat().st_size > 0
    bad = subprocess.run(
        [sys.executable, "benchmarks/board_game_ladder.py", "seeds", str(tmp_path / "s2"), "--plot", str(plot)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "no games against MCTS-100" in bad.stderr


def test_minimax_lines_plays_every_line_of_the_bot_from_both_seats(tiny_tictactoe_run):
    """The agent is deterministic and minimax branches over its equally good moves only: at least
    one line per seat, every lost line printed (a 150-step agent loses some)."""
    out = _last_json(["benchmarks/minimax_lines.py", str(tiny_tictactoe_run / "ckpt" / "ckpt_latest.pt")], timeout=300)
    assert out["lines"] >= 2 and 0 <= out["lost"] <= out["lines"] and len(out["lost_lines"]) == out["lost"]
    for line in out["lost_lines"]:
        moves = line.split()
        assert {m[0] for m in moves} == {"A", "M"} and len(moves) >= 5  # a loss takes 3 moves of the winner


@pytest.mark.slow  # ~20 s: two real train runs to a tiny budget
def test_tictactoe_exploration_prints_one_row_per_variant_and_seed(tmp_path):
    out = _last_json(
        [
            "benchmarks/tictactoe_exploration.py",
            "--variants",
            "both",
            "gumbel",
            "--seeds",
            "0",
            "--max-env-step",
            "200",
            "--out",
            str(tmp_path),
            "mcts.num_simulations=4",
            "env.collector_env_num=2",
        ],
        timeout=300,
    )
    assert [(r["variant"], r["seed"]) for r in out["runs"]] == [("both", 0), ("gumbel", 0)]
    assert all(r["env_steps"] >= 200 and r["train_iter"] > 0 for r in out["runs"])
