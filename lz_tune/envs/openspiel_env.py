"""OpenSpiel games as gymnasium envs (:class:`OpenSpielEnv`) and as lz_tune vector envs
(:class:`OpenSpielVectorEnv`), for self-play training and evaluation against OpenSpiel's bots.

Two modes, picked by whether an opponent is given:

- **self-play** (collect mode): the agent plays both sides. Every step is one move of the player
  to move; ``info["to_play"]`` is that player (0 or 1), the observation is from its view (see
  :mod:`lz_tune.envs.openspiel_game`), and the reward is the MOVER's reward for its move
  (``state.rewards()[mover]``: +1 for the winning move, -1 for a losing one, 0 otherwise in
  games scored at the end). ``episode_return`` is the first player's return.
- **against a bot** (eval mode): the agent holds one seat, the bot (:mod:`lz_tune.envs.openspiel_bots`)
  the other; one step is the agent's move followed by the bot's replies, the reward and
  ``episode_return`` are the agent's, ``to_play`` is the agent's seat. Seats alternate game by
  game: a seeded reset with seed ``s`` gives seat ``s % 2`` (so env ``i`` of a vector env
  seeded with ``seed`` starts with seat ``(seed + i) % 2``), and each later game switches seat.
  When the agent plays second, the bot's opening move is made inside ``reset``.

``info["action_mask"]`` holds the legal moves. Illegal actions raise ValueError naming the game.
``render()`` gives OpenSpiel's text board as a uint8 RGB image (``render_mode="rgb_array"``, for
``evaluate --video``) or as text (``"ansi"``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import gymnasium
import numpy as np
from gymnasium import spaces

from lz_tune.envs.frame_stack import stacked_shape
from lz_tune.envs.gym_vector import GymVectorEnv
from lz_tune.envs.openspiel_bots import OpponentOptions, make_opponent
from lz_tune.envs.openspiel_game import NUM_PLAYERS, OPENSPIEL_PREFIX, encode_observation, load_openspiel_game
from lz_tune.envs.text_render import render_text
from lz_tune.envs.types import EnvBatch, EnvSpecInfo, StepResult

__all__ = ["OpenSpielEnv", "OpenSpielVectorEnv", "GYM_ID", "SEAT_COLUMN", "probe_openspiel"]

GYM_ID = "lz_tune/OpenSpiel-v0"
"""The gymnasium registration behind every ``openspiel:<game>`` id (the game is a make kwarg)."""

_STATUS_WIDTH = 18
"""Characters reserved for the status line under the board in rendered frames."""

SEAT_COLUMN = "agent_seat"
"""``StepResult.info_columns`` key of an eval-mode :class:`OpenSpielVectorEnv`: ``[N]`` int64, the
seat (0: first player, 1: second) the agent held in the game each env's step belonged to."""


