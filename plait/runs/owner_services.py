"""What the run owners of one process share, made of small parts with one job each.

An :class:`OwnerServices` is built once per serving process (by :func:`plait.runs.serve`),
held by its :class:`~plait.runs.RunServices` and handed to its runtime, whose run owners
get it through their actor context:

- :class:`~plait.runs.store.RunStore` reads records, specs, outputs, conversations;
- :class:`~plait.runs.commit.RunCommit` writes every transition;
- :class:`~plait.runs.env.RunEnvironment` gives executors their models, profiles,
  tools and workspace;
- :meth:`OwnerServices.accepts` decides which actors the runtime activates;
- :meth:`OwnerServices.partitions_gained` wakes the runs of partitions a leased runtime
  takes over;
- :meth:`OwnerServices.partitions_to_avoid` names the partitions of runs waiting for a
  tool another live worker offers, which the leased runtime then leaves to it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from plait.actors import LeasedRuntime, new_host_id, partition_of
from plait.decisions import DecisionAsker
from plait.mesh import DEFAULT_KEEP_BYTES, Mesh
from plait.models import Model
from plait.programs import AgentsPort, ProgramCatalog
from plait.runs.channel import RunChannels
from plait.runs.commit import RunCommit
from plait.runs.env import RunEnvironment
from plait.runs.heartbeats import live_heartbeats, missing_tools, serves_run
from plait.runs.live import TAKEOVER, live_in
from plait.runs.record import owner_id
from plait.runs.store import Lru, RunStore
from plait.tools import ToolRegistry, default_registry

log = logging.getLogger("plait.runs")


class OwnerServices:
    """What the run owners of one process share: reads, writes, environment, decisions.

    Args:
        mesh: the mesh of the runs.
        host: this process's runtime host id (default: a fresh one).
        model: a model answering for every agent of every run that names none.
        tools: the tool registry (default: the built-in tools).
        cwd: where tools work for runs whose record pins no workspace.
        tick_ms: how often a parked run re-checks its decision as a fallback.
        only_run: serve only this run and its child runs (a foreground ``graph run``);
            the runtime hands other actors' messages back for another process.
        store: the reads to use (default: a fresh :class:`RunStore`).
        agents: the agent actors' service program nodes get (None: one that refuses).
        programs: the catalog program nodes look refs up in (None: the default one).
        live_keep_bytes: what each run's live channel keeps (see
            :mod:`plait.runs.channel`).

    Attributes:
        id: the host id its claims and audit events name.
        store, commit, env, board: its parts (see the module docstring).
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        host: str | None = None,
        model: Model | None = None,
        tools: ToolRegistry | None = None,
        cwd: Path | None = None,
        tick_ms: int = 60_000,
        only_run: str | None = None,
        store: RunStore | None = None,
        agents: AgentsPort | None = None,
        programs: ProgramCatalog | None = None,
        live_keep_bytes: int = DEFAULT_KEEP_BYTES,
    ) -> None:
        self.mesh = mesh
        self.channels = RunChannels(mesh, keep_bytes=live_keep_bytes)
        self.id = host or new_host_id()
        self.started_at = time.time()
        """When this host started: a claim under its id made before then is another
        incarnation's (a host restarted under the same id, as Ray restarts one)."""
        self.only_run = only_run
        self.store = store or RunStore(mesh)
        self.board = DecisionAsker(mesh)
        self.env = RunEnvironment(
            mesh,
            self.store,
            self.board,
            tools=tools or default_registry(),
            model=model,
            cwd=cwd or Path.cwd(),
            agents=agents,
            programs=programs,
            channels=self.channels,
        )
        self.commit = RunCommit(
            mesh,
            store=self.store,
            board=self.board,
            actor=self.id,
            tick_ms=tick_ms,
            channels=self.channels,
        )
        self._servable: Lru = Lru()
        self._lacking: dict[str, list[str]] = {}
        """Runs refused here for want of tools, with the tools they lack."""

    async def partitions_gained(self, runtime: LeasedRuntime, gained: set[int]) -> None:
        """Wake the runs in flight under partitions its runtime took over (see
        :mod:`plait.runs.live`): whatever held them before may have left no wake."""
        found = await live_in(self.mesh, gained, only_run=self.only_run)
        await self.commit.wake_all(found, TAKEOVER)
        if found:
            log.info(
                "took over partition(s) %s: woke %d run(s) in flight", sorted(gained), len(found)
            )

    async def partitions_to_avoid(self, count: int) -> set[int]:
        """The partitions (of ``count``) of runs refused here for want of a tool that a
        live worker other than this one offers: left to it while such a run is in
        flight (the leased runtime releases them, see :mod:`plait.actors.leases`)."""
        if not self._lacking or self.only_run is not None:
            return set()
        others = [
            beat
            for beat in await live_heartbeats(self.mesh)
            if beat.serves == "all" and beat.host != self.id
        ]
        avoid: set[int] = set()
        for run_id, missing in list(self._lacking.items()):
            rec, _ = await self.store.record(run_id, fresh=True)
            if rec is None or rec.terminal:
                del self._lacking[run_id]  # the need ended
            elif any(not missing_tools(missing, beat.tools) for beat in others):
                avoid.add(partition_of(owner_id(run_id), count))
        return avoid

    @property
    def tools(self) -> ToolRegistry:
        """The tools this process offers."""
        return self.env.tools

    async def accepts(self, actor_id: str) -> bool:
        """Whether this process's runtime activates ``actor_id``.

        A run whose graph names a tool this process does not offer is left for a process
        that does, before any of its nodes runs here; with ``only_run``, only that run and
        its children are served (and no other actor).
        """
        owners = owner_id("")
        if not actor_id.startswith(owners):
            return self.only_run is None
        if self.only_run is not None and not serves_run(self.only_run, actor_id):
            return False
        run_id = actor_id[len(owners) :]
        if self._servable.get(run_id) is True:
            return True
        rec, _ = await self.store.record(run_id)
        if rec is None or rec.terminal:
            return True  # its owner drops what it cannot serve
        missing = missing_tools(await self.env.needed_tools(rec), self.tools.names())
        if missing:
            if self._servable.get(run_id) is None:
                log.warning(
                    "run %s needs tool(s) %s that this process does not offer: left queued "
                    "for a process that offers them (started with --tools, or where their "
                    "MCP server starts)",
                    run_id,
                    ", ".join(missing),
                )
                self._servable[run_id] = False
            self._lacking[run_id] = missing
            return False
        self._servable[run_id] = True
        self._lacking.pop(run_id, None)
        return True


__all__ = ["OwnerServices"]
