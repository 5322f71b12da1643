"""Building a serving process: one runtime, its run host and its heartbeat.

Every process that serves runs — ``plait worker``, a foreground ``plait graph run``,
the tests — is built here, with what it serves with given explicitly: the tools, the
default model, the working directory. Nothing is looked up later: the runtime hands the
run host to each run owner it activates (``ctx.services``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from plait.actors import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    ActorRuntime,
    LocalRuntime,
    TopicRouter,
    new_host_id,
)
from plait.mesh import Mesh
from plait.models import Model
from plait.programs import AgentsPort
from plait.programs.sandbox import warm_pool
from plait.runs.host import RunHost
from plait.runs.record import PROGRESS_KEPT_S
from plait.runs.serving import heartbeat
from plait.runs.store import RunStore
from plait.tools import ToolRegistry

R = TypeVar("R", bound=ActorRuntime)


class AgentsFactory(Protocol):
    """Builds the agent actors' service of a serving process (``plait.agents.Agents``)."""

    def __call__(self, mesh: Mesh, *, model: Model | None, tools: ToolRegistry) -> AgentsPort: ...


@dataclass(frozen=True)
class Serving(Generic[R]):
    """A serving process: its runtime and its run host.

    Attributes:
        runtime: the actor runtime serving the mesh's mailboxes.
        host: the run host its run owners use.
    """

    runtime: R
    host: RunHost


@contextlib.asynccontextmanager
async def serve(
    mesh: Mesh,
    *,
    runtime: Callable[..., R] = LocalRuntime,  # type: ignore[assignment]
    tools: ToolRegistry | None = None,
    model: Model | None = None,
    cwd: Path | None = None,
    only_run: str | None = None,
    tick_ms: int = 60_000,
    progress_kept_s: float = PROGRESS_KEPT_S,
    visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    drain_timeout_s: float = 30.0,
    store: RunStore | None = None,
    beat: bool = True,
    agents: AgentsFactory | None = None,
    host_id: str | None = None,
) -> AsyncIterator[Serving[R]]:
    """Serve runs on ``mesh`` in this process for the block, then drain.

    Args:
        mesh: the mesh of the runs.
        runtime: builds the actor runtime to serve with, called as every
            :class:`~plait.actors.ActorRuntime` is constructed (the mesh, then ``host``,
            ``services``, ``accepts``, ``visibility_timeout_ms``, ``max_attempts`` and
            ``drain_timeout_s`` by keyword): a runtime class, or a ``functools.partial``
            of one with its own options (default :class:`~plait.actors.LocalRuntime`).
        tools: the tools offered (default: the built-in ones).
        model: the model of every agent of a run that names none (default: each agent
            profile's own).
        cwd: where tools work for runs whose record pins no workspace (default: the
            working directory).
        only_run: serve only this run and its child runs (a foreground ``graph run``).
        tick_ms: how often a parked run re-checks its decision as a fallback.
        progress_kept_s: how long a finished run's progress topic is kept.
        visibility_timeout_ms: how long before a dead process's unacked work is taken.
        max_attempts: deliveries of a wake after which it is dead-lettered.
        drain_timeout_s: how long work in flight may finish when the block ends.
        store: the run host's reads (default: fresh ones).
        beat: keep this process's heartbeat (``serving/<host>``) for the block.
        agents: builds the agent actors' service the programs of runs get as ``agents``
            (:class:`plait.agents.Agents`, passed in by the layer above); None: they get
            an agents capability that refuses.
        host_id: the host id of the runtime and run host (default: a new one, see
            :func:`~plait.actors.new_host_id`); a Ray host gives its own.

    Beside the runtime, a :class:`~plait.actors.TopicRouter` forwards subscribed topics
    into the mailboxes this process serves, and the program sandbox's pool keeps warm
    processes from the first program on (:func:`~plait.programs.sandbox.warm_pool`).
    """
    host = RunHost(
        mesh,
        host=host_id or new_host_id(),
        model=model,
        tools=tools,
        cwd=cwd,
        tick_ms=tick_ms,
        progress_kept_s=progress_kept_s,
        only_run=only_run,
        store=store,
    )
    if agents is not None:
        host.env.agents = agents(mesh, model=model, tools=host.tools)
    actors = runtime(
        mesh,
        host=host.id,
        visibility_timeout_ms=visibility_timeout_ms,
        max_attempts=max_attempts,
        drain_timeout_s=drain_timeout_s,
        accepts=host.accepts,
        services=host,
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(warm_pool())  # program texts' sandbox processes, closed after
        await stack.enter_async_context(actors)
        await stack.enter_async_context(TopicRouter(actors))
        if beat:
            await stack.enter_async_context(
                heartbeat(mesh, actors.host, tools=host.tools.names(), run_id=only_run)
            )
        yield Serving(actors, host)


__all__ = ["Serving", "serve"]
