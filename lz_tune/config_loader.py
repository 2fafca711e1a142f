"""Config files to :class:`~lz_tune.config.Config`: a zoo module (``make_config()``), or a LightZero
experiment config file mapped by :mod:`lz_tune.lightzero`, plus the command line's overrides and
flags. Sits above both :mod:`lz_tune.config` and :mod:`lz_tune.lightzero`, which know nothing of
each other's files.

A zoo config is named by its file (``zoo/classic_control/cartpole_muzero.py``), its dotted module
(``lz_tune.zoo.classic_control.cartpole_muzero``; from the repository root also
``zoo.classic_control.cartpole_muzero``) or its short name, the file's name without ``.py``
(``cartpole_muzero``). The zoo and the search spaces install as :mod:`lz_tune.zoo` and
:mod:`lz_tune.search_spaces` (the repository's ``zoo/`` and ``search_spaces/`` folders), so no
top-level ``zoo`` module meets LightZero's.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from lz_tune.config import Config, ConfigError
from lz_tune.lightzero import is_lightzero_config, load_lightzero_config
from lz_tune.lightzero.flags import flag_updates

__all__ = [
    "ZOO_PACKAGE",
    "SEARCH_SPACES_PACKAGE",
    "NamedModule",
    "named_modules",
    "resolve_short_name",
    "build_config",
    "build_config_for_env",
    "load_config_module",
]

ZOO_PACKAGE = "lz_tune.zoo"
"""The package of the zoo configs (the repository's ``zoo/`` folder)."""
SEARCH_SPACES_PACKAGE = "lz_tune.search_spaces"
"""The package of the Tune search spaces (the repository's ``search_spaces/`` folder)."""


@dataclass(frozen=True)
class NamedModule:
    """A module of the zoo or of the search spaces: its short name, dotted name and file."""

    name: str
    """The short name: the file's name without ``.py`` (``cartpole_muzero``)."""
    module: str
    """The dotted module name (``lz_tune.zoo.classic_control.cartpole_muzero``)."""
    path: Path
    """The file."""


def named_modules(package: str) -> list[NamedModule]:
    """The modules of ``package`` (:data:`ZOO_PACKAGE` or :data:`SEARCH_SPACES_PACKAGE`), found
    through the package itself (its ``__path__``: the repository's folder in an editable install,
    ``site-packages/lz_tune/zoo`` in a wheel), in subpackages too; files named ``_*`` are left out.
    Sorted by file. Empty when the package cannot be imported (lz-tune not installed)."""
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return []
    found = []
    for root in map(Path, getattr(pkg, "__path__", [])):
        for file in sorted(root.rglob("*.py")):
            rel = file.relative_to(root)
            if any(part.startswith("_") for part in rel.parts):
                continue
            folders = [root.joinpath(*rel.parts[:i]) for i in range(1, len(rel.parts))]
            if not all((folder / "__init__.py").is_file() for folder in folders):
                continue  # not importable under the package
            found.append(NamedModule(file.stem, ".".join([package, *rel.with_suffix("").parts]), file))
    return found


def resolve_short_name(name: str, package: str = ZOO_PACKAGE, *, what: str = "zoo config") -> str:
    """The dotted module of the short name ``name`` in ``package``; a module importable under that
    name itself (a top-level module of your own) when ``package`` has none; else a
    :class:`ConfigError` that lists the closest short names."""
    modules = named_modules(package)
    matches = [m.module for m in modules if m.name == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ConfigError(f"{name}: more than one {what} has that name ({', '.join(matches)}); give the dotted name")
    try:
        if importlib.util.find_spec(name) is not None:
            return name
    except (ImportError, ValueError):
        pass
    raise ConfigError(f"{name}: no {what} of that name" + _suggestions(name, modules, package))


def _suggestions(name: str, modules: Sequence[NamedModule], package: str) -> str:
    """``; did you mean ...?`` (the module of that short name, else the closest short names), or
    the list of short names."""
    names = sorted({m.name for m in modules})
    if not names:
        return f" ({package} is not installed: pip install -e . in the lz-tune repository)"
    last = name.rsplit(".", 1)[-1]
    exact = [m.module for m in modules if m.name == last and m.module != name]
    if exact:
        return f"; did you mean {last} ({' or '.join(exact)})?"
    close = difflib.get_close_matches(last, names, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + (", ".join(close[:-1]) + " or " if len(close) > 1 else "") + close[-1] + "?"
    return f" (the short names: {', '.join(names)})"


def _is_short_name(path: str) -> bool:
    return path.isidentifier()


def load_config_module(path: str) -> Config:
    """Import a zoo config module and call its ``make_config()``: a .py file path, a dotted module
    name or a short name (a zoo file's name without ``.py``: ``cartpole_muzero``). A LightZero config
    file is mapped by :mod:`lz_tune.lightzero` (its report as a
    :class:`~lz_tune.lightzero.LightZeroConfigWarning`)."""
    if path.endswith(".py") or os.sep in path or "/" in path:
        if not os.path.isfile(path):
            stem = os.path.splitext(os.path.basename(path))[0]
            hint = (
                f" (the zoo config of that name loads from any folder by its short name: {stem})"
                if any(m.name == stem for m in named_modules(ZOO_PACKAGE))
                else ""
            )
            raise ConfigError(f"{path}: config file not found{hint}")
        if is_lightzero_config(path):  # a LightZero experiment config (main_config / create_config)
            return load_lightzero_config(path)
        name = "_lz_config_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        name = resolve_short_name(path) if _is_short_name(path) else path
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
                raise  # the module exists but imports something missing: keep that error
            raise ConfigError(
                f"{path}: config module not found (no module named {e.name!r})"
                + _suggestions(path, named_modules(ZOO_PACKAGE), ZOO_PACKAGE)
            ) from e
    if not hasattr(module, "make_config"):
        raise ConfigError(f"{path}: a config module must define make_config() -> Config")
    cfg = module.make_config()
    if not isinstance(cfg, Config):
        raise ConfigError(f"{path}: make_config() returned {type(cfg).__name__}, not Config")
    return cfg


def build_config(
    path: str,
    overrides: Sequence[str] = (),
    flags: Optional[Mapping[str, Any]] = None,
    *,
    report: Optional[Callable[[str], None]] = None,
) -> Config:
    """What ``python -m lz_tune train PATH key=value ... --flag ...`` runs: a zoo module or a
    LightZero file, then the ``key=value`` overrides, then the flags (``--seed 3`` is ``seed=3``)."""
    flags = dict(flags or {})
    cfg = load_lightzero_config(path, flags, report=report) if is_lightzero_config(path) else load_config_module(path)
    if overrides:
        cfg = cfg.with_overrides(list(overrides))
    updates = flag_updates(flags)
    return cfg.with_updates(updates) if updates else cfg


def build_config_for_env(
    env_id: str,
    overrides: Sequence[str] = (),
    flags: Optional[Mapping[str, Any]] = None,
    *,
    policy_type: Optional[str] = None,
    report: Optional[Callable[[str], None]] = None,
) -> Config:
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
    generated = config_for_env(
        env_id,
        policy_type=policy_type,
        import_modules=given.env.import_modules,
        observation_layout=given.env.observation_layout,
        seed=int(flags.get("seed", given.seed)),
    )
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
