"""The mesh: versioned state with compare-and-swap, durable topics and delayed publish.

``open_mesh(url)`` picks a backend by URL:

- ``memory://`` — this process only; for tests and in-session graphs.
- ``sqlite:///PATH`` — a SQLite file shared by the processes of one machine; the
  default when no URL is given: ``mesh.db`` in ``PLAIT_HOME`` if set, else in the
  nearest ``.plait/`` directory at or above the working directory (as git finds
  ``.git``), else a new ``.plait/mesh.db`` under the working directory.
  ``?synchronous=full`` makes every commit survive a power loss too (it fsyncs each).
- ``redis://[:PASSWORD@]HOST:PORT/DB[?prefix=NAME]`` (or ``rediss://``) — a Redis
  server shared by many hosts; ``prefix`` namespaces every key (``NAME:``, the ``:``
  added unless ``NAME`` ends in a separator), ``timeout`` and
  ``connect_timeout`` (seconds) bound how long a reply or a connection is waited for.
- ``postgresql://USER[:PASSWORD]@HOST:PORT/DB[?schema=NAME]`` (or ``postgres://``) — a
  PostgreSQL database shared by many hosts; the mesh keeps its tables in schema
  ``NAME`` (default ``plait``), created and migrated by plait (``plait mesh migrate``);
  ``pool`` bounds its connections, ``timeout`` (seconds) how long an operation waits.

Values. Every backend refuses a value (or event payload) over ``max_value_bytes``,
8 MiB unless ``open_mesh`` is given another; each has a ceiling above which that
option is refused: the memory mesh none, SQLite 1,000,000,000 bytes (its
``SQLITE_MAX_LENGTH``), Redis 512 MiB (a bulk string), PostgreSQL 1 GiB (a ``bytea``).
Values are not chunked: store a large document under several keys.

Wherever a URL is printed its credentials are masked (:func:`redact_url`).

The contract every backend keeps is written once, in :mod:`plait.mesh._base`.

The mesh is the bottom room of the house: every other room keeps its state through
it, and it imports nothing of plait beyond :mod:`plait.errors` and :mod:`plait.ids`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from plait.errors import ConfigError
from plait.mesh._backoff import Backoff
from plait.mesh._base import (
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    Delivery,
    Entry,
    Event,
    Mesh,
    StartFrom,
    Subscription,
    Transaction,
    TransactionResult,
)
from plait.mesh._codec import (
    DEFAULT_MAX_VALUE_BYTES,
    OnCorrupt,
    skip_corrupt,
    skip_unreadable,
)
from plait.mesh._live import (
    DEFAULT_KEEP_BYTES,
    LiveChannels,
    LiveItem,
    LiveSlice,
    LiveWatch,
)
from plait.mesh._urls import redact_url

DEFAULT_MESH_URL = "sqlite:///.plait/mesh.db"
"""The embedded default: a SQLite file under the working directory."""

SUPPORTED_SCHEMES = ("memory", "sqlite", "redis", "rediss", "postgresql", "postgres")


MESH_DIR = ".plait"
"""The directory holding a default mesh, found by walking up from the working directory."""


def find_mesh(start: Path | None = None) -> str | None:
    """The default mesh's URL if there is one: ``PLAIT_HOME``, else the nearest ``.plait/``.

    ``PLAIT_HOME`` names the directory itself (its ``mesh.db`` is the mesh) and is
    returned whether or not it exists yet; otherwise the search walks up from ``start``
    (default: the working directory) to the nearest directory holding ``.plait/``.
    """
    home = os.environ.get("PLAIT_HOME")
    if home:
        return f"sqlite:///{Path(home).absolute() / 'mesh.db'}"
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / MESH_DIR).is_dir():
            return f"sqlite:///{folder / MESH_DIR / 'mesh.db'}"
    return None


def resolve_mesh_url(url: str | None = None) -> str:
    """The mesh URL to use: the argument, else ``PLAIT_MESH``, else the default mesh.

    The default is :func:`find_mesh`'s, else a new ``.plait/mesh.db`` under the working
    directory.
    """
    return url or os.environ.get("PLAIT_MESH") or find_mesh() or DEFAULT_MESH_URL


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite://`` URL (relative to the working directory), else None."""
    if _scheme(url) != "sqlite":
        return None
    path = url.split("://", 1)[1].split("?", 1)[0]
    if path.startswith("/"):
        path = path[1:]  # sqlite:///rel/path -> rel/path; sqlite:////abs -> /abs
    return Path(path or DEFAULT_MESH_URL.split(":///", 1)[1])


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def mesh_class(url: str | None = None) -> type[Mesh]:
    """The backend class a mesh ``url`` opens (None: the default mesh's), to ask what
    that kind of mesh is (:attr:`Mesh.shares_across_machines`, :attr:`Mesh.reach`)
    before opening one.

    Raises:
        ConfigError: the URL's scheme is not supported, or its driver is not installed.
    """
    scheme = _scheme(resolve_mesh_url(url))
    if scheme == "memory":
        from plait.mesh.memory import MemoryMesh

        return MemoryMesh
    if scheme == "sqlite":
        from plait.mesh.sqlite import SqliteMesh

        return SqliteMesh
    if scheme in ("redis", "rediss"):
        try:
            from plait.mesh.redis import RedisMesh
        except ImportError:
            raise ConfigError("a Redis mesh needs redis: pip install 'plait[redis]'") from None
        return RedisMesh
    if scheme in ("postgresql", "postgres"):
        try:
            from plait.mesh.postgres import PostgresMesh
        except ImportError:
            raise ConfigError(
                "a PostgreSQL mesh needs psycopg: pip install 'plait[postgres]'"
            ) from None
        return PostgresMesh
    raise _unsupported(resolve_mesh_url(url))


