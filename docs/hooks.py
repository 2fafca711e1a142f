"""MkDocs hooks of the documentation site (mkdocs.yml loads them; not part of the site).

GitHub's Markdown lets a list start right under a paragraph line ("Include:\\n- the version");
Python-Markdown, which MkDocs uses, needs a blank line there and otherwise prints the items as
one paragraph. benchmarks/README.md and SECURITY.md are written for GitHub and included as they
are, so a preprocessor (after pymdownx.snippets has included them) adds that blank line.
"""

from __future__ import annotations

import re
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

_ITEM = re.compile(r"^(?:[-*+]|\d+\.) \S")  # a list item at the start of a line
_FENCE = re.compile(r"^\s*(```|~~~)")


class _BlankLineBeforeLists(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence = None
        for line in lines:
            match = _FENCE.match(line)
            if match:
                fence = None if fence == match.group(1) else (fence or match.group(1))
            elif fence is None and _ITEM.match(line) and out:
                prev = out[-1]
                if (
                    prev.strip()
                    and not prev[0].isspace()
                    and not _ITEM.match(prev)
                    and not prev.startswith(("|", "#", ">"))
                ):
                    out.append("")
            out.append(line)
        return out


class BlankLineBeforeLists(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # Python-Markdown's name
        # after pymdownx.snippets (priority 32), before the fenced-code preprocessors (25)
        md.preprocessors.register(_BlankLineBeforeLists(md), "lz_tune_blank_line_before_lists", 31)


def on_config(config: Any, **kwargs: Any) -> Any:
    config.markdown_extensions.append(BlankLineBeforeLists())
    return config
