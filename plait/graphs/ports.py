"""What node executors need from the world, as small ports each runner provides.

The in-session runner answers them from memory (answers given up front, histories in
a dict); the durable owner actor answers them from the mesh (decisions, stored
histories, child runs). Executors see only these ports, so one set of executors serves
both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from plait.errors import ConfigError
from plait.graphs.state import Waiting
from plait.mesh import Mesh
from plait.models import Message, Model, load_model
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile
from plait.programs.capabilities import AgentsPort
from plait.programs.registry import ProgramCatalog
from plait.tools import ToolContext, ToolRegistry, default_registry
from plait.tools.workspace import workspace_of


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to a question a node asked."""

    text: str
    by: str = "human"


class HumanPort(Protocol):
    """Asks a person; returns their answer, or a :class:`Waiting` while there is none."""

    async def ask(
        self,
        *,
        key: str,
        visit: int,
        ask: str,
        options: list[str] | None,
        expires_after_s: float | None,
        default: str | None,
        on_expire: str,
    ) -> Answer | Waiting:
        """The answer to ``ask`` for node ``key`` at ``visit``, or what the run waits on."""
        ...


class ApprovalPort(Protocol):
    """Asks a person to approve one tool call."""

    async def approve(
        self, *, key: str, visit: int, tool: str, args: dict[str, Any]
    ) -> bool | Waiting:
        """True if approved, False if rejected, a :class:`Waiting` while undecided."""
        ...


class LivePort(Protocol):
    """Where a node's model streams its reply as it comes: a run's live channel, or an
    in-session ``on_event`` callback. Nothing here is durable: the committed output
    stays the only truth."""

    def delta(self, key: str, visit: int, text: str) -> None:
        """One piece of the reply text node ``key`` (visit ``visit``) streams; must not
        block (it runs between the pieces a model sends)."""
        ...


class HistoryPort(Protocol):
    """Keeps each node's model conversation so its next visit in a loop carries on."""

    async def load(self, key: str) -> Sequence[Message]:
        """The messages of ``key``'s earlier visits (empty on the first), read-only: a
        port may hand out the list it keeps, so a visit's conversation is not copied
        once more per visit as it grows."""
        ...


SubgraphRunner = Callable[[str, str, int | None, Any, str, int, bool], Awaitable[Any]]
"""``(agent, graph name, version or None, input, parent key, visit, input untrusted) ->
child output``: an untrusted input (the node read tainted state) taints the child's.

A durable run's runner may answer a :class:`~plait.graphs.state.Waiting` instead (the
child runs as a run of its own, and the node parks until it ends), and then a
:class:`~plait.graphs.result.NodeResult` holding the child's output and what it spent
(counted against the parent's budget)."""


class MemoryHistories:
    """Histories held in a dict: the in-session port."""

    def __init__(self) -> None:
        self.saved: dict[str, list[Message]] = {}

    async def load(self, key: str) -> Sequence[Message]:
        """See :class:`HistoryPort`."""
        return self.saved.get(key, [])


