"""The package's architecture rules, checked over the source of ``lz_tune/``.

1. No import circles between ``lz_tune`` modules, counting imports inside functions too (a
   package's ``__init__`` is the package itself).
2. No class overrides a ``_`` name of a class defined in another module (a subclass extends a
   class through its declared, public hooks).
3. No module touches another module's ``_`` names: neither ``obj._name`` nor
   ``from lz_tune.x import _name`` where ``_name`` is defined only in other ``lz_tune`` modules.
   Third-party privates (``os._exit``, Ray or torch internals) are not ours to rule; a
   package-private module (``lz_tune/models/_validation.py``) is imported within its package.

Rules 1 and 3 read the source with :mod:`ast` (nothing is imported); rule 2 imports every module
to follow the real method resolution order.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
from collections import defaultdict

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1] / "lz_tune"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, pathlib.Path] = {_module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}
TREES: dict[str, ast.Module] = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _owner(dotted: str) -> str:
    """The longest known module that ``dotted`` names or lies in (``lz_tune.a.b.Name`` -> ``lz_tune.a.b``)."""
    while dotted not in MODULES and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


def _imports_in(tree: ast.Module, name: str) -> list[tuple[str, str]]:
    """[(imported module, imported name or "")] of every lz_tune import in module ``name``."""
    out: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names if a.name.startswith("lz_tune")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                is_package = name in MODULES and MODULES[name].name == "__init__.py"
                base = (name if is_package else name.rsplit(".", 1)[0]).split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            if module.startswith("lz_tune"):
                out += [(module, a.name) for a in node.names]
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the lz_tune modules it imports (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        for module, imported in _imports_in(TREES[name], name):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else _owner(module)
            if target != name and target in MODULES:
                graph[name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(MODULES):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_circles():
    cycles = import_cycles(import_graph())
    assert not cycles, "import circles between lz_tune modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_circle():
    graph = {"lz_tune.config": {"lz_tune.envs"}, "lz_tune.envs": {"lz_tune.config"}}
    assert import_cycles(graph) == [["lz_tune.config", "lz_tune.envs"]]


def _private_names_defined(tree: ast.Module) -> set[str]:
    """The ``_`` names a module defines: functions, classes, assigned names and attributes, arguments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias) and not isinstance(node, ast.Import):
            names.add(node.asname or node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def foreign_private_uses(trees: dict[str, ast.Module], modules: set[str]) -> list[str]:
    """Each place a module of ``trees`` reads a ``_`` name that only other modules of it define."""
    defined = {name: _private_names_defined(tree) for name, tree in trees.items()}
    ours = set().union(*defined.values())
    found: list[str] = []
    for name, tree in trees.items():
        for module, imported in _imports_in(tree, name):
            if not imported.startswith("_") or imported.startswith("__"):
                continue
            if f"{module}.{imported}" in modules and name.startswith(module + "."):
                continue  # a package-private module, imported inside its package
            found.append(f"{name}: from {module} import {imported}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr in ours
                and node.attr not in defined[name]
            ):
                found.append(f"{name}:{node.lineno}: .{node.attr}")
    return found


def test_no_module_touches_another_modules_private_names():
    found = foreign_private_uses(TREES, set(MODULES))
    assert not found, "private names used outside their module:\n" + "\n".join(found)


def test_the_private_use_finder_finds_a_base_class_helper_and_an_import():
    trees = {
        "lz_tune.envs.base": ast.parse("class Env:\n    def _check(self): pass\n_EPS = 1e-5\n"),
        "lz_tune.envs.gym": ast.parse(
            "from lz_tune.envs.base import Env, _EPS\nclass Gym(Env):\n    def step(self): self._check(); os._exit(0)\n"
        ),
        "lz_tune.models._validation": ast.parse("def check(): pass\n"),
        "lz_tune.models.mlp": ast.parse("from lz_tune.models import _validation\n"),
    }
    found = foreign_private_uses(trees, set(trees) | {"lz_tune.models"})
    assert found == ["lz_tune.envs.gym: from lz_tune.envs.base import _EPS", "lz_tune.envs.gym:3: ._check"]


def _import_all() -> dict[str, object]:
    modules = {}
    for name in MODULES:
        try:
            modules[name] = importlib.import_module(name)
        except ImportError as e:  # an optional extra (open_spiel, mujoco) not installed here
            if e.name and not e.name.startswith("lz_tune"):
                continue
            raise
    return modules


def private_overrides() -> list[str]:
    """Each ``_`` name a class defines that a base class from another lz_tune module also defines."""
    found = []
    for name, module in _import_all().items():
        for cls_name, cls in vars(module).items():
            if not inspect.isclass(cls) or cls.__module__ != name:
                continue
            for attr in vars(cls):
                if not attr.startswith("_") or attr.startswith("__") or attr == "_abc_impl":
                    continue
                for base in cls.__mro__[1:]:
                    if base.__module__.startswith("lz_tune") and base.__module__ != name and attr in vars(base):
                        found.append(f"{name}.{cls_name}.{attr} overrides {base.__module__}.{base.__qualname__}.{attr}")
                        break
    return found


def test_no_class_overrides_a_private_name_of_another_modules_class():
    found = private_overrides()
    assert not found, "\n".join(found)


def test_benchmarks_zoo_and_search_spaces_use_only_public_names():
    """Scripts outside the package are users of it: they reach the driver, the learner and the
    buffer through public methods."""
    repo = PACKAGE_ROOT.parent
    ours = set().union(*(_private_names_defined(tree) for tree in TREES.values()))
    found = []
    for folder in ("benchmarks", "zoo", "search_spaces"):
        for path in sorted((repo / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            mine = _private_names_defined(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ours
                    and node.attr not in mine
                    and not node.attr.startswith("__")
                ):
                    found.append(f"{path.relative_to(repo)}:{node.lineno}: .{node.attr}")
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lz_tune"):
                    found += [
                        f"{path.relative_to(repo)}: from {node.module} import {a.name}"
                        for a in node.names
                        if a.name.startswith("_")
                    ]
    assert not found, "\n".join(found)


def test_the_policy_type_names_are_listed_once():
    """Only :mod:`lz_tune.policy_registry` spells out the list of built-in types: no other module
    holds a literal tuple, list or set naming more than half of them (a dict of per-type values,
    like LightZero's defaults by type, is data, not a list to keep in step)."""
    from lz_tune.policy_registry import POLICY_TYPES

    names = set(POLICY_TYPES)
    found = []
    for name, tree in TREES.items():
        if name == "lz_tune.policy_registry":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                spelled = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names}
                if len(spelled) > len(names) // 2:
                    found.append(f"{name}:{node.lineno}: {sorted(spelled)}")
    assert not found, "policy type lists outside lz_tune.policy_registry:\n" + "\n".join(found)
