"""UniZero: the windowed transformer's caches are exact, the per-env KV caches follow their
lifecycle (per env, per weights version, cleared on the configured interval, bounded), the
learner's targets use the stored context, train_iter reaches the schedules, the loss weights
are the configured ones."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from lz_tune.algos import get_algorithm
from lz_tune.algos.unizero import history_token_valid
from lz_tune.buffer import GameBuffer, GameSegment
from lz_tune.config import ConfigError
from lz_tune.models.transformer import WindowTransformer
from lz_tune.models.unizero import UniZeroWorldModel
from lz_tune.workers import env_spec_for, make_env

UNI = ("policy_type=unizero", "unizero.embed_dim=16", "unizero.num_heads=2", "unizero.infer_context_length=2")


def _randomise(module: torch.nn.Module, std: float = 0.3) -> None:
    """Non-trivial weights everywhere (zero-initialised heads would hide mistakes)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)


# ---------------------------------------------------------------------------- the transformer


@pytest.mark.parametrize("chunks", [[1] * 30, [2] * 15, [1, 2, 3, 1, 5, 2, 4, 3, 1, 2, 6]])
def test_window_cache_equals_the_whole_sequence_at_once(chunks):
    """Appending tokens in chunks to a window (8 tokens, sequence of 30) gives the outputs of
    one banded pass over the whole sequence."""
    torch.manual_seed(0)
    tr = WindowTransformer(embed_dim=16, num_layers=3, num_heads=2, context_tokens=8).eval()
    _randomise(tr)
    x = torch.randn(2, sum(chunks), 16)
    with torch.no_grad():
        full, _ = tr(x)
        window, outs, start = None, [], 0
        for n in chunks:
            out, window = tr(x[:, start : start + n], window)
            outs.append(out)
            start += n
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-4)
    assert window.keys.shape == (2, 3, 7, 16)  # bounded: C - 1 slots


def test_window_limits_attention_to_the_last_c_tokens():
    """Changing a token more than C - 1 positions back changes nothing in a one-layer model; a
    token within the window does change the output."""
    tr = WindowTransformer(embed_dim=16, num_layers=1, num_heads=2, context_tokens=4).eval()
    _randomise(tr)
    x = torch.randn(1, 10, 16)
    with torch.no_grad():
        base, _ = tr(x)
        far, near = x.clone(), x.clone()
        far[:, 5] += torch.randn(16)  # 4 back from the last token: outside its window
        near[:, 6] += torch.randn(16)  # 3 back: inside (not a constant shift: LayerNorm removes those)
        assert torch.allclose(tr(far)[0][:, -1], base[:, -1])
        assert not torch.allclose(tr(near)[0][:, -1], base[:, -1])


def test_left_padding_is_invisible():
    """A context left-padded with junk tokens (marked not valid) gives the outputs of the
    context alone."""
    tr = WindowTransformer(embed_dim=16, num_layers=2, num_heads=2, context_tokens=8).eval()
    _randomise(tr)
    x = torch.randn(1, 5, 16)
    padded = torch.cat((torch.randn(1, 2, 16) * 5, x), 1)
    valid = torch.tensor([[False, False, True, True, True, True, True]])
    with torch.no_grad():
        torch.testing.assert_close(tr(padded, token_valid=valid)[0][:, 2:], tr(x)[0], atol=1e-5, rtol=1e-4)


def test_recurrent_step_equals_the_teacher_forced_sequence_of_its_predictions():
    """A search step (action token, then its predicted latent as the next observation token)
    from a root window equals the whole sequence run at once with those tokens."""
    model = UniZeroWorldModel(
        observation_shape=(4,),
        action_space_size=3,
        embed_dim=16,
        num_heads=2,
        context_tokens=6,
        value_support_size=5,
        reward_support_size=5,
    ).eval()
    _randomise(model)
    obs, acts = torch.randn(2, 4, 4), torch.tensor([[0, 2, 1], [1, 1, 0]])
    with torch.no_grad():
        z = model.encode(obs.reshape(-1, 4)).view(2, 4, -1)
        _, _, window = model.sequence(z, acts)
        window, reward_logits, policy_logits, value_logits, next_latent = model.recurrent_step(
            window, torch.tensor([2, 0])
        )
        h_obs, h_act, _ = model.sequence(
            torch.cat((z, next_latent[:, None]), 1), torch.cat((acts, torch.tensor([[2], [0]])), 1)
        )
        r_ref, latent_ref = model.action_heads(h_act[:, -1])
        p_ref, v_ref = model.observation_heads(h_obs[:, -1])
    for got, ref in ((reward_logits, r_ref), (next_latent, latent_ref), (policy_logits, p_ref), (value_logits, v_ref)):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------- per-env caches


