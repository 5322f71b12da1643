"""Who serves runs on a mesh: heartbeats of serving processes, and the tools a run needs.

Every process that serves runs (``plait worker``, and ``plait graph run`` or ``resume``
while it serves its own run) keeps a heartbeat at ``serving/<host>``: its host id, pid,
when it started, when it last beat, what it serves (``"all"`` runs, or one run and its
children) and the tools it offers. A heartbeat older than :data:`STALE_S` is a dead
process's. Commands read them to say when nothing serves the mesh, and to tell whether a
run's graph names a tool that no serving process offers (see
:meth:`plait.graphs.compiled.CompiledGraph.tools_needed`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Literal

import anyio
from pydantic import BaseModel, ValidationError

from plait.errors import PlaitError
from plait.mesh import Mesh

log = logging.getLogger("plait.runs")

HEARTBEAT_PREFIX = "serving/"
"""The mesh key prefix of heartbeats."""

MESH_KEYS = (HEARTBEAT_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

BEAT_S = 2.0
"""How often a serving process renews its heartbeat."""

STALE_S = 10.0
"""A heartbeat not renewed for this long is a dead (or unreachable) process's."""

NO_WORKER = "no worker is serving this mesh: start `plait worker`"
"""What a command says when no live process serves every run."""


class Heartbeat(BaseModel):
    """What one serving process says of itself.

    Attributes:
        host: the runtime's host id.
        pid: the process id.
        started: when it started serving (epoch seconds).
        beat: when it last renewed this heartbeat (epoch seconds).
        serves: ``"all"`` (every run on the mesh) or ``"run"`` (only ``run_id`` and its
            child runs).
        run_id: the run served, when ``serves`` is ``"run"``.
        tools: the names of the tools it offers.
    """

    host: str
    pid: int
    started: float
    beat: float
    serves: Literal["all", "run"]
    run_id: str | None = None
    tools: list[str] = []

    def live(self, now: float | None = None) -> bool:
        """True while the process renews its heartbeat."""
        return (now if now is not None else time.time()) - self.beat < STALE_S


async def live_heartbeats(mesh: Mesh) -> list[Heartbeat]:
    """The heartbeats of the processes serving ``mesh`` now (a corrupt one is skipped)."""
    now = time.time()
    found: list[Heartbeat] = []
    async for entry in mesh.scan(HEARTBEAT_PREFIX):
        try:
            beat = Heartbeat.model_validate(entry.value)
        except ValidationError:
            log.warning("skipping the corrupt heartbeat at %r", entry.key)
            continue
        if beat.live(now):
            found.append(beat)
    return found


async def workers(mesh: Mesh) -> list[Heartbeat]:
    """The live processes that serve every run (``plait worker``)."""
    return [b for b in await live_heartbeats(mesh) if b.serves == "all"]


@contextlib.asynccontextmanager
async def heartbeat(
    mesh: Mesh,
    host: str,
    *,
    tools: Iterable[str] | Callable[[], Iterable[str]],
    run_id: str | None = None,
) -> AsyncIterator[Heartbeat]:
    """Keep this process's heartbeat in ``mesh`` for the block; removed when it ends.

    ``tools`` is what it offers, or what says so at each beat (tools an MCP server
    adds while the process serves are advertised from the next beat on).
    ``run_id`` None means the process serves every run; else that run and its children.
    A beat that cannot be written (the mesh unreachable for a moment) is tried again at
    the next one: a missed beat never stops the serving.
    """
    if callable(tools):
        current = tools
    else:
        fixed = sorted(tools)  # an iterator is read once

        def current() -> Iterable[str]:
            return fixed

    def offered() -> list[str]:
        return sorted(current())

    now = time.time()
    beat = Heartbeat(
        host=host,
        pid=os.getpid(),
        started=now,
        beat=now,
        serves="all" if run_id is None else "run",
        run_id=run_id,
        tools=offered(),
    )
    key = HEARTBEAT_PREFIX + host
    await mesh.put(key, beat.model_dump())

    async def renew() -> None:
        while True:
            await anyio.sleep(BEAT_S)
            beat.beat = time.time()
            beat.tools = offered()
            try:
                await mesh.put(key, beat.model_dump())
            except PlaitError as exc:
                log.warning("cannot renew the heartbeat %s: %s", key, exc)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(renew)
            try:
                yield beat
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True), contextlib.suppress(PlaitError):
            await mesh.delete(key)


def serves_run(run_id: str, actor_id: str) -> bool:
    """True if ``actor_id`` owns run ``run_id`` or one of its child runs."""
    own = f"run:{run_id}"
    return actor_id == own or actor_id.startswith(own + "__")


def missing_tools(needed: Iterable[str], offered: Iterable[str]) -> list[str]:
    """The tools of ``needed`` not in ``offered``, sorted; a needed ``SOURCE.*`` (an MCP
    server's every tool) is offered by any tool of that source, and any tool of a source
    by an offered ``SOURCE.*``."""
    have = set(offered)
    sources = {n.partition(".")[0] for n in have if "." in n}
    return sorted(
        n
        for n in set(needed) - have
        if not (n.endswith(".*") and n[:-2] in sources) and f"{n.partition('.')[0]}.*" not in have
    )


__all__ = [
    "BEAT_S",
    "HEARTBEAT_PREFIX",
    "MESH_KEYS",
    "NO_WORKER",
    "STALE_S",
    "Heartbeat",
    "heartbeat",
    "live_heartbeats",
    "missing_tools",
    "serves_run",
    "workers",
]
