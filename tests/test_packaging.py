"""What a plain install imports, it installs: every third-party module imported anywhere in lz_tune/
is a core dependency in pyproject.toml (or comes with one, named here with the reason)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT as _ROOT

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

REPO_ROOT = Path(_ROOT)

#: import name -> distribution name, where they differ
DIST_OF = {"PIL": "pillow", "ale_py": "ale-py", "tensorboardX": "tensorboardx"}
#: modules that arrive with a core dependency (no own requirement needed)
COMES_WITH = {"pyarrow": "ray[tune,train] (Tune's storage layer)"}
#: modules of an optional extra (imported only where that feature is used): import name -> (extra, distribution)
OPTIONAL = {"pyspiel": ("games", "open_spiel"), "minatar": ("minatar", "minatar")}


def _third_party_imports() -> set[str]:
    mods: set[str] = set()
    for f in (REPO_ROOT / "lz_tune").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                mods.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
    return {m for m in mods if m not in sys.stdlib_module_names and m != "lz_tune"}


def _core_dependencies() -> set[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}


def test_every_module_lz_tune_imports_is_a_core_dependency():
    core = _core_dependencies()
    missing = sorted(m for m in _third_party_imports()
                     if m not in COMES_WITH and m not in OPTIONAL and DIST_OF.get(m, m).lower() not in core)
    assert not missing, f"imported by lz_tune/ but not in [project].dependencies: {missing}"


def test_optional_modules_are_in_their_extra_and_in_dev():
    """An optional module's distribution is in its extra, and in ``dev`` too, so that the tests
    of that feature run wherever the README's install line ran."""
    optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, (extra, dist) in OPTIONAL.items():
        for group in (extra, "dev"):
            names = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in optional[group]}
            assert dist in names, f"{module}: {dist} missing from the {group!r} extra"


def test_ale_py_is_at_least_the_version_with_the_vector_env():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    (ale,) = [d for d in project["dependencies"] if d.startswith("ale-py")]
    assert re.fullmatch(r"ale-py>=0\.(1[1-9]|[2-9]\d)(\.\d+)?", ale), ale


def test_the_readme_install_line_installs_what_its_notebook_command_needs():
    readme = (REPO_ROOT / "README.md").read_text()
    install = re.search(r'pip install -c constraints.txt -e "\.\[([a-z0-9,]+)\]"', readme)
    assert install is not None
    extras = set(install.group(1).split(","))
    optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "jupyter lab notebooks/" in readme
    assert any(d.startswith("jupyterlab") for extra in extras for d in optional.get(extra, []))
    # and CI installs what the README says
    assert f'-e ".[{install.group(1)}]"' in (REPO_ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("preset,expected", [(None, "1"), ("0", "0")])
def test_import_lz_tune_puts_large_tensors_on_huge_pages_unless_the_user_said_otherwise(preset, expected):
    """``import lz_tune`` sets THP_MEM_ALLOC_ENABLE=1 (torch's allocator then madvises its large
    CPU allocations) before torch is imported; a value the user set is kept."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if preset is not None:
        env["THP_MEM_ALLOC_ENABLE"] = preset
    code = ("import os, sys; import lz_tune; assert 'torch' not in sys.modules, 'lz_tune imported torch first'; "
            "print(os.environ['THP_MEM_ALLOC_ENABLE'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected


def test_version_floors_and_the_ray_range_checked_at_start():
    """torch >= 2.6 (torch.load(weights_only=True) ran code before: CVE-2025-32434); Ray in
    [2.59, 2.61): the range pyproject.toml declares is the one checked when Ray is imported."""
    from lz_tune.pipeline.ray_backend import SUPPORTED_RAY, check_ray_version

    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch>=2.6" in deps
    (lo, hi) = SUPPORTED_RAY
    assert f"ray[tune,train]>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}" in deps
    for ok in (f"{lo[0]}.{lo[1]}.0", "2.60.0", "2.60.1rc0"):
        check_ray_version(ok)
    for bad in ("2.40.0", "2.58.9", f"{hi[0]}.{hi[1]}.0", "3.0.0.dev0", "nightly"):
        with pytest.raises(ImportError, match=r"Ray >= 2\.59 and < 2\.61"):
            check_ray_version(bad)


def test_an_unsupported_ray_is_a_clear_error_at_the_cli(monkeypatch, capsys, tmp_path):
    ray = pytest.importorskip("ray")
    from lz_tune.cli.main import main

    monkeypatch.setattr(ray, "__version__", "2.40.0")
    code = main(["tune", "search_spaces/cartpole_muzero.py", "--storage-path", str(tmp_path), "--name", "v"])
    assert code == 2 and "found 2.40.0" in capsys.readouterr().err
