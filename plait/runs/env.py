"""The executor environment of a run: models, agent profiles, tools, its workspace.

:class:`RunEnvironment` gives the owner what a node's executor needs (an
:class:`~plait.graphs.ports.ExecEnv`), and answers the tool questions a host asks
about a run: what its graph may call, whether a node's effect is already there
(``verify``) and whether a tool only reads.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

from plait.decisions import DecisionAsker
from plait.errors import ConfigError, GraphError
from plait.graphs.compiled import CompiledGraph
from plait.graphs.engine import NodeResult, node_of
from plait.graphs.ports import ExecEnv
from plait.graphs.state import Attempt
from plait.mesh import Mesh
from plait.models import Model, load_model
from plait.profiles import AgentProfile, profiles_map
from plait.programs import AgentsPort, ProgramCatalog
from plait.runs.channel import RunChannels
from plait.runs.mesh_ports import MeshHistories, RunDecisions
from plait.runs.record import RunRecord
from plait.runs.shared_loads import SharedLoads
from plait.runs.start import child_runner
from plait.runs.store import Lru, RunStore
from plait.tools import ToolContext, ToolRegistry

PROFILE_TTL_S = 5.0
"""How long a host uses agent profiles it read before reading them again."""

_AGENTS_KEPT = 1_024  # graph versions (and reads of their profiles) a host remembers


class RunEnvironment:
    """What the nodes of runs served by one process run with.

    Args:
        mesh: the mesh of the runs.
        store: the process's reads (its conversation cache is the executors').
        board: where human questions and approvals are raised.
        tools: the tools this process offers.
        model: the model of every agent of a run that names none (None: each agent
            profile's own).
        cwd: where tools work for runs whose record pins no workspace.
        agents: the agent actors' service program nodes get (None: one that refuses).
        programs: the catalog program nodes look refs up in (None: the default one).
        channels: the live channels nodes stream their models' replies to (None: they
            do not stream).
    """

    def __init__(
        self,
        mesh: Mesh,
        store: RunStore,
        board: DecisionAsker,
        *,
        tools: ToolRegistry,
        model: Model | None,
        cwd: Path,
        agents: AgentsPort | None = None,
        programs: ProgramCatalog | None = None,
        channels: RunChannels | None = None,
    ) -> None:
        self.mesh = mesh
        self.channels = channels
        self.store = store
        self.board = board
        self.tools = tools
        self.model = model
        self.cwd = cwd
        self.agents = agents
        self.programs = programs
        self._models: dict[str, Model] = {}
        self._profiles: dict[str, tuple[float, dict[str, AgentProfile]]] = {}
        self._agent_names = Lru(_AGENTS_KEPT)
        self._needs = Lru(_AGENTS_KEPT)
        self._reading: SharedLoads[str, tuple[float, dict[str, AgentProfile]]] = SharedLoads()

    async def env(self, graph: CompiledGraph, rec: RunRecord) -> ExecEnv:
        """The executor environment of one run."""
        decisions = RunDecisions(self.board, rec.run_id, self.mesh)
        workspace = self.workspace(rec)
        return ExecEnv(
            agent=graph.agent,
            run_id=rec.run_id,
            model=self._model(rec.model),
            profiles=await self.profiles(graph),
            tools=self.tools,
            human=decisions,
            approvals=decisions,
            histories=MeshHistories(self.mesh, rec.run_id, self.store.histories, rec.visits),
            subgraphs=child_runner(self.mesh, rec, workspace),
            cwd=workspace,
            protected=self.mesh.local_files,
            mesh=self.mesh,
            agents=self.agents,
            programs=self.programs,
            live=None if self.channels is None else self.channels.port(rec.run_id, rec.attempts),
        )

    def workspace(self, rec: RunRecord) -> Path:
        """Where the run's tools work: pinned in its record, else this process's ``cwd``."""
        return _path(rec.workspace) if rec.workspace else self.cwd

    async def profiles(self, graph: CompiledGraph) -> dict[str, AgentProfile]:
        """The profiles of ``graph``'s agents, re-read at most every PROFILE_TTL_S seconds."""
        return dict((await self._profiles_read(graph))[1])

    async def _profiles_read(self, graph: CompiledGraph) -> tuple[float, dict[str, AgentProfile]]:
        """When ``graph``'s agents' profiles were read (monotonic seconds), and them."""
        key, names = self._agents_of(graph)
        cached = self._profiles.get(key)
        now = time.monotonic()
        if cached is None or now - cached[0] > PROFILE_TTL_S:
            cached = await self._reading.load(key, lambda: self._read_profiles(key, names))
        return cached

    async def _read_profiles(
        self, key: str, names: list[str]
    ) -> tuple[float, dict[str, AgentProfile]]:
        read = (time.monotonic(), await profiles_map(self.mesh, names))
        self._profiles[key] = read
        return read

    def _agents_of(self, graph: CompiledGraph) -> tuple[str, list[str]]:
        """``graph``'s agents, sorted, and their cache key; worked out once per graph
        content (its hash), as every node visit of a run asks."""
        found: tuple[str, list[str]] | None = self._agent_names.get(graph.sha256)
        if found is None:
            names = sorted(graph.agents)
            found = self._agent_names[graph.sha256] = (",".join(names), names)
        return found

    async def needed_tools(self, rec: RunRecord) -> set[str]:
        """Every tool ``rec``'s graph may call (see :meth:`CompiledGraph.tools_needed`)."""
        try:
            graph = await self.store.graph(rec)
            read_at, profiles = await self._profiles_read(graph)
        except (ConfigError, GraphError):
            return set()  # the run's owner fails the run, with that message
        # Asked once per run this process activates: worked out once per graph and
        # read of its profiles.
        key = f"{graph.sha256}@{read_at}"
        found: frozenset[str] | None = self._needs.get(key)
        if found is None:
            found = self._needs[key] = frozenset(graph.tools_needed(profiles))
        return set(found)

    def on_indeterminate(self, graph: CompiledGraph, rec: RunRecord, crashed: Attempt) -> str:
        """What to do with a visit found claimed but not committed: the node's
        ``on_indeterminate``, else its kind's default, told whether the tools it names
        are all safe to call again (read-only or idempotent: such a tool is just retried)."""
        node = node_of(graph, rec, crashed.node)
        if node.on_indeterminate is not None:
            return node.on_indeterminate
        named = graph.tools_named(node.id)
        read_only = bool(named) and all(
            t in self.tools and self.tools.get(t).retry_safe for t in named
        )
        return graph.kind(node.id).on_indeterminate(node, read_only)

    async def verify_effect(
        self, graph: CompiledGraph, rec: RunRecord, key: str, visit: int
    ) -> NodeResult | None:
        """Run the node's ``verify`` check; a result if the effect is already there."""
        check = node_of(graph, rec, key).verify
        if not check:
            return None
        started = time.time()
        found = await self.tools.call(
            check,
            {"run_id": rec.run_id, "node": key, "visit": visit},
            ToolContext(
                run_id=rec.run_id,
                node=key,
                cwd=self.workspace(rec),
                protected=self.mesh.local_files,
            ),
        )
        if isinstance(found, dict) and found.get("done"):
            return NodeResult(value=found.get("value"), started_at=started, ended_at=time.time())
        return None

    def _model(self, spec: str | None) -> Model | None:
        if spec is None:
            return self.model
        model = self._models.get(spec)
        if model is None:
            model = self._models[spec] = load_model(spec)
        return model


async def graph_needs(mesh: Mesh, rec: RunRecord) -> set[str]:
    """Every tool ``rec``'s graph may call, read afresh (for a process that serves none)."""
    store = RunStore(mesh)
    return await RunEnvironment(
        mesh, store, DecisionAsker(mesh), tools=ToolRegistry(), model=None, cwd=Path.cwd()
    ).needed_tools(rec)


@functools.lru_cache(maxsize=256)
def _path(text: str) -> Path:
    """``Path(text)``, built once per workspace: every node of a run asks for it."""
    return Path(text)


__all__ = ["PROFILE_TTL_S", "RunEnvironment", "graph_needs"]
