"""A griffe extension for the API reference (mkdocs.yml loads it; not part of the site).

lz-tune's docstrings are free text with reST habits: ``:class:`Config```-style roles and a
trailing ``::`` before an indented example. Markdown would show the roles verbatim, so this
turns ``:role:`target``` into the code span ``target`` (``~a.b.C`` into ``C``) and ``text::``
before an indented block into ``text:``. The docstrings themselves stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|obj|exc|const|ref):`~?([^`]+)`")
_LITERAL_BLOCK = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)


def _tilde(match: re.Match[str]) -> str:
    target = match.group(1)
    if match.group(0).split("`", 1)[1].startswith("~"):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` as Markdown reads it (roles as code spans, ``::`` as ``:``)."""
    return _LITERAL_BLOCK.sub(r"\1:", _ROLE.sub(_tilde, text))


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
