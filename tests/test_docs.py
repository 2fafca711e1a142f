"""The documentation: the MkDocs site builds with ``--strict`` (every link, anchor, snippet and
``::: module`` reference resolves, every page is in the nav), its API reference is generated from
the docstrings, and the README's relative links point at files that exist (GitHub renders them)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _links(markdown: str) -> list[str]:
    """Targets of ``[text](target)`` and ``![alt](target)`` outside fenced code blocks."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)
    return [m.group(1).split()[0] for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+(?:\s+\"[^\"]*\")?)\)", text)]


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (the `docs` extra: pip install -e '.[docs]')",
)
def test_the_site_builds_strict_with_the_api_reference(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner, not a build warning
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(site)],
        check=False,
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    config_page = (site / "api" / "config" / "index.html").read_text()
    for field in ("replay_ratio", "max_policy_lag", "num_simulations", "env_id"):  # one field of several sections
        assert field in config_page, field
    assert ":class:" not in config_page  # reST roles rewritten by docs/griffe_sphinx_roles.py
    api_page = (site / "api" / "python_api" / "index.html").read_text()
    for name in ("load_config", "RunResult", "EvalResult", "best_eval_return"):
        assert name in api_page, name
    assert "MuZeroTrainable" in (site / "api" / "tune" / "index.html").read_text()
    assert "register_policy_type" in (site / "api" / "policy_types" / "index.html").read_text()
    # the included files are on their pages, not just a snippet marker
    assert "Tree search speed" in (site / "benchmarks" / "index.html").read_text()
    assert "Reporting a problem" in (site / "security" / "index.html").read_text()


def test_every_relative_link_of_the_readme_resolves():
    readme = (REPO_ROOT / "README.md").read_text()
    targets = [t for t in _links(readme) if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]
    assert targets, "the README links no page"
    missing = [t for t in targets if not (REPO_ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"


def test_the_readme_stays_short_and_links_every_docs_page():
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    linked = {t.split("#", 1)[0] for t in _links(readme)}
    pages = {f"docs/{p.relative_to(REPO_ROOT / 'docs').as_posix()}" for p in (REPO_ROOT / "docs").glob("*.md")}
    pages -= {"docs/benchmarks.md", "docs/security.md"}  # benchmarks/README.md and SECURITY.md themselves
    assert not pages - linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def _python_block_under(page: Path, heading: str) -> str:
    """The first ```python block after ``heading`` on ``page``."""
    text = page.read_text()
    assert heading in text, f"{page.name}: no heading {heading!r}"
    block = re.search(r"```python\n(.*?)```", text.split(heading, 1)[1], flags=re.DOTALL)
    assert block, f"{page.name}: no python block under {heading!r}"
    return block.group(1)


def test_getting_started_install_and_test_commands_are_the_readme_and_ci_ones():
    """The page, the README and .ci/run give the same install and test commands."""
    page = (REPO_ROOT / "docs" / "getting_started.md").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    for command in ('pip install -c constraints.txt -e ".[all]"', "python -m pytest"):
        assert command in page and command in readme, command
    assert 'pip install -q -c constraints.txt -e ".[all]"' in ci and ci.rstrip().endswith("python -m pytest")


def test_getting_started_trains_cartpole_from_python_word_by_word(tmp_path):
    """The page's "Train from Python" block, run as written in a fresh process and an empty
    folder (as a new user's), trains CartPole to the stop value through lz_tune.train and
    evaluates the checkpoint again."""
    code = _python_block_under(REPO_ROOT / "docs" / "getting_started.md", "## Train from Python")
    assert "lz_tune.train(" in code and "lz_tune.evaluate(" in code
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    first = run.stdout.splitlines()[0].split()
    assert first[0] == "True" and float(first[1]) >= 195, run.stdout  # stop_value_reached, best_eval_return
    assert list(tmp_path.glob("runs/cartpole_muzero_seed0_*/ckpt/ckpt_latest.pt"))
    assert re.search(r"over 10 episodes", run.stdout), run.stdout
