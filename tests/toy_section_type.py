"""A toy policy type with config keys of its own, ``toy`` (for tests/test_policy_type_sections.py
and docs/adding_a_policy_type.md): the algorithm of ``muzero_mc`` (tests/toy_policy_type.py) and
a section ``toy`` with one key, ``toy.key``.

Everything the type adds is in this file: the section class, a frozen dataclass subclassing
:class:`lz_tune.config.Section`, and the registration that names it. ``lz_tune/config.py`` is not
touched; a config of the type then takes ``toy.key=3``, checks it, documents it
(``python -m lz_tune config``) and saves it (``config.json``) as a shared key. A config names the
type ``"tests.toy_section_type:toy"`` (:data:`POLICY_TYPE`), so that any process importing the
config imports this module, which registers the type and its section.
"""

from __future__ import annotations

from dataclasses import dataclass

from lz_tune.config import Section
from lz_tune.policy_registry import register_policy_type
from tests.toy_policy_type import make_learner, make_policy, policy_target_size, step_columns  # noqa: F401


@dataclass(frozen=True)
class ToyConfig(Section):
    """The toy type's own keys (``policy_type=toy``)."""

    section_name = "toy"
    key: int = 1
    """How many toys the toy type has (>= 1; read by nothing, the section is what is tested)."""

    def validate(self) -> None:
        self.require_positive("key")


NAME = "toy"
register_policy_type(NAME, module=__name__, config_section=ToyConfig)

POLICY_TYPE = f"{__name__}:{NAME}"
"""What a config's ``policy_type`` says to use this type in every process."""
