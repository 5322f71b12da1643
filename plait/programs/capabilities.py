"""What program code sees: capability objects with exactly their methods.

Each capability is a small object whose only public names are its methods; what it
acts through (the mesh, a decision board, the tool registry) is held privately and is
never a surface that can answer a decision, promote a program or drive a run. A program
run nested through :class:`ProgramsCapability` gets the same capabilities as its
caller, never more: a capability its caller lacks is a :class:`Missing` there too.

Taint. The capabilities of one program run share one :class:`Taint`: the run starts
tainted when its caller ran untrusted, and becomes tainted once it reads a value or
scans an entry the mesh holds as tainted, or an external tool answers it. From then on
its gated tools lose their pre-approvals, what it tells or runs on an agent is marked
untrusted, and what it writes and publishes on the mesh is stored tainted, so the taint
reaches whoever reads it next.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

from plait.decisions import Agent, Decision, DecisionAsker, DecisionId, DecisionKind, Notify
from plait.errors import CapabilityMissing, ConfigError, ToolError, ToolNotPermitted
from plait.ids import RUN_ID_PREFIX, derived_id, new_decision_id
from plait.mesh import Mesh
from plait.profiles import AgentProfile
from plait.programs.budget import CallBudget, SharedBudget
from plait.tools import ToolContext, ToolRegistry, check_allowed, gate

PROTECTED_PREFIXES = (  # each service's MESH_KEYS; tests/agents/test_service_keys.py checks
    "programs/",  # promotions
    "decisions/",
    "agents/",  # profiles
    "graphs/",
    "tokens/",  # API tokens
    "serving/",  # worker heartbeats
    "schedules/",
    "actors/",  # actor records
    "agent-actors/",  # agent actors' conversations and state
    "subscriptions/",
    "backlog/",
    "cluster/",  # partition leases, epochs and members
    "runindex/",  # run listings
    "runlive/",  # the live-run index
    "mcp/",  # MCP server declarations: a command a worker starts
    "sessions/",  # in-session run keys
    "runs/" + RUN_ID_PREFIX,  # durable run records and logs
)
"""Key prefixes code given the mesh (a program, an agent's ``mesh_put``) may read but
never write: they belong to the plait services that own them. A program keeps its
own state elsewhere, e.g. under ``runs/<its run>/``."""


PROTECTED_TOPICS = (  # each service's MESH_TOPICS; tests/agents/test_service_keys.py checks
    "actors.",  # mailbox partitions (a message there runs an actor's turn), dead letters
    "decisions",  # decision events
    "runs/" + RUN_ID_PREFIX,  # durable runs' progress
)
"""Topics (and topic prefixes) code given the mesh may never publish on: the runtime's
own. A program reaches an actor through ``agents.tell``, which marks the taint it
carries, never by writing into its mailbox."""

CAPABILITY_SCHEDULE_PREFIX = "cap:"
"""Put before the schedule key of an event code given the mesh publishes, so that it
can replace or cancel only its own scheduled events, never a service's (a run's tick)."""


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_keywords(where: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with camelCase names in snake_case (``ifVersion`` is ``if_version``).

    Program texts written for other runtimes spell keywords in camelCase
    (``ifVersion``, ``timeoutMs``, ``afterMs``, ``requirePromoted``); plait's own names
    are snake_case, and both are accepted.

    Raises:
        TypeError: a keyword is given in both spellings.
    """
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for name, value in kwargs.items():
        snake = _CAMEL.sub(lambda m: "_" + m.group(1).lower(), name)
        if snake in out:
            raise TypeError(f"{where}: {snake} is given twice, as {given[snake]} and {name}")
        out[snake], given[snake] = value, name
    return out


def decision_view(decision: Decision) -> dict[str, Any]:
    """A decision as program code reads it: its record, the answer's option also as
    ``answer["optionId"]``."""
    shown = decision.model_dump(mode="json")
    if isinstance(shown.get("answer"), dict):
        shown["answer"]["optionId"] = shown["answer"].get("option")
    return shown


def service_owned(key: str) -> bool:
    """Whether ``key`` belongs to a plait service (see :data:`PROTECTED_PREFIXES`)."""
    return key.startswith(PROTECTED_PREFIXES)


def service_topic(topic: str) -> bool:
    """Whether ``topic`` belongs to the runtime (see :data:`PROTECTED_TOPICS`)."""
    return topic.startswith(PROTECTED_TOPICS)


class Taint:
    """Whether one program run (or one agent turn) has read outside content; shared by
    the capabilities it holds, and only ever set, never cleared."""

    __slots__ = ("tainted",)

    def __init__(self, tainted: bool = False) -> None:
        self.tainted = tainted

    def mark(self) -> None:
        """Record that outside content was read."""
        self.tainted = True


