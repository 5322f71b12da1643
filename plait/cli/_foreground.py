"""What serves a run the CLI starts or resumes: a worker if one is live, else this process.

A foreground ``graph run`` or ``resume`` never serves other runs on the mesh: with a live
worker it only watches; with none it serves its own run (and its child runs) until it
settles, and says that nothing else is served.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio

from plait.actors import LeasedRuntime, LocalRuntime, tune_gc_for_serving
from plait.agents import Agents
from plait.cli._output import say, styled
from plait.cli._ray import ensure_hosts
from plait.cluster.kinds import SERVING_KINDS
from plait.mcp import list_servers, offered_tools
from plait.mesh import Mesh
from plait.programs import DEFAULT_CATALOG
from plait.runs import RunRecord, serve
from plait.runs.env import graph_needs
from plait.runs.heartbeats import NO_WORKER, live_heartbeats, missing_tools, workers
from plait.runs.record import owner_id
from plait.tools import ToolRegistry, default_registry, serving_registry

T = TypeVar("T")

INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells expect."""


async def warn_if_unserved(mesh: Mesh) -> None:
    """Say on stderr when no live worker serves ``mesh``."""
    if not await workers(mesh):
        say(NO_WORKER, stderr=True)


SERVING_HERE = (
    "this process serves run {run_id} until it settles (no `plait worker` serves this mesh)"
)
"""What a foreground command says, as information, when it serves its run itself."""


@asynccontextmanager
async def serving_run(
    mesh: Mesh, rec: RunRecord, *, ray_url: str | None = None, quiet: bool = False
) -> AsyncIterator[LocalRuntime | None]:
    """Have ``rec`` served for the block: by a live worker, else by this process; with
    ``ray_url`` (``--runtime ray``) by Ray hosts on that mesh, started if none serves.

    Serving the run here is the documented default, not a fault: it is said once, as
    information (:data:`SERVING_HERE`), and not at all when ``quiet`` (``graph resume``
    of a run whose start said it already).

    Yields this process's runtime when it serves the run (only that run and its child
    runs), None when a worker does and this process only watches.
    """
    if ray_url is not None:
        if not await workers(mesh):
            await ensure_hosts(ray_url)
        yield None
        return
    if await workers(mesh):
        yield None
        return
    tune_gc_for_serving()
    if not quiet:
        say(styled(SERVING_HERE.format(run_id=rec.run_id), "dim"), stderr=True)
    # Leases only its run's partition, and releases it to a worker that starts.
    leased = functools.partial(LeasedRuntime, family=owner_id(rec.run_id))
    registry = default_registry()
    async with (
        offered_tools(mesh, registry),
        serve(
            mesh,
            runtime=leased,
            tools=registry,
            only_run=rec.run_id,
            agents=Agents,
            programs=DEFAULT_CATALOG,
            kinds=SERVING_KINDS,
        ) as serving,
    ):
        yield serving.runtime


async def tools_nobody_offers(mesh: Mesh, rec: RunRecord) -> list[str]:
    """The tools ``rec``'s graph names that no live worker offers all of (with none, that
    this process does not offer): while any is missing, no node of the run runs."""
    needed = await graph_needs(mesh, rec)
    # With no worker this process serves, with the declared MCP servers' tools too.
    local = default_registry().names() + [f"{s.name}.*" for s in await list_servers(mesh)]
    offers = [w.tools for w in await workers(mesh)] or [local]
    return min((missing_tools(needed, offered) for offered in offers), key=len)


async def who_offers(mesh: Mesh, missing: list[str]) -> str:
    """What would offer the ``missing`` tools: a worker started with ``--tools``, or,
    for those of a declared MCP server, one where that server can start."""
    declared = {s.name for s in await list_servers(mesh)}
    servers = sorted({t.partition(".")[0] for t in missing} & declared)
    if not servers:
        return "`plait worker --tools MODULE` offering them serves this mesh"
    return (
        f"a worker or Ray host where MCP server(s) {', '.join(servers)} can start serves "
        f"this mesh (see `plait mcp show {servers[0]}`)"
    )


def env_tools() -> list[str]:
    """The ``pkg.module[:NAME]`` references in ``PLAIT_TOOLS`` (comma-separated)."""
    return [ref.strip() for ref in os.environ.get("PLAIT_TOOLS", "").split(",") if ref.strip()]


async def known_tools(mesh: Mesh) -> tuple[ToolRegistry, set[str]]:
    """The tools a graph may name: this process's (built-in and of ``PLAIT_TOOLS``), and
    the names of all of them with those a live worker offers and ``SERVER.*`` of each
    declared MCP server (see :func:`plait.tools.names_match`)."""
    registry = serving_registry(env_tools())
    offered = set(registry.names())
    for beat in await live_heartbeats(mesh):
        offered.update(beat.tools)
    # A declared MCP server's tools are known by its name (SERVER.*) before any worker
    # has listed them.
    offered.update(f"{server.name}.*" for server in await list_servers(mesh))
    return registry, offered


async def interruptible(
    body: Callable[[], Awaitable[T]], on_interrupt: Callable[[], None]
) -> T | None:
    """``body()``'s result, or None after Ctrl-C (``on_interrupt`` says what it means).

    A second Ctrl-C exits the process at once.
    """
    result: list[T] = []
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:

            async def main() -> None:
                result.append(await body())
                tg.cancel_scope.cancel()

            async def interrupt() -> None:
                async for _ in signals:
                    on_interrupt()
                    tg.cancel_scope.cancel()
                    return

            tg.start_soon(main)
            tg.start_soon(interrupt)
    if not result:
        # What is left is shutting down: a second Ctrl-C skips it.
        signal.signal(signal.SIGINT, lambda *_: os._exit(INTERRUPTED))
        return None
    return result[0]


__all__ = [
    "INTERRUPTED",
    "SERVING_HERE",
    "env_tools",
    "interruptible",
    "known_tools",
    "serving_run",
    "tools_nobody_offers",
    "warn_if_unserved",
    "who_offers",
]