class OpenSpielEnv(gymnasium.Env):
    """One OpenSpiel game (see the module docstring).

    Args:
        game: an ``openspiel:<game>`` id or the bare game string.
        opponent: an :class:`OpponentOptions` as a dict (gymnasium kwargs stay plain), or None
            for self-play.
        planes: observations as ``[C + 2, H, W]`` planes instead of a flat vector.
        render_mode: ``"rgb_array"``, ``"ansi"`` or None.
    """

    # planes are served channels-first: declared, so that [C, H, W] shapes the layout rule cannot
    # tell apart (tic-tac-toe's (5, 3, 3)) need no env.observation_layout
    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 2, "observation_layout": "chw"}

    def __init__(
        self,
        game: str,
        opponent: Optional[dict[str, Any]] = None,
        planes: bool = False,
        render_mode: Optional[str] = None,
    ) -> None:
        env_id = game if game.startswith(OPENSPIEL_PREFIX) else OPENSPIEL_PREFIX + game
        self.info = load_openspiel_game(env_id)
        self.planes = bool(planes)
        shape = self.info.observation_shape(self.planes)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape, np.float32)
        self.action_space = spaces.Discrete(self.info.num_actions)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.opponent_options = None if opponent is None else OpponentOptions(**opponent)
        self._opponent = None if self.opponent_options is None else make_opponent(self.info.game, self.opponent_options)
        self._state: Any = None
        self._seat = 0
        self._first_seat = 0
        self._games_since_seed = 0
        self.last_returns = np.zeros(2, np.float64)
        """Returns of both players after the latest step: a finished game's stay until the next
        game's first step (the vector env reads them after its autoreset)."""

    # -------------------------------------------------------------------------- properties

    @property
    def agent_seat(self) -> int:
        """The agent's seat against a bot (0 or 1); 0 in self-play (the player of ``episode_return``)."""
        return self._seat if self._opponent is not None else 0

    @property
    def state(self) -> Any:
        """The current ``pyspiel.State`` (read only: do not apply actions to it)."""
        return self._state

    # -------------------------------------------------------------------------- gymnasium API

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is not None:
            self._games_since_seed = 0
            self._first_seat = int(seed) % 2
        self._seat = (self._first_seat + self._games_since_seed) % 2
        self._games_since_seed += 1
        self._state = self.info.game.new_initial_state()
        if self._opponent is not None:
            self._opponent.new_game(int(self.np_random.integers(0, 2**31 - 1)))
            self._play_opponent()
            if self._state.is_terminal():
                raise RuntimeError(f"{self.info.env_id}: the game ended before the agent's first move")
        return self._observation(), self._info()

    def step(self, action: int):
        state = self._state
        if state is None or state.is_terminal():
            raise RuntimeError(f"{self.info.env_id}: call reset() before step()")
        action = int(action)
        mover = state.current_player()
        if action not in state.legal_actions():
            raise ValueError(
                f"{self.info.env_id}: action {action} is illegal for player {mover} (legal: {state.legal_actions()})"
            )
        view = mover if self._opponent is None else self._seat
        state.apply_action(action)
        reward = float(state.rewards()[view])
        if self._opponent is not None:
            reward += self._play_opponent()
        self.last_returns = np.asarray(state.returns(), np.float64)
        return self._observation(view), reward, bool(state.is_terminal()), False, self._info()

    def render(self):
        text = str(self._state)
        if self.render_mode == "ansi":
            return text
        if self.render_mode == "rgb_array":  # one frame size per game: board lines + a status line
            board = text.split("\n")
            return render_text(
                f"{text}\n{self._status()}", columns=max(_STATUS_WIDTH, *map(len, board)), rows=len(board) + 1
            )
        return None

    # -------------------------------------------------------------------------- internals

    def _play_opponent(self) -> float:
        """The bot's moves until the agent is to move or the game ends; the agent's reward for them."""
        state, reward, opponent = self._state, 0.0, self._opponent
        assert opponent is not None  # called for a game against the bot
        while not state.is_terminal() and state.current_player() != self._seat:
            state.apply_action(opponent.choose(state))
            reward += float(state.rewards()[self._seat])
        return reward

    def _to_play(self) -> int:
        """The player whose view the observation takes: the player to move (the agent's seat
        against a bot)."""
        if self._opponent is not None:
            return self._seat
        player = self._state.current_player()
        return player if player >= 0 else 0

    def _observation(self, terminal_view: int = 0) -> np.ndarray:
        player = self._to_play() if not self._state.is_terminal() else terminal_view
        return encode_observation(self._state, player, self.info.tensor_shape, self.planes)

    def _info(self) -> dict[str, Any]:
        state = self._state
        mask = np.zeros(self.info.num_actions, bool)
        if not state.is_terminal():
            mask[state.legal_actions()] = True
        else:
            mask[:] = True  # no move is asked for at a terminal state; the search needs one legal action
        return {"action_mask": mask, "to_play": self._to_play()}

    def _status(self) -> str:
        """One line under the rendered board: who moves, or the final score."""
        state = self._state
        if state.is_terminal():
            r0, r1 = state.returns()
            return f"over: p0 {r0:+g}, p1 {r1:+g}"
        player = state.current_player()
        who = "" if self._opponent is None else " (agent)" if player == self._seat else " (bot)"
        return f"p{player} to move{who}"


