"""Tests of the env layer: typed batches, seeding, autoreset, frame stacks, Atari modes."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from lz_tune.envs import (
    AtariOptions,
    AtariVectorEnv,
    EnvBatch,
    GymVectorEnv,
    StepResult,
    make_vector_env,
    probe_env_spec,
)

# ---------------------------------------------------------------------------------------------
# helpers


def _check_batch(batch: EnvBatch, *, n: int, obs_shape, frame_shape, dtype, num_actions: int):
    assert batch.observation.shape == (n, *obs_shape)
    assert batch.observation.dtype == dtype
    assert batch.frame.shape == (n, *frame_shape)
    assert batch.frame.dtype == dtype
    assert batch.action_mask.shape == (n, num_actions) and batch.action_mask.dtype == np.bool_
    assert batch.to_play.shape == (n,) and batch.to_play.dtype == np.int64
    assert batch.timestep.shape == (n,) and batch.timestep.dtype == np.int64


def _check_step_types(result: StepResult, *, n: int):
    assert result.reward.shape == (n,) and result.reward.dtype == np.float32
    assert result.terminated.shape == (n,) and result.terminated.dtype == np.bool_
    assert result.truncated.shape == (n,) and result.truncated.dtype == np.bool_
    assert result.episode_return.shape == (n,) and result.episode_return.dtype == np.float64
    assert result.episode_length.shape == (n,) and result.episode_length.dtype == np.int64
    assert result.real_episode_end.shape == (n,) and result.real_episode_end.dtype == np.bool_


def _cartpole(n: int = 3, **kwargs) -> GymVectorEnv:
    return make_vector_env(env_id="CartPole-v1", num_envs=n, seed=0, mode="collect", **kwargs)


# ---------------------------------------------------------------------------------------------
# GymVectorEnv (CartPole)


def test_cartpole_shapes_and_dtypes():
    with _cartpole() as env:
        assert isinstance(env, GymVectorEnv)
        assert (env.num_envs, env.action_space_size, env.frame_stack) == (3, 2, 1)
        assert env.observation_shape == env.frame_shape == (4,)
        assert env.observation_dtype == np.float32
        batch = env.reset(seed=1)
        _check_batch(batch, n=3, obs_shape=(4,), frame_shape=(4,), dtype=np.float32, num_actions=2)
        np.testing.assert_array_equal(batch.observation, batch.frame)
        assert batch.action_mask.all() and (batch.to_play == -1).all() and (batch.timestep == 0).all()
        result = env.step(np.array([0, 1, 0]))
        _check_step_types(result, n=3)
        _check_batch(result.batch, n=3, obs_shape=(4,), frame_shape=(4,), dtype=np.float32, num_actions=2)
        np.testing.assert_array_equal(result.reward, 1.0)
        np.testing.assert_array_equal(result.batch.timestep, 1)
        assert np.isnan(result.episode_return).all() and (result.episode_length == 0).all()


def test_cartpole_seeds_are_reproducible_and_per_env():
    with _cartpole() as a, _cartpole() as b:
        obs_a, obs_b = a.reset(seed=7).observation, b.reset(seed=7).observation
        np.testing.assert_array_equal(obs_a, obs_b)
        assert not np.array_equal(obs_a, a.reset(seed=8).observation)
    for i in range(3):
        reference, _ = gymnasium.make("CartPole-v1").reset(seed=7 + i)
        np.testing.assert_array_equal(obs_a[i], reference)
    # The factory's seed applies to the first reset() called without one.
    with make_vector_env(env_id="CartPole-v1", num_envs=2, seed=7, mode="eval") as env:
        np.testing.assert_array_equal(env.reset().observation, obs_a[:2])


def test_cartpole_same_step_autoreset_matches_reference_envs():
    n, seed = 3, 11
    references = [gymnasium.make("CartPole-v1") for _ in range(n)]
    ref_obs = [ref.reset(seed=seed + i)[0] for i, ref in enumerate(references)]
    ref_len = [0] * n
    ended = np.zeros(n, dtype=bool)
    with _cartpole(n) as env:
        env.reset(seed=seed)
        for _ in range(40):  # always pushing left ends an episode within ~10 steps
            result = env.step(np.zeros(n, dtype=np.int64))
            for i, ref in enumerate(references):
                ref_obs[i], _, term, trunc, _ = ref.step(0)
                ref_len[i] += 1
                assert result.terminated[i] == term and result.truncated[i] == trunc
                if term or trunc:
                    ended[i] = True
                    ref_obs[i], _ = ref.reset()
                    # CartPole pays 1 per step: the return is the true episode length.
                    assert result.real_episode_end[i]
                    assert result.episode_length[i] == ref_len[i]
                    assert result.episode_return[i] == float(ref_len[i])
                    assert result.batch.timestep[i] == 0
                    ref_len[i] = 0
                else:
                    assert not result.real_episode_end[i]
                    assert np.isnan(result.episode_return[i]) and result.episode_length[i] == 0
                    assert result.batch.timestep[i] == ref_len[i]
                np.testing.assert_allclose(result.batch.observation[i], ref_obs[i], rtol=0, atol=0)
    assert ended.all()


def test_cartpole_frame_stack_of_two():
    with _cartpole(2, frame_stack=2) as env:
        assert env.observation_shape == (8,) and env.frame_shape == (4,)
        batch = env.reset(seed=3)
        _check_batch(batch, n=2, obs_shape=(8,), frame_shape=(4,), dtype=np.float32, num_actions=2)
        np.testing.assert_array_equal(batch.observation[:, :4], batch.frame)
        np.testing.assert_array_equal(batch.observation[:, 4:], batch.frame)
        seen_done = False
        for _ in range(30):
            result = env.step(np.zeros(2, dtype=np.int64))
            new = result.batch
            np.testing.assert_array_equal(new.observation[:, 4:], new.frame)
            for i in range(2):
                older = new.frame[i] if result.terminated[i] else batch.frame[i]
                np.testing.assert_array_equal(new.observation[i, :4], older)
            seen_done |= bool(result.terminated.any())
            batch = new
        assert seen_done


def test_cartpole_max_episode_steps_truncates():
    with _cartpole(2, max_episode_steps=5) as env:
        env.reset(seed=0)
        for t in range(1, 6):
            result = env.step(np.array([t % 2, (t + 1) % 2]))
        assert result.truncated.all() and not result.terminated.any()
        assert result.real_episode_end.all()
        np.testing.assert_array_equal(result.episode_length, 5)
        np.testing.assert_array_equal(result.episode_return, 5.0)
        np.testing.assert_array_equal(result.batch.timestep, 0)


def test_action_repeat_sums_rewards_and_matches_a_raw_env_replay():
    """env.action_repeat = 3: one agent step plays its action 3 env steps; the reward is their sum,
    an episode end inside stops the repeat, returns stay in the env's units, lengths count agent steps."""
    seed, repeat = 5, 3
    ref = gymnasium.make("Acrobot-v1")
    ref_obs, _ = ref.reset(seed=seed)
    rng = np.random.default_rng(0)
    with make_vector_env(env_id="Acrobot-v1", num_envs=1, seed=seed, mode="eval", action_repeat=repeat) as env:
        env.reset()
        raw_steps = agent_steps = 0
        while True:
            a = int(rng.integers(3))
            result = env.step(np.array([a]))
            agent_steps += 1
            reward = 0.0
            for _ in range(repeat):
                ref_obs, r, term, trunc, _ = ref.step(a)
                reward += r
                raw_steps += 1
                if term or trunc:
                    break
            assert result.reward[0] == pytest.approx(reward)
            if term or trunc:
                break
            np.testing.assert_allclose(result.batch.observation[0], ref_obs, rtol=0, atol=1e-6)
        # random play does not reach the goal: the 500-step limit ends the episode inside a repeat
        assert trunc and result.truncated[0] and raw_steps == 500 and agent_steps == 167
        assert result.episode_length[0] == 167 and result.episode_return[0] == -500.0


