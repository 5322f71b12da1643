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

from pydantic import BaseModel

from plait.decisions import DecisionBoard
from plait.errors import ConfigError, GraphError
from plait.graphs.engine import NodeResult, node_of
from plait.graphs.ports import ExecEnv
from plait.graphs.spec import GraphSpec, default_on_indeterminate
from plait.graphs.state import Attempt
from plait.mesh import Mesh
from plait.models import Model, load_model
from plait.profiles import AgentProfile, profiles_map
from plait.programs import AgentsPort, ProgramCatalog
from plait.runs.ports import MeshHistories, RunDecisions
from plait.runs.record import RunRecord
from plait.runs.serving import graph_tools
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
    """

    def __init__(
        self,
        mesh: Mesh,
        store: RunStore,
        board: DecisionBoard,
        *,
        tools: ToolRegistry,
        model: Model | None,
        cwd: Path,
        agents: AgentsPort | None = None,
        programs: ProgramCatalog | None = None,
    ) -> None:
        self.mesh = mesh
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

    async def env(self, spec: GraphSpec, rec: RunRecord) -> ExecEnv:
        """The executor environment of one run."""
        decisions = RunDecisions(self.board, rec.run_id, self.mesh)
        workspace = self.workspace(rec)
        return ExecEnv(
            agent=spec.agent,
            run_id=rec.run_id,
            model=self._model(rec.model),
            profiles=await self.profiles(spec),
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
        )

    def workspace(self, rec: RunRecord) -> Path:
        """Where the run's tools work: pinned in its record, else this process's ``cwd``."""
        return _path(rec.workspace) if rec.workspace else self.cwd

    async def profiles(self, spec: GraphSpec) -> dict[str, AgentProfile]:
        """The profiles of ``spec``'s agents, re-read at most every PROFILE_TTL_S seconds."""
        return dict((await self._profiles_read(spec))[1])

    async def _profiles_read(self, spec: GraphSpec) -> tuple[float, dict[str, AgentProfile]]:
        """When ``spec``'s agents' profiles were read (monotonic seconds), and them."""
        key, names = self._agents_of(spec)
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

    def _agents_of(self, spec: GraphSpec) -> tuple[str, list[str]]:
        """``spec``'s agents, sorted, and their cache key; worked out once per spec
        content (its hash), as every node visit of a run asks."""
        sha = spec.sha256()
        found: tuple[str, list[str]] | None = self._agent_names.get(sha)
        if found is None:
            names = sorted(_agents(spec))
            found = self._agent_names[sha] = (",".join(names), names)
        return found

    async def needed_tools(self, rec: RunRecord) -> set[str]:
        """Every tool ``rec``'s graph may call (see :func:`plait.runs.serving.graph_tools`)."""
        try:
            spec = await self.store.spec(rec)
            read_at, profiles = await self._profiles_read(spec)
        except (ConfigError, GraphError):
            return set()  # the run's owner fails the run, with that message
        # Asked once per run this process activates: worked out once per graph and
        # read of its profiles.
        key = f"{spec.sha256()}@{read_at}"
        found: frozenset[str] | None = self._needs.get(key)
        if found is None:
            found = self._needs[key] = frozenset(graph_tools(spec, profiles))
        return set(found)

    def on_indeterminate(self, spec: GraphSpec, rec: RunRecord, crashed: Attempt) -> str:
        """What to do with a visit found claimed but not committed: the node's
        ``on_indeterminate``, else its default (a read-only tool is just retried)."""
        node = node_of(spec, rec, crashed.node)
        if node.on_indeterminate is not None:
            return node.on_indeterminate
        # Only some kinds have a tool: asking the others would raise inside pydantic.
        tool = getattr(node, "tool", None) if _has_field(type(node), "tool") else None
        read_only = bool(tool and tool in self.tools and self.tools.get(tool).read_only)
        return default_on_indeterminate(node, read_only)

    async def verify_effect(
        self, spec: GraphSpec, rec: RunRecord, key: str, visit: int
    ) -> NodeResult | None:
        """Run the node's ``verify`` check; a result if the effect is already there."""
        check = getattr(node_of(spec, rec, key), "verify", None)
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


def _agents(spec: GraphSpec) -> set[str]:
    named = {spec.agent} | {
        a for n in spec.nodes if isinstance(a := getattr(n, "agent", None), str)
    }
    return {a for a in named if a}


async def graph_needs(mesh: Mesh, rec: RunRecord) -> set[str]:
    """Every tool ``rec``'s graph may call, read afresh (for a process that serves none)."""
    store = RunStore(mesh)
    return await RunEnvironment(
        mesh, store, DecisionBoard(mesh), tools=ToolRegistry(), model=None, cwd=Path.cwd()
    ).needed_tools(rec)


@functools.cache
def _has_field(kind: type[BaseModel], name: str) -> bool:
    return name in kind.model_fields


@functools.lru_cache(maxsize=256)
def _path(text: str) -> Path:
    """``Path(text)``, built once per workspace: every node of a run asks for it."""
    return Path(text)


__all__ = ["PROFILE_TTL_S", "RunEnvironment", "graph_needs"]
