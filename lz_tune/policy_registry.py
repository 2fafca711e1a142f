"""The one registry of policy types: name -> the module implementing it, the config section it
owns and the type-specific sections it reads.

Both :class:`lz_tune.config.Config` (validation of ``policy_type``, and which sections a config
holds) and :func:`lz_tune.algos.get_algorithm` read it; this module imports nothing from lz_tune,
so the config can validate a name without importing torch or any policy code.

The eleven built-in types are listed here (their modules are imported only when used). A new
type registers from its own module::

    register_policy_type("muzero_mc", module=__name__)

**A type's own config keys.** A type with keys of its own declares them in a section class next
to its algorithm (a frozen dataclass subclassing :class:`lz_tune.config.Section`, whose
``section_name`` is its key in the config) and names the class in its entry::

    @dataclass(frozen=True)
    class ToyConfig(Section):
        \"\"\"The toy type's keys.\"\"\"
        section_name = "toy"
        key: int = 1
        \"\"\"How many toys (>= 1).\"\"\"
        def validate(self) -> None:
            self.require_positive("key")

    register_policy_type("toy", module=__name__, config_section=ToyConfig)

The section is then checked, overridden (``toy.key=3``), documented (``python -m lz_tune config``),
saved (``config.json``) and searched (Tune) like the shared sections, and read as ``cfg.toy.key``;
``lz_tune/config.py`` is not touched. Which sections a :class:`~lz_tune.config.Config` holds
(:func:`config_section_classes`): the section of every built-in type (so that every built-in
config has the same keys, those of the ``config.json`` of earlier runs, and an override or a
search space may set another built-in type's keys), then those its ``policy_type`` reads that no
built-in owns. A section registered outside lz-tune is thus held only by the configs of the types
that read it: other processes learn of it from ``policy_type`` alone (below), so a config whose
type does not read it never carries it to them. A type may read another type's section
(``config_sections``: ``sampled_unizero`` reads ``unizero`` and ``sampled``).

The built-in entries name their section class as ``"module:Class"`` (imported on first use, the
same way as ``"<module>:<name>"`` types below): the section modules import
:mod:`lz_tune.config`, which imports this module. A type registered from its own module passes
the class itself.

Other processes (Ray collector and evaluator actors, Tune trials) only see the built-ins and
what they import. A config therefore names a type registered outside lz-tune as
``"<module>:<name>"`` (as ``gymnasium.make("module:EnvId")`` does): any process that meets it
imports ``<module>``, whose import registers ``<name>`` (and its section), before looking the
name up. The module must be importable there (Ray adds the driver's working directory to its
workers' path).
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Optional, Union

__all__ = [
    "PolicyTypeEntry",
    "UnknownPolicyTypeError",
    "UnknownConfigSectionError",
    "BUILTIN_POLICY_TYPES",
    "POLICY_TYPES",
    "register_policy_type",
    "lookup_policy_type",
    "registered_policy_types",
    "config_section_classes",
]


@dataclass(frozen=True, kw_only=True)
class PolicyTypeEntry:
    """One policy type."""

    name: str
    """What ``policy_type`` says (without a ``module:`` prefix)."""
    module: str
    """Dotted name of the module providing ``make_policy``, ``make_learner``, ``step_columns`` and
    ``policy_target_size`` (see :mod:`lz_tune.algos.base`)."""
    config_section: Union[type, str, None] = None
    """The config section this type owns: a frozen dataclass subclassing
    :class:`lz_tune.config.Section` (its ``section_name`` is its key: ``cfg.unizero``,
    ``unizero.num_layers=4``), or ``"module:Class"`` naming one (the built-ins). None: no keys of
    its own."""
    config_sections: tuple[str, ...] = ()
    """Names of the type-specific sections it reads, its own included (``sampled_efficientzero``
    reads ``efficientzero`` and ``sampled``), beyond the shared ones every type reads (env, model,
    mcts, buffer, learner, collector, evaluator, async_pipeline)."""
    reanalyze_writes_root_values: bool = False
    """What ``buffer.reanalyze_writes_root_values=None`` means for this type: whether a periodic
    buffer reanalyze also replaces the stored root values, as LightZero's buffer of the type does
    (its EfficientZero and sampled buffers write them; its MuZero buffer, which muzero, gumbel,
    stochastic and unizero use, leaves them)."""

    def section_class(self) -> Optional[type]:
        """The class of :attr:`config_section` (a ``"module:Class"`` is imported), or None."""
        section = self.config_section
        if section is None or isinstance(section, type):
            return section
        module, _, name = section.partition(":")
        return getattr(importlib.import_module(module), name)


class UnknownPolicyTypeError(KeyError):
    """``policy_type`` names no registered type; ``str()`` is the full message (with a
    did-you-mean hint and the known names)."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownConfigSectionError(LookupError):
    """A type reads a config section that no registered type owns."""


