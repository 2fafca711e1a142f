"""A gymnasium env that only exists once ``register()`` has run: what a user's registration code
looks like (``env.import_modules=("tests.registered_env:register",)``). Its observation is a
channels-last image ``[H=6, W=5, C=2]`` whose content varies along H only: channel 0 is one
bright row (the row index is the state), channel 1 a vertical ramp. The reward is 1 when the
action says whether the bright row is in the top half (0) or the bottom half (1)."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

ENV_ID = "LzTuneTest/HwcRows-v0"
H, W, C = 6, 5, 2


def rows_image(row: int) -> np.ndarray:
    """``[H, W, C]`` float32: channel 0 bright at ``row``, channel 1 the ramp h / H."""
    image = np.zeros((H, W, C), np.float32)
    image[row, :, 0] = 1.0
    image[:, :, 1] = (np.arange(H, dtype=np.float32) / H)[:, None]
    return image


class HwcRowsEnv(gymnasium.Env):
    """Ten steps per episode; the bright row is drawn uniformly at every step."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, shape=(H, W, C), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._row = 0
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._row = int(self.np_random.integers(H))
        return rows_image(self._row), {}

    def step(self, action):
        reward = float(int(action) == int(self._row >= H // 2))
        self._t += 1
        self._row = int(self.np_random.integers(H))
        return rows_image(self._row), reward, self._t >= 10, False, {}


def register() -> None:
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=HwcRowsEnv)
