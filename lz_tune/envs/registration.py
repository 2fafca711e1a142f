"""Env registration code that has to run in every process that makes an env.

A gymnasium env that is not registered by importing a package (MinAtar's ``register_envs()``, a
user's own module) must be registered in the driver AND in every Ray actor, Tune trial and
learner worker, each a fresh Python process. ``env.import_modules`` names that code;
:func:`run_env_imports` runs it, once per process, wherever lz_tune makes or probes an env
(:func:`lz_tune.workers.common.make_env` / :func:`~lz_tune.workers.common.env_spec_for`), so no
process can miss it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

__all__ = ["run_env_imports"]

_done: set[str] = set()


def run_env_imports(names: Sequence[str]) -> None:
    """Import each ``"package.module"`` and call each ``"package.module:function"`` (with no
    arguments), each at most once in this process.

    Raises:
        ValueError: naming ``env.import_modules[i]`` when the module cannot be imported, has no
            such function, or the function raises.
    """
    for i, name in enumerate(names):
        if name in _done:
            continue
        module_name, _, function_name = name.partition(":")
        key = f"env.import_modules[{i}]"
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(
                f"{key}: cannot import {module_name!r} ({e}); is its package installed in this "
                "environment (and on every node of a cluster)?"
            ) from e
        if function_name:
            function = getattr(module, function_name, None)
            if not callable(function):
                raise ValueError(f"{key}: module {module_name!r} has no function {function_name!r}")
            try:
                function()
            except Exception as e:
                raise ValueError(f"{key}: {name}() raised {type(e).__name__}: {e}") from e
        _done.add(name)