@pytest.fixture
def uni(tiny_cfg):
    def make(*extra, num_envs=3):
        cfg = tiny_cfg(*UNI, f"env.collector_env_num={num_envs}", *extra)
        policy = get_algorithm("unizero").make_policy(cfg, env_spec_for(cfg))
        _randomise(policy.network)
        env = make_env(cfg, num_envs=num_envs, seed=0, mode="collect")
        return cfg, policy, env

    return make


def _uncached_values(policy, obs_seq, act_seq):
    """Value logits at the last observation, recomputed over the whole context [T] at once."""
    net = policy.network
    with torch.inference_mode():
        z = net.encode(torch.from_numpy(np.stack(obs_seq)))[None]
        actions = torch.from_numpy(np.asarray(act_seq, np.int64))[None]
        h_obs, _, _ = net.sequence(z, actions)
        return net.observation_heads(h_obs[:, -1])[1][0]


def test_cached_roots_equal_recomputation_over_a_long_episode(uni):
    """40 steps with a window of 2 steps (4 tokens): every root's value equals the uncached
    pass over every token since the episode start; env 1's reset leaves env 0 untouched."""
    cfg, policy, env = uni()
    rng = np.random.default_rng(0)
    batch = env.reset(seed=0)
    history = [([o], []) for o in batch.observation]
    previous = None
    for step in range(40):
        _, _, value_logits = policy.root_windows(batch.observation, previous)
        for i in range(3):
            ref = _uncached_values(policy, *history[i])
            torch.testing.assert_close(value_logits[i], ref, atol=1e-5, rtol=1e-4)
        actions = rng.integers(0, 2, size=3)
        batch = env.step(actions).batch
        previous = actions.copy()
        for i in range(3):
            history[i][0].append(batch.observation[i])
            history[i][1].append(int(actions[i]))
        if step == 20:  # env 1's episode ends (as the collector reports it)
            policy.reset(np.array([1]))
            previous[1] = -1
            history[1] = ([batch.observation[1]], [])
    assert policy.cache.keys.shape[2] == 2 * 2 - 1


def test_a_cache_of_old_weights_is_never_used(uni):
    cfg, policy, env = uni()
    batch = env.reset(seed=0)
    policy.root_windows(batch.observation, None)
    batch = env.step(np.zeros(3, np.int64)).batch
    assert policy.history.carried(3, np.zeros(3, np.int64)).all()
    policy.load_weights({k: v + 0.01 for k, v in policy.weights().items()})  # a snapshot arrives
    _, _, value_logits = policy.root_windows(batch.observation, np.zeros(3, np.int64))
    for i in range(3):  # a fresh context: the current observation alone, under the new weights
        torch.testing.assert_close(value_logits[i], _uncached_values(policy, [batch.observation[i]], []))


@pytest.mark.parametrize("interval, restarts", [(3, [0, 3, 6, 9]), (0, [0])])
def test_caches_clear_every_kv_cache_clear_interval_steps(uni, interval, restarts):
    cfg, policy, env = uni(f"unizero.kv_cache_clear_interval={interval}", num_envs=2)
    batch = env.reset(seed=0)
    previous, fresh = None, []
    for _ in range(11):
        fresh.append(not policy.history.carried(2, previous)[0])
        policy.root_windows(batch.observation, previous)
        previous = np.zeros(2, np.int64)
        batch = env.step(previous).batch
    assert list(np.flatnonzero(fresh)) == restarts


