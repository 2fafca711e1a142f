"""Read a LightZero experiment config file without LightZero installed.

LightZero's config files come in two shapes, and both are read:

* **module-level** (most of LightZero's zoo, e.g. ``cartpole_muzero_config.py``):
  ``main_config`` and ``create_config`` EasyDicts at module level, the training entry called
  under ``if __name__ == "__main__":``. The file is imported under another name, so that block
  does not run; ``max_env_step`` and ``seed`` are the module's globals of those names (what
  LightZero passes to the entry) when it has them.
* **function** (LightZero's segment / async Atari configs, e.g.
  ``atari_muzero_segment_async_config.py``): ``main(env_id, seed, ...)`` builds the config and
  calls a training entry (``from lzero.entry... import train_...``). ``main`` is called with the
  arguments the file's own command line would give it (the defaults of its ``argparse`` flags,
  read from the source, with the flags given to lz-tune on top: :data:`REFERENCE_FLAGS`), inside
  a throw-away working folder and with its output captured (such files create run folders and
  tee their output); the training entry is a stand-in that records its arguments
  (``[main_config, create_config]``, ``seed``, ``max_env_step``) and stops the call.

While the file runs, ``zoo.*`` imports resolve to LightZero's own module files: in the LightZero
checkout the file lives in, else beside the file (LightZero configs import sibling modules such
as ``zoo.atari.config.atari_env_action_space_map``); ``lzero`` and ``lzero.entry`` are the
recording stand-ins; any other import that is not installed stops with a
:class:`~lz_tune.config.ConfigError` naming the module. Our own ``zoo`` package and any real
``lzero`` are put back afterwards.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import io
import os
import sys
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from lz_tune.config import ConfigError

__all__ = ["LightZeroFile", "is_lightzero_config", "read_lightzero_file", "REFERENCE_FLAGS"]

#: the flags of LightZero's Atari segment / async config scripts that lz-tune takes too (argparse
#: dest names); their values reach a function config's ``main()`` as its own command line would
#: pass them
REFERENCE_FLAGS = (
    "env",
    "seed",
    "max_env_step",
    "async_pipeline",
    "num_collector_actors",
    "max_policy_lag",
    "max_train_chunk_steps",
    "weight_sync_interval",
    "collector_num_gpus",
    "evaluator_num_gpus",
)

#: main() parameters whose reference flag has another name, for files without a ``__main__`` call
_PARAM_TO_FLAG = {"env_id": "env", "max_env_step_override": "max_env_step"}

_STUB_PACKAGES = ("lzero", "lzero.entry")


@dataclass(frozen=True)
class LightZeroFile:
    """What a LightZero config file gives: its two EasyDicts as plain nested dicts, and what its
    training entry would be called with."""

    path: str
    main_config: dict[str, Any]
    create_config: dict[str, Any]
    seed: Optional[int] = None
    """``seed=`` of the entry call (function configs), or the module's ``seed`` global."""
    max_env_step: Optional[int] = None
    """``max_env_step=`` of the entry call, or the module's ``max_env_step`` global."""
    max_train_iter: Optional[int] = None
    """``max_train_iter=`` of the entry call, if given."""
    entry: Optional[str] = None
    """The LightZero training entry ``main()`` called (``train_muzero_segment_async``, ...)."""
    entry_kwargs: dict[str, Any] = field(default_factory=dict)
    """Every other keyword of the entry call (``model_path``, ...), for the mapping to check."""


def is_lightzero_config(path: str) -> bool:
    """True for a ``.py`` file that builds LightZero's ``main_config`` / ``create_config`` and is not
    an lz-tune zoo module (no top-level ``make_config``). Decided from the source, without running it."""
    if not path.endswith(".py") or not os.path.isfile(path):
        return False
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return False  # the ordinary import reports it
    if any(isinstance(n, ast.FunctionDef) and n.name == "make_config" for n in tree.body):
        return False
    return any(
        isinstance(t, ast.Name) and t.id in ("main_config", "create_config")
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in node.targets
    )


def read_lightzero_file(path: str, flags: Optional[Mapping[str, Any]] = None) -> LightZeroFile:
    """Run the LightZero config file at ``path`` as described in the module docstring.

    ``flags``: reference flags given on lz-tune's command line (argparse dest names of
    :data:`REFERENCE_FLAGS`, e.g. ``{"env": "ALE/Pong-v5", "async_pipeline": True}``); they are
    used only by function configs, whose ``main()`` takes them."""
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: config file not found")
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source, filename=path)
    with _lightzero_imports(path):
        module = _import_file(path)
        if hasattr(module, "main_config"):
            return LightZeroFile(
                path=path,
                main_config=_plain(module.main_config, f"{path}: main_config"),
                create_config=_plain(getattr(module, "create_config", {}), f"{path}: create_config"),
                seed=_int_global(module, "seed"),
                max_env_step=_int_global(module, "max_env_step"),
            )
        if callable(getattr(module, "main", None)):
            return _call_main(path, module, tree, dict(flags or {}))
    raise ConfigError(
        f"{path}: a LightZero config must define main_config / create_config at module level, or "
        "a main(env_id, seed, ...) that passes [main_config, create_config] to a lzero.entry train "
        "function; this file has neither"
    )


