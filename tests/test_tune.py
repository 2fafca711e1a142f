"""MuZeroTrainable under Ray Tune: tune.run and Tuner, per-evaluation checkpoints that hold the
evaluated weights, placement-group bundles sized from the async config."""

import json
import os

import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402

from lz_tune.checkpoint import load_checkpoint  # noqa: E402
from lz_tune.config import ConfigError, parse_override  # noqa: E402
from lz_tune.tune import MuZeroTrainable, config_from_tune, placement_group_factory  # noqa: E402
from lz_tune.tune.trainable import CHECKPOINT_FILE  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402

TINY = dict(
    parse_override(o)
    for o in [
        "env.collector_env_num=2",
        "env.evaluator_env_num=2",
        "evaluator.n_evaluator_episode=2",
        "env.max_episode_steps=40",
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
        "learner.num_threads=1",
        "learner.update_per_collect=4",
        "evaluator.eval_freq=8",
    ]
)
BASE = {"config": "lz_tune.zoo.classic_control.cartpole_muzero", "step_seconds": 1.5, "driver_num_cpus": 1, **TINY}


def test_bundles_follow_the_async_config():
    sync = placement_group_factory(BASE)
    assert sync.bundles == [{"CPU": 1.0}]
    pgf = placement_group_factory(
        {
            **BASE,
            "driver_num_cpus": 0.5,
            "async_pipeline.enabled": True,
            "async_pipeline.num_collector_actors": 2,
            "async_pipeline.collector_num_cpus": 0.25,
            "async_pipeline.evaluator_num_cpus": 0.25,
        }
    )
    assert pgf.bundles == [{"CPU": 0.5}, {"CPU": 0.25}, {"CPU": 0.25}, {"CPU": 0.25}]


def test_bad_search_space_key_is_named():
    with pytest.raises(ConfigError, match="learner.learning_rte"):
        config_from_tune({**BASE, "learner.learning_rte": 1e-3})


def test_tune_run_two_trials_checkpoint_the_evaluated_weights(ray_cluster, tmp_path):
    """A sync trial and an async one (its collector and evaluator actors in the trial's own
    placement group), side by side."""
    config = {
        **BASE,
        "driver_num_cpus": 0.5,
        "async_pipeline.collector_num_cpus": 0.25,
        "async_pipeline.evaluator_num_cpus": 0.25,
        "async_pipeline.enabled": tune.grid_search([False, True]),
    }
    analysis = tune.run(
        MuZeroTrainable,
        config=config,
        stop={"training_iteration": 3},
        storage_path=str(tmp_path),
        name="exp",
        metric="evaluation/env_runners/episode_return_mean",
        mode="max",
        verbose=0,
        raise_on_failed_trial=True,
    )
    assert len(analysis.trials) == 2
    for trial in analysis.trials:
        with open(os.path.join(trial.path, "lz_tune", "placement.json")) as f:
            placement = json.load(f)
        actors = placement["actor_placement_group_ids"]
        if trial.config["async_pipeline.enabled"]:
            assert placement["placement_group_id"] and actors == [placement["placement_group_id"]] * 2
            assert placement["driver_node_id"] == placement["collector_node_ids"][0]  # PACK: one node here
        else:
            assert actors == []
        assert trial.status == "TERMINATED"
        assert trial.last_result["num_env_steps_sampled_lifetime"] > 0 and trial.last_result["train_iter"] > 0
        assert trial.last_result["evaluation/num_evaluations_lifetime"] >= 1
        # the learner's TensorBoard files are in the trial's storage folder, not a temp working dir
        tb = os.path.join(trial.path, "lz_tune", "tb")
        # one writer per trial: its lease, given back when the trial ended (lz_tune.tune.trial_lease)
        with open(os.path.join(trial.path, "lz_tune", "lease.json")) as f:
            assert json.load(f)["released"] is True
        assert trial.path.startswith(str(tmp_path)) and any(f.startswith("events.") for f in os.listdir(tb))
        # TensorBoard tags and result keys are the same strings (lz_tune.metrics)
        from lz_tune.metrics import EVAL_RETURN
        from tests.tb_events import read_scalars

        scalars = read_scalars(tb)
        tags, keys = set(scalars), set(trial.last_result)
        assert tags <= keys, tags - keys
        # x-axis: env steps in tb/, learner updates in tb_train_iter/ (the same tags)
        by_iter = read_scalars(os.path.join(trial.path, "lz_tune", "tb_train_iter"))
        assert set(by_iter) == tags
        assert scalars[EVAL_RETURN][-1][0] <= trial.last_result["num_env_steps_sampled_lifetime"]
        # the reported evaluation is one of those logged (an evaluation taken in at close may follow it)
        assert trial.last_result["evaluation/train_iter"] in [s for s, _ in by_iter[EVAL_RETURN]]
        for name in (
            EVAL_RETURN,
            "num_env_steps_sampled_lifetime",
            "learners/muzero/total_loss",
            "learners/muzero/value_loss",
            "buffer/transitions",
            "policy_lag/start_mean",
        ):
            assert name in tags and name in keys, name
        assert trial.last_result["timesteps_total"] == trial.last_result["num_env_steps_sampled_lifetime"]
        assert not any(k.startswith("placement") or k.startswith("actor_placement") for k in keys)
    best = analysis.get_best_checkpoint(
        analysis.get_best_trial(), metric="evaluation/env_runners/episode_return_mean", mode="max"
    )
    assert best is not None
    with best.as_directory() as d:
        ckpt = load_checkpoint(os.path.join(d, CHECKPOINT_FILE), policy_type="muzero")
    assert ckpt["eval"] is not None
    assert ckpt["counters"]["train_iter"] == ckpt["eval"]["train_iter"]


