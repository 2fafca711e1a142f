"""The one registry of policy types: name -> the module implementing it and the config sections
it reads.

Both :class:`lz_tune.config.Config` (validation of ``policy_type``) and
:func:`lz_tune.algos.get_algorithm` read it; this module imports nothing from lz_tune, so the
config can validate a name without importing torch or any policy code.

The ten built-in types are listed here (their modules are imported only when used). A new
type registers from its own module::

    register_policy_type("muzero_mc", module=__name__, config_sections=())

Other processes (Ray collector and evaluator actors, Tune trials) only see the built-ins and
what they import. A config therefore names a type registered outside lz-tune as
``"<module>:<name>"`` (as ``gymnasium.make("module:EnvId")`` does): any process that meets it
imports ``<module>``, whose import registers ``<name>``, before looking the name up. The module
must be importable there (Ray adds the driver's working directory to its workers' path).
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass

__all__ = ["PolicyTypeEntry", "UnknownPolicyTypeError", "BUILTIN_POLICY_TYPES", "POLICY_TYPES",
           "register_policy_type", "lookup_policy_type", "registered_policy_types"]


@dataclass(frozen=True, kw_only=True)
class PolicyTypeEntry:
    """One policy type."""

    name: str
    """What ``policy_type`` says (without a ``module:`` prefix)."""
    module: str
    """Dotted name of the module providing ``make_policy``, ``make_learner``, ``step_columns`` and
    ``policy_target_size`` (see :mod:`lz_tune.algos.base`)."""
    config_sections: tuple[str, ...] = ()
    """The type-specific sections of :class:`lz_tune.config.Config` it reads (``gumbel``,
    ``sampled``, ...), beyond the common ones every type reads (env, model, mcts, buffer,
    learner, collector, evaluator, async_pipeline)."""
    reanalyze_writes_root_values: bool = False
    """What ``buffer.reanalyze_writes_root_values=None`` means for this type: whether a periodic
    buffer reanalyze also replaces the stored root values, as LightZero's buffer of the type does
    (its EfficientZero and sampled buffers write them; its MuZero buffer, which muzero, gumbel,
    stochastic and unizero use, leaves them)."""


class UnknownPolicyTypeError(KeyError):
    """``policy_type`` names no registered type; ``str()`` is the full message (with a
    did-you-mean hint and the known names)."""

    def __str__(self) -> str:
        return str(self.args[0])


BUILTIN_POLICY_TYPES: tuple[PolicyTypeEntry, ...] = (
    PolicyTypeEntry(name="muzero", module="lz_tune.algos.muzero"),
    PolicyTypeEntry(name="efficientzero", module="lz_tune.algos.efficientzero", config_sections=("efficientzero",),
                    reanalyze_writes_root_values=True),
    PolicyTypeEntry(name="sampled_efficientzero", module="lz_tune.algos.sampled_efficientzero",
                    config_sections=("efficientzero", "sampled"), reanalyze_writes_root_values=True),
    PolicyTypeEntry(name="sampled_muzero", module="lz_tune.algos.sampled_muzero", config_sections=("sampled",),
                    reanalyze_writes_root_values=True),
    PolicyTypeEntry(name="gumbel_muzero", module="lz_tune.algos.gumbel_muzero", config_sections=("gumbel",)),
    PolicyTypeEntry(name="stochastic_muzero", module="lz_tune.algos.stochastic_muzero",
                    config_sections=("stochastic",)),
    PolicyTypeEntry(name="muzero_context", module="lz_tune.algos.muzero_context", config_sections=("context",)),
    PolicyTypeEntry(name="muzero_rnn_full_obs", module="lz_tune.algos.muzero_rnn_full_obs",
                    config_sections=("context",)),
    PolicyTypeEntry(name="unizero", module="lz_tune.algos.unizero", config_sections=("unizero",)),
    PolicyTypeEntry(name="sampled_unizero", module="lz_tune.algos.sampled_unizero",
                    config_sections=("unizero", "sampled"), reanalyze_writes_root_values=True),
)
"""The types lz-tune ships, in the order the docs list them."""

POLICY_TYPES: tuple[str, ...] = tuple(entry.name for entry in BUILTIN_POLICY_TYPES)
"""Names of the built-in types."""

_registry: dict[str, PolicyTypeEntry] = {entry.name: entry for entry in BUILTIN_POLICY_TYPES}


def register_policy_type(name: str, *, module: str, config_sections: tuple[str, ...] = (),
                         reanalyze_writes_root_values: bool = False) -> PolicyTypeEntry:
    """Add a type (call it from the type's own module: ``module=__name__``). Registering the
    same entry again is a no-op (a module imported twice); another entry under a taken name
    raises ValueError."""
    if not name or ":" in name:
        raise ValueError(f"policy type name {name!r}: must be non-empty and without ':'")
    entry = PolicyTypeEntry(name=name, module=module, config_sections=tuple(config_sections),
                            reanalyze_writes_root_values=reanalyze_writes_root_values)
    known = _registry.get(name)
    if known is not None and known != entry:
        raise ValueError(f"policy type {name!r} is already registered by {known.module}")
    _registry[name] = entry
    return entry


def registered_policy_types() -> tuple[str, ...]:
    """Names of every type this process knows: the built-ins, then those registered since."""
    return tuple(_registry)


def lookup_policy_type(policy_type: str) -> PolicyTypeEntry:
    """The entry of ``policy_type``: a registered name, or ``"<module>:<name>"`` (the module is
    imported first, and must register ``<name>``). Raises :class:`UnknownPolicyTypeError`."""
    module, sep, name = policy_type.rpartition(":")
    if sep:  # imported once per process (importlib caches it)
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UnknownPolicyTypeError(f"unknown policy type {policy_type!r}: cannot import module {module!r} "
                                         f"({e})") from None
    entry = _registry.get(name)
    if entry is None:
        known = registered_policy_types()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        where = f" (module {module!r} registers no such type)" if sep else ""
        raise UnknownPolicyTypeError(f"unknown policy type {policy_type!r}{where}{hint} (known: {', '.join(known)})")
    return entry