# ------------------------------------------------------------------------------------ importing


class _EntryCalled(BaseException):
    """Raised by the ``lzero.entry`` stand-in: a BaseException, so ``except Exception`` in the
    file does not swallow it."""

    def __init__(self, name: str, args: tuple, kwargs: dict) -> None:
        super().__init__(name)
        self.name, self.args_, self.kwargs = name, args, kwargs


class _EntryModule(types.ModuleType):
    """``lzero`` / ``lzero.entry`` (and its submodules): every public attribute is a training
    entry that records its call and stops it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def entry(*args: Any, **kwargs: Any) -> None:
            raise _EntryCalled(name, args, kwargs)

        entry.__name__ = name
        return entry


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _EntryModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _MissingLoader(importlib.abc.Loader):
    """A module LightZero has and lz-tune does not: importing it is the clear error."""

    def __init__(self, config_path: str) -> None:
        self.config_path = config_path

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        raise ConfigError(
            f"{self.config_path}: imports {spec.name}, which lz-tune does not have (LightZero itself is not "
            "needed, nor used). A LightZero config file may import easydict, installed packages, "
            "lzero.entry (its train_* functions, called only to hand over the config) and LightZero's "
            "zoo.* config modules (found in the LightZero checkout the file lives in, or beside the file)"
        )

    def exec_module(self, module: types.ModuleType) -> None:  # never reached
        pass


class _LightZeroFinder(importlib.abc.MetaPathFinder):
    """Resolves ``lzero`` / ``lzero.entry*`` to the recording stand-ins and ``zoo.*`` to LightZero's
    files (see the module docstring)."""

    def __init__(self, config_path: str) -> None:
        self.config_path = config_path
        here = Path(config_path).resolve().parent
        self.sibling_dir = here
        # the LightZero checkout: the folder above the nearest ancestor named "zoo"
        self.root = next((p.parent for p in [here, *here.parents] if p.name == "zoo"), None)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        top = fullname.split(".")[0]
        if top == "lzero":
            if fullname in _STUB_PACKAGES or fullname.startswith("lzero.entry."):
                return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
            return importlib.machinery.ModuleSpec(fullname, _MissingLoader(self.config_path))
        if top != "zoo":
            return None
        parts = fullname.split(".")
        if self.root is not None:
            folder = self.root.joinpath(*parts)
            if folder.is_dir():  # a namespace package: its __init__.py (which may import more) is not run
                spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
                spec.submodule_search_locations = [str(folder)]
                return spec
            if folder.with_suffix(".py").is_file():
                return importlib.util.spec_from_file_location(fullname, folder.with_suffix(".py"))
        sibling = self.sibling_dir / f"{parts[-1]}.py"
        if len(parts) > 1 and sibling.is_file():
            return importlib.util.spec_from_file_location(fullname, sibling)
        # not found: an empty package, so that deeper modules can still be found beside the file;
        # taking a name from it is the clear error
        return importlib.machinery.ModuleSpec(fullname, _ZooPackageLoader(self.config_path), is_package=True)


class _ZooPackage(types.ModuleType):
    """A ``zoo.*`` name with no file: any name taken from it is a :class:`ConfigError`."""

    config_path = ""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise ConfigError(
            f"{self.config_path}: imports {self.__name__}.{name}, a LightZero module that is neither in a LightZero "
            "checkout around the file nor beside it; copy that module (a .py file of LightZero's zoo) next to the "
            "config, or run the config from inside a LightZero checkout"
        )


class _ZooPackageLoader(importlib.abc.Loader):
    def __init__(self, config_path: str) -> None:
        self.config_path = config_path

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _ZooPackage(spec.name)
        module.config_path = self.config_path
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _owned(name: str) -> bool:
    return name.split(".")[0] in ("zoo", "lzero")


@contextlib.contextmanager
def _lightzero_imports(config_path: str) -> Iterator[None]:
    """The finder first on ``sys.meta_path``, ``zoo*`` / ``lzero*`` modules swapped out of
    ``sys.modules`` meanwhile, everything put back afterwards."""
    saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _owned(k)]}
    finder = _LightZeroFinder(config_path)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if _owned(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


def _import_file(path: str) -> types.ModuleType:
    """Import ``path`` under a private name (not ``__main__``): its ``__main__`` block does not run."""
    name = "_lz_lightzero_" + "".join(c if c.isalnum() else "_" for c in Path(path).stem)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ConfigError:
        raise
    except ModuleNotFoundError as e:
        if e.name == "easydict":  # the `lightzero` extra
            from lz_tune.extras import install_hint

            raise ConfigError(
                f"{path}: a LightZero config file needs easydict, which is not installed: {install_hint('lightzero')}"
            ) from e
        raise ConfigError(f"{path}: imports {e.name}, which is not installed ({e})") from e
    except _EntryCalled as e:
        raise ConfigError(
            f"{path}: calls lzero.entry.{e.name} when imported; LightZero configs call their "
            'training entry only under `if __name__ == "__main__":`'
        ) from None
    except Exception as e:
        raise ConfigError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    return module


# ----------------------------------------------------------------------------- function configs


def _reference_cli(tree: ast.Module) -> tuple[dict[str, Any], dict[Any, str]]:
    """From the file's source: (argparse dest -> default) of its ``add_argument`` calls, and
    (``main()`` parameter name or position -> argparse dest) of its ``main(args.x, ...)`` call."""
    defaults: dict[str, Any] = {}
    sources: dict[Any, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("--")
        ):
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            dest = _literal(kw["dest"]) if "dest" in kw else str(node.args[0].value)[2:].replace("-", "_")
            if "default" in kw:
                with contextlib.suppress(ValueError, SyntaxError):
                    defaults[dest] = ast.literal_eval(kw["default"])
            elif _literal(kw.get("action")) == "store_true":
                defaults[dest] = False
        elif isinstance(func, ast.Name) and func.id == "main":
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Attribute):
                    sources[i] = arg.attr
            for k in node.keywords:
                if k.arg and isinstance(k.value, ast.Attribute):
                    sources[k.arg] = k.value.attr
    return defaults, sources


def _literal(node: Optional[ast.AST]) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError):
        return None


def _call_main(path: str, module: types.ModuleType, tree: ast.Module, flags: dict[str, Any]) -> LightZeroFile:
    defaults, sources = _reference_cli(tree)
    kwargs: dict[str, Any] = {}
    for i, (name, param) in enumerate(inspect.signature(module.main).parameters.items()):
        dest = sources.get(name) or sources.get(i) or _PARAM_TO_FLAG.get(name, name)
        if flags.get(dest) is not None:
            kwargs[name] = flags[dest]
        elif dest in defaults:
            kwargs[name] = defaults[dest]
        elif param.default is inspect.Parameter.empty:
            raise ConfigError(f"{path}: its main() needs {name!r}: give it as --{dest.replace('_', '-')}")
    out = io.StringIO()
    with (
        tempfile.TemporaryDirectory(prefix="lz_lightzero_") as scratch,
        _working_dir(scratch),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(out),
    ):
        try:
            module.main(**kwargs)
        except _EntryCalled as call:
            entry = call
        except Exception as e:
            printed = "".join(f"\n  | {line}" for line in out.getvalue().splitlines()[-15:])
            raise ConfigError(
                f"{path}: main({_args_text(kwargs)}) failed: {type(e).__name__}: {e}"
                + (f"; it printed:{printed}" if printed else "")
            ) from e
        else:
            raise ConfigError(
                f"{path}: main() returned without calling a lzero.entry train function, so it handed over no config"
            )
    if not entry.args_ or not isinstance(entry.args_[0], (list, tuple)) or len(entry.args_[0]) < 1:
        raise ConfigError(f"{path}: main() called lzero.entry.{entry.name} without [main_config, create_config]")
    cfgs = list(entry.args_[0])
    kw = dict(entry.kwargs)
    return LightZeroFile(
        path=path,
        main_config=_plain(cfgs[0], f"{path}: main_config"),
        create_config=_plain(cfgs[1] if len(cfgs) > 1 else {}, f"{path}: create_config"),
        seed=kw.pop("seed", None),
        max_env_step=_optional_int(kw.pop("max_env_step", None)),
        max_train_iter=_optional_int(kw.pop("max_train_iter", None)),
        entry=entry.name,
        entry_kwargs=kw,
    )


def _args_text(kwargs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


@contextlib.contextmanager
def _working_dir(folder: str) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


# ---------------------------------------------------------------------------------- values


def _plain(value: Any, what: str) -> dict[str, Any]:
    """An EasyDict (or dict) as a plain nested dict; anything else is an error naming ``what``."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what}: expected a dict / EasyDict, got {type(value).__name__}")
    return {str(k): _plain(v, f"{what}.{k}") if isinstance(v, Mapping) else v for k, v in value.items()}


def _int_global(module: types.ModuleType, name: str) -> Optional[int]:
    value = getattr(module, name, None)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _optional_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)
