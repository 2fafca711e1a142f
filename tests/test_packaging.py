"""What a plain install imports, it installs: every third-party module imported anywhere in lz_tune/
is a core dependency in pyproject.toml (or comes with one, named here with the reason), or belongs
to an extra whose feature names it when missing. What it installs: lz_tune only, with the zoo and
the search spaces inside it (lz_tune.zoo, lz_tune.search_spaces), in a wheel and in an editable
install, beside LightZero's own top-level ``zoo``."""

from __future__ import annotations

import ast
import os
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
OPTIONAL = {
    "pyspiel": ("games", "open_spiel"),
    "minatar": ("minatar", "minatar"),
    "matplotlib": ("analysis", "matplotlib"),
    "PIL": ("analysis", "pillow"),
}
#: what the core install must work without (the features' extras)
EXTRA_MODULES = ("matplotlib", "PIL", "easydict", "pyspiel", "minatar", "tensorboard", "mkdocs", "jupyterlab")


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
    missing = sorted(
        m
        for m in _third_party_imports()
        if m not in COMES_WITH and m not in OPTIONAL and DIST_OF.get(m, m).lower() not in core
    )
    assert not missing, f"imported by lz_tune/ but not in [project].dependencies: {missing}"


def _extra_requirements(extra: str) -> list[str]:
    """The requirements of ``extra``, with the extras it names of lz-tune itself (``lz-tune[a,b]``) expanded."""
    optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found = []
    for req in optional[extra]:
        own = re.fullmatch(r"lz-tune\[([a-z0-9,_-]+)\]", req.replace(" ", ""))
        found += [r for e in own.group(1).split(",") for r in _extra_requirements(e)] if own else [req]
    return found


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in requirements}


def test_optional_modules_are_in_their_extra_and_in_all():
    """An optional module's distribution is in its extra, and in ``all`` too (the README's and
    CI's install line), so that the tests of that feature run wherever that line ran; the board
    games and MinAtar are in ``dev`` as well."""
    for module, (extra, dist) in OPTIONAL.items():
        for group in (extra, "all") + (("dev",) if extra in ("games", "minatar") else ()):
            assert dist in _names(_extra_requirements(group)), f"{module}: {dist} missing from the {group!r} extra"


def test_all_is_every_extra_but_mujoco():
    optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(optional) >= {
        "analysis",
        "lightzero",
        "games",
        "minatar",
        "box2d",
        "tensorboard",
        "notebooks",
        "docs",
        "mujoco",
        "dev",
        "all",
    }
    everything = _extra_requirements("all")
    for extra in set(optional) - {"all", "mujoco"}:
        assert set(_extra_requirements(extra)) <= set(everything), extra
    assert "mujoco" not in " ".join(everything)
    core = _core_dependencies()
    for moved in ("matplotlib", "pillow", "easydict"):  # the features' packages are not core
        assert moved not in core, moved


def test_ale_py_is_at_least_the_version_with_the_vector_env():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    (ale,) = [d for d in project["dependencies"] if d.startswith("ale-py")]
    assert re.fullmatch(r"ale-py>=0\.(1[1-9]|[2-9]\d)(\.\d+)?", ale), ale


def test_the_readme_install_line_installs_what_its_notebook_command_needs():
    readme = (REPO_ROOT / "README.md").read_text()
    install = re.search(r'^pip install -c constraints.txt -e "\.\[([a-z0-9,]+)\]"', readme, re.M)  # a command line
    assert install is not None
    extras = set(install.group(1).split(","))
    assert "jupyter lab notebooks/" in readme
    assert any(d.startswith("jupyterlab") for extra in extras for d in _extra_requirements(extra))
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
    code = (
        "import os, sys; import lz_tune; assert 'torch' not in sys.modules, 'lz_tune imported torch first'; "
        "print(os.environ['THP_MEM_ALLOC_ENABLE'])"
    )
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


# ----------------------------------------------------------------------------- the zoo and the search spaces
# They live in the repository's zoo/ and search_spaces/ folders and install as lz_tune.zoo and
# lz_tune.search_spaces: no top-level `zoo` module, which would collide with LightZero's.


