"""Ray hosts serving runs: the run layer's spec for a host, and the host set of a cluster.

A Ray host (:class:`~plait.actors.ray.HostActor`) serving runs builds, inside its
Ray process, what ``plait worker`` builds in its own: owner services with the tools and
default model named here and the tools of the mesh's declared MCP servers (their
sessions kept by the host, see :func:`plait.mcp.offered_tools`), and a
:class:`~plait.actors.ray.HostRuntime` leasing a share of the mailbox partitions
(:func:`plait.runs.serve`). Its heartbeat advertises the tools it offers, so a run
naming an MCP tool waits for a host (or worker) whose server opened. Run owners are virtual
actors inside hosts: a parked run holds no Ray actor, only its record.

Hosts are named ``host-0``, ``host-1``... in a Ray namespace (``plait`` unless another is
given), detached (they outlive the command that started them) and restarted by Ray when
they die. :func:`scale` makes the namespace hold exactly N of them: it adopts the ones
running, starts the missing ones, and drains the ones over N (each finishes its messages
in flight and releases its leases before it ends, so ownership moves without a lost
message; the epoch fence stops a double commit whatever happens).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plait.actors import DEFAULT_LEASE_S, DEFAULT_MAX_ATTEMPTS, MAILBOX_VISIBILITY_TIMEOUT_MS
from plait.actors.ray import (
    DEDICATED_IDLE_S,
    NAMESPACE,
    HostRuntime,
    HostSpec,
    refuse_unshared,
    require_ray,
    spread_nodes,
    start_host,
)
from plait.agents import Agents
from plait.cluster.kinds import SERVING_KINDS
from plait.errors import ConfigError, PlaitError
from plait.mcp import offered_tools
from plait.mesh import Mesh
from plait.models import load_model
from plait.programs import DEFAULT_CATALOG
from plait.runs import serve
from plait.tools import serving_registry

log = logging.getLogger("plait.cluster")

HOST_PREFIX = "host-"
"""Ray hosts serving runs are named this and their index."""

_HOST_NAME = re.compile(rf"^{HOST_PREFIX}(\d+)$")


@dataclass(frozen=True)
class RunsSpec:
    """What a Ray host serving runs builds: picklable, rebuilt on every restart.

    Attributes:
        tools: Python tool references offered besides the built-in ones.
        model: the model of runs that name none (a :func:`~plait.models.load_model` spec).
        cwd: where tools work for runs whose record pins no workspace.
        lease_s: partition lease (the takeover time after a host dies).
        partitions: the mesh's partition count on first use.
        visibility_timeout_ms: how long a dead host's unacked message waits.
        max_attempts: deliveries of a wake after which it is dead-lettered.
        drain_timeout_s: how long work in flight may finish when a host drains.
        dedicated_idle_s: how long a dedicated actor lives without mail.
    """

    tools: tuple[str, ...] = ()
    model: str | None = None
    cwd: str | None = None
    lease_s: float = DEFAULT_LEASE_S
    partitions: int | None = None
    visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    drain_timeout_s: float = 30.0
    dedicated_idle_s: float = DEDICATED_IDLE_S

    @contextlib.asynccontextmanager
    async def serve(self, mesh: Mesh, host: str) -> AsyncIterator[HostRuntime]:
        """Serve every run on ``mesh`` as ``host`` for the block."""
        runtime = functools.partial(
            HostRuntime,
            lease_s=self.lease_s,
            partitions=self.partitions,
            dedicated_idle_s=self.dedicated_idle_s,
        )
        registry = serving_registry(self.tools)
        cwd = Path(self.cwd) if self.cwd else None
        async with (
            offered_tools(mesh, registry, cwd=cwd),
            serve(
                mesh,
                runtime=runtime,
                host_id=host,
                tools=registry,
                model=load_model(self.model) if self.model else None,
                cwd=cwd,
                visibility_timeout_ms=self.visibility_timeout_ms,
                max_attempts=self.max_attempts,
                drain_timeout_s=self.drain_timeout_s,
                agents=Agents,
                programs=DEFAULT_CATALOG,
                kinds=SERVING_KINDS,
            ) as serving,
        ):
            yield serving.runtime


def host_index(name: str) -> int | None:
    """The index in a host's Ray name (``host-3`` is 3), or None for another actor."""
    found = _HOST_NAME.match(name)
    return int(found.group(1)) if found else None


