"""Building a serving process: one runtime, its run services and its heartbeat.

Every process that serves runs — ``plait worker``, a foreground ``plait graph run``,
the tests — is built here, with what it serves with given explicitly: the tools, the
default model, the programs it runs by name, the actor kinds it runs, the working
directory. Nothing is looked up later: the runtime hands the :class:`RunServices` built
here to each actor it activates (``ctx.services``), and the agents service in them is
built once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from plait.actors import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    ActorRuntime,
    Handler,
    LocalRuntime,
    TopicRouter,
    new_host_id,
)
from plait.mesh import Mesh
from plait.models import Model
from plait.programs import DEFAULT_CATALOG, AgentsPort, ProgramCatalog
from plait.programs.sandbox import warm_pool
from plait.runs.heartbeats import heartbeat
from plait.runs.owner_services import OwnerServices
from plait.runs.services import RunServices
from plait.runs.store import RunStore
from plait.telemetry import STATE, configure, wanted
from plait.tools import ToolRegistry, default_registry

R = TypeVar("R", bound=ActorRuntime)


class AgentsFactory(Protocol):
    """Builds the agent actors' service of a serving process (``plait.agents.Agents``)."""

    def __call__(
        self,
        mesh: Mesh,
        *,
        model: Model | None,
        tools: ToolRegistry,
        programs: ProgramCatalog,
    ) -> AgentsPort: ...


@dataclass(frozen=True)
class Serving(Generic[R]):
    """A serving process: its runtime and its run services.

    Attributes:
        runtime: the actor runtime serving the mesh's mailboxes.
        services: what its actors are handed (the run host, programs, agents).
    """

    runtime: R
    services: RunServices

    @property
    def owner_services(self) -> OwnerServices:
        """The run host its run owners use."""
        return self.services.owner_services


@contextlib.asynccontextmanager
async def serve(
    mesh: Mesh,
    *,
    runtime: Callable[..., R] = LocalRuntime,  # type: ignore[assignment]
    tools: ToolRegistry | None = None,
    model: Model | None = None,
    programs: ProgramCatalog | None = None,
    kinds: Mapping[str, Handler] | None = None,
    cwd: Path | None = None,
    only_run: str | None = None,
    tick_ms: int = 60_000,
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
            ``drain_timeout_s`` by keyword, and ``handlers`` when ``kinds`` are given):
            a runtime class, or a ``functools.partial`` of one with its own options
            (default :class:`~plait.actors.LocalRuntime`).
        tools: the tools offered (default: the built-in ones).
        model: the model of every agent of a run that names none (default: each agent
            profile's own).
        programs: the programs runs and agents run by name; the only catalog looked in
            while serving (default :data:`~plait.programs.DEFAULT_CATALOG`, what
            ``@plait.program`` collected in this process). Import paths need none.
        kinds: the handlers of the actor kinds this process runs, by kind (an
            :class:`~plait.actors.ActorKind` carries a dead-letter hook too); a kind
            not among them is imported by its reference, once per runtime.
        cwd: where tools work for runs whose record pins no workspace (default: the
            working directory).
        only_run: serve only this run and its child runs (a foreground ``graph run``).
        tick_ms: how often a parked run re-checks its decision as a fallback.
        visibility_timeout_ms: how long before a dead process's unacked work is taken.
        max_attempts: deliveries of a wake after which it is dead-lettered.
        drain_timeout_s: how long work in flight may finish when the block ends.
        store: the run host's reads (default: fresh ones).
        beat: keep this process's heartbeat (``serving/<host>``) for the block.
        agents: builds the agent actors' service, once, for the programs of runs and
            agent actors (:class:`plait.agents.Agents`, passed in by the layer above);
            None: they get an agents capability that refuses.
        host_id: the host id of the runtime and run host (default: a new one, see
            :func:`~plait.actors.new_host_id`); a Ray host gives its own.

    With ``PLAIT_OTEL=1`` in the environment, the process traces (see
    :mod:`plait.telemetry.setup`), wherever it was started from.

    Beside the runtime, a :class:`~plait.actors.TopicRouter` forwards subscribed topics
    into the mailboxes this process serves, and the program sandbox's pool keeps warm
    processes from the first program on (:func:`~plait.programs.sandbox.warm_pool`).
    """
    if wanted() and not STATE.tracing:
        configure()  # PLAIT_OTEL=1 in a process no command line built (a Ray host)
    registry = tools if tools is not None else default_registry()
    catalog = programs if programs is not None else DEFAULT_CATALOG
    service = (
        None if agents is None else agents(mesh, model=model, tools=registry, programs=catalog)
    )
    host = OwnerServices(
        mesh,
        host=host_id or new_host_id(),
        model=model,
        tools=registry,
        cwd=cwd,
        tick_ms=tick_ms,
        only_run=only_run,
        store=store,
        agents=service,
        programs=catalog,
    )
    services = RunServices(host, catalog, service)
    options: dict[str, Any] = {} if kinds is None else {"handlers": dict(kinds)}
    actors = runtime(
        mesh,
        host=host.id,
        visibility_timeout_ms=visibility_timeout_ms,
        max_attempts=max_attempts,
        drain_timeout_s=drain_timeout_s,
        accepts=host.accepts,
        services=services,
        **options,
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(warm_pool())  # program texts' sandbox processes, closed after
        await stack.enter_async_context(actors)
        await stack.enter_async_context(TopicRouter(actors))
        if beat:
            await stack.enter_async_context(
                heartbeat(mesh, actors.host, tools=host.tools.names, run_id=only_run)
            )
        yield Serving(actors, services)


__all__ = ["AgentsFactory", "Serving", "serve"]
