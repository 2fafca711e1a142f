"""The optional extras of ``pyproject.toml`` and the error a feature raises when its extra is missing.

Core installs (``pip install lz-tune``) train, tune and evaluate; these features need an extra:

- ``analysis``: :mod:`lz_tune.analysis_plots` (matplotlib) and ``evaluate --video`` (Pillow)
- ``lightzero``: LightZero experiment config files (easydict)
- ``games``: ``openspiel:*`` env ids; ``minatar``: ``MinAtar/*`` ids; ``box2d``, ``mujoco``: those gymnasium envs
- ``tensorboard``: the ``tensorboard`` viewer; ``notebooks``: JupyterLab; ``docs``: the documentation site
- ``all``: every extra but ``mujoco``
"""

from __future__ import annotations

__all__ = ["MissingExtraError", "install_hint", "missing_extra"]


class MissingExtraError(ImportError):
    """A feature needs a package of an optional extra that is not installed; the message says
    which extra installs it."""


def install_hint(extra: str) -> str:
    """How to install ``extra``, as a user of the package and from a checkout."""
    return f'pip install "lz-tune[{extra}]" (from a checkout: pip install -e ".[{extra}]")'


def missing_extra(feature: str, extra: str, error: ImportError) -> MissingExtraError:
    """The error to raise (``from error``) when ``feature`` failed to import a package of ``extra``."""
    name = error.name or str(error)
    return MissingExtraError(f"{feature} needs {name}, which is not installed: {install_hint(extra)}", name=error.name)
