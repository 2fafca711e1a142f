"""Policy types. Each is a module with ``make_policy(cfg, spec, device=...)``,
``make_learner(cfg, spec)``, ``step_columns(cfg, spec)`` (its extra per-step data) and
``policy_target_size(cfg, spec)`` (the width P of its stored policy target); see
:mod:`lz_tune.algos.base` for the interface.

Shared code (collectors, evaluators, the driver) never branches on the policy type: it asks
:func:`get_algorithm` for the module and uses the interface.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from lz_tune.config import POLICY_TYPES, ConfigError

#: policy type -> module implementing it
IMPLEMENTED: dict[str, str] = {
    "muzero": "lz_tune.algos.muzero",
    "efficientzero": "lz_tune.algos.efficientzero",
    "gumbel_muzero": "lz_tune.algos.gumbel_muzero",
    "sampled_muzero": "lz_tune.algos.sampled_muzero",
    "sampled_efficientzero": "lz_tune.algos.sampled_efficientzero",
    "stochastic_muzero": "lz_tune.algos.stochastic_muzero",
    "muzero_context": "lz_tune.algos.muzero_context",
    "muzero_rnn_full_obs": "lz_tune.algos.muzero_rnn_full_obs",
    "unizero": "lz_tune.algos.unizero",
    "sampled_unizero": "lz_tune.algos.sampled_unizero",
}


def get_algorithm(policy_type: str) -> ModuleType:
    """The module implementing ``policy_type``.

    Raises ConfigError naming ``policy_type`` for an unknown type.
    """
    if policy_type not in POLICY_TYPES or policy_type not in IMPLEMENTED:
        raise ConfigError(f"policy_type: unknown policy type {policy_type!r} (known: {', '.join(IMPLEMENTED)})")
    return importlib.import_module(IMPLEMENTED[policy_type])


__all__ = ["IMPLEMENTED", "get_algorithm"]