def host_names(namespace: str = NAMESPACE) -> list[str]:
    """The Ray names of the hosts in ``namespace``, by index."""
    ray = require_ray()
    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a.get("namespace") == namespace and host_index(a["name"]) is not None
    ]
    return sorted(names, key=lambda n: host_index(n) or 0)


def _handle(name: str, namespace: str) -> Any:
    return require_ray().get_actor(name, namespace=namespace)


async def host_infos(namespace: str = NAMESPACE, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Each host's info (host id, pid, partitions...) with its ``name``; a host that does
    not answer in time (restarting) shows as ``{"name": ..., "error": ...}``."""

    async def one(name: str) -> dict[str, Any]:
        try:
            info = await asyncio.wait_for(_handle(name, namespace).info.remote(), timeout_s)
        except Exception as exc:
            return {"name": name, "error": f"{type(exc).__name__}: {exc}"}
        return {"name": name, **info}

    return list(await asyncio.gather(*(one(n) for n in host_names(namespace))))


async def started_with(namespace: str = NAMESPACE) -> tuple[str, HostSpec] | None:
    """The mesh URL and spec the lowest host of ``namespace`` serves (None: no host)."""
    for name in host_names(namespace):
        with contextlib.suppress(Exception):
            found: tuple[str, HostSpec] = await _handle(name, namespace).started_with.remote()
            return found
    return None


async def scale(
    url: str | None, spec: HostSpec | None, count: int, *, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """Make ``namespace`` hold exactly ``count`` hosts serving runs.

    Hosts running are adopted as they are (their spec is the one they started with);
    missing ones are started with ``url`` and ``spec``, by default those of a host
    running (``plait cluster scale`` copies them); those over ``count`` are drained,
    then ended. Returns the info of each host kept, once it serves.

    Raises:
        ConfigError: the mesh is one a remote host cannot share, Ray is missing, or no
            URL is given and no host runs to copy it from.
    """
    if url is None or spec is None:
        found = await started_with(namespace)
        if url is None:
            if found is None:
                raise ConfigError(
                    f"no host runs in Ray namespace {namespace!r} to copy its mesh from: "
                    "start them with `plait worker --runtime ray`"
                )
            url = found[0]
        if spec is None:
            spec = found[1] if found else RunsSpec()
    refuse_unshared(url)
    running = host_names(namespace)
    extra = [n for n in running if (host_index(n) or 0) >= count]
    handles = [
        start_host(
            url, spec, name=f"{HOST_PREFIX}{i}", namespace=namespace, detached=True, node=node
        )
        for i, node in enumerate(spread_nodes(count))
    ]
    results = await asyncio.gather(*(h.ready.remote() for h in handles), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        # A host that cannot serve (a mesh it cannot use) would only sit there.
        for handle, result in zip(handles, results, strict=True):
            if isinstance(result, BaseException):
                require_ray().kill(handle, no_restart=True)
        raise _cause(failed[0])
    infos: list[dict[str, Any]] = [r for r in results if isinstance(r, dict)]
    await drain(extra, namespace=namespace)
    return [{"name": f"{HOST_PREFIX}{i}", **info} for i, info in enumerate(infos)]


def _cause(exc: BaseException) -> BaseException:
    """The plait error a Ray task error carries (its ``cause``), or ``exc`` itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, PlaitError) else exc


async def drain(names: list[str] | None = None, *, namespace: str = NAMESPACE) -> int:
    """Drain the named hosts (all of ``namespace``'s by default), then end them; how many."""
    ray = require_ray()
    found = host_names(namespace) if names is None else names
    handles = [_handle(n, namespace) for n in found]
    results = await asyncio.gather(*(h.drain.remote() for h in handles), return_exceptions=True)
    for name, result in zip(found, results, strict=True):
        if isinstance(result, BaseException):
            log.warning("host %s did not drain: %s", name, result)
    for handle in handles:
        ray.kill(handle, no_restart=True)
    return len(handles)


__all__ = [
    "HOST_PREFIX",
    "RunsSpec",
    "drain",
    "host_index",
    "host_infos",
    "host_names",
    "scale",
    "started_with",
]
