"""LightZero experiment config files, run by lz-tune.

    python -m lz_tune train path/to/cartpole_muzero_config.py
    python -m lz_tune train zoo/atari/config/atari_muzero_segment_async_config.py \\
        --env ALE/Pong-v5 --seed 0 --async-pipeline
    python -m lz_tune config path/to/cartpole_muzero_config.py          # the mapped config, field by field

From Python, :func:`lz_tune.config_loader.load_config_module` (and so a Tune search space's ``"config"``
entry) takes a LightZero file like a zoo module; :func:`load_lightzero_config` also takes the
LightZero's flags.

Three parts: :mod:`~lz_tune.lightzero.loader` reads the file without LightZero,
:mod:`~lz_tune.lightzero.rules` says what becomes of each LightZero key, and
:mod:`~lz_tune.lightzero.mapping` builds the :class:`~lz_tune.config.Config`;
:mod:`~lz_tune.lightzero.flags` adds LightZero's command-line flags.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping, Optional

from lz_tune.config import Config
from lz_tune.lightzero.loader import is_lightzero_config, read_lightzero_file
from lz_tune.lightzero.mapping import MappingReport, map_lightzero

__all__ = ["is_lightzero_config", "load_lightzero_config", "LightZeroConfigWarning", "MappingReport"]


class LightZeroConfigWarning(UserWarning):
    """A LightZero file's mapping report (features trained without, keys with no effect), when no
    ``report`` function takes its lines."""


def load_lightzero_config(
    path: str, flags: Optional[Mapping[str, Any]] = None, *, report: Optional[Callable[[str], None]] = None
) -> Config:
    """The :class:`Config` of the LightZero config file at ``path``.

    ``flags``: LightZero's flags by argparse dest name (``{"env": "ALE/Pong-v5", "seed": 0,
    "async_pipeline": True}``), handed to a function config's ``main()``; apply them to the result
    with :func:`lz_tune.config_loader.build_config` (or :func:`lz_tune.lightzero.flags.flag_updates`). ``report``:
    called with each line of the mapping report (default: one :class:`LightZeroConfigWarning`)."""
    cfg, mapping_report = map_lightzero(read_lightzero_file(path, flags))
    lines = mapping_report.lines()
    if lines and report is None:
        warnings.warn("\n".join(lines), LightZeroConfigWarning, stacklevel=2)
    if report is not None:
        for line in lines:
            report(line)
    return cfg
