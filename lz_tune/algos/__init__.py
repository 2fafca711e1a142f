"""Policy types. Each is a module with ``make_policy(cfg, spec, device=...)``,
``make_learner(cfg, spec)``, ``step_columns(cfg, spec)`` (its extra per-step data) and
``policy_target_size(cfg, spec)`` (the width P of its stored policy target); see
:mod:`lz_tune.algos.base` for the interface and the hooks a type supplies, and
:mod:`lz_tune.policy_registry` for the registry of names.

Shared code (collectors, evaluators, the driver) never branches on the policy type: it asks
:func:`get_algorithm` for the module and uses the interface.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from lz_tune.config import ConfigError
from lz_tune.policy_registry import UnknownPolicyTypeError, lookup_policy_type


def get_algorithm(policy_type: str) -> ModuleType:
    """The module implementing ``policy_type`` (a registered name, or ``"<module>:<name>"``:
    see :mod:`lz_tune.policy_registry`).

    Raises ConfigError naming ``policy_type`` for an unknown type.
    """
    try:
        entry = lookup_policy_type(policy_type)
    except UnknownPolicyTypeError as e:
        raise ConfigError(f"policy_type: {e}") from None
    return importlib.import_module(entry.module)


__all__ = ["get_algorithm"]
