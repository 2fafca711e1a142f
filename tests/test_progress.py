"""The live progress line of ``train``: redrawn in place on a terminal, plain lines elsewhere, moving
during the cold start and between evaluations."""

from __future__ import annotations

import io

from lz_tune.progress import ProgressLine, format_progress

METRICS = {
    "wall_time_s": 3725.0,
    "env_steps": 1234,
    "env_steps_per_s": 45.2,
    "train_iter": 0,
    "updates_per_s": 0.0,
    "buffer_transitions": 1200,
    "collect_return_mean": float("nan"),
}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_cold_start_line_counts_towards_the_training_start():
    line = format_progress(METRICS, train_start_after_envsteps=2000, trainable=False)
    assert line.startswith("1:02:05 | env steps 1,234 (45/s)")
    assert "cold start 1,234/2,000 env steps" in line and "no evaluation yet" in line
    assert "collect return" not in line  # NaN until an episode ends: not shown


def test_training_line_shows_updates_and_the_last_evaluation():
    m = {
        **METRICS,
        "train_iter": 300,
        "updates_per_s": 7.25,
        "eval_reward_mean_last": 164.6,
        "eval_train_iter_last": 200,
        "collect_return_mean": 20.1,
    }
    line = format_progress(m, train_start_after_envsteps=2000, trainable=True)
    assert "updates 300 (7.2/s)" in line and "last eval 164.6 @ 200 updates" in line
    assert "collect return 20.1" in line and "cold start" not in line


def test_plain_lines_when_not_a_terminal_at_most_one_per_interval():
    out, clock = io.StringIO(), Clock()
    p = ProgressLine("exp", stream=out, plain_interval_s=30.0, clock=clock)
    assert not p.live  # StringIO is not a terminal
    p.update("a")
    clock.t = 10.0
    p.update("b")  # too soon
    clock.t = 31.0
    p.update("c")
    p.print("[exp] train_iter=100 eval_return=9.9")
    assert out.getvalue() == "[exp] a\n[exp] c\n[exp] train_iter=100 eval_return=9.9\n"
    assert "\r" not in out.getvalue()


def test_live_line_is_redrawn_in_place_and_kept_apart_from_messages():
    out, clock = io.StringIO(), Clock()
    p = ProgressLine("exp", stream=out, live=True, live_interval_s=0.5, clock=clock)
    p.update("a")
    clock.t = 0.6
    p.update("b")
    p.print("eval line")  # clears the live line, prints on its own line
    p.update("c")  # drawn at once after a message
    p.close()
    assert out.getvalue() == "\r\033[K[exp] a\r\033[K[exp] b\r\033[Keval line\n\r\033[K[exp] c\n"


def test_train_cli_shows_progress_during_the_cold_start(tmp_path, monkeypatch, capsys):
    """The real command: a plain progress line appears before the first update (cold start)."""
    import lz_tune.progress
    from lz_tune.__main__ import main

    original = lz_tune.progress.ProgressLine.__init__

    def every_call(self, prefix, **kw):
        original(self, prefix, **{**kw, "plain_interval_s": 0.0})

    monkeypatch.setattr(lz_tune.progress.ProgressLine, "__init__", every_call)
    rc = main(
        [
            "train",
            "zoo/classic_control/cartpole_muzero.py",
            "--exp-dir",
            str(tmp_path / "run"),
            "env.collector_env_num=2",
            "env.evaluator_env_num=2",
            "evaluator.n_evaluator_episode=2",
            "env.max_episode_steps=20",
            "mcts.num_simulations=4",
            "learner.batch_size=16",
            "buffer.game_segment_length=10",
            "model.latent_dim=16",
            "model.hidden_sizes=(16,)",
            "learner.train_start_after_envsteps=600",
            "learner.update_per_collect=2",
            "max_env_step=640",
            "learner.num_threads=1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "cold start" in out and "/600 env steps" in out
    assert "updates " in out  # and it moved on once training started
