"""``evaluator.stop_confirm_episodes``: an evaluation that meets the stop condition plays more
episodes (other env seeds) with the same weights, and the stop rests on all of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lz_tune.config import ConfigError
from lz_tune.workers import Evaluator, WeightSnapshot


def _evaluate(cfg, **kwargs):
    torch.manual_seed(0)
    evaluator = Evaluator(cfg, seed=5)
    try:
        torch.manual_seed(1)
        weights = {
            k: torch.randn_like(v) * 0.3 if v.is_floating_point() else v for k, v in evaluator.policy.weights().items()
        }
        return evaluator.evaluate(WeightSnapshot(version=0, train_iter=0, weights=weights), **kwargs)
    finally:
        evaluator.close()


def test_a_stop_is_confirmed_on_more_episodes_and_rests_on_all_of_them(tiny_cfg):
    base = tiny_cfg("evaluator.n_evaluator_episode=4", "env.max_episode_steps=200")
    first = _evaluate(base)
    assert first.num_episodes == 4 and not first.stop  # no stop condition set
    # the first four episodes meet the stop value exactly; four more (other seeds) are played
    confirmed = _evaluate(
        base.with_overrides([f"evaluator.stop_value={first.reward_mean}", "evaluator.stop_confirm_episodes=4"])
    )
    assert confirmed.num_episodes == 8
    assert confirmed.returns[:4] == first.returns
    assert confirmed.returns[4:] != first.returns  # other episodes, not the same four again
    assert confirmed.reward_mean == pytest.approx(np.mean(confirmed.returns))
    assert confirmed.stop == (np.mean(confirmed.returns) >= first.reward_mean)
    # not met by the first four: nothing more is played
    unmet = _evaluate(
        base.with_overrides([f"evaluator.stop_value={first.reward_mean + 1}", "evaluator.stop_confirm_episodes=4"])
    )
    assert unmet.num_episodes == 4 and not unmet.stop
    # evaluating a checkpoint plays exactly the episodes asked for
    exact = _evaluate(
        base.with_overrides([f"evaluator.stop_value={first.reward_mean}", "evaluator.stop_confirm_episodes=4"]),
        confirm_stop=False,
    )
    assert exact.num_episodes == 4 and exact.stop


def test_a_stop_that_the_confirmation_contradicts_does_not_stop(tiny_cfg, monkeypatch):
    """Scripted episodes: the first four reach the stop value, the four more do not, so the
    eight together do not and the run goes on; the first evaluation's seed, then another."""
    from lz_tune.workers import evaluator as evaluator_module

    seeds = []
    scripted = {5: (1.0, 1.0, 1.0, 1.0), 5 + evaluator_module.CONFIRM_SEED_OFFSET: (1.0, 0.0, 0.0, 0.0)}

    def play(self, n, *, seed):
        seeds.append(seed)
        return evaluator_module._Played(scripted[seed], (3,) * n, (), 3 * n)

    monkeypatch.setattr(evaluator_module.Evaluator, "_play", play)
    cfg = tiny_cfg("evaluator.n_evaluator_episode=4", "evaluator.stop_value=1.0", "evaluator.stop_confirm_episodes=4")
    result = _evaluate(cfg)
    assert seeds == [5, 5 + evaluator_module.CONFIRM_SEED_OFFSET]
    assert not result.stop and result.num_episodes == 8 and result.reward_mean == pytest.approx(0.625)
    assert result.env_steps == 24


def test_stop_confirm_episodes_must_be_positive(tiny_cfg):
    with pytest.raises(ConfigError, match="evaluator.stop_confirm_episodes"):
        tiny_cfg("evaluator.stop_confirm_episodes=0")


def test_a_run_stops_on_a_confirmed_evaluation_and_logs_its_episode_count(tiny_cfg, tmp_path):
    import json

    from lz_tune.metrics import EVAL_RETURN
    from lz_tune.pipeline import Driver

    cfg = tiny_cfg("evaluator.stop_value=0.0", "evaluator.stop_confirm_episodes=3", "max_env_step=2000")
    driver = Driver(cfg, exp_dir=str(tmp_path / "run"), print_fn=None)
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert metrics["stop_value_reached"] and driver.last_eval.num_episodes == 2 + 3
    rows = [json.loads(line) for line in open(tmp_path / "run" / "result.json")]
    assert len(rows) == 1 and rows[0]["evaluation/env_runners/num_episodes"] == 5 and EVAL_RETURN in rows[0]
