"""Driver (sync, in-process back-end): cold start, budget-locked replay ratio, checkpoints
taken at evaluation launch, resume, and failing early on a bad checkpoint or env id."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

from lz_tune.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from lz_tune.config import ConfigError
from lz_tune.pipeline import Driver
from lz_tune.pipeline.backends import EVALUATOR_SEED_OFFSET
from lz_tune.pipeline.budget import updates_for_collect
from lz_tune.workers import Evaluator, WeightSnapshot


def _quiet(cfg, **kwargs) -> Driver:
    return Driver(cfg, print_fn=None, **kwargs)


# ---------------------------------------------------------------------------------------------
# one instrumented run shared by the budget, checkpoint and resume tests


@pytest.fixture(scope="module")
def run_a(tiny_cfg, tmp_path_factory):
    """A short run with an exp dir and a replay-ratio budget; records every collect's
    transitions and budget, and the weights of every evaluated snapshot."""
    cfg = tiny_cfg("max_env_step=100", "learner.update_per_collect=None", "learner.replay_ratio=0.15")
    exp_dir = str(tmp_path_factory.mktemp("run_a") / "exp")
    driver = _quiet(cfg, exp_dir=exp_dir)
    collects: list[tuple[int, bool]] = []  # (num_transitions, budget expected)
    evaluated: dict[int, dict] = {}  # version -> (train_iter, weights)

    on_collect = driver._on_collect

    def record_collect(result):
        before = driver.counters.budgets_enqueued
        on_collect(result)
        collects.append((result.num_transitions, driver.counters.budgets_enqueued > before))

    driver._on_collect = record_collect
    evaluator = driver.backend.evaluators[0]
    evaluate = evaluator.evaluate

    def record_eval(snapshot, **kw):
        evaluated[snapshot.version] = {
            "train_iter": snapshot.train_iter,
            "weights": {k: v.clone() for k, v in snapshot.weights.items()},
        }
        return evaluate(snapshot, **kw)

    evaluator.evaluate = record_eval
    metrics = driver.run()
    driver.close()
    return cfg, exp_dir, driver, metrics, collects, evaluated


def test_cold_start_waits_for_env_steps(tiny_cfg):
    n = 60
    cfg = tiny_cfg(f"learner.train_start_after_envsteps={n}", "max_env_step=1000")
    driver = _quiet(cfg)
    try:
        batch_ready_early = False
        for _ in range(30):
            driver._iteration()
            c = driver.counters
            if c.env_steps < n:
                assert driver.train_iter == 0, f"trained at env_steps={c.env_steps} < {n}"
                assert len(driver.budgets) == 0 and c.budgets_enqueued == 0
                batch_ready_early |= driver.buffer.num_transitions >= cfg.learner.batch_size
            if driver.train_iter > 0:
                break
        assert driver.train_iter > 0, "training never started"
        assert driver.counters.env_steps >= n
        assert driver.counters.cold_start_collects >= 1
        # the env-step threshold (not the batch size) is what held training back
        assert batch_ready_early
    finally:
        driver.close()


def test_budget_locked_replay_ratio(run_a):
    cfg, _, driver, metrics, collects, _ = run_a
    b, c = driver.budgets, driver.counters
    assert driver.stop.max_env_step and driver.counters.env_steps >= cfg.max_env_step
    assert driver.train_iter > 0
    assert driver.train_iter == b.total_consumed == b.total_enqueued - b.remaining
    assert metrics["train_iter"] == driver.train_iter
    assert c.updates_enqueued == b.total_enqueued
    assert len(collects) == c.collects
    # one budget per trainable collect, of exactly updates_for_collect(transitions)
    expected = [updates_for_collect(cfg, n) for n, enqueued in collects if enqueued]
    assert len(expected) == c.budgets_enqueued == c.collects - c.cold_start_collects
    assert sum(expected) == b.total_enqueued
    assert expected == [max(1, int(n * cfg.learner.replay_ratio)) for n, enqueued in collects if enqueued]


def test_checkpoint_holds_the_evaluated_weights(run_a):
    cfg, exp_dir, driver, _, _, evaluated = run_a
    ckpt_dir = os.path.join(exp_dir, "ckpt")
    latest_path = os.path.join(ckpt_dir, "ckpt_latest.pt")
    assert os.path.isfile(latest_path) and os.path.isfile(os.path.join(ckpt_dir, "ckpt_best.pt"))
    assert os.path.isfile(os.path.join(exp_dir, "config.json"))
    assert not [f for f in os.listdir(ckpt_dir) if f.endswith(".tmp")]
    ckpt = load_checkpoint(latest_path, policy_type="muzero")
    info = ckpt["eval"]
    history = {r["train_iter"]: r for r in driver.eval_history}
    assert info["train_iter"] in history, (info, list(history))
    # the latest checkpoint belongs to the last consumed evaluation
    assert info["train_iter"] == driver.eval_history[-1]["train_iter"]
    assert info["reward_mean"] == history[info["train_iter"]]["reward_mean"]
    assert ckpt["learner"]["train_iter"] == ckpt["counters"]["train_iter"] == info["train_iter"]
    assert ckpt["counters"]["env_steps"] == history[info["train_iter"]]["env_steps"]
    # the network in the checkpoint is exactly the snapshot that was evaluated
    seen = evaluated[info["version"]]
    assert seen["train_iter"] == info["train_iter"]
    net = ckpt["learner"]["network"]
    assert net.keys() == seen["weights"].keys()
    for k in net:
        assert torch.equal(net[k], seen["weights"][k]), k
    # ... and it is not simply the final weights when training went on after that eval
    if driver.train_iter != info["train_iter"]:
        final = driver.learner.policy.network.state_dict()
        assert not all(torch.equal(net[k], final[k]) for k in net)
    # re-evaluating the checkpoint's weights with the same evaluator seed reproduces the score
    evaluator = Evaluator(cfg, seed=cfg.seed + EVALUATOR_SEED_OFFSET)
    try:
        again = evaluator.evaluate(WeightSnapshot(version=0, train_iter=info["train_iter"], weights=net))
    finally:
        evaluator.close()
    assert again.reward_mean == info["reward_mean"]
    assert again.num_episodes == info["num_episodes"] == cfg.evaluator.n_evaluator_episode
    # best checkpoint: the first evaluation with the best mean
    best = load_checkpoint(os.path.join(ckpt_dir, "ckpt_best.pt"))
    means = [r["reward_mean"] for r in driver.eval_history]
    assert best["eval"]["reward_mean"] == max(means)
    assert best["eval"]["train_iter"] == driver.eval_history[int(np.argmax(means))]["train_iter"]


def test_final_weights_are_evaluated(run_a):
    _, _, driver, metrics, _, evaluated = run_a
    # an evaluation of the final weights was launched ...
    assert any(e["train_iter"] == driver.train_iter for e in evaluated.values())
    # ... so it must be in the history, the metrics and the latest checkpoint
    assert driver.eval_history[-1]["train_iter"] == driver.train_iter
    assert metrics["eval_train_iter_last"] == driver.train_iter
    assert metrics["evaluations"] == len(evaluated)


def test_resume_continues_counters(run_a, tiny_cfg, tmp_path):
    _, exp_dir, _, _, _, _ = run_a
    path = os.path.join(exp_dir, "ckpt", "ckpt_latest.pt")
    ckpt = load_checkpoint(path)
    saved_iter, saved_steps = ckpt["counters"]["train_iter"], ckpt["counters"]["env_steps"]
    assert saved_iter > 0 and saved_steps > 0
    cfg = tiny_cfg("max_env_step=160", "learner.update_per_collect=None", "learner.replay_ratio=0.15")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "resumed"), resume_from=path)
    try:
        assert driver.train_iter == saved_iter
        assert driver.counters.env_steps == saved_steps
        assert driver.counters.collects == ckpt["counters"]["collects"]
        for k, v in driver.learner.policy.network.state_dict().items():
            assert torch.equal(v, ckpt["learner"]["network"][k]), k
        metrics = driver.run()
    finally:
        driver.close()
    assert driver.train_iter > saved_iter and metrics["train_iter"] == driver.train_iter
    assert driver.counters.env_steps > saved_steps and driver.counters.env_steps >= 160
    # budgets of the resumed run account for exactly the new updates
    assert driver.budgets.total_consumed == driver.train_iter - saved_iter
    new = load_checkpoint(str(tmp_path / "resumed" / "ckpt" / "ckpt_latest.pt"))
    assert new["counters"]["train_iter"] > saved_iter
    assert new["counters"]["env_steps"] > saved_steps


def test_resume_keeps_best_checkpoint(run_a, tiny_cfg, tmp_path):
    import shutil

    _, exp_dir, _, _, _, _ = run_a
    resumed_dir = tmp_path / "exp"
    shutil.copytree(exp_dir, resumed_dir)
    latest = resumed_dir / "ckpt" / "ckpt_latest.pt"
    best = resumed_dir / "ckpt" / "ckpt_best.pt"
    # pretend the best evaluation so far scored far above anything this run can reach
    for path in (latest, best):
        data = load_checkpoint(path)
        data["best_eval_reward_mean"] = 1e9
        data["eval"]["reward_mean"] = 1e9 if path == best else data["eval"]["reward_mean"]
        save_checkpoint(path, {k: v for k, v in data.items() if k not in ("format", "format_version")})
    evaluations_before = load_checkpoint(latest)["counters"]["evaluations"]
    cfg = tiny_cfg("max_env_step=200", "learner.update_per_collect=None", "learner.replay_ratio=0.15")
    driver = _quiet(cfg, exp_dir=str(resumed_dir), resume_from=str(latest))
    try:
        metrics = driver.run()
    finally:
        driver.close()
    assert driver.counters.evaluations > evaluations_before  # a real evaluation happened after the resume
    assert load_checkpoint(best)["eval"]["reward_mean"] == 1e9
    assert metrics["eval_reward_mean_best"] == 1e9


# ---------------------------------------------------------------------------------------------
# failing early: nothing is created for a bad checkpoint or env id


def _valid_payload(cfg) -> dict:
    from lz_tune.algos.muzero import MuZeroLearner
    from lz_tune.workers import env_spec_for

    learner = MuZeroLearner(cfg, env_spec_for(cfg))
    return {
        "policy_type": cfg.policy_type,
        "config": cfg.to_dict(),
        "learner": learner.state_dict(),
        "counters": {"env_steps": 10, "train_iter": 0},
    }


@pytest.fixture(scope="module")
def bad_checkpoints(tiny_cfg, tmp_path_factory):
    """name -> path of a checkpoint that must be refused."""
    cfg = tiny_cfg()
    root = tmp_path_factory.mktemp("bad_ckpt")
    good = save_checkpoint(root / "good.pt", _valid_payload(cfg))
    data = good.read_bytes()
    paths = {}
    paths["garbage"] = root / "garbage.pt"
    paths["garbage"].write_bytes(b"this is not a checkpoint\x00\xff" * 10)
    paths["empty"] = root / "empty.pt"
    paths["empty"].write_bytes(b"")
    paths["truncated"] = root / "truncated.pt"
    paths["truncated"].write_bytes(data[: len(data) // 2])
    paths["foreign_state_dict"] = root / "foreign_state_dict.pt"
    torch.save({"weight": torch.zeros(3)}, paths["foreign_state_dict"])
    paths["foreign_list"] = root / "foreign_list.pt"
    torch.save([1, 2, 3], paths["foreign_list"])
    paths["future_version"] = root / "future_version.pt"
    torch.save(torch.load(good, weights_only=True) | {"format_version": 99}, paths["future_version"])
    paths["other_policy"] = root / "other_policy.pt"
    save_checkpoint(paths["other_policy"], _valid_payload(cfg) | {"policy_type": "unizero"})
    paths["no_learner"] = root / "no_learner.pt"
    payload = _valid_payload(cfg)
    del payload["learner"]
    save_checkpoint(paths["no_learner"], payload)
    paths["missing"] = root / "does_not_exist.pt"
    return cfg, {k: str(v) for k, v in paths.items()}


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "empty",
        "truncated",
        "foreign_state_dict",
        "foreign_list",
        "future_version",
        "other_policy",
        "no_learner",
        "missing",
    ],
)
def test_bad_checkpoint_is_refused_before_exp_dir(bad_checkpoints, tmp_path, kind):
    cfg, paths = bad_checkpoints
    exp_dir = tmp_path / "exp"
    with pytest.raises(CheckpointError) as err:
        _quiet(cfg, exp_dir=str(exp_dir), resume_from=paths[kind])
    assert paths[kind] in str(err.value)
    assert not exp_dir.exists()


def test_incompatible_checkpoint_is_refused_before_exp_dir(tiny_cfg, tmp_path):
    other = tiny_cfg("model.latent_dim=24")
    path = save_checkpoint(tmp_path / "other_shape.pt", _valid_payload(other))
    exp_dir = tmp_path / "exp"
    try:
        with pytest.raises(CheckpointError) as err:
            _quiet(tiny_cfg(), exp_dir=str(exp_dir), resume_from=str(path))
        assert str(path) in str(err.value)
    finally:
        assert not exp_dir.exists()


@pytest.mark.parametrize("env_id", ["CartPol-v1", "NoSuchGame-v0", "ALE/NoSuchGame-v5"])
def test_unknown_env_id_is_a_config_error_before_exp_dir(tiny_cfg, tmp_path, env_id):
    cfg = tiny_cfg(f"env.env_id={env_id}")
    exp_dir = tmp_path / "exp"
    with pytest.raises(ConfigError) as err:
        _quiet(cfg, exp_dir=str(exp_dir))
    assert str(err.value).startswith("env.env_id")
    assert env_id in str(err.value)
    assert not exp_dir.exists()


def test_replay_buffer_saved_beside_the_checkpoint_comes_back_on_resume(tiny_cfg, tmp_path):
    """buffer.save_in_checkpoint (the default): every checkpoint names the manifest of its buffer
    (chunks in ckpt/buffer_store) and a resumed driver starts with exactly that buffer (every
    array, clock and the sampling RNG)."""
    from lz_tune.checkpoint import load_checkpoint
    from tests.buffer_states import assert_buffer_states_equal

    cfg = tiny_cfg("max_env_step=80")
    exp_dir = tmp_path / "exp"
    driver = _quiet(cfg, exp_dir=str(exp_dir))
    driver.run()
    driver.close()
    ckpt_dir = exp_dir / "ckpt"
    name = load_checkpoint(ckpt_dir / "ckpt_latest.pt")["buffer_manifest"]
    assert (ckpt_dir / name).is_file() and any((ckpt_dir / "buffer_store").iterdir())
    saved = driver.buffer.state_dict()  # the buffer file is written at the last evaluation: compare to it
    resumed = _quiet(
        cfg.with_overrides(["max_env_step=200"]),
        exp_dir=str(tmp_path / "r"),
        resume_from=str(ckpt_dir / "ckpt_latest.pt"),
    )
    try:
        assert resumed.buffer.num_transitions > 0
        assert_buffer_states_equal(resumed.buffer.state_dict(), saved)
    finally:
        resumed.close()
    # without the option, the same checkpoint resumes with an empty buffer
    fresh = _quiet(
        cfg.with_overrides(["buffer.save_in_checkpoint=False"]),
        exp_dir=str(tmp_path / "f"),
        resume_from=str(ckpt_dir / "ckpt_latest.pt"),
    )
    try:
        assert fresh.buffer.num_transitions == 0
    finally:
        fresh.close()


def test_replay_buffer_file_that_does_not_fit_is_a_checkpoint_error(tiny_cfg, tmp_path):
    from lz_tune.checkpoint import load_checkpoint

    cfg = tiny_cfg("max_env_step=40")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "exp"))
    driver.run()
    driver.close()
    ckpt_dir = tmp_path / "exp" / "ckpt"
    name = load_checkpoint(ckpt_dir / "ckpt_latest.pt")["buffer_manifest"]
    other = _quiet(tiny_cfg("buffer.td_steps=4"), exp_dir=None)
    try:
        with pytest.raises(CheckpointError, match=name.replace(".", r"\.") + ".*td_steps"):
            other.load_buffer(str(ckpt_dir / name))
        assert other.buffer.num_transitions == 0  # left as it was
        (tmp_path / "junk.pt").write_bytes(b"not a buffer")
        with pytest.raises(CheckpointError, match="junk.pt"):
            other.load_buffer(str(tmp_path / "junk.pt"))
    finally:
        other.close()


def test_checkpoint_weights_rng_counters_and_buffer_file_are_from_one_moment(tiny_cfg, tmp_path):
    """Everything a resume reads comes from the moment the evaluated weights were launched: the
    RNG state and the replay-buffer file too (they used to be taken when the result arrived,
    after more collection), so no transition in the buffer file is missing from the counters."""
    from lz_tune.buffer.snapshot import read_manifest
    from lz_tune.checkpoint import load_checkpoint
    from lz_tune.pipeline.backends import InProcessBackend, PollResult

    class SlowEvaluator(InProcessBackend):
        """Eval results arrive two polls after their launch (collection goes on meanwhile), as
        with evaluator actors."""

        def __init__(self, cfg):
            super().__init__(cfg)
            self._held = []

        @property
        def evals_in_flight(self):
            return len(self._done.evals) + sum(len(h) for h in self._held)

        def poll(self, timeout_s):
            done = super().poll(timeout_s)
            self._held.append(done.evals)
            ready = self._held.pop(0) if len(self._held) > 2 else []
            return PollResult(collects=done.collects, evals=ready, failures=done.failures)

    cfg = tiny_cfg("max_env_step=120", "evaluator.eval_freq=3")
    driver = _quiet(cfg, exp_dir=str(tmp_path / "exp"), backend=SlowEvaluator(cfg))
    at_launch = {}
    launch = driver._launch_eval

    def recording_launch():
        snapshot = driver.publisher.current(driver.train_iter)
        at_launch.setdefault(
            snapshot.version,
            (driver.buffer.num_transitions, driver.counters.env_steps, copy.deepcopy(driver.rng.bit_generator.state)),
        )
        return launch()

    driver._launch_eval = recording_launch
    on_eval, written = driver._on_eval, []
    ckpt_dir = tmp_path / "exp" / "ckpt"

    def recording_on_eval(result):  # what a resume right after this evaluation would read
        on_eval(result)
        ckpt = load_checkpoint(ckpt_dir / "ckpt_latest.pt", policy_type=cfg.policy_type)
        written.append((ckpt, read_manifest(ckpt_dir / ckpt["buffer_manifest"])["transitions"]))

    driver._on_eval = recording_on_eval
    try:
        driver.run()
    finally:
        driver.close()
    assert len(written) >= 3
    for ckpt, transitions_in_file in written:
        transitions, env_steps, rng = at_launch[ckpt["eval"]["version"]]
        assert ckpt["counters"]["env_steps"] == env_steps
        assert ckpt["rng"]["numpy"] == rng
        assert transitions_in_file == transitions
    # no manifest left behind that no checkpoint refers to
    names = {load_checkpoint(ckpt_dir / f)["buffer_manifest"] for f in ("ckpt_latest.pt", "ckpt_best.pt")}
    assert {p.name for p in ckpt_dir.glob("replay_buffer.v*.json")} == names


# ---------------------------------------------------------------------------------------------
# policy lag at a collect's real start; finished work at close


def test_policy_lag_is_measured_at_the_collects_real_start(tiny_cfg):
    """A collect may wait in an actor's queue after its launch: its lag at start counts the updates
    the learner had finished when the collect began stepping (CollectResult.started_at)."""
    import dataclasses

    driver = _quiet(tiny_cfg("max_env_step=120", "learner.update_per_collect=6"))
    try:
        driver.run()
        n = driver.train_iter
        assert n >= 12 and len(driver.policy_lag.update_times) == n
        times = list(driver.policy_lag.update_times)
        assert driver.train_iter_at(times[-1]) == n and driver.train_iter_at(times[-5]) == n - 4
        assert driver.train_iter_at(times[0] - 1.0) == 0
        # a result that started when update n-4 had just finished, on weights of update n-6
        real = driver.backend.collectors[0].collect(temperature=1.0)
        late = dataclasses.replace(real, started_at=times[-5], policy_train_iter=n - 6)
        driver._on_collect(late)
        assert driver.policy_lag.start[-1] == 2 and driver.policy_lag.returned[-1] == 6
        m = driver.metrics()
        assert m["policy_lag_start_max"] == 2 and m["policy_lag_return_max"] == 6
    finally:
        driver.close()


def test_close_consumes_finished_collects_and_reports_discarded_ones(tiny_cfg):
    """At shutdown a collect that has finished is counted and kept; one still running is
    discarded, and the driver says so."""
    from lz_tune.pipeline.backends import InProcessBackend

    lines: list[str] = []
    driver = Driver(tiny_cfg("max_env_step=60"), print_fn=lines.append)
    driver.run()
    steps, pushed = driver.counters.env_steps, driver.buffer.num_transitions
    driver.backend.launch_collect(0, driver.publisher.current(driver.train_iter), 1.0)  # finishes, unread
    driver.close()
    assert driver.counters.env_steps > steps and driver.buffer.num_transitions > pushed
    assert driver.collects_discarded_at_close == 0 and not any("discarded" in s for s in lines)

    class StillRunning(InProcessBackend):
        concurrent = True

        @property
        def collects_in_flight(self) -> int:
            return 1  # a collect that never finishes

    lines.clear()
    cfg = tiny_cfg("max_env_step=60")
    driver = Driver(cfg, print_fn=lines.append, backend=StillRunning(cfg))
    driver.close()
    assert driver.collects_discarded_at_close == 1
    assert any("1 collect(s) still running discarded" in s for s in lines)