def test_action_repeat_is_refused_for_atari_and_2048_and_below_one():
    from lz_tune.config import Config, ConfigError

    with pytest.raises(ValueError, match=r"env\.action_repeat=2.*frame_skip"):
        probe_env_spec("ALE/Pong-v5", action_repeat=2)
    with pytest.raises(ValueError, match=r"env\.action_repeat=4.*Game2048"):
        make_vector_env(env_id="Game2048-v0", num_envs=1, seed=0, mode="eval", action_repeat=4)
    with pytest.raises(ConfigError, match=r"env\.action_repeat"):
        Config.from_dict({"env": {"action_repeat": 0}})


def test_gym_env_bad_actions_and_closed_env():
    env = _cartpole(2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        env.step(np.array([0, 2]))
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


class _TwoPlayerCountdown(gymnasium.Env):
    """A toy turn-based env that reports ``action_mask`` and ``to_play`` in its info."""

    def __init__(self):
        self.action_space = spaces.Discrete(3)
        self.observation_space = spaces.Box(0.0, 10.0, shape=(1,), dtype=np.float64)

    def _info(self):
        return {"action_mask": np.array([1, self.left > 1, self.left > 2]), "to_play": self.left % 2}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = 4
        return np.array([self.left], dtype=np.float64), self._info()

    def step(self, action):
        self.left -= int(action) + 1
        done = self.left <= 0
        if done:
            self.left = 0
        return np.array([self.left], dtype=np.float64), 1.0, done, False, self._info()


gymnasium.register(id="LzTuneTest/TwoPlayerCountdown-v0", entry_point=_TwoPlayerCountdown)


def test_gym_env_info_action_mask_and_to_play():
    with make_vector_env(env_id="LzTuneTest/TwoPlayerCountdown-v0", num_envs=2, seed=0, mode="collect") as env:
        batch = env.reset()
        assert batch.observation.dtype == np.float32
        np.testing.assert_array_equal(batch.action_mask, [[True, True, True]] * 2)
        np.testing.assert_array_equal(batch.to_play, [0, 0])
        result = env.step(np.array([1, 0]))  # 4 -> 2, 4 -> 3
        np.testing.assert_array_equal(result.batch.action_mask, [[True, True, False], [True, True, True]])
        np.testing.assert_array_equal(result.batch.to_play, [0, 1])
        result = env.step(np.array([1, 2]))  # 2 -> 0 (done, autoreset to 4), 3 -> 0 (done)
        assert result.terminated.all()
        np.testing.assert_array_equal(result.batch.observation, [[4.0], [4.0]])
        np.testing.assert_array_equal(result.batch.action_mask, [[True, True, True]] * 2)


# ---------------------------------------------------------------------------------------------
# ids, spaces, probing


def test_unknown_env_id_names_it_and_suggests_close_matches():
    with pytest.raises(ValueError, match="CartPol-v1") as info:
        make_vector_env(env_id="CartPol-v1", num_envs=1, seed=0, mode="collect")
    assert "CartPole-v1" in str(info.value)
    with pytest.raises(ValueError, match="ALE/Pongg-v5") as info:
        probe_env_spec("ALE/Pongg-v5")
    assert "ALE/Pong-v5" in str(info.value)


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError, match="mode"):
        make_vector_env(env_id="CartPole-v1", num_envs=1, seed=0, mode="train")


