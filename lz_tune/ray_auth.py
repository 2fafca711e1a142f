"""Ray's token authentication, kept on (Ray 2.60: https://docs.ray.io/en/latest/ray-security/token-auth.html).

What Ray 2.60 does by itself, checked in its sources (``ray/_private/worker.py``,
``ray/scripts/scripts.py``) and on the 2-core box:

* ``ray.init()`` that starts a new local cluster turns token authentication on unless
  ``RAY_AUTH_MODE`` is set, and writes a new token to ``~/.ray/auth_token`` if there is none.
  Workers it starts read the same token: nothing to do for ``train --async-pipeline`` or
  ``tune`` on one machine. A process without the token is refused by the cluster's GCS
  (``Unauthenticated: ... InvalidAuthToken``).
* ``ray start --head`` turns it on only if a token exists (``ray get-auth-token --generate``)
  or ``RAY_AUTH_MODE=token``; ``ray start --address=...`` and ``ray.init(address=HOST:PORT)``
  use it only with ``RAY_AUTH_MODE=token`` (``address="auto"`` also when a token is there).
  A token-mode client joins a cluster without authentication too.

:func:`prepare_join` makes the CLI's explicit ``--address`` / ``RAY_ADDRESS`` behave like
``auto``: when this machine has a token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token``) and ``RAY_AUTH_MODE`` is unset, the join uses it. An explicit
``RAY_AUTH_MODE`` (``token`` or ``disabled``) is always left as the user set it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AUTH_MODE_VAR", "RayJoinError", "token_available", "prepare_join", "refused_hint", "join_ray"]

AUTH_MODE_VAR = "RAY_AUTH_MODE"


class RayJoinError(ConnectionError):
    """Joining a Ray cluster failed; the message says what to check (its token)."""


def token_available() -> bool:
    """Whether this machine has a Ray token: ``RAY_AUTH_TOKEN`` (non-empty),
    ``RAY_AUTH_TOKEN_PATH`` (an existing file) or ``~/.ray/auth_token`` (Ray's precedence)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return os.path.isfile(path)
    return (Path.home() / ".ray" / "auth_token").is_file()


def prepare_join(address: str) -> None:
    """Before ``ray.init(address=address)``: use this machine's token for an explicit address
    when ``RAY_AUTH_MODE`` is unset (Ray does so itself only for ``auto``)."""
    if AUTH_MODE_VAR not in os.environ and address not in ("", "auto") and token_available():
        os.environ[AUTH_MODE_VAR] = "token"
        _reload_ray_config()


def _reload_ray_config() -> None:
    """Ray reads ``RAY_AUTH_MODE`` into its process-wide config when ``ray`` is imported, so a
    variable set later is not seen by this process's own join (its child processes do see it).
    Re-read it, as Ray does itself when it turns token mode on for a new cluster
    (``ray._private.authentication.authentication_token_setup._enable_token_auth``). Nothing to do
    before ``ray`` is imported."""
    import sys

    raylet = sys.modules.get("ray._raylet")
    if raylet is not None:
        raylet.Config.initialize("")


def refused_hint(address: str) -> str:
    """What to tell a user whose join was refused."""
    return (
        f"could not join the Ray cluster at {address}. If it runs with token authentication "
        f"(Ray's default for clusters started by ray.init, and for `ray start --head` once "
        f"`ray get-auth-token --generate` made a token), give this machine the cluster's token: "
        f"copy the head's ~/.ray/auth_token here, or export RAY_AUTH_TOKEN=<token>; "
        f"{AUTH_MODE_VAR}={os.environ.get(AUTH_MODE_VAR, '(unset)')} here"
    )


def join_ray(address: str, **init_kwargs) -> None:
    """``ray.init(address=address)`` with this machine's token where :func:`prepare_join` says;
    a refused join raises RayJoinError with :func:`refused_hint`."""
    import ray

    prepare_join(address)
    try:
        ray.init(address=address, configure_logging=False, **init_kwargs)
    except ConnectionError as e:
        raise RayJoinError(f"{refused_hint(address)} ({e})") from e
