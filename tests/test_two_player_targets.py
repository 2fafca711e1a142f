"""Value targets of finished self-play games (issue 38): both players' moves in one segment,
to_play stored, every n-step term from the view of the player to move at t; reanalyze gets the
stored to_play. Games are played by the real collector on the real OpenSpiel env, with scripted
moves."""

from __future__ import annotations

import numpy as np
import pytest

from lz_tune.algos.base import ActResult
from lz_tune.algos.targets import make_train_batch
from lz_tune.buffer import GameBuffer, Reanalysis, SampledIndex, segment_value_targets
from lz_tune.config import Config
from lz_tune.workers import SegmentCollector

X_WINS = [0, 3, 1, 4, 2]  # x: 0 1 2, the top row, at move 5
O_WINS = [0, 3, 1, 4, 8, 5]  # o: 3 4 5, the middle row, at move 6
DRAW = [0, 4, 8, 2, 6, 3, 5, 7, 1]  # nine moves, no line


class Scripted:
    """A stand-in policy that plays fixed moves and reports a uniform policy target."""

    def __init__(self, moves):
        self.moves, self.t = moves, 0

    def act(self, batch, **_):
        action = np.array([self.moves[self.t]])
        self.t += 1
        return ActResult(
            action=action,
            root_value=np.full(1, 0.25, np.float32),
            pred_value=np.zeros(1, np.float32),
            policy_target=np.full((1, 9), 1 / 9, np.float32),
        )

    def reset(self, env_ids):
        pass


def play(moves):
    """The segment the collector cuts from one self-play game of ``moves``."""
    cfg = Config.from_dict(
        {
            "env": {"env_id": "openspiel:tic_tac_toe", "collector_env_num": 1},
            "buffer": {"game_segment_length": 12, "num_unroll_steps": 3, "td_steps": 9},
        }
    )
    collector = SegmentCollector(cfg, seed=0)
    collector.policy = Scripted(moves)
    result = collector.collect(temperature=1.0, num_segments=1)
    collector.close()
    (segment,) = result.segments
    return segment, result


def buffer_targets(segment, *, td_steps, discount, value):
    """n-step targets at positions 0..m-1 through the buffer's batch path (window + n_step_values)."""
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=0,
        td_steps=td_steps,
        discount=discount,
        frame_stack=1,
        action_space_size=9,
        seed=0,
    )
    buffer.push([segment])
    m = segment.num_steps
    index = SampledIndex(
        segment_ids=np.zeros(m, np.int64), positions=np.arange(m), weights=np.ones(m, np.float32), make_time=buffer.time
    )
    win = buffer.gather_window(index)
    return buffer.n_step_values(win, value_fn=lambda obs: np.full(len(obs), value, np.float32))[:, 0]


def test_a_won_game_is_one_segment_with_both_players_moves():
    segment, result = play(X_WINS)
    np.testing.assert_array_equal(segment.actions, X_WINS)
    np.testing.assert_array_equal(segment.to_play, [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(segment.rewards, [0, 0, 0, 0, 1])  # the mover's reward: x's winning move
    assert segment.terminal and segment.num_owned == 5
    assert result.episode_returns == [1.0]  # the first player's return


@pytest.mark.parametrize(
    "moves,expected",
    [
        (X_WINS, [1, -1, 1, -1, 1]),
        (O_WINS, [-1, 1, -1, 1, -1, 1]),
        (DRAW, [0] * 9),
    ],
)
def test_monte_carlo_targets_are_the_outcome_for_the_player_to_move(moves, expected):
    """td_steps >= the game's length: z_t = +-outcome, + where the player to move at t won."""
    segment, _ = play(moves)
    np.testing.assert_allclose(buffer_targets(segment, td_steps=9, discount=1.0, value=0.0), expected)
    np.testing.assert_allclose(
        segment_value_targets(
            segment, np.arange(len(moves)), td_steps=9, discount=1.0, value_fn=lambda obs: np.zeros(len(obs))
        ),
        expected,
    )


def test_n_step_targets_sign_rewards_and_bootstraps_by_player():
    """x wins at move 5; td_steps 3, gamma 0.9, every bootstrap value v = 0.5 (the view of the
    player to move there). By hand, s = +1 for the player to move at t, -1 for the other:

    z_0 = r0 - g r1 + g^2 r2 - g^3 v(o3)      = -0.3645  (o3: o to move, x at t = 0)
    z_1 = r1 - g r2 + g^2 r3 - g^3 v(o4)      = -0.3645  (o4: x to move, o at t = 1)
    z_2 = r2 - g r3 + g^2 r4 (x's win, +)     =  0.81    (o5 past the end: no bootstrap)
    z_3 = r3 - g r4                           = -0.9
    z_4 = r4                                  =  1.0
    """
    segment, _ = play(X_WINS)
    expected = [-0.3645, -0.3645, 0.81, -0.9, 1.0]
    np.testing.assert_allclose(buffer_targets(segment, td_steps=3, discount=0.9, value=0.5), expected, atol=1e-6)
    np.testing.assert_allclose(
        segment_value_targets(
            segment, np.arange(5), td_steps=3, discount=0.9, value_fn=lambda obs: np.full(len(obs), 0.5)
        ),
        expected,
        atol=1e-6,
    )
    # stored root values bootstrap the same way
    np.testing.assert_allclose(
        segment_value_targets(segment, np.arange(2), td_steps=3, discount=0.9, use_root_value=True),
        [-(0.9**3) * 0.25] * 2,
        atol=1e-6,
    )


def test_the_unroll_window_and_reanalyze_get_the_stored_to_play():
    segment, _ = play(O_WINS)
    buffer = GameBuffer(
        capacity_transitions=100,
        num_unroll_steps=3,
        td_steps=9,
        discount=1.0,
        frame_stack=1,
        action_space_size=9,
        seed=0,
    )
    buffer.push([segment])
    index = SampledIndex(
        segment_ids=np.zeros(2, np.int64),
        positions=np.array([0, 3]),
        weights=np.ones(2, np.float32),
        make_time=buffer.time,
    )
    seen = []

    def reanalyze(obs, mask, to_play):
        seen.append(to_play.copy())
        # the observation's to-play one-hot agrees with the to_play handed over
        np.testing.assert_array_equal(obs[:, 27:29].argmax(axis=1), to_play)
        return Reanalysis(
            policy_target=np.full((len(obs), 9), 1 / 9, np.float32), root_value=np.zeros(len(obs), np.float32)
        )

    batch = make_train_batch(
        buffer, index, value_fn=lambda obs: np.zeros(len(obs), np.float32), reanalyze_fn=reanalyze, reanalyze_ratio=1.0
    )
    np.testing.assert_array_equal(batch.to_play, [[0, 1, 0, 1], [1, 0, 1, -1]])  # -1 past the end
    np.testing.assert_array_equal(np.concatenate(seen), [0, 1, 0, 1, 1, 0, 1])
    np.testing.assert_allclose(batch.target_value, [[-1, 1, -1, 1], [1, -1, 1, 0]])
    np.testing.assert_allclose(batch.target_reward, [[0, 0, 0], [0, 0, 1]])  # the mover's rewards