def test_probe_env_spec_matches_created_envs():
    spec = probe_env_spec("CartPole-v1", frame_stack=3)
    assert (spec.observation_shape, spec.frame_shape, spec.frame_stack) == ((12,), (4,), 3)
    assert (spec.action_space_size, spec.is_atari, spec.observation_dtype) == (2, False, np.float32)
    spec = probe_env_spec("PongNoFrameskip-v4")
    assert (spec.observation_shape, spec.frame_shape, spec.frame_stack) == ((4, 64, 64), (1, 64, 64), 4)
    assert (spec.action_space_size, spec.is_atari, spec.observation_dtype) == (6, True, np.uint8)
    rgb = probe_env_spec("ALE/Breakout-v5", frame_stack=2, atari=AtariOptions(grayscale=False, image_size=96))
    assert (rgb.observation_shape, rgb.frame_shape, rgb.action_space_size) == ((6, 96, 96), (3, 96, 96), 4)


# ---------------------------------------------------------------------------------------------
# AtariVectorEnv


def _atari(env_id: str, *, mode: str = "collect", n: int = 2, seed: int = 0, **options) -> AtariVectorEnv:
    return make_vector_env(env_id=env_id, num_envs=n, seed=seed, mode=mode, atari=AtariOptions(**options))


def test_pong_shapes_and_frame_stack():
    with _atari("ALE/Pong-v5") as env:
        assert isinstance(env, AtariVectorEnv)
        assert (env.observation_shape, env.frame_shape, env.action_space_size) == ((4, 64, 64), (1, 64, 64), 6)
        assert env.observation_dtype == np.uint8
        batch = env.reset()
        _check_batch(batch, n=2, obs_shape=(4, 64, 64), frame_shape=(1, 64, 64), dtype=np.uint8, num_actions=6)
        assert batch.action_mask.all() and (batch.to_play == -1).all() and (batch.timestep == 0).all()
        for plane in range(4):  # a new game starts with copies of its first frame
            np.testing.assert_array_equal(batch.observation[:, plane : plane + 1], batch.frame)
        rng = np.random.default_rng(0)
        for t in range(1, 6):
            result = env.step(rng.integers(0, 6, size=2))
            _check_step_types(result, n=2)
            new = result.batch
            _check_batch(new, n=2, obs_shape=(4, 64, 64), frame_shape=(1, 64, 64), dtype=np.uint8, num_actions=6)
            np.testing.assert_array_equal(new.observation[:, -1:], new.frame)  # newest plane last
            np.testing.assert_array_equal(new.observation[:, :-1], batch.observation[:, 1:])
            np.testing.assert_array_equal(new.timestep, t)
            batch = new
        assert batch.frame.any()