BUILTIN_POLICY_TYPES: tuple[PolicyTypeEntry, ...] = (
    PolicyTypeEntry(name="muzero", module="lz_tune.algos.muzero"),
    PolicyTypeEntry(
        name="efficientzero",
        module="lz_tune.algos.efficientzero",
        config_section="lz_tune.algos.efficientzero_config:EfficientZeroConfig",
        config_sections=("efficientzero",),
        reanalyze_writes_root_values=True,
    ),
    PolicyTypeEntry(
        name="sampled_efficientzero",
        module="lz_tune.algos.sampled_efficientzero",
        config_sections=("efficientzero", "sampled"),
        reanalyze_writes_root_values=True,
    ),
    PolicyTypeEntry(
        name="sampled_muzero",
        module="lz_tune.algos.sampled_muzero",
        config_section="lz_tune.algos.sampled_muzero_config:SampledConfig",
        config_sections=("sampled",),
        reanalyze_writes_root_values=True,
    ),
    PolicyTypeEntry(
        name="gumbel_muzero",
        module="lz_tune.algos.gumbel_muzero",
        config_section="lz_tune.algos.gumbel_muzero_config:GumbelConfig",
        config_sections=("gumbel",),
    ),
    PolicyTypeEntry(
        name="stochastic_muzero",
        module="lz_tune.algos.stochastic_muzero",
        config_section="lz_tune.algos.stochastic_muzero_config:StochasticConfig",
        config_sections=("stochastic",),
    ),
    PolicyTypeEntry(
        name="muzero_context",
        module="lz_tune.algos.muzero_context",
        config_section="lz_tune.algos.muzero_context_config:ContextConfig",
        config_sections=("context",),
    ),
    PolicyTypeEntry(
        name="muzero_rnn_full_obs", module="lz_tune.algos.muzero_rnn_full_obs", config_sections=("context",)
    ),
    PolicyTypeEntry(
        name="unizero",
        module="lz_tune.algos.unizero",
        config_section="lz_tune.algos.unizero_config:UniZeroConfig",
        config_sections=("unizero",),
    ),
    PolicyTypeEntry(
        name="sampled_unizero",
        module="lz_tune.algos.sampled_unizero",
        config_sections=("unizero", "sampled"),
        reanalyze_writes_root_values=True,
    ),
    PolicyTypeEntry(
        name="alphazero",
        module="lz_tune.algos.alphazero",
        config_section="lz_tune.algos.alphazero_config:AlphaZeroConfig",
        config_sections=("alphazero",),
    ),
)
"""The types lz-tune ships, in the order the docs list them."""

POLICY_TYPES: tuple[str, ...] = tuple(entry.name for entry in BUILTIN_POLICY_TYPES)
"""Names of the built-in types."""

_registry: dict[str, PolicyTypeEntry] = {entry.name: entry for entry in BUILTIN_POLICY_TYPES}


def _section_name(cls: Any, owner: str) -> str:
    name = getattr(cls, "section_name", "")
    if not isinstance(cls, type) or not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"policy type {owner!r}: config_section must be a Section class with a section_name "
            f"(an identifier), got {cls!r}"
        )
    return name


def _owners() -> dict[str, tuple[type, str]]:
    """Section name -> (class, owning type) over every registered type, built-ins first."""
    owners: dict[str, tuple[type, str]] = {}
    for entry in _registry.values():
        cls = entry.section_class()
        if cls is not None:
            owners.setdefault(_section_name(cls, entry.name), (cls, entry.name))
    return owners


def register_policy_type(
    name: str,
    *,
    module: str,
    config_section: Optional[type] = None,
    config_sections: tuple[str, ...] = (),
    reanalyze_writes_root_values: bool = False,
) -> PolicyTypeEntry:
    """Add a type (call it from the type's own module: ``module=__name__``).

    ``config_section``: the :class:`lz_tune.config.Section` class of the type's own keys (its
    ``section_name`` joins ``config_sections``); ``config_sections``: the names of other types'
    sections it reads as well. Registering the same entry again is a no-op (a module imported
    twice); another entry under a taken name, or a section under a name another type's section
    has, raises ValueError."""
    if not name or ":" in name:
        raise ValueError(f"policy type name {name!r}: must be non-empty and without ':'")
    reads = tuple(config_sections)
    if config_section is not None:
        own = _section_name(config_section, name)
        reads = (own, *(s for s in reads if s != own))
        owner = _owners().get(own)
        if owner is not None and owner[0] is not config_section:
            raise ValueError(
                f"policy type {name!r}: config section {own!r} is already owned by policy type "
                f"{owner[1]!r} ({owner[0].__module__}.{owner[0].__qualname__})"
            )
    entry = PolicyTypeEntry(
        name=name,
        module=module,
        config_section=config_section,
        config_sections=reads,
        reanalyze_writes_root_values=reanalyze_writes_root_values,
    )
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
            raise UnknownPolicyTypeError(
                f"unknown policy type {policy_type!r}: cannot import module {module!r} ({e})"
            ) from None
    entry = _registry.get(name)
    if entry is None:
        known = registered_policy_types()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        where = f" (module {module!r} registers no such type)" if sep else ""
        raise UnknownPolicyTypeError(f"unknown policy type {policy_type!r}{where}{hint} (known: {', '.join(known)})")
    return entry


def config_section_classes(policy_type: str) -> tuple[type, ...]:
    """The type-specific section classes a config of ``policy_type`` holds, in their order in the
    config: the section of every built-in type, then those ``policy_type`` reads that no built-in
    owns. Raises :class:`UnknownPolicyTypeError`, or :class:`UnknownConfigSectionError` for a
    section the type reads and no registered type owns."""
    entry = lookup_policy_type(policy_type)
    owners = _owners()
    held = {section: owners[section][0] for section in _builtin_section_names(owners)}
    missing = [section for section in entry.config_sections if section not in owners]
    if missing:
        raise UnknownConfigSectionError(
            f"{policy_type!r} reads config section(s) {', '.join(missing)}, which no "
            f"registered policy type provides (known: {', '.join(owners)})"
        )
    for section in entry.config_sections:
        held.setdefault(section, owners[section][0])
    return tuple(held.values())


def _builtin_section_names(owners: dict[str, tuple[type, str]]) -> list[str]:
    builtin = {entry.name for entry in BUILTIN_POLICY_TYPES}
    return [section for section, (_, owner) in owners.items() if owner in builtin]