def test_cache_memory_is_bounded_over_a_long_run(uni):
    cfg, policy, env = uni(num_envs=2)
    rng = np.random.default_rng(0)
    batch, previous, sizes = env.reset(seed=0), None, []
    for _ in range(60):
        out = policy.act(batch, mode="collect", temperature=1.0, rng=rng, previous_action=previous)
        previous = out.action
        step = env.step(out.action)
        batch = step.batch
        sizes.append(policy.cache_nbytes())
    net = policy.network
    bound = 2 * (
        2 * net.transformer.num_layers * (net.context_tokens - 1) * net.embed_dim * 4 + (net.context_tokens - 1) * 9 + 8
    )
    assert max(sizes) <= bound and len(set(sizes)) == 1


# ---------------------------------------------------------------------------- learner side


def _segment(num_steps, *, first_frame=0.0):
    """Vector frames [1] whose value is the step index (+ first_frame); action t = t % 2."""
    frames = (np.arange(num_steps + 1, dtype=np.float32) + first_frame)[:, None]
    return GameSegment(
        frames=frames,
        actions=np.arange(num_steps) % 2,
        rewards=np.ones(num_steps),
        root_values=np.zeros(num_steps),
        pred_values=np.zeros(num_steps),
        policy_targets=np.full((num_steps, 2), 0.5),
        action_mask=np.ones((num_steps, 2), bool),
        to_play=np.full(num_steps, -1),
        timesteps=np.arange(num_steps),
        num_owned=num_steps - 4,
        terminal=False,
    )