def test_atari_seeds_are_reproducible():
    with _atari("ALE/Pong-v5", noop_max=30) as env:
        first = env.reset(seed=5).observation
        np.testing.assert_array_equal(first, env.reset(seed=5).observation)
        actions = np.array([2, 3])
        a = [env.step(actions).batch.observation for _ in range(3)]
        env.reset(seed=5)
        b = [env.step(actions).batch.observation for _ in range(3)]
        np.testing.assert_array_equal(np.stack(a), np.stack(b))


@pytest.mark.parametrize(
    ("options", "obs_shape", "frame_shape"),
    [
        ({"image_size": 96}, (4, 96, 96), (1, 96, 96)),
        ({"grayscale": False}, (12, 64, 64), (3, 64, 64)),
        ({"grayscale": False, "image_size": 96, "frame_stack": 2}, (6, 96, 96), (3, 96, 96)),
    ],
)
def test_atari_image_size_and_rgb_shapes(options, obs_shape, frame_shape):
    with _atari("PongNoFrameskip-v4", n=1, **options) as env:
        assert (env.observation_shape, env.frame_shape) == (obs_shape, frame_shape)
        env.reset(seed=0)
        batch = env.step(np.array([0])).batch
        _check_batch(batch, n=1, obs_shape=obs_shape, frame_shape=frame_shape, dtype=np.uint8, num_actions=6)
        c = frame_shape[0]
        np.testing.assert_array_equal(batch.observation[:, -c:], batch.frame)
        if c == 3:  # real colour: the channels differ somewhere
            assert not np.array_equal(batch.frame[:, 0], batch.frame[:, 1])