Approver = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Asks for approval of one tool call ``(tool, args)``: True to run it, False to refuse;
raises when no one can be asked now."""


class MeshCapability:
    """The mesh as program code sees it: read, write with CAS, publish, scan, ``self()``.

    Reading a tainted value taints the run (see :class:`Taint`); a tainted run's writes
    and publishes are stored tainted.
    """

    __slots__ = ("__me", "__mesh", "__taint")

    def __init__(self, mesh: Mesh, me: Mapping[str, Any], *, taint: Taint | None = None) -> None:
        self.__mesh = mesh
        self.__me = dict(me)
        self.__taint = taint if taint is not None else Taint()

    async def get(self, key: str) -> dict[str, Any] | None:
        """``{key, value, version}`` at ``key``, or None if it does not exist."""
        entry = await self.__mesh.get(key)
        if entry is None:
            return None
        if entry.tainted:
            self.__taint.mark()
        return {"key": key, "value": entry.value, "version": entry.version}

    async def put(self, key: str, value: Any, if_version: int | None = None) -> dict[str, Any]:
        """Write ``value`` at ``key``; ``if_version`` 0 only creates, N only overwrites N.

        Raises:
            VersionConflict: ``if_version`` did not hold: someone else wrote first.
            CapabilityMissing: ``key`` belongs to a service, not to programs.
        """
        _writable(key)
        tainted = self.__taint.tainted
        entry = await self.__mesh.put(key, value, if_version=if_version, tainted=tainted)
        return {"key": key, "version": entry.version}

    async def publish(
        self, topic: str, kind: str, data: Any = None, after_ms: int = 0, key: str | None = None
    ) -> str:
        """Publish an event; ``after_ms`` delays it, a ``key`` replaces a pending one.

        Raises:
            CapabilityMissing: ``topic`` is the runtime's (an actor's mailbox, say).
        """
        _publishable(topic)
        return await self.__mesh.publish(
            topic,
            kind,
            data,
            after_ms=after_ms,
            key=capability_schedule_key(key),
            tainted=self.__taint.tainted,
        )

    async def scan(self, prefix: str) -> list[dict[str, Any]]:
        """Every ``{key, value, version}`` under ``prefix``, in key order."""
        out = []
        async for e in self.__mesh.scan(prefix):
            if e.tainted:
                self.__taint.mark()
            out.append({"key": e.key, "value": e.value, "version": e.version})
        return out

    async def self(self) -> dict[str, Any]:
        """Who runs this program: ``{id, run, node}`` (None where it does not apply)."""
        return dict(self.__me)


Wake = Callable[[str], Notify]
"""The event that wakes whoever raised decision ``id`` once it closes (an actor's mail)."""


class DecisionsCapability:
    """Raise a decision and wait for it; never answer one (only a person does).

    ``raise`` is a Python keyword: call ``decisions.raise_(...)``, or ``getattr(decisions,
    "raise")``, or ``tools.call("decisions.raise", {...})`` as the seed programs do.

    Given a ``scope`` (an actor and the message it handles), a raise without an ``id``
    gets one derived from the scope and the raise's place among the run's raises: the
    message delivered again after a crash raises the same decision, not a second one.
    Given a ``wake``, each decision raised publishes that event when it closes, so the
    actor that raised it runs again once a person answers.
    """

    __slots__ = ("__board", "__by", "__raised", "__scope", "__wake")

    def __init__(
        self,
        board: DecisionAsker,
        by: str,
        *,
        scope: tuple[str, ...] | None = None,
        wake: Wake | None = None,
    ) -> None:
        self.__board = board
        self.__by = Agent(by)
        self.__scope = scope
        self.__wake = wake
        self.__raised = 0

    async def raise_(
        self,
        title: str,
        input: DecisionKind = "confirm",
        options: list[str] | None = None,
        id: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Raise a decision (``input``: confirm, choice or text); a stable ``id`` raises once,
        and so does a raise without one in an actor's message (see the class)."""
        if not id:
            self.__raised += 1
            id = (
                derived_id("dec_", *self.__scope, "raise", str(self.__raised))
                if self.__scope is not None
                else new_decision_id()
            )
        notify = self.__wake(id) if self.__wake is not None else None
        decision = await self.__board.raise_(
            title, input, options, id=DecisionId(id), data=data, notify=notify, by=self.__by
        )
        return decision_view(decision)

    async def wait(self, id: str, timeout_ms: int = 60_000) -> dict[str, Any]:
        """The decision once it is closed, or still ``open`` after ``timeout_ms``
        (``status``: open, answered, cancelled or expired; the chosen option is
        ``answer["option"]``, also ``answer["optionId"]``)."""
        decision = await self.__board.wait(DecisionId(id), timeout_ms / 1000)
        return decision_view(decision)


setattr(DecisionsCapability, "raise", DecisionsCapability.raise_)


class ToolsCapability:
    """Call a tool by name, gated as any tool call of the agent is; ``bash`` for short."""

    __slots__ = (
        "__approve",
        "__budget",
        "__context",
        "__decisions",
        "__profile",
        "__registry",
        "__taint",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        profile: AgentProfile,
        context: ToolContext,
        budget: SharedBudget,
        *,
        approve: Approver | None = None,
        decisions: DecisionsCapability | None = None,
        trusted: bool = True,
        taint: Taint | None = None,
    ) -> None:
        self.__registry = registry
        self.__profile = profile
        self.__context = context
        self.__budget = budget
        self.__approve = approve
        self.__decisions: DecisionsCapability | Missing = (
            decisions if decisions is not None else Missing("decisions")
        )
        self.__taint = _shared(taint, trusted)

    async def call(self, ref: str, args: Mapping[str, Any] | None = None) -> Any:
        """Call tool ``ref`` with ``args``; ``decisions.raise`` and ``decisions.wait`` too.

        Raises:
            ToolNotPermitted: the agent does not have the tool, or it needs a person's
                approval and none was given.
            CapabilityMissing: a ``decisions.*`` ref without the decisions capability.
        """
        args = dict(args or {})
        if ref in ("decisions.raise", "decisions.wait"):
            method = self.__decisions.raise_ if ref.endswith("raise") else self.__decisions.wait
            return await method(**snake_keywords(ref, args))
        self.__budget.step(self.__context.node or "program", f"tool call {ref!r}")
        tool = check_allowed(ref, self.__profile, registry=self.__registry)
        args = self.__registry.validate_args(ref, args)
        trusted = not self.__taint.tainted
        decision = gate(tool, trusted=trusted, pre_approved=self.__profile.pre_approved)
        if decision == "needs_approval":
            if self.__approve is None or not await self.__approve(ref, args):
                raise ToolNotPermitted(
                    f"tool {ref!r} needs a person's approval and has none here: pre-approve "
                    f"it for agent {self.__profile.name!r}, or approve tools up front"
                )
        if tool.external:
            self.__taint.mark()  # what it answers is outside content, even if it raises
        return await self.__registry.call(ref, args, self.__context)

    def _without_decisions(self) -> ToolsCapability:
        """This capability with its ``decisions.*`` refs refused (for a narrowed caller)."""
        return ToolsCapability(
            self.__registry,
            self.__profile,
            self.__context,
            self.__budget,
            approve=self.__approve,
            taint=self.__taint,
        )

    async def bash(
        self, command: str, timeout_s: float | None = None, settle: bool = True
    ) -> dict[str, Any]:
        """Run ``command`` with the ``bash`` tool: ``{ok, exit_code, stdout, stderr}``.

        ``settle`` (the default) waits for the command and returns its result however it
        ended, ``ok`` saying whether it succeeded; ``settle=False`` raises instead when
        it fails.

        Raises:
            ToolError: ``settle`` is False and the command failed or timed out.
        """
        args: dict[str, Any] = {"command": command}
        if timeout_s is not None:
            args["timeout_s"] = timeout_s
        result = await self.call("bash", args)
        out = {
            "ok": result.get("exit_code") == 0 and not result.get("timed_out"),
            "exit_code": result.get("exit_code"),
            "stdout": result.get("stdout", ""),
            "stderr": result.get("stderr", ""),
        }
        if not settle and not out["ok"]:
            raise ToolError(f"bash {command!r} failed with exit code {out['exit_code']}")
        return out


class AgentsPort(Protocol):
    """What the agents capability acts through: the agent actors' service
    (:class:`plait.agents.Agents`), which a layer above passes in."""

    async def create(self, name: str, **options: Any) -> dict[str, Any]:
        """Start agent actor ``name``; its record."""
        ...

    async def tell(self, name: str, message: str, *, untrusted: bool = False) -> str:
        """Send agent actor ``name`` a message (``untrusted``: outside content); its id."""
        ...

    async def run(
        self, task: str, *, budget: CallBudget | None = None, **options: Any
    ) -> dict[str, Any]:
        """One turn of an agent on ``task``, spending from ``budget`` (None: unlimited):
        ``{status, text, usage}``."""
        ...


class AgentsCapability:
    """Agent actors: create one, tell one, run a task on an agent.

    A caller that runs untrusted (it read outside content) passes the taint on: what it
    tells an agent is marked untrusted, and so is a task it runs on one. A task it runs
    spends from the caller's budget (a node visit's, through the program's).
    """

    __slots__ = ("__budget", "__port", "__taint")

    def __init__(
        self,
        port: AgentsPort | None = None,
        *,
        trusted: bool = True,
        taint: Taint | None = None,
        budget: CallBudget | None = None,
    ) -> None:
        self.__port = port
        self.__taint = _shared(taint, trusted)
        self.__budget = budget

    def __use(self) -> AgentsPort:
        if self.__port is None:
            raise _no_agents()
        return self.__port

    async def create(self, name: str, **options: Any) -> dict[str, Any]:
        """Start the agent profile ``name`` as a durable agent actor (``topics``,
        ``max_concurrency``, ``profile``, ``budget``... as ``plait agents start``);
        with ``program=REF`` and ``input={...}``, one whose every message runs that
        promoted program once instead of a model turn."""
        return await self.__use().create(name, **options)

    async def tell(self, id: str, message: str) -> str:
        """Send agent actor ``id`` (``agent:NAME``, or its name) a message (one turn
        handles it); the message id."""
        port = self.__use()
        if not self.__taint.tainted:
            return await port.tell(id, message)
        return await port.tell(id, message, untrusted=True)

    async def run(self, task: str, **options: Any) -> dict[str, Any]:
        """Run one task on an agent (``agent=``, default assistant), spending from this
        program's budget: ``{status, text, usage}``.

        Raises:
            ConfigError: ``budget=`` given (a program spends its caller's budget).
            BudgetExhausted: the budget is spent; the turn stops before the call.
        """
        if "budget" in options:
            raise ConfigError(
                "agents.run takes no budget=: a task spends from the budget of the run "
                "that runs this program"
            )
        if self.__taint.tainted:
            options = {**options, "untrusted": True}
        return await self.__use().run(task, budget=self.__budget, **options)


class Missing:
    """A capability the caller was not given: every use of it is refused."""

    __slots__ = ("__name",)

    def __init__(self, name: str) -> None:
        self.__name = name

    def __getattr__(self, attr: str) -> Any:
        raise CapabilityMissing(
            f"this program was run without the {self.__name} capability, so "
            f"{self.__name}.{attr} is not available to it (nor to programs it runs)"
        )


class Payload(Mapping[str, Any]):
    """A program's input, read-only: ``payload["target"]`` or ``payload.target``."""

    __slots__ = ("__data",)

    def __init__(self, data: Any) -> None:
        self.__data = dict(data) if isinstance(data, Mapping) else {"input": data}

    def __getitem__(self, key: str) -> Any:
        return self.__data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.__data)

    def __len__(self) -> int:
        return len(self.__data)

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__data[key]
        except KeyError:
            raise AttributeError(
                f"the payload has no {key!r} (it has: {', '.join(self)})"
            ) from None


def _writable(key: str) -> None:
    if service_owned(key):
        raise CapabilityMissing(
            f"program code may not write {key!r}: that key belongs to a plait service "
            "(write under a key of your own, such as runs/<your run>/graph)"
        )


def _publishable(topic: str) -> None:
    if service_topic(topic):
        raise CapabilityMissing(
            f"program code may not publish on {topic!r}: that topic belongs to the plait "
            "runtime (tell an agent with agents.tell; publish on a topic of your own)"
        )


def capability_schedule_key(key: str | None) -> str | None:
    """The schedule key an event published through a capability is kept under (see
    :data:`CAPABILITY_SCHEDULE_PREFIX`)."""
    return None if key is None else CAPABILITY_SCHEDULE_PREFIX + key


def _shared(taint: Taint | None, trusted: bool) -> Taint:
    """``taint`` (marked if the caller is not ``trusted``), or a new one."""
    if taint is None:
        return Taint(not trusted)
    if not trusted:
        taint.mark()
    return taint


def _no_agents() -> CapabilityMissing:
    return CapabilityMissing(
        "agent actors are not available yet here: this program was run without the agents "
        "capability (plait exec and agent actors give it)"
    )


__all__ = [
    "CAPABILITY_SCHEDULE_PREFIX",
    "PROTECTED_PREFIXES",
    "PROTECTED_TOPICS",
    "AgentsCapability",
    "AgentsPort",
    "Approver",
    "DecisionsCapability",
    "MeshCapability",
    "Missing",
    "Payload",
    "Taint",
    "ToolsCapability",
    "Wake",
    "capability_schedule_key",
    "decision_view",
    "service_owned",
    "service_topic",
    "snake_keywords",
]