@pytest.mark.slow  # ~20 s; tune.run tests cover the same Trainable
def test_tuner_api_works_too(ray_cluster, tmp_path):
    tuner = tune.Tuner(
        MuZeroTrainable,
        param_space=BASE,
        tune_config=tune.TuneConfig(metric="evaluation/env_runners/episode_return_mean", mode="max", num_samples=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="tuner", stop={"training_iteration": 2}, verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    assert results[0].metrics["num_env_steps_sampled_lifetime"] > 0


SPACES = sorted(
    f"search_spaces.{name[:-3]}"
    for name in os.listdir(os.path.join(REPO_ROOT, "search_spaces"))
    if name.endswith(".py") and not name.startswith("_")
)


@pytest.mark.parametrize("module", SPACES)
def test_search_spaces_name_existing_keys(module):
    import importlib

    from ray.tune.search.sample import Domain

    mod = importlib.import_module(module)
    sample = {
        k: (v.sample() if isinstance(v, Domain) else v["grid_search"][0] if isinstance(v, dict) else v)
        for k, v in mod.space.items()
    }
    config_from_tune(sample)  # every key exists and every sampled value validates
    assert placement_group_factory(sample).bundles[0]["CPU"] > 0
    assert mod.scheduler() is not None and mod.stop


def test_cli_tune_runs_and_resumes(tmp_path):
    """`python -m lz_tune tune <space> ...` runs a 2-trial search; --resume restores it; an existing
    name without --resume is refused before Ray starts."""
    import subprocess
    import sys

    fixed = [f"{k}={v!r}" if not isinstance(v, str) else f"{k}={v}" for k, v in TINY.items()] + ["step_seconds=1.5"]
    common = ["--storage-path", str(tmp_path), "--name", "cli", "--num-cpus", "2"]
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "lz_tune", "tune", "search_spaces/cartpole_muzero.py"]
    run = subprocess.run(
        cmd + fixed + common + ["--num-samples", "2", "--stop-iters", "2", "--scheduler", "fifo"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "trials: 2, errors: 0" in run.stdout
    again = subprocess.run(cmd + common, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 2 and "--resume" in again.stderr
    resumed = subprocess.run(cmd + common + ["--resume"], capture_output=True, text=True, timeout=240, env=env)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "trials: 2" in resumed.stdout


@pytest.mark.slow  # ~45 s; the default run has an async trial beside a sync one (above)
def test_two_async_trials_run_concurrently_each_with_actors_in_its_own_placement_group(ray_cluster, tmp_path):
    space = {
        **BASE,
        "driver_num_cpus": 0.5,
        "async_pipeline.enabled": True,
        "async_pipeline.collector_num_cpus": 0.25,
        "async_pipeline.evaluator_num_cpus": 0.25,
        "learner.learning_rate": tune.grid_search([1e-3, 3e-3]),
    }
    analysis = tune.run(
        MuZeroTrainable,
        config=space,
        stop={"training_iteration": 3},
        storage_path=str(tmp_path),
        name="pg",
        verbose=0,
        raise_on_failed_trial=True,
    )
    assert len(analysis.trials) == 2
    groups = []
    for trial in analysis.trials:
        df = analysis.trial_dataframes[trial.trial_id]
        with open(os.path.join(trial.path, "lz_tune", "placement.json")) as f:
            placement = json.load(f)
        pg, actors = placement["placement_group_id"], placement["actor_placement_group_ids"]
        assert pg and len(actors) == 2 and all(a == pg for a in actors)
        groups.append(pg)
        assert trial.last_result["num_env_steps_sampled_lifetime"] > 0
    assert groups[0] != groups[1]
    # both trials ran at the same time (2 x 1 CPU fits the 2-CPU cluster): each trial's life, from
    # the start of its setup (actors, envs, networks) to its last result, overlaps the other's
    lives = []
    for trial in analysis.trials:
        df = analysis.trial_dataframes[trial.trial_id].sort_values("training_iteration")
        first = df.iloc[0]
        setup_start = first["timestamp"] - first["time_total_s"] - first["perf/driver_setup_s"]
        lives.append((setup_start, df["timestamp"].max()))
    latest_start, earliest_end = max(start for start, _ in lives), min(end for _, end in lives)
    assert latest_start <= earliest_end + 1.0, lives  # timestamps have 1-s resolution


def test_reset_config_refuses_changes_it_cannot_apply_live():
    from lz_tune.tune.trainable import _live

    assert _live("learner.learning_rate") and _live("learner.update_per_collect") and _live("evaluator.eval_freq")
    assert not _live("learner.optim_type") and not _live("mcts.num_simulations")
    assert not _live("model.latent_dim") and not _live("buffer.td_steps")


def test_driver_restore_from_a_running_state_moves_weights_and_counters(tmp_path):
    """What Tune's load_checkpoint does (trial restore, PBT exploit): a running driver takes a
    checkpoint payload; train_iter and weights come back, worker versions change, training goes on."""
    import torch

    from lz_tune.pipeline import Driver

    cfg = config_from_tune({**BASE, "max_env_step": 10_000})
    driver = Driver(cfg, exp_dir=None, print_fn=None)
    try:
        driver.step(max_seconds=3.0)
        while driver.counters.evaluations == 0:
            driver.step(max_seconds=1.0)
        payload = driver.last_checkpoint_payload()
        saved_iter = payload["counters"]["train_iter"]
        assert payload["eval"]["train_iter"] == saved_iter
        driver.step(max_seconds=2.0)
        assert driver.train_iter > saved_iter
        old_generation = driver.publisher.generation
        path = tmp_path / "ckpt.pt"
        from lz_tune.checkpoint import save_checkpoint

        save_checkpoint(path, payload)
        driver.restore_from(load_checkpoint(path), str(path))
        assert driver.train_iter == saved_iter
        assert driver.publisher.generation == old_generation + 1
        # the restored evaluation is carried forward (eval/reward_mean is not NaN after a restore)
        assert driver.last_eval.train_iter == saved_iter
        assert driver.last_eval.reward_mean == payload["eval"]["reward_mean"]
        assert driver.last_eval_env_steps == payload["counters"]["env_steps"]
        assert driver.last_checkpoint_payload()["counters"]["train_iter"] == saved_iter
        for k, v in driver.learner.policy.network.state_dict().items():
            assert torch.equal(v, payload["learner"]["network"][k]), k
        before = driver.train_iter
        driver.step(max_seconds=2.0)
        assert driver.train_iter > before
    finally:
        driver.close()


def _network(driver) -> dict:
    return {k: v.clone() for k, v in driver.learner.policy.network.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tune_checkpoints_keep_the_current_state_and_the_evaluated_snapshot(ray_cluster, tmp_path, monkeypatch):
    """Two kinds of Tune checkpoint: a save right after an evaluation and a save Tune asks for
    (pause, PBT, checkpoint_at_end). Both restore the learner exactly as it was at the save
    (train_iter, weights, optimizer): a pause/resume or a PBT exploit of the trial itself loses
    no update; both hold the evaluated snapshot that earned the result's metric."""
    import copy
    import sys

    import torch

    from lz_tune.tune.trainable import STATE_FILE

    # a Trainable built outside tune.run keeps its folder under DEFAULT_STORAGE_PATH (~/ray_results)
    monkeypatch.setattr(sys.modules[tune.Trainable.__module__], "DEFAULT_STORAGE_PATH", str(tmp_path / "logs"))

    def make():
        return MuZeroTrainable(
            config={**BASE, "step_seconds": 0.05, "max_env_step": 100_000, "evaluator.eval_freq": 24}
        )

    t = make()
    try:
        # a trial that has not evaluated yet still gets a checkpoint (its state), and it restores
        early = tmp_path / "early"
        early.mkdir()
        t.save_checkpoint(str(early))
        assert (early / STATE_FILE).is_file() and not (early / CHECKPOINT_FILE).is_file()
        assert load_checkpoint(early / STATE_FILE)["checkpoint_kind"] == "current"

        for _ in range(500):  # until an evaluation was reported: Tune saves the "evaluated" kind then
            if t.train().get("should_checkpoint"):
                break
        else:
            raise AssertionError("no evaluation was reported")
        after_eval = tmp_path / "after_eval"
        after_eval.mkdir()
        t.save_checkpoint(str(after_eval))
        assert load_checkpoint(after_eval / STATE_FILE)["checkpoint_kind"] == "evaluated"

        for _ in range(2000):  # the learner moves past the evaluated weights; no new evaluation reported
            result = t.train()  # (short steps: on a fast machine a 0.3 s step always holds an evaluation)
            if not result.get("should_checkpoint") and t.driver.train_iter > t.driver.last_eval.train_iter:
                break
        else:
            raise AssertionError("no step without an evaluation moved the learner past the evaluated weights")
        assert not t.driver.done, "the run ended before the learner moved past the evaluated weights"
        requested = tmp_path / "requested"
        requested.mkdir()
        t.save_checkpoint(str(requested))
        saved_iter, saved_net = t.driver.train_iter, _network(t.driver)
        saved_opt = copy.deepcopy(t.driver.learner.state_dict()["optimizer"])
        evaluated = t.driver.evaluated_payload
        state = load_checkpoint(requested / STATE_FILE)
        snap = load_checkpoint(requested / CHECKPOINT_FILE)
        assert state["checkpoint_kind"] == "current" and state["counters"]["train_iter"] == saved_iter
        # the evaluated snapshot: exactly the weights the latest evaluation scored
        assert snap["checkpoint_kind"] == "evaluated"
        assert snap["counters"]["train_iter"] == snap["eval"]["train_iter"] == t.driver.last_eval.train_iter
        assert snap["counters"]["train_iter"] < saved_iter
        assert _same(snap["learner"]["network"], evaluated["learner"]["network"])
        assert not _same(snap["learner"]["network"], saved_net)

        for _ in range(3):
            t.train()
        assert t.driver.train_iter > saved_iter
        t.load_checkpoint(str(requested))  # PBT exploit of the trial itself: back to the save, not to the eval
        assert t.driver.train_iter == saved_iter and _same(_network(t.driver), saved_net)
        assert t.driver.last_eval.train_iter == snap["eval"]["train_iter"]
        assert (
            t.train()["evaluation/env_runners/episode_return_mean"] == snap["eval"]["reward_mean"]
            or t.driver.counters.evaluations > 0
        )
    finally:
        t.stop()

    t2 = make()  # pause / resume in a new trial process
    try:
        t2.load_checkpoint(str(requested))
        assert t2.driver.train_iter == saved_iter and _same(_network(t2.driver), saved_net)
        opt = t2.driver.learner.state_dict()["optimizer"]
        assert opt["state"].keys() == saved_opt["state"].keys()
        for k, s in saved_opt["state"].items():
            for name, v in s.items():
                if isinstance(v, torch.Tensor):
                    assert torch.equal(opt["state"][k][name], v), (k, name)
        assert t2.driver.last_eval.reward_mean == snap["eval"]["reward_mean"]
        assert t2.driver.evaluated_payload["counters"]["train_iter"] == snap["counters"]["train_iter"]
        t2.load_checkpoint(str(early))  # the not-yet-evaluated checkpoint restores too
        assert t2.driver.train_iter == 0 and t2.driver.last_eval is None
    finally:
        t2.stop()


def test_relative_config_path_and_asha_sees_only_real_evaluations(ray_cluster, tmp_path, monkeypatch):
    """A relative config file path resolves against the directory tune.run was called from (Tune
    changes into the trial folder before setup). Every result carries a real evaluation, so ASHA
    stops, at its first rung, a trial whose returns stay at the floor: CartPole capped at 5 steps
    scores exactly 5, below any 200-step trial (a constant action already lasts ~9 steps). Were the
    first results NaN, ASHA would pass the capped trial through every rung."""
    import math

    monkeypatch.chdir(REPO_ROOT)
    config = {
        **BASE,
        "config": "zoo/classic_control/cartpole_muzero.py",
        "step_seconds": 0.5,
        "learner.train_start_after_envsteps": 200,  # no evaluation before the first result's slice ends
        "env.max_episode_steps": tune.grid_search([200, 5]),
    }
    scheduler = tune.schedulers.ASHAScheduler(
        time_attr="training_iteration", max_t=4, grace_period=1, reduction_factor=2
    )
    analysis = tune.run(
        MuZeroTrainable,
        config=config,
        scheduler=scheduler,
        metric="evaluation/env_runners/episode_return_mean",
        mode="max",
        max_concurrent_trials=1,
        storage_path=str(tmp_path),
        name="asha",
        verbose=0,
        raise_on_failed_trial=True,
    )
    by_cap = {t.config["env.max_episode_steps"]: t for t in analysis.trials}
    for trial in analysis.trials:
        rows = analysis.trial_dataframes[trial.trial_id]
        assert len(rows) >= 1 and all(math.isfinite(v) for v in rows["evaluation/env_runners/episode_return_mean"])
    assert by_cap[200].last_result["training_iteration"] == 4
    assert by_cap[5].last_result["evaluation/env_runners/episode_return_mean"] == 5.0
    assert by_cap[5].last_result["training_iteration"] < 4  # stopped by ASHA


def test_time_to_stop_value_is_reported_once_solved_and_survives_a_restore(ray_cluster, tmp_path):
    """``time_to_stop_value_s``: NaN while unsolved; the trial seconds (setup included) at the
    solving evaluation once solved, kept by save/load so a restored trial reports the same value."""
    import math
    import time

    from lz_tune.tune import TIME_TO_STOP_VALUE

    unsolved = MuZeroTrainable(config={**BASE, "evaluator.stop_value": 1e9})
    try:
        assert math.isnan(unsolved.train()[TIME_TO_STOP_VALUE])
    finally:
        unsolved.stop()
    start = time.perf_counter()
    trainable = MuZeroTrainable(config={**BASE, "evaluator.stop_value": 0.0})  # any episode solves it
    try:
        result = trainable.train()
        elapsed = time.perf_counter() - start
        assert result["done"] and result["stop_value_reached"]
        solved_at = result[TIME_TO_STOP_VALUE]
        assert result["perf/driver_setup_s"] < solved_at <= elapsed
        trainable.save_checkpoint(str(tmp_path))
    finally:
        trainable.stop()
    restored = MuZeroTrainable(config={**BASE, "evaluator.stop_value": 0.0})
    try:
        restored.load_checkpoint(str(tmp_path))
        assert restored._trial_seconds() > solved_at  # the restored run's seconds continue from the save
        assert restored.train()[TIME_TO_STOP_VALUE] == solved_at
    finally:
        restored.stop()


def test_space_module_metric_and_mode_are_checked(tmp_path):
    from lz_tune.cli.tune import load_space_module

    path = tmp_path / "space.py"
    path.write_text("space = {}\nmetric = 'time_to_stop_value_s'\nmode = 'minimum'\n")
    with pytest.raises(ConfigError, match="`mode`"):
        load_space_module(str(path))
    path.write_text("space = {}\nmetric = 'time_to_stop_value_s'\nmode = 'min'\n")
    assert load_space_module(str(path)).mode == "min"
