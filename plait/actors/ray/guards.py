"""What the Ray runtime checks before it starts anything: Ray installed, a shared mesh."""

from __future__ import annotations

from typing import Any

from plait.errors import ConfigError
from plait.mesh import Mesh

INSTALL_HINT = "the Ray runtime needs Ray: pip install 'plait[ray]'"


def require_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ConfigError: Ray is not installed (says how to install it).
    """
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def refuse_unshared(url: str) -> None:
    """Refuse a mesh a host in another process or machine cannot share.

    Raises:
        ConfigError: ``url`` is a ``memory://`` or SQLite mesh.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("memory", "sqlite") or not scheme:
        raise ConfigError(
            f"the Ray runtime cannot serve the mesh {url!r}: its hosts run in other "
            "processes (or machines) and a memory:// or SQLite mesh lives in one. "
            "Use a Redis mesh (redis://HOST:6379)."
        )


def mesh_url_of(mesh: Mesh, url: str | None) -> str:
    """The URL hosts open ``mesh`` with: ``url`` if given, else the mesh's own.

    Raises:
        ConfigError: the mesh's URL had a credential masked (pass ``url=``), or it is a
            mesh a remote host cannot share.
    """
    found = url or mesh.url
    if url is None and "***" in found:
        raise ConfigError(
            "the mesh URL carries a password, masked in mesh.url: give the Ray runtime url="
        )
    refuse_unshared(found)
    return found


__all__ = ["INSTALL_HINT", "mesh_url_of", "refuse_unshared", "require_ray"]