if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point="lz_tune.envs.openspiel_env:OpenSpielEnv", disable_env_checker=True)


class OpenSpielVectorEnv(GymVectorEnv):
    """N :class:`OpenSpielEnv` games stepped together, with the batching, frame stacking and
    same-step autoreset of :class:`GymVectorEnv`.

    ``mode="collect"``: self-play; ``mode="eval"``: against ``opponent`` (default random), the
    agent's seat alternating per game, reported in ``info_columns[SEAT_COLUMN]``. ``episode_return``
    is the first player's return in self-play, the agent's against a bot.
    """

    def __init__(
        self,
        *,
        env_id: str,
        num_envs: int,
        seed: Optional[int],
        mode: str,
        planes: bool = False,
        opponent: Optional[OpponentOptions] = None,
        frame_stack: int = 1,
        max_episode_steps: Optional[int] = None,
    ) -> None:
        info = load_openspiel_game(env_id)  # a bad or unsupported game fails here, before any env exists
        info.observation_shape(planes)
        self.against_bot = mode == "eval"
        bot = dataclasses.asdict(opponent or OpponentOptions()) if self.against_bot else None
        super().__init__(
            env_id=GYM_ID,
            num_envs=num_envs,
            seed=seed,
            frame_stack=frame_stack,
            max_episode_steps=max_episode_steps,
            make_kwargs={"game": info.game_string, "opponent": bot, "planes": planes},
        )
        self.env_id = env_id
        self.game_info = info

    def _games(self) -> list[OpenSpielEnv]:
        return [env.unwrapped for env in self.gym_envs]  # type: ignore[misc]

    def current_batch(self, frames: np.ndarray) -> EnvBatch:
        """:meth:`GymVectorEnv.current_batch` with ``game_states``: a clone of every game's
        ``pyspiel.State`` (what a policy that searches on the rules reads; ~1 us a game)."""
        batch = super().current_batch(frames)
        return dataclasses.replace(batch, game_states=tuple(g.state.clone() for g in self._games()))

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every game (self-play: one move; against a bot: the agent's move and the bot's
        replies); see :meth:`GymVectorEnv.step`."""
        seats = np.array([g.agent_seat for g in self._games()], np.int64)  # before any autoreset
        res = super().step(actions)
        ended = np.flatnonzero(res.real_episode_end)
        columns = {SEAT_COLUMN: seats} if self.against_bot else {}
        if not self.against_bot and ended.size:  # self-play: the first player's return, not the movers' sum
            episode_return = res.episode_return.copy()
            for i in ended:
                episode_return[i] = self._games()[i].last_returns[0]
            return dataclasses.replace(res, episode_return=episode_return, info_columns=columns)
        return dataclasses.replace(res, info_columns=columns)


def probe_openspiel(env_id: str, *, frame_stack: int = 1, planes: bool = False) -> EnvSpecInfo:
    """Shapes of an ``openspiel:<game>`` id as :class:`OpenSpielVectorEnv` serves it (loads the
    game, creates no env). Raises ValueError for a bad or unsupported game."""
    if frame_stack < 1:
        raise ValueError(f"frame_stack must be >= 1, got {frame_stack}")
    info = load_openspiel_game(env_id)
    frame_shape = info.observation_shape(planes)
    return EnvSpecInfo(
        observation_shape=stacked_shape(frame_shape, frame_stack),
        frame_shape=frame_shape,
        frame_stack=frame_stack,
        action_space_size=info.num_actions,
        is_atari=False,
        observation_dtype=np.dtype(np.float32),
        num_players=NUM_PLAYERS,
    )
