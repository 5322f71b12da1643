"""The capabilities as tools, for one agent turn: the mesh, agents, decisions, programs, graphs.

Tools an agent actor's profile may list (``plait agents put NAME --tools ...``):

- ``mesh_get``, ``mesh_put`` (with ``if_version``: 0 creates only, N overwrites only
  version N), ``mesh_publish``, ``agents_tell``: their writes are the turn's own
  (:class:`TurnEffects`), committed with the turn's ack or not at all. A ``mesh_put``
  checks ``if_version`` when called (the model learns at once that it lost a race) and
  again at the commit, where a conflict makes the whole turn run again.
- ``decisions_raise``, ``decisions_wait``: raise a decision (raised once per turn and
  call, however often the turn runs) and wait for a person's answer; never answer one.
- ``programs_run``: run a promoted saved program with the agent's capabilities.
- ``manage_graph`` (``put``, ``get``, ``list``), ``run_graph``, ``inspect_graph_run``:
  define graphs, start a durable run (its id derived from the turn, so a turn run again
  starts none twice) and follow it.

Each is gated like any tool: ``manage_graph`` needs a person's approval unless
pre-approved, and a turn that read outside content loses its pre-approvals.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from plait.actors import tell_in
from plait.agents.config import agent_actor_id
from plait.decisions import Agent, DecisionAsker
from plait.errors import CapabilityMissing, ToolError, VersionConflict
from plait.graphs import GraphSpec
from plait.graphs.store import get_graph, import_graph, list_graphs
from plait.ids import RUN_ID_PREFIX, DecisionId, RunId, derived_id
from plait.mesh import Mesh, Transaction
from plait.programs.capabilities import capability_schedule_key, service_owned, service_topic
from plait.runs import Runs
from plait.telemetry import STATE, carrying_trace, current_traceparent
from plait.tools import Tool, ToolContext, ToolRegistry

CAPABILITY_TOOLS = (
    "mesh_get",
    "mesh_put",
    "mesh_publish",
    "agents_tell",
    "decisions_raise",
    "decisions_wait",
    "programs_run",
    "manage_graph",
    "run_graph",
    "inspect_graph_run",
)
"""The names of the capability tools, in the order they are described above."""

UNTRUSTED = "untrusted"
"""The key of a told message's body that marks it outside content (``{"text": ...,
"untrusted": true}``): the turn handling it runs untrusted."""


@dataclass
class TurnEffects:
    """The mesh writes, publishes and tells of one turn, applied with its commit.

    Attributes:
        puts: by key, the value to write and the version expected at commit.
        publishes: ``(topic, kind, data, after_ms, key)`` in call order.
        tells: ``(actor id, body)`` in call order.
        outside: the tools called with effects outside the mesh (for crash recovery).
        called: every tool called, in order.
        tainted: the turn has read outside content (its message came from an untrusted
            source, its conversation carries some, a tool fetched some, or ``mesh_get``
            read a tainted value): from then on it runs untrusted, what it tells
            carries the taint, and so do the conversation it commits and every value it
            writes and event it publishes (the mesh keeps the taint beside them).
    """

    puts: dict[str, tuple[Any, int | None, int]] = field(default_factory=dict)
    publishes: list[tuple[str, str, Any, int, str | None]] = field(default_factory=list)
    tells: list[tuple[str, Any]] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)
    tainted: bool = False

    def apply(self, tx: Transaction) -> None:
        """Add every effect to ``tx``."""
        tainted = self.tainted
        for key, (value, if_version, _) in self.puts.items():
            tx.put(key, value, if_version=if_version, tainted=tainted)
        for topic, kind, data, after_ms, schedule in self.publishes:
            tx.publish(topic, kind, data, after_ms=after_ms, key=schedule, tainted=tainted)
        for actor_id, body in self.tells:
            tell_in(tx, actor_id, body)

    @property
    def empty(self) -> bool:
        """Whether the turn has no mesh effect."""
        return not (self.puts or self.publishes or self.tells)


@dataclass
class TurnTools:
    """What the capability tools of one turn act through.

    Attributes:
        mesh: the mesh.
        actor_id: the agent actor taking the turn (decisions are raised by it).
        message_id: the message the turn handles (derived ids come from it).
        effects: the turn's buffered effects.
        run_program: runs a saved program with the agent's capabilities (and whether
            the turn still runs trusted: a tainted one loses its pre-approvals).
        on_outside: called before a tool with effects outside the mesh runs (marks the
            turn's in-flight record, so a crash after it is known for what it is).
    """

    mesh: Mesh
    actor_id: str
    message_id: str
    effects: TurnEffects
    run_program: Callable[[str, Any, bool], Awaitable[Any]] | None = None
    on_outside: Callable[[str], Awaitable[None]] | None = None
    _calls: int = 0

    def _derived(self, prefix: str, what: str) -> str:
        self._calls += 1
        return derived_id(prefix, self.actor_id, self.message_id, what, str(self._calls))

    # -- mesh ------------------------------------------------------------------------

    async def mesh_get(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """The value and version at a key (as this turn wrote it), or null."""
        key = args["key"]
        if key in self.effects.puts:
            value, _, version = self.effects.puts[key]
            return {"key": key, "value": value, "version": version}
        entry = await self.mesh.get(key)
        if entry is None:
            return None
        if entry.tainted:
            self.effects.tainted = True  # its writer had read outside content: so has this turn
        return {"key": key, "value": entry.value, "version": entry.version}

    async def mesh_put(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Write a value at a key; ``if_version`` 0 creates only, N overwrites only N."""
        key, value, expected = args["key"], args["value"], args.get("if_version")
        if service_owned(key):
            raise CapabilityMissing(f"an agent may not write {key!r}: it belongs to plait")
        if key in self.effects.puts:
            _, first_expected, current = self.effects.puts[key]
        else:
            entry = await self.mesh.get(key)
            first_expected, current = expected, 0 if entry is None else entry.version
        if expected is not None and expected != current:
            raise VersionConflict(key, expected, current)
        self.effects.puts[key] = (value, first_expected, current + 1)
        return {"key": key, "version": current + 1}

    async def mesh_publish(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Publish an event on a topic (with the turn); its subscribers get it."""
        if service_topic(args["topic"]):
            raise CapabilityMissing(
                f"an agent may not publish on {args['topic']!r}: it belongs to plait "
                "(tell an agent with agents_tell)"
            )
        publish = (
            args["topic"],
            args["kind"],
            carrying_trace(args.get("data")) if STATE.tracing else args.get("data"),
            args.get("after_ms", 0),
            capability_schedule_key(args.get("key")),
        )
        self.mesh._publish_op(*publish)  # checks topic, kind and payload now, not at the commit
        self.effects.publishes.append(publish)
        return {"published": True, "topic": args["topic"]}

    async def agents_tell(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Send another agent actor a message (with the turn)."""
        body: dict[str, Any] = {"text": args["message"]}
        if self.effects.tainted:
            body[UNTRUSTED] = True  # taint follows the data into the other agent's turn
        if STATE.tracing and (sender := current_traceparent()):
            body["traceparent"] = sender  # its turn joins this one's trace
        self.effects.tells.append((agent_actor_id(args["agent"]), body))
        return {"told": args["agent"]}

    # -- decisions ---------------------------------------------------------------------

    async def decisions_raise(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Raise a decision for a person; the same call of the same turn raises it once."""
        board = DecisionAsker(self.mesh)
        did = DecisionId(args.get("id") or self._derived("dec_", "decision"))
        decision = await board.raise_(
            args["title"],
            args.get("input", "confirm"),
            args.get("options"),
            id=did,
            data=args.get("data"),
            by=Agent(self.actor_id),
        )
        return decision.model_dump(mode="json")

    async def decisions_wait(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Wait for a decision to close (or ``timeout_ms`` to pass); its record."""
        board = DecisionAsker(self.mesh)
        decision = await board.wait(DecisionId(args["id"]), args.get("timeout_ms", 60_000) / 1000)
        return decision.model_dump(mode="json")

    # -- programs and graphs -------------------------------------------------------------

    async def programs_run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run a promoted saved program and return what it returns."""
        if self.run_program is None:
            raise CapabilityMissing("programs_run is not available to this agent")
        if self.on_outside is not None:
            await self.on_outside("programs_run")
        return await self.run_program(args["ref"], args.get("input"), not self.effects.tainted)

    async def manage_graph(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Store a graph (``put`` a spec), read one (``get``) or list an agent's graphs."""
        action = args["action"]
        if action == "put":
            if "spec" not in args:
                raise ToolError("manage_graph put needs the graph as 'spec'")
            stored = await import_graph(self.mesh, GraphSpec.model_validate(args["spec"]))
            return {
                "agent": stored.spec.agent,
                "name": stored.spec.name,
                "version": stored.spec.version,
            }
        if action == "get":
            found = await get_graph(self.mesh, args["agent"], args["name"], args.get("version"))
            return found.spec.model_dump(mode="json", exclude_none=True)
        return [s.model_dump(mode="json") for s in await list_graphs(self.mesh, args.get("agent"))]

    async def run_graph(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Start a durable run of a stored graph; its run id (the same on a retried turn)."""
        run_id = RunId(self._derived(RUN_ID_PREFIX, "run"))
        runs = Runs(self.mesh)
        try:
            rec = await runs.start(
                args["agent"],
                args["name"],
                args.get("input"),
                version=args.get("version"),
                run_id=run_id,
                # the run reads what this turn chose: outside content if the turn read some
                input_untrusted=self.effects.tainted,
            )
        except VersionConflict:
            rec = await runs.get(run_id)  # this turn started it before it was interrupted
        return {"run_id": rec.run_id, "status": rec.status}

    async def inspect_graph_run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """A run's status, and its output once done."""
        runs = Runs(self.mesh)
        rec = await runs.get(RunId(args["run_id"]))
        out: dict[str, Any] = {"run_id": rec.run_id, "status": rec.status}
        if rec.ended_detail:
            out["detail"] = rec.ended_detail
        if rec.status == "done":
            out["output"] = await runs.output(rec)
        return out

    @contextmanager
    def bound(self) -> Iterator[None]:
        """Make this turn the one the capability tools act for, within the block (the
        turn's task and what it awaits)."""
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)


_CURRENT: ContextVar[TurnTools] = ContextVar("plait_agent_turn")


def _current() -> TurnTools:
    try:
        return _CURRENT.get()
    except LookupError:
        raise CapabilityMissing("a capability tool was called outside an agent turn") from None


_STR: dict[str, Any] = {"type": "string", "minLength": 1}


@functools.cache
def capability_tools() -> tuple[Tool, ...]:
    """The capability tools, built once: each acts for the turn :meth:`TurnTools.bound`
    made current (their schemas are checked once per process, not per turn)."""
    t = TurnTools
    return (
        _tool(t.mesh_get, {"key": _STR}, ["key"], read_only=True),
        _tool(
            t.mesh_put,
            {"key": _STR, "value": {}, "if_version": {"type": ["integer", "null"], "minimum": 0}},
            ["key", "value"],
        ),
        _tool(
            t.mesh_publish,
            {
                "topic": _STR,
                "kind": _STR,
                "data": {},
                "after_ms": {"type": "integer", "minimum": 0},
                "key": _STR,
            },
            ["topic", "kind"],
        ),
        _tool(t.agents_tell, {"agent": _STR, "message": _STR}, ["agent", "message"]),
        _tool(
            t.decisions_raise,
            {
                "title": _STR,
                "input": {"enum": ["confirm", "choice", "text"]},
                "options": {"type": "array", "items": _STR},
                "id": _STR,
                "data": {"type": "object"},
            },
            ["title"],
        ),
        _tool(
            t.decisions_wait,
            {"id": _STR, "timeout_ms": {"type": "integer", "minimum": 0}},
            ["id"],
            read_only=True,
        ),
        _tool(t.programs_run, {"ref": _STR, "input": {}}, ["ref"]),
        _tool(
            t.manage_graph,
            {
                "action": {"enum": ["put", "get", "list"]},
                "spec": {"type": "object"},
                "agent": _STR,
                "name": _STR,
                "version": {"type": "integer", "minimum": 1},
            },
            ["action"],
            requires_approval=True,
        ),
        _tool(
            t.run_graph,
            {
                "agent": _STR,
                "name": _STR,
                "input": {},
                "version": {"type": "integer", "minimum": 1},
            },
            ["agent", "name"],
        ),
        _tool(t.inspect_graph_run, {"run_id": _STR}, ["run_id"], read_only=True),
    )


_with_capabilities: weakref.WeakKeyDictionary[ToolRegistry, ToolRegistry] = (
    weakref.WeakKeyDictionary()
)


def with_capabilities(base: ToolRegistry) -> ToolRegistry:
    """``base``'s tools and the capability tools (which replace any of the same name),
    as one registry made once per ``base``."""
    found = _with_capabilities.get(base)
    if found is None:
        own = capability_tools()
        names = {t.name for t in own}
        found = ToolRegistry([*(t for t in base if t.name not in names), *own])
        _with_capabilities[base] = found
    return found


def _tool(
    method: Callable[[TurnTools, dict[str, Any], ToolContext], Awaitable[Any]],
    properties: dict[str, Any],
    required: list[str],
    *,
    read_only: bool = False,
    requires_approval: bool = False,
) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await method(_current(), args, ctx)

    return Tool(
        name=method.__name__,
        description=(method.__doc__ or "").strip(),
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
        handler=handler,
        read_only=read_only,
        requires_approval=requires_approval,
    )


__all__ = [
    "CAPABILITY_TOOLS",
    "UNTRUSTED",
    "TurnEffects",
    "TurnTools",
    "capability_tools",
    "with_capabilities",
]