def _run_both_modes(env_id: str, *, steps: int, seed: int, **options):
    """Step a collect and an eval env with the same seed and random actions."""
    results = {}
    for mode in ("collect", "eval"):
        with _atari(env_id, mode=mode, seed=seed, **options) as env:
            rng = np.random.default_rng(seed)
            batches, steps_out = [env.reset()], []
            for _ in range(steps):
                steps_out.append(env.step(rng.integers(0, env.action_space_size, size=env.num_envs)))
                batches.append(steps_out[-1].batch)
            results[mode] = (batches, steps_out)
    return results


def test_breakout_episodic_life_only_in_collect_mode():
    results = _run_both_modes("ALE/Breakout-v5", steps=160, seed=0)
    (c_batches, c_steps), (_, e_steps) = results["collect"], results["eval"]
    life_losses = game_overs = 0
    for t, (c, e) in enumerate(zip(c_steps, e_steps)):
        # Same game in both modes: a lost life resets neither the emulator nor the stack.
        np.testing.assert_array_equal(c.batch.observation, e.batch.observation)
        np.testing.assert_array_equal(c.real_episode_end, e.real_episode_end)
        np.testing.assert_array_equal(c.episode_return, e.episode_return)
        # Eval mode: episodes are whole games.
        np.testing.assert_array_equal(e.terminated | e.truncated, e.real_episode_end)
        lost = c.terminated & ~c.real_episode_end
        life_losses += int(lost.sum())
        game_overs += int(c.real_episode_end.sum())
        for i in np.flatnonzero(lost):
            assert c.batch.timestep[i] == 0 and e.batch.timestep[i] > 0
            assert np.isnan(c.episode_return[i]) and c.episode_length[i] == 0
            np.testing.assert_array_equal(c.batch.observation[i, :-1], c_batches[t].observation[i, 1:])
        for i in np.flatnonzero(c.real_episode_end):
            assert c.terminated[i] and e.terminated[i]
            assert c.batch.timestep[i] == 0 and e.batch.timestep[i] == 0
            assert c.episode_length[i] == e.episode_length[i] > 0
            for plane in range(4):  # a new game gets a fresh stack
                np.testing.assert_array_equal(c.batch.observation[i, plane], c.batch.frame[i, 0])
    assert life_losses >= 2, "random Breakout play should lose lives within 160 steps"
    assert game_overs >= 1, "random Breakout play should lose a whole game within 160 steps"


def test_asterix_rewards_clipped_only_in_collect_mode():
    results = _run_both_modes("ALE/Asterix-v5", steps=40, seed=0, max_episode_steps=4 * 40 + 200)
    (_, c_steps), (_, e_steps) = results["collect"], results["eval"]
    c_reward = np.stack([s.reward for s in c_steps])
    e_reward = np.stack([s.reward for s in e_steps])
    assert np.abs(e_reward).max() > 1, "Asterix pays 50 per item: eval rewards are raw"
    assert set(np.unique(c_reward)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_array_equal(c_reward, np.sign(e_reward))


def test_atari_time_limit_truncates_with_fresh_stack_and_raw_return():
    with make_vector_env(
        env_id="ALE/Pong-v5",
        num_envs=2,
        seed=0,
        mode="collect",
        max_episode_steps=12,
        atari=AtariOptions(noop_max=0),
    ) as env:
        env.reset()
        raw_total = np.zeros(2)
        for t in range(1, 13):  # noqa: B007 (t is read after the loop)
            result = env.step(np.array([2, 3]))
            raw_total += result.reward  # Pong rewards are already in {-1, 0, 1}
            if result.truncated.any():
                break
        assert result.truncated.all() and result.real_episode_end.all()
        # Without no-op starts the cap of 12 agent steps (48 frames) is hit exactly.
        assert t == 12 and (result.episode_length == 12).all()
        np.testing.assert_array_equal(result.episode_return, raw_total)
        np.testing.assert_array_equal(result.batch.timestep, 0)
        for plane in range(4):
            np.testing.assert_array_equal(result.batch.observation[:, plane : plane + 1], result.batch.frame)