def test_gather_history_reads_the_steps_before_each_position_and_pads_at_the_segment_start():
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=1,
        action_space_size=2,
        seed=0,
    )
    buffer.push([_segment(10), _segment(10, first_frame=100.0)])
    hist = buffer.gather_history(np.array([0, 1, 1]), np.array([1, 0, 6]), 3)
    np.testing.assert_array_equal(hist.valid, [[False, True, True], [False, False, True], [True, True, True]])
    np.testing.assert_array_equal(hist.obs[..., 0], [[0, 0, 1], [0, 0, 100], [104, 105, 106]])
    np.testing.assert_array_equal(hist.actions, [[0, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(history_token_valid(hist.valid)[0], [False, False, True, True, True])
    past_end = buffer.gather_history(np.array([0]), np.array([11]), 3)  # 11 observations: 0..10
    np.testing.assert_array_equal(past_end.valid, [[True, True, False]])
    np.testing.assert_array_equal(past_end.obs[0, :, 0], [9, 10, 0])
    with pytest.raises(ValueError, match="positions"):
        buffer.gather_history(np.array([0]), np.array([-1]), 2)


def test_bootstrap_fn_gives_the_value_fn_targets_when_it_reads_the_same_observation():
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=2,
        td_steps=2,
        discount=0.9,
        frame_stack=1,
        action_space_size=2,
        seed=0,
    )
    buffer.push([_segment(10), _segment(10, first_frame=100.0)])
    index = buffer.sample(8)
    win = buffer.gather_window(index)

    def value_fn(obs):
        return np.sin(obs[:, 0]).astype(np.float32)

    def bootstrap_fn(rows, segment_ids, positions):
        return value_fn(buffer.gather_history(segment_ids, positions, 1).obs[:, 0])

    np.testing.assert_allclose(
        buffer.n_step_values(win, value_fn=None, bootstrap_fn=bootstrap_fn),
        buffer.n_step_values(win, value_fn=value_fn),
        rtol=1e-6,
    )


def _learner_and_batch(tiny_cfg, *extra):
    from lz_tune.pipeline import Driver

    cfg = tiny_cfg(*UNI, "buffer.use_priority=False", "max_env_step=60", *extra)
    driver = Driver(cfg, print_fn=None)
    try:
        driver.run()
        index = driver.buffer.sample(8)
        batch = driver.learner.make_batch(driver.buffer, index, rng=np.random.default_rng(0))
        return driver, batch
    finally:
        driver.close()


def test_bootstrap_values_come_from_the_target_model_over_each_samples_sequence(tiny_cfg, monkeypatch):
    """Sample b's n-step target at t bootstraps from the target model's value at o_{t+n}, read
    off one teacher-forced pass over o_{t+n-H+1} .. o_{t+n+U} (H = 2, n = U = 3)."""
    from lz_tune.algos.unizero import UniZeroPolicy

    seen = []
    original = UniZeroPolicy.sequence_values_and_latents
    monkeypatch.setattr(
        UniZeroPolicy,
        "sequence_values_and_latents",
        lambda self, hist: (seen.append((self, hist)), original(self, hist))[1],
    )
    driver, _ = _learner_and_batch(tiny_cfg, "env.max_episode_steps=200")
    learner, buffer = driver.learner, driver.buffer
    assert seen and all(policy is learner.target_policy for policy, _ in seen)
    _randomise(learner.target_policy.network, std=0.2)  # values that differ from position to position
    n, u, h = buffer.td_steps, buffer.num_unroll_steps, 2
    checked = 0
    for _ in range(40):
        index = buffer.sample(1)  # one sample: no other sample shares its bootstrap positions
        win = buffer.gather_window(index)
        t, seg = int(index.positions[0]), int(index.segment_ids[0])
        if t + n + u >= win.num_obs[0, 0] - 1 or t + n - h + 1 < 0:
            continue
        batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
        seq = buffer.gather_history(np.array([seg]), np.array([t + n + u]), h + u)
        values = learner.target_policy.sequence_values(seq)[0]  # at o_{t+n-h+1} .. o_{t+n+u}
        first = t + n - h + 1

        def from_this_sequence(rows, segment_ids, positions, seg=seg, first=first, values=values):
            assert (segment_ids == seg).all() and (positions - first >= h - 1).all()
            return values[positions - first]

        expected = buffer.n_step_values(win, value_fn=None, bootstrap_fn=from_this_sequence)
        np.testing.assert_allclose(batch.target_value, expected, rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 3


CONV_PONG = (
    "env.env_id=ALE/Pong-v5",
    "model.kind=conv",
    "model.num_channels=8",
    "model.downsample=True",
    "env.frame_stack=2",
    "env.image_size=32",
    "env.max_episode_steps=40",
    "env.collector_env_num=2",
)


@pytest.mark.parametrize("env", [(), CONV_PONG], ids=["vector", "conv"])
def test_latent_targets_are_the_target_models_encodings_of_the_next_observations(tiny_cfg, env):
    """make_batch hands the latent loss its targets: the target model's latents of o_{t+1} ..
    o_{t+U}, most of them taken from the bootstrap pass's encodings (o_{t+2} .. here: H = 2,
    n = U = 3), the others encoded on their own; where the step is real, each equals encoding
    that observation alone."""
    from lz_tune.algos.unizero import TARGET_LATENT

    driver, _ = _learner_and_batch(tiny_cfg, *env)
    learner, buffer = driver.learner, driver.buffer
    _randomise(learner.target_policy.network, std=0.2)
    learner.target_policy.on_weights_loaded()
    index = buffer.sample(16)
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    got = batch.extras[TARGET_LATENT]
    u = buffer.num_unroll_steps
    assert got.shape == (16, u, learner.cfg.unizero.embed_dim) and got.dtype == np.float32
    with torch.no_grad():
        frames = torch.from_numpy(batch.obs[:, 1:].reshape(16 * u, *batch.obs.shape[2:]))
        want = learner.target_policy.network.encode(frames)
    want = want.numpy().reshape(16, u, -1)
    real = batch.mask[:, 1:] > 0
    assert real.sum() >= 16 and np.abs(want[real]).max() > 0.1  # the comparison has teeth
    np.testing.assert_allclose(got[real], want[real], rtol=1e-4, atol=1e-5)
    assert np.isfinite(got).all()


def test_learn_with_make_batch_latent_targets_equals_encoding_them_in_the_loss(tiny_cfg):
    from lz_tune.algos.unizero import TARGET_LATENT

    driver, batch = _learner_and_batch(tiny_cfg)
    learner = driver.learner
    twin = copy.deepcopy(learner)
    own = dataclasses.replace(batch, extras={k: v for k, v in batch.extras.items() if k != TARGET_LATENT})
    encodes = []
    for lrn in (learner, twin):
        net = lrn.target_policy.network
        net.encode = lambda obs, net=net, original=net.encode: (encodes.append(net), original(obs))[1]
    logs, priorities = learner.learn(batch, train_iter=0)
    assert not encodes  # the loss read make_batch's targets
    twin_logs, twin_priorities = twin.learn(own, train_iter=0)
    assert encodes == [twin.target_policy.network]
    assert logs["loss/latent"] > 0
    for key in ("loss/total", "loss/latent", "loss/value", "loss/policy"):
        np.testing.assert_allclose(logs[key], twin_logs[key], rtol=1e-5, atol=1e-7, err_msg=key)
    np.testing.assert_allclose(priorities, twin_priorities, rtol=1e-5, atol=1e-6)


def test_driver_hands_train_iter_to_learn_and_it_drives_label_smoothing(tiny_cfg, monkeypatch):
    from lz_tune.algos.unizero import UniZeroLearner

    calls = []
    original = UniZeroLearner.learn
    monkeypatch.setattr(
        UniZeroLearner,
        "learn",
        lambda self, batch, *, train_iter=None: (
            calls.append((train_iter, self.train_iter)),
            original(self, batch, train_iter=train_iter),
        )[1],
    )
    driver, batch = _learner_and_batch(
        tiny_cfg,
        "unizero.policy_ls_eps_start=0.5",
        "unizero.policy_ls_eps_end=0.0",
        "unizero.policy_ls_eps_decay_steps=10",
    )
    assert calls and all(given == own for given, own in calls)
    learner = driver.learner
    logs, _ = original(learner, batch, train_iter=0)
    assert logs["learner/policy_label_smoothing"] == 0.5
    logs_late, _ = original(learner, batch, train_iter=10)
    assert logs_late["learner/policy_label_smoothing"] == 0.0
    learner._schedule_iter = 0
    smoothed = learner.policy_targets(batch).numpy()
    np.testing.assert_allclose(smoothed, 0.5 * batch.target_policy + 0.5 / batch.target_policy.shape[-1], rtol=1e-6)


def test_loss_weights_are_the_configured_ones(tiny_cfg):
    """Only the value weight non-zero (and 3): the total is 3 x the value term / U (unit IS
    weights); the original hard-codes its weights and would fail this."""
    zero = (
        "learner.policy_loss_weight=0",
        "learner.reward_loss_weight=0",
        "learner.ssl_loss_weight=0",
        "learner.policy_entropy_weight=0",
        "learner.value_loss_weight=3",
    )
    driver, batch = _learner_and_batch(tiny_cfg, *zero)
    assert np.all(batch.weights == 1)
    logs, _ = driver.learner.learn(batch)
    num_unroll = batch.actions.shape[1]
    assert logs["loss/total"] == pytest.approx(3 * logs["loss/value"] / num_unroll, rel=1e-5)


def test_target_network_is_a_momentum_average(tiny_cfg):
    driver, batch = _learner_and_batch(tiny_cfg, "unizero.target_momentum=0.25")
    learner = driver.learner
    before = {k: v.clone() for k, v in learner.target_policy.network.state_dict().items()}
    learner.learn(batch)
    after_online = learner.policy.network.state_dict()
    for key, target in learner.target_policy.network.state_dict().items():
        torch.testing.assert_close(target, 0.75 * before[key] + 0.25 * after_online[key])


@pytest.mark.parametrize(
    "override, key",
    [
        ("unizero.num_heads=3", "unizero.embed_dim"),
        ("unizero.infer_context_length=0", "unizero.infer_context_length"),
        ("unizero.kv_cache_clear_interval=-1", "unizero.kv_cache_clear_interval"),
        ("unizero.target_momentum=0", "unizero.target_momentum"),
        ("unizero.dropout=1.0", "unizero.dropout"),
        ("unizero.policy_ls_eps_start=2", "unizero.policy_ls_eps_start"),
    ],
)
def test_bad_unizero_keys(tiny_cfg, override, key):
    with pytest.raises(ConfigError, match=key):
        tiny_cfg(*UNI, override)


@pytest.mark.parametrize("write_root_values", [None, True])
def test_buffer_reanalysis_searches_every_step_from_its_stored_context(tiny_cfg, write_root_values):
    """buffer.buffer_reanalyze_freq (the reference's Atari UniZero config uses it): each step of a
    chosen segment gets the target model's search from the H stored steps ending at it: its
    policy target always, its root value with buffer.reanalyze_writes_root_values=True (the
    default for unizero keeps the stored one, as the reference's UniZero buffer does)."""
    extra = () if write_root_values is None else (f"buffer.reanalyze_writes_root_values={write_root_values}",)
    driver, _ = _learner_and_batch(
        tiny_cfg,
        "buffer.buffer_reanalyze_freq=1",
        "mcts.num_simulations=16",
        "buffer.reanalyze_batch_size=1",
        "buffer.reanalyze_partition=1.0",
        *extra,
    )
    learner, buffer = driver.learner, driver.buffer
    assert driver.counters.buffer_reanalyzes > 0 and buffer.reanalyze_counts().sum() > 0  # ran inside budgets
    _randomise(learner.target_policy.network, std=0.2)
    ids = buffer.segment_ids[:2]
    before = np.concatenate([buffer.get_segment(i).root_values for i in ids])
    learner.reanalyze_segments(buffer, ids, rng=np.random.default_rng(0))
    seg, pos = buffer.segment_steps(ids)
    stored = np.concatenate([buffer.get_segment(i).policy_targets for i in ids])
    masks = np.concatenate([buffer.get_segment(i).action_mask for i in ids])
    to_play = np.concatenate([buffer.get_segment(i).to_play for i in ids])
    expected = learner.target_policy.reanalyze_history(
        buffer.gather_history(seg, pos, 2), masks, to_play, np.random.default_rng(0)
    )
    np.testing.assert_allclose(stored, expected.policy_target, rtol=1e-5, atol=1e-6)
    values = np.concatenate([buffer.get_segment(i).root_values for i in ids])
    if write_root_values:
        np.testing.assert_allclose(values, expected.root_value, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(values, before)
        assert not np.allclose(before, expected.root_value, rtol=1e-5, atol=1e-6)  # (so the check can fail)


def test_reanalysis_searches_from_the_stored_context(tiny_cfg):
    """Rows 0..3 (ratio 0.5 of 8) get the target model's search from the H stored steps ending at
    each of their positions (no root noise: deterministic); rows 4..7 keep the stored targets."""
    driver, _ = _learner_and_batch(tiny_cfg, "buffer.reanalyze_ratio=0.5", "mcts.num_simulations=24")
    learner, buffer = driver.learner, driver.buffer
    _randomise(learner.target_policy.network, std=0.2)
    index = buffer.sample(8)
    batch = learner.make_batch(buffer, index, rng=np.random.default_rng(0))
    win = buffer.gather_window(index)
    assert batch.num_reanalyzed == 4
    sel = win.valid[:4]
    seg = np.broadcast_to(np.asarray(index.segment_ids)[:4, None], sel.shape)[sel]
    hist = buffer.gather_history(seg, win.positions[:4][sel], 2)
    expected = learner.target_policy.reanalyze_history(
        hist, win.action_mask[:4][sel], win.to_play[:4][sel], np.random.default_rng(1)
    )
    np.testing.assert_allclose(batch.target_policy[:4][sel], expected.policy_target, rtol=1e-6)
    np.testing.assert_array_equal(batch.target_policy[4:], win.policy_targets[4:])
    no_context = learner.target_policy.reanalyze_history(
        buffer.gather_history(seg, win.positions[:4][sel], 1),
        win.action_mask[:4][sel],
        win.to_play[:4][sel],
        np.random.default_rng(1),
    )
    assert not np.allclose(no_context.policy_target, expected.policy_target)  # the context matters here


# ---------------------------------------------------------------------------- sampled_unizero


def test_continuous_previous_actions_mark_resets_with_nan_rows():
    from lz_tune.algos.history import acted

    np.testing.assert_array_equal(acted(np.array([[-0.5], [np.nan], [0.3]], np.float32)), [True, False, True])
    np.testing.assert_array_equal(acted(np.array([0, -1, 2])), [True, False, True])


def test_sampled_unizero_caches_continuous_actions_and_reanalysis_replaces_the_samples(tiny_cfg):
    from lz_tune.pipeline import Driver

    cfg = tiny_cfg(
        "env.env_id=Pendulum-v1",
        "policy_type=sampled_unizero",
        "unizero.embed_dim=16",
        "unizero.num_heads=2",
        "unizero.infer_context_length=2",
        "sampled.num_samples=3",
        "buffer.reanalyze_ratio=0.5",
        "max_env_step=60",
    )
    policy = get_algorithm("sampled_unizero").make_policy(cfg, env_spec_for(cfg))
    _randomise(policy.network)
    env = make_env(cfg, num_envs=2, seed=0, mode="collect")
    rng = np.random.default_rng(0)
    batch = env.reset(seed=0)
    obs_seq, act_seq, previous = [batch.observation], [], None
    for _ in range(6):
        out = policy.act(batch, mode="collect", temperature=1.0, rng=rng, previous_action=previous)
        assert out.action.shape == (2, 1) and out.extras["sampled_actions"].shape == (2, 3, 1)
        previous = out.action
        batch = env.step(out.action).batch
        obs_seq.append(batch.observation)
        act_seq.append(out.action)
    env.close()
    _, _, value_logits = policy.root_windows(batch.observation, previous)
    net = policy.network
    with torch.inference_mode():  # the cached root equals the whole episode recomputed
        z = net.encode(torch.from_numpy(np.stack(obs_seq, 1).reshape(-1, 3))).view(2, 7, -1)
        h_obs, _, _ = net.sequence(z, torch.from_numpy(np.stack(act_seq, 1)))
        torch.testing.assert_close(value_logits, net.observation_heads(h_obs[:, -1])[1], atol=1e-5, rtol=1e-4)

    driver = Driver(cfg, print_fn=None)
    try:
        driver.run()
        index = driver.buffer.sample(8)
        stored = driver.buffer.gather_window(index).extras["sampled_actions"]
        batch = driver.learner.make_batch(driver.buffer, index, rng=np.random.default_rng(0))
    finally:
        driver.close()
    fresh = batch.extras["sampled_actions"]
    valid = batch.mask > 0
    assert not np.allclose(fresh[:4][valid[:4]], stored[:4][valid[:4]])  # reanalysed rows: new samples
    np.testing.assert_array_equal(fresh[4:], stored[4:])  # the others: as stored


def test_cached_search_equals_the_uncached_recomputation(tiny_cfg):
    """The same searches (same roots, same noise) with per-node windows and with every leaf's
    path recomputed from its root: same root values and visit counts."""
    outs = {}
    for cached in (True, False):
        cfg = tiny_cfg(*UNI, f"unizero.search_cache={cached}", "mcts.num_simulations=12", "env.collector_env_num=4")
        policy = get_algorithm("unizero").make_policy(cfg, env_spec_for(cfg))
        _randomise(policy.network, std=0.2)
        env = make_env(cfg, num_envs=4, seed=0, mode="collect")
        batch, previous, rng, results = env.reset(seed=0), None, np.random.default_rng(0), []
        for _ in range(5):
            out = policy.act(batch, mode="collect", temperature=1.0, rng=rng, previous_action=previous)
            results.append(out)
            previous = out.action
            batch = env.step(out.action).batch
        env.close()
        outs[cached] = results
    for a, b in zip(outs[True], outs[False]):
        np.testing.assert_allclose(a.root_value, b.root_value, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(a.policy_target, b.policy_target)
        np.testing.assert_array_equal(a.action, b.action)


def test_a_collector_drops_its_caches_when_a_new_snapshot_loads(tiny_cfg, monkeypatch):
    """Collectors keep their envs (and caches) between collects; a snapshot of a new version
    makes every env start a fresh context at its next step, the same version changes nothing."""
    from lz_tune.algos.history import EnvHistory
    from lz_tune.workers import WeightSnapshot
    from lz_tune.workers.collector import SegmentCollector

    cfg = tiny_cfg(*UNI)
    collector = SegmentCollector(cfg, seed=0)
    seen = []
    original = EnvHistory.carried
    monkeypatch.setattr(
        EnvHistory, "carried", lambda self, n, prev: (seen.append(original(self, n, prev)), seen[-1])[1]
    )
    collector.collect(temperature=1.0, num_segments=1)
    weights = collector.policy.weights()
    collector.load_snapshot(WeightSnapshot(version=collector.policy_version, train_iter=0, weights=weights))
    start = len(seen)
    collector.collect(temperature=1.0, num_segments=1)
    assert seen[start].any()  # same version: the caches carry on
    collector.load_snapshot(
        WeightSnapshot(
            version=collector.policy_version + 1, train_iter=1, weights={k: v + 0.01 for k, v in weights.items()}
        )
    )
    start = len(seen)
    collector.collect(temperature=1.0, num_segments=1)
    assert not seen[start].any() and seen[start + 1].any()  # new weights: every env restarts once
    collector.close()


def test_sync_collector_caches_are_dropped_after_every_completed_budget(tiny_cfg, monkeypatch):
    """Sync pipeline: every collect after a completed train budget loads the new snapshot, so the
    collector's caches start fresh (the spec's clearing after each budget)."""
    from lz_tune.pipeline import Driver

    cfg = tiny_cfg(*UNI, "max_env_step=120", "learner.update_per_collect=3")
    driver = Driver(cfg, print_fn=None)
    collector = driver.backend.collectors[0]
    loads = []
    original = collector.policy.on_weights_loaded
    monkeypatch.setattr(
        collector.policy, "on_weights_loaded", lambda: (loads.append(driver.budgets.budgets_completed), original())[1]
    )
    try:
        driver.run()
    finally:
        driver.close()
    completed = driver.budgets.budgets_completed
    assert completed >= 3
    assert set(range(1, completed)) <= set(loads)  # a fresh load after each budget before the last


def test_no_loss_term_reads_the_padding_past_the_episode_end(tiny_cfg):
    """Past the episode end (mask 0) the buffer pads with zero observations, no state (on CartPole
    zeros are the upright, centred cart): value, policy, entropy, reward and latent terms are all
    masked there, as the original's ``mask_padding`` masks them, so the loss does not depend on
    what the padding holds; where the steps are real the same observations do matter."""
    from lz_tune.algos import get_algorithm
    from lz_tune.workers import env_spec_for
    from tests.test_stochastic_muzero import _batch

    torch.manual_seed(0)
    cfg = tiny_cfg(*UNI)
    spec = env_spec_for(cfg)
    learner = get_algorithm(cfg.policy_type).make_learner(cfg, spec)
    net = learner.policy.network
    _randomise(net)
    batch = _batch(cfg, spec, np.random.default_rng(0))
    steps = batch.obs.shape[1]
    assert steps >= 4
    rng = np.random.default_rng(1)

    def soft(shape):
        return torch.softmax(torch.from_numpy(rng.normal(size=shape).astype(np.float32)), -1)

    value_t = soft((batch.obs.shape[0], steps, net.value_head[-1].out_features))
    reward_t = soft((batch.obs.shape[0], steps - 1, net.reward_head[-1].out_features))
    policy_t = torch.from_numpy(batch.target_policy)
    actions = torch.from_numpy(batch.actions)
    mask = torch.ones(batch.obs.shape[0], steps)
    mask[:, 3:] = 0.0  # the episode ended after step t+2
    padded, other = torch.from_numpy(batch.obs).clone(), torch.from_numpy(batch.obs).clone()
    padded[:, 3:] = 0.0
    other[:, 3:] = 5.0
    with torch.no_grad():
        terms, changed, unmasked = (
            learner.unroll_losses(net, o, actions, value_t, reward_t, policy_t, m)
            for o, m in ((padded, mask), (other, mask), (other, torch.ones_like(mask)))
        )
    for name, a, b in zip(terms._fields, terms, changed):
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}")
    assert not torch.allclose(terms.value, unmasked.value)