def _setuptools() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    """Every package folder (with __init__.py) of lz_tune/, zoo/ and search_spaces/, by its installed name."""
    found = set()
    for folder, name in (("lz_tune", "lz_tune"), ("zoo", "lz_tune.zoo"), ("search_spaces", "lz_tune.search_spaces")):
        for init in (REPO_ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO_ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    return found


def test_the_package_list_is_every_package_folder():
    """pyproject.toml lists the packages (packages.find cannot rename zoo/ to lz_tune.zoo): a new
    package folder must be added there, or the wheel leaves it out."""
    setuptools = _setuptools()
    assert setuptools["package-dir"] == {"lz_tune.zoo": "zoo", "lz_tune.search_spaces": "search_spaces"}
    listed = set(setuptools["packages"])
    assert listed == _packages_on_disk(), (
        f"missing from [tool.setuptools] packages: {sorted(_packages_on_disk() - listed)}; "
        f"listed without a folder: {sorted(listed - _packages_on_disk())}"
    )
    assert not any(p.split(".")[0] != "lz_tune" for p in listed)


def _build_wheel(tmp_path: Path) -> Path:
    """``pip wheel`` of a copy of the sources (the working tree gets no build/ or egg-info)."""
    import shutil
    import subprocess

    src = tmp_path / "src"
    src.mkdir()
    for f in REPO_ROOT.iterdir():
        if f.is_file():
            shutil.copy2(f, src / f.name)
    for folder in ("lz_tune", "zoo", "search_spaces"):
        shutil.copytree(REPO_ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("lz_tune-*.whl")
    return wheel


def test_the_wheel_ships_the_zoo_and_the_search_spaces_inside_lz_tune(tmp_path):
    """No top-level zoo/ or search_spaces/ in the wheel; every zoo config and search space is
    under lz_tune/; and from the unpacked wheel alone (another folder, not the repository) a zoo
    config loads by short name, by dotted name and by file, and a search space by short name."""
    import subprocess
    import zipfile

    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lz_tune"}, sorted(tops)
    assert "lz_tune/zoo/classic_control/cartpole_muzero.py" in names
    assert "lz_tune/search_spaces/cartpole_muzero.py" in names
    assert "lz_tune/py.typed" in names  # PEP 561: type checkers read the package's annotations
    for folder, under in (("zoo", "lz_tune/zoo"), ("search_spaces", "lz_tune/search_spaces")):
        for f in (REPO_ROOT / folder).rglob("*.py"):
            assert f"{under}/{f.relative_to(REPO_ROOT / folder).as_posix()}" in names, f

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a pure wheel installs by unpacking
    run = tmp_path / "elsewhere"
    run.mkdir()
    code = (
        "import lz_tune, lz_tune.zoo, os\n"
        f"assert os.path.dirname(lz_tune.__file__) == {str(site / 'lz_tune')!r}, lz_tune.__file__\n"
        "from lz_tune.config_loader import load_config_module\n"
        "from lz_tune.cli.common import zoo_configs\n"
        "assert load_config_module('cartpole_unizero').policy_type == 'unizero'\n"
        "assert load_config_module('lz_tune.zoo.classic_control.cartpole_efficientzero').policy_type"
        " == 'efficientzero'\n"
        "(path,) = [p for p in zoo_configs() if p.endswith('cartpole_gumbel_muzero.py')]\n"
        f"assert path.startswith({str(site)!r}), path\n"
        "assert load_config_module(path).policy_type == 'gumbel_muzero'\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", code], cwd=run, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_lightzero_zoo_and_lz_tune_zoo_coexist(tmp_path):
    """A LightZero user's environment has a top-level ``zoo`` package: it stays LightZero's, and
    lz-tune's zoo (lz_tune.zoo, its short names, its configs importing each other) works beside it."""
    import subprocess

    (tmp_path / "zoo").mkdir()
    (tmp_path / "zoo" / "__init__.py").write_text("LIGHTZERO = True\n")
    code = (
        "import zoo\n"
        "assert zoo.LIGHTZERO, 'not the LightZero zoo'\n"
        "from lz_tune.zoo.classic_control.cartpole_muzero import make_config\n"
        "assert make_config().policy_type == 'muzero'\n"
        "from lz_tune.config_loader import load_config_module\n"
        "assert load_config_module('cartpole_unizero').policy_type == 'unizero'\n"  # imports cartpole_muzero
        "import sys\n"
        "assert sys.modules['zoo'] is zoo and not hasattr(zoo, 'classic_control')\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_a_zoo_config_by_short_name_dotted_name_and_file(monkeypatch, tmp_path):
    from lz_tune.config_loader import ZOO_PACKAGE, load_config_module, named_modules

    monkeypatch.chdir(tmp_path)  # not the repository: only the installed package
    by_short = load_config_module("cartpole_unizero")
    assert by_short == load_config_module("lz_tune.zoo.classic_control.cartpole_unizero")
    assert by_short == load_config_module(str(REPO_ROOT / "zoo" / "classic_control" / "cartpole_unizero.py"))
    # every zoo file has its own short name
    names = [m.name for m in named_modules(ZOO_PACKAGE)]
    assert len(names) == len(set(names)) and "cartpole_muzero" in names and "pong_muzero" in names
    assert len(names) == sum(1 for f in (REPO_ROOT / "zoo").rglob("*.py") if not f.name.startswith("_"))


@pytest.mark.parametrize(
    "name,suggested",
    [
        ("cartpole_muzer", "cartpole_muzero"),
        ("pong_muzro", "pong_muzero"),
        ("zoo.classic_control.cartpole_muzer", "cartpole_muzero"),
    ],
)
def test_an_unknown_short_name_suggests_the_close_ones(monkeypatch, tmp_path, name, suggested):
    from lz_tune.config import ConfigError
    from lz_tune.config_loader import load_config_module

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=rf"^{re.escape(name)}: .*did you mean .*\b{suggested}\b"):
        load_config_module(name)


def test_the_repository_layout_still_loads_from_the_repository_root(monkeypatch):
    """From the repository root the folders are importable as they are: ``zoo.classic_control.X``
    (the docs' dotted names) and ``search_spaces/X.py`` files, whose imports name lz_tune.zoo."""
    from lz_tune.cli.tune import load_space_module
    from lz_tune.config_loader import load_config_module

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    assert load_config_module("zoo.classic_control.cartpole_unizero").policy_type == "unizero"
    assert load_config_module("zoo/classic_control/cartpole_unizero.py").policy_type == "unizero"
    space = load_space_module("search_spaces/cartpole_unizero.py")
    assert space.space["config"] == "lz_tune.zoo.classic_control.cartpole_unizero"


def test_a_search_space_by_short_name(monkeypatch, tmp_path):
    pytest.importorskip("ray")
    from lz_tune.cli.tune import load_space_module
    from lz_tune.config import ConfigError
    from lz_tune.tune.tune_config import DEFAULT_CONFIG, config_from_tune

    monkeypatch.chdir(tmp_path)
    space = load_space_module("cartpole_efficientzero")  # imports search_spaces.cartpole_muzero's scheduler
    assert space.__name__ == "lz_tune.search_spaces.cartpole_efficientzero"
    assert config_from_tune({"config": space.space["config"]}).policy_type == "efficientzero"
    assert DEFAULT_CONFIG.startswith("lz_tune.zoo.") and config_from_tune({}).policy_type == "muzero"
    with pytest.raises(
        ConfigError, match=r"cartpole_muzro: no search space of that name; did you mean cartpole_muzero"
    ):
        load_space_module("cartpole_muzro")


@pytest.mark.parametrize("space", ["cartpole_muzero", "lz_tune.search_spaces.cartpole_muzero"])
def test_the_tune_command_takes_a_search_space_by_short_or_dotted_name(space, monkeypatch, tmp_path):
    """``python -m lz_tune tune cartpole_muzero`` from any folder: the space of that name, the
    experiment named after it (Ray and the Tuner replaced by recorders)."""
    ray = pytest.importorskip("ray")
    from ray import tune

    from lz_tune.cli.main import main

    seen: dict = {}
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda **kw: None)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr("lz_tune.tune.check_cluster_resources", lambda space: None)

    class FakeTuner:
        def __init__(self, trainable, **kw):
            seen.update(kw)

        @staticmethod
        def can_restore(path):
            return False

        def fit(self):
            class NoResults(list):
                errors: list = []

            return NoResults()

    monkeypatch.setattr(tune, "Tuner", FakeTuner)
    monkeypatch.chdir(tmp_path)
    assert main(["tune", space, "--storage-path", str(tmp_path), "--num-samples", "1"]) == 0
    assert seen["run_config"].name == "cartpole_muzero"
    assert seen["param_space"]["config"] == "lz_tune.zoo.classic_control.cartpole_muzero"


# ----------------------------------------------------------------------------- extras


def test_a_missing_extra_is_named(monkeypatch, tmp_path, capsys):
    """A feature whose extra is not installed says which extra installs it."""
    from lz_tune.config import ConfigError
    from lz_tune.config_loader import build_config
    from lz_tune.envs.recording import write_gif
    from lz_tune.extras import MissingExtraError

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] or ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "lz_tune.analysis_plots", raising=False)
    with pytest.raises(MissingExtraError, match=re.escape('pip install "lz-tune[analysis]"')):
        import lz_tune.analysis_plots  # noqa: F401

    monkeypatch.setitem(sys.modules, "PIL", None)
    import numpy as np

    with pytest.raises(
        MissingExtraError, match=r"needs PIL, which is not installed: pip install \"lz-tune\[analysis\]\""
    ):
        write_gif(np.zeros((1, 2, 2, 3), np.uint8), tmp_path / "x.gif", fps=10)
    from lz_tune.cli.main import main

    # `evaluate --video`: refused before the checkpoint is even looked for
    assert main(["evaluate", str(tmp_path / "no_run"), "--video", str(tmp_path / "x.gif")]) == 2
    assert '--video: needs Pillow, which is not installed: pip install "lz-tune[analysis]"' in capsys.readouterr().err

    monkeypatch.setitem(sys.modules, "easydict", None)
    f = tmp_path / "cartpole_muzero_config.py"
    f.write_text("from easydict import EasyDict\nmain_config = EasyDict(dict())\ncreate_config = EasyDict(dict())\n")
    with pytest.raises(
        ConfigError, match=re.escape('needs easydict, which is not installed: pip install "lz-tune[lightzero]"')
    ):
        build_config(str(f))


def test_the_core_imports_without_the_extras():
    """``import lz_tune``, the CLI, the pipeline and the Tune trainable import with every extra's
    package missing: the features that need them import them where they are used."""
    import subprocess

    blocked = ", ".join(repr(m) for m in EXTRA_MODULES)
    code = (
        f"import sys\nfor m in ({blocked},):\n    sys.modules[m] = None\n"
        "import lz_tune, lz_tune.cli.main, lz_tune.pipeline, lz_tune.config_loader, lz_tune.tune.trainable\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
