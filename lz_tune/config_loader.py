"""Config files to :class:`~lz_tune.config.Config`: a zoo module (``make_config()``), or a LightZero
experiment config file mapped by :mod:`lz_tune.lightzero`, plus the command line's overrides and
flags. Sits above both :mod:`lz_tune.config` and :mod:`lz_tune.lightzero`, which know nothing of
each other's files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any, Callable, Mapping, Optional, Sequence

from lz_tune.config import Config, ConfigError
from lz_tune.lightzero import is_lightzero_config, load_lightzero_config
from lz_tune.lightzero.flags import flag_updates

__all__ = ["build_config", "build_config_for_env", "load_config_module"]


def load_config_module(path: str) -> Config:
    """Import a zoo config module (a .py file path or a dotted module name) and call its
    ``make_config()``; a LightZero config file is mapped by :mod:`lz_tune.lightzero` (its report
    as a :class:`~lz_tune.lightzero.LightZeroConfigWarning`)."""
    if path.endswith(".py") or os.sep in path:
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: config file not found")
        if is_lightzero_config(path):  # a LightZero experiment config (main_config / create_config)
            return load_lightzero_config(path)
        name = "_lz_config_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as e:
            if e.name is None or not (path == e.name or path.startswith(e.name + ".")):
                raise  # the module exists but imports something missing: keep that error
            raise ConfigError(f"{path}: config module not found (no module named {e.name!r})") from e
    if not hasattr(module, "make_config"):
        raise ConfigError(f"{path}: a config module must define make_config() -> Config")
    cfg = module.make_config()
    if not isinstance(cfg, Config):
        raise ConfigError(f"{path}: make_config() returned {type(cfg).__name__}, not Config")
    return cfg


def build_config(path: str, overrides: Sequence[str] = (), flags: Optional[Mapping[str, Any]] = None, *,
                 report: Optional[Callable[[str], None]] = None) -> Config:
    """What ``python -m lz_tune train PATH key=value ... --flag ...`` runs: a zoo module or a
    LightZero file, then the ``key=value`` overrides, then the flags (``--seed 3`` is ``seed=3``)."""
    flags = dict(flags or {})
    cfg = load_lightzero_config(path, flags, report=report) if is_lightzero_config(path) else load_config_module(path)
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    updates = flag_updates(flags)
    return cfg.with_updates(updates) if updates else cfg


def build_config_for_env(env_id: str, overrides: Sequence[str] = (), flags: Optional[Mapping[str, Any]] = None, *,
                         policy_type: Optional[str] = None,
                         report: Optional[Callable[[str], None]] = None) -> Config:
    """What ``python -m lz_tune train --env ENV_ID [--policy-type T] key=value ...`` runs with no config
    file: the generic config :func:`lz_tune.env_defaults.config_for_env` derives from the env (its
    choices and reasons passed to ``report``), then the overrides, then the other flags.

    The overrides ``policy_type=``, ``seed=``, ``env.import_modules=`` and ``env.observation_layout=``
    (and the ``--seed`` flag) are read first: they change what is derived. The step-size schedule
    is fitted to the final budget (``max_env_step``) unless the overrides set it."""
    from lz_tune.env_defaults import config_for_env, fit_schedule_to_budget

    flags = dict(flags or {})
    flags.pop("env", None)
    given = Config().with_overrides(list(overrides)) if overrides else Config()
    if policy_type is None and any(o.strip().startswith("policy_type=") for o in overrides):
        policy_type = given.policy_type
    generated = config_for_env(env_id, policy_type=policy_type, import_modules=given.env.import_modules,
                               observation_layout=given.env.observation_layout,
                               seed=int(flags.get("seed", given.seed)))
    if report is not None:
        report(generated.describe())
    cfg = generated.config
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    updates = flag_updates(flags)
    if updates:
        cfg = cfg.with_updates(updates)
    if not any(o.strip().startswith("learner.threshold_training_steps_for_final_lr=") for o in overrides):
        cfg = fit_schedule_to_budget(cfg)  # the step-size schedule follows a budget given on the command line
    return cfg