class AnswersUpFront:
    """Human answers and tool approvals given before the run starts (in-session).

    ``answers`` hold, by human node id, the answer to every visit of that node, and by
    ``approve:<node>:<tool>`` a standing approval (``yes``/``approve``) or rejection.
    ``once`` holds answers to one visit only, by ``(node or approval key, visit)``: what a
    person said when a parked run resumed. A question with no answer parks the run.
    """

    def __init__(
        self,
        answers: Mapping[str, str] | None = None,
        approve_all: bool = False,
        *,
        once: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        self.answers = dict(answers or {})
        self.approve_all = approve_all
        self.once = dict(once or {})

    async def ask(
        self,
        *,
        key: str,
        visit: int,
        ask: str,
        options: list[str] | None,
        expires_after_s: float | None,
        default: str | None,
        on_expire: str,
    ) -> Answer | Waiting:
        """See :class:`HumanPort`."""
        answer = self.once.get((key, visit), self.answers.get(key))
        if answer is not None:
            return Answer(answer)
        return Waiting(node=key, kind="human", ask=ask, options=options, visit=visit)

    async def approve(
        self, *, key: str, visit: int, tool: str, args: dict[str, Any]
    ) -> bool | Waiting:
        """See :class:`ApprovalPort`."""
        name = f"approve:{key}:{tool}"
        answer = self.once.get((name, visit), self.answers.get(name))
        if answer is not None:
            return answer.strip().lower() in ("yes", "y", "approve", "approved", "true")
        if self.approve_all:
            return True
        return Waiting(
            node=key,
            kind="approval",
            ask=f"Approve calling {tool} with {args}?",
            options=["approve", "reject"],
            tool=tool,
            visit=visit,
        )


@dataclass
class ExecEnv:
    """Everything node executors use, for one run.

    Attributes:
        agent: the graph's agent: it answers for the nodes that name none.
        run_id: the run (None in-session).
        model: a model that answers for every agent (``--model``); None uses each
            agent profile's own model.
        profiles: agent profiles by name; the default ``assistant`` is added if absent.
        tools: the tool registry.
        human, approvals, histories: the ports above.
        subgraphs: runs a child graph to completion; None refuses subgraph nodes.
        cwd: the directory the run was started from: tools work there, or in their
            agent profile's ``workspace`` relative to it.
        prices: dollars per million input and output tokens by model name.
        protected: files tools never touch (the mesh's own).
        mesh: the mesh program nodes act on and read saved programs from; None gives
            them no mesh and decisions capabilities (registered programs still run).
        agents: the agent actors' service program nodes get as ``agents``; None gives
            them an agents capability that refuses.
        programs: the catalog program nodes look refs up in (None: the default one,
            what ``@plait.program`` collected in this process).
        live: where agent nodes stream their models' replies as they come (None: they
            do not stream, and call ``complete``).
    """

    agent: str = DEFAULT_ASSISTANT.name
    run_id: str | None = None
    model: Model | None = None
    profiles: dict[str, AgentProfile] = field(default_factory=dict)
    tools: ToolRegistry = field(default_factory=default_registry)
    human: HumanPort = field(default_factory=AnswersUpFront)
    approvals: ApprovalPort = field(default_factory=AnswersUpFront)
    histories: HistoryPort = field(default_factory=MemoryHistories)
    subgraphs: SubgraphRunner | None = None
    cwd: Path = field(default_factory=Path.cwd)
    prices: Mapping[str, tuple[float, float]] | None = None
    protected: tuple[Path, ...] = ()
    mesh: Mesh | None = None
    agents: AgentsPort | None = None
    programs: ProgramCatalog | None = None
    live: LivePort | None = None
    _models: dict[str, Model] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.profiles.setdefault(DEFAULT_ASSISTANT.name, DEFAULT_ASSISTANT)

    def profile(self, name: str | None) -> AgentProfile:
        """The profile of agent ``name`` (the graph's agent when None)."""
        agent = name or self.agent
        try:
            return self.profiles[agent]
        except KeyError:
            raise ConfigError(
                f"unknown agent {agent!r}: store a profile for it first (known: "
                f"{', '.join(sorted(self.profiles))})"
            ) from None

    def tool_context(self, node: str, profile: AgentProfile) -> ToolContext:
        """The context of a tool call ``profile``'s agent makes at ``node``."""
        return ToolContext(
            run_id=self.run_id,
            node=node,
            cwd=workspace_of(profile, self.cwd),
            profile=profile,
            protected=self.protected,
        )

    def model_for(self, profile: AgentProfile) -> Model:
        """The model that answers for ``profile``."""
        if self.model is not None:
            return self.model
        if profile.model is None:
            raise ConfigError(
                f"agent {profile.name!r} has no model: pass one (--model / model=) or "
                "set PLAIT_MODEL, e.g. openai:gpt-4o-mini or scripted:path/to/script.yaml"
            )
        cached = self._models.get(profile.model)
        if cached is None:
            cached = self._models[profile.model] = load_model(profile.model)
        return cached


def read_only_tools(registry: ToolRegistry, names: Sequence[str]) -> list[str]:
    """The names among ``names`` of registered tools that are read-only."""
    return [n for n in names if n in registry and registry.get(n).read_only]


__all__ = [
    "Answer",
    "AnswersUpFront",
    "ApprovalPort",
    "ExecEnv",
    "HistoryPort",
    "HumanPort",
    "LivePort",
    "MemoryHistories",
    "SubgraphRunner",
    "read_only_tools",
]
