"""What the Ray runtime checks before it starts anything: Ray installed, a shared mesh."""

from __future__ import annotations

from typing import Any

from plait.errors import ConfigError
from plait.mesh import Mesh, mesh_class, redact_url

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
    """Refuse a mesh a host in another process or machine cannot share (one the mesh
    says is not :attr:`~plait.mesh.Mesh.shares_across_machines`).

    Raises:
        ConfigError: ``url`` is a ``memory://`` or SQLite mesh (or an unsupported one).
    """
    kind = mesh_class(url)
    if not kind.shares_across_machines:
        raise _unshared(redact_url(url), f"is reached from {kind.reach} only")


def _unshared(url: str, why: str) -> ConfigError:
    return ConfigError(
        f"the Ray runtime cannot serve the mesh {url!r}: its hosts run in other processes "
        f"(or machines), and this mesh {why}. Use a Redis mesh (redis://HOST:6379)."
    )


def mesh_url_of(mesh: Mesh, url: str | None) -> str:
    """The URL hosts open ``mesh`` with: ``url`` if given, else the mesh's own.

    Raises:
        ConfigError: the mesh's URL had a credential masked (pass ``url=``), or it is a
            mesh a remote host cannot share.
    """
    if not mesh.shares_across_machines:
        raise _unshared(mesh.url, f"lives in {mesh.location}")
    found = url or mesh.url
    if url is None and "***" in found:
        raise ConfigError(
            "the mesh URL carries a password, masked in mesh.url: give the Ray runtime url="
        )
    refuse_unshared(found)
    return found


__all__ = ["INSTALL_HINT", "mesh_url_of", "refuse_unshared", "require_ray"]