def absolute_mesh_url(url: str) -> str:
    """``url`` naming the same mesh from any working directory: a relative SQLite path
    made absolute (other URLs are returned as they are)."""
    path = sqlite_path(url)
    if path is None or path.is_absolute():
        return url
    query = url.partition("?")[2]
    return f"sqlite:///{path.absolute()}" + (f"?{query}" if query else "")


def _unsupported(url: str) -> ConfigError:
    return ConfigError(
        f"unsupported mesh URL {redact_url(url)!r}: the scheme must be one of "
        + ", ".join(f"{s}://" for s in SUPPORTED_SCHEMES)
        + " (for example memory://, sqlite:///.plait/mesh.db, redis://127.0.0.1:6379/0 or"
        " postgresql://user@127.0.0.1:5432/db)"
    )


def open_mesh(
    url: str | None = None,
    *,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    connect_timeout: float = 5.0,
    **options: Any,
) -> Mesh:
    """A mesh for ``url``; use it as ``async with open_mesh(url) as mesh``.

    Args:
        url: the mesh URL (see the module docstring); None uses ``PLAIT_MESH`` or the
            SQLite default.
        max_value_bytes: the largest encoded value or event payload accepted.
        connect_timeout: seconds to wait for a network backend before giving up.
        **options: backend options (``busy_timeout``, ``synchronous`` for SQLite;
            ``prefix`` for Redis).

    Raises:
        ConfigError: the URL's scheme is not supported or the URL is malformed.
    """
    url = resolve_mesh_url(url)
    if max_value_bytes <= 0:
        raise ConfigError(f"max_value_bytes must be positive, got {max_value_bytes}")
    scheme = _scheme(url)
    if scheme == "memory":
        from plait.mesh.memory import MemoryMesh

        return MemoryMesh(max_value_bytes=max_value_bytes)
    if scheme == "sqlite":
        from plait.mesh.sqlite import SqliteMesh

        path = sqlite_path(url)
        assert path is not None
        for name, values in parse_qs(url.partition("?")[2]).items():
            if name != "synchronous":
                raise ConfigError(
                    f"unknown SQLite mesh URL option {name!r} in {url!r}: the only one is "
                    "synchronous (e.g. sqlite:///.plait/mesh.db?synchronous=full)"
                )
            options.setdefault(name, values[-1])
        return SqliteMesh(path, max_value_bytes=max_value_bytes, **options)
    if scheme in ("redis", "rediss"):
        from plait.mesh.redis import RedisMesh

        try:
            query = parse_qs(urlsplit(url).query)
        except ValueError as exc:  # an unclosed "[" of an IPv6 host, say
            raise ConfigError(f"malformed Redis mesh URL {redact_url(url)!r}: {exc}") from None
        prefix = options.pop("prefix", None) or (query.get("prefix") or [""])[0]
        return RedisMesh(
            url,
            prefix=prefix,
            max_value_bytes=max_value_bytes,
            connect_timeout=connect_timeout,
            **options,
        )
    if scheme in ("postgresql", "postgres"):
        kind = mesh_class(url)
        return kind(  # type: ignore[call-arg]
            url, max_value_bytes=max_value_bytes, connect_timeout=connect_timeout, **options
        )
    raise _unsupported(url)


__all__ = [
    "DEFAULT_KEEP_BYTES",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_MESH_URL",
    "DEFAULT_VISIBILITY_TIMEOUT_MS",
    "MESH_DIR",
    "Backoff",
    "Delivery",
    "Entry",
    "Event",
    "LiveChannels",
    "LiveItem",
    "LiveSlice",
    "LiveWatch",
    "Mesh",
    "OnCorrupt",
    "StartFrom",
    "Subscription",
    "Transaction",
    "TransactionResult",
    "absolute_mesh_url",
    "find_mesh",
    "mesh_class",
    "open_mesh",
    "redact_url",
    "resolve_mesh_url",
    "skip_corrupt",
    "skip_unreadable",
    "sqlite_path",
]
