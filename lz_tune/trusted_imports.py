"""Which modules a saved config would import, and the guard that keeps a checkpoint data.

A config can name code: ``policy_type="module:name"``, ``env.env_id="module:EnvId"`` (as
``gymnasium.make`` takes it) and ``env.import_modules=("module:function",)``. Building the
config, or its env, imports those modules, and importing a module runs it. For a config the
user wrote that is what they asked for. For one read from a checkpoint or a run folder (a
downloaded file), it would run a module of that name from wherever Python finds it, the
current folder first. So a config read from a checkpoint may name only modules this process
has imported already; anything else is refused unless the user says they trust the file
(``--allow-imports``, ``allow_imports=True``). SECURITY.md has the threat model.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from lz_tune.checkpoint import CheckpointError

__all__ = ["imports_of_config", "refuse_untrusted_imports"]

#: env id families lz-tune resolves itself (not a module to import)
_ENV_ID_FAMILIES = ("openspiel:",)


def imports_of_config(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, module)`` for every module a nested config dict would import."""
    out: list[tuple[str, str]] = []
    policy_type = config.get("policy_type")
    if isinstance(policy_type, str) and ":" in policy_type:
        out.append(("policy_type", policy_type.rpartition(":")[0]))
    env = config.get("env") or {}
    if isinstance(env, Mapping):
        env_id = env.get("env_id")
        if isinstance(env_id, str) and ":" in env_id and not env_id.startswith(_ENV_ID_FAMILIES):
            out.append(("env.env_id", env_id.partition(":")[0]))
        for entry in env.get("import_modules") or ():
            out.append(("env.import_modules", str(entry).partition(":")[0]))
    return out


def refuse_untrusted_imports(config: Mapping[str, Any], *, source: str, allow: bool = False) -> None:
    """CheckpointError when ``config`` (read from ``source``, a checkpoint or run folder) would
    import a module this process has not imported, unless ``allow``."""
    if allow:
        return
    for key, module in imports_of_config(config):
        if module and module not in sys.modules:
            raise CheckpointError(
                f"{source}: its config's {key} imports module {module!r}, and importing a module runs its code; "
                f"a config read from a checkpoint may only name modules already imported. If you trust this "
                f"file, pass --allow-imports (Python: allow_imports=True), or import {module!r} first"
            )
