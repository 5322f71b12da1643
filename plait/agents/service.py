"""Agent actors from outside: start, tell, list, show, stop, and one-off turns.

:class:`Agents` is what ``plait agents start|tell|list|show|stop`` call, and what
program code gets as its ``agents`` capability (``create``, ``tell``, ``run``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from plait.actors import (
    ActorRecord,
    actor_key,
    backlog,
    subscribe,
    subscriptions,
    tell_tracked,
    unsubscribe,
)
from plait.actors.directory import create_record, find_record, stop_record
from plait.actors.topics import StartAt
from plait.agents.config import (
    AGENT_KIND,
    AGENT_PREFIX,
    AgentActorConfig,
    agent_actor_id,
    agent_name,
)
from plait.agents.store import (
    AgentState,
    TurnSummary,
    conversation_key,
    last_turns,
    read_conversation,
    read_state,
)
from plait.agents.tools import UNTRUSTED, TurnEffects
from plait.agents.turn import prepare_turn
from plait.decisions import Principal, require_human
from plait.errors import ActorError, ActorNotFound, ConfigError, VersionConflict
from plait.graphs.agent_loop import run_turn
from plait.ids import new_id
from plait.mesh import Entry, Mesh
from plait.models import CallContext, Model
from plait.profiles import DEFAULT_ASSISTANT, get_profile
from plait.programs import DEFAULT_CATALOG, CallBudget, ProgramCatalog, resolve_saved
from plait.tools import ToolRegistry, default_registry

SHOW_READS = 10
"""How often :meth:`Agents.show` reads an actor busy committing turns before it settles
for the last read."""


@dataclass
class AgentInfo:
    """An agent actor as listed.

    Attributes:
        name: its name (its actor id is ``agent:NAME``).
        record: its actor record.
        topics: the patterns it subscribes to.
        backlog: messages sent to it and not handled yet.
        state: its day's spending, whether it is parked, its turns so far.
    """

    name: str
    record: ActorRecord
    topics: list[str]
    backlog: int
    state: AgentState

    @property
    def status(self) -> str:
        """``stopped``, ``parked (<why>)`` or ``running``."""
        if self.record.stopped:
            return "stopped"
        return f"parked ({self.state.parked})" if self.state.parked else "running"


@dataclass
class AgentDetails(AgentInfo):
    """An agent actor as shown: also its backlog's messages and its last turns."""

    messages: list[Entry] = field(default_factory=list)
    turns: list[TurnSummary] = field(default_factory=list)
    conversation: int = 0
    tainted: bool = False
    """Its conversation holds outside content: its turns run untrusted."""


class Agents:
    """Agent actors on ``mesh``.

    Args:
        mesh: the mesh.
        model: the model of one-off turns (:meth:`run`) for agents that name none.
        tools: the tools of one-off turns (default: the built-in ones).
        programs: the catalog a program actor's ref is checked against, and the
            programs of one-off turns look refs up in (default: the default catalog).
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        model: Model | None = None,
        tools: ToolRegistry | None = None,
        programs: ProgramCatalog | None = None,
    ) -> None:
        self.mesh = mesh
        self.model = model
        self.tools = tools if tools is not None else default_registry()
        self.programs = programs if programs is not None else DEFAULT_CATALOG

    async def start(
        self,
        name: str,
        *,
        profile: str | None = None,
        topics: Sequence[str] = (),
        max_concurrency: int = 1,
        start: StartAt = "new",
        **config: Any,
    ) -> ActorRecord:
        """Run agent profile ``profile`` (default ``name``) as the actor ``agent:NAME``.

        Starting one that exists updates its settings and subscriptions (and restarts
        it if stopped). Its subscriptions get backlog markers, so ``list`` counts them;
        ``start`` says where a new subscription starts (``earliest``: every event its
        topic still holds).

        With ``program=REF`` it is a program actor (:mod:`plait.agents.program_actor`):
        each message runs ``REF`` (promoted, if a saved program) with ``input`` as its
        payload, and its tools are gated by ``profile`` (default ``assistant``).

        With ``runner="pi"`` (and ``instructions=``) each message is one model turn
        that writes one program and runs it (:mod:`plait.agents.exec_actor`); its tools
        are gated by ``profile`` (default ``assistant``).

        Raises:
            ConfigError: both ``program`` and ``runner="pi"``.
            AgentNotFound: no such profile.
            ValidationError: a setting is not one of :class:`AgentActorConfig`.
            ProgramNotFound: ``program`` names no program.
            ProgramNotPromoted: ``program`` is a saved version not promoted.
        """
        cfg = AgentActorConfig(profile=profile, max_concurrency=max_concurrency, **config)
        if cfg.program is not None and cfg.runner != "model":
            raise ConfigError(
                f"agent actor {name!r}: program= runs a program per message, runner= a "
                "model per message: give one of them"
            )
        if cfg.program is not None or cfg.runner == "pi":
            if cfg.program is not None and self.programs.find(cfg.program) is None:
                await resolve_saved(cfg.program, self.mesh, require_promoted=True)
            await get_profile(self.mesh, profile or DEFAULT_ASSISTANT.name)
        else:
            await get_profile(self.mesh, profile or name)
        actor_id = agent_actor_id(name)
        settings = cfg.model_dump(exclude_defaults=True) | {"max_concurrency": max_concurrency}
        record = await create_record(
            self.mesh, actor_id, AGENT_KIND, topics=list(topics), config=settings, exist_ok=True
        )
        if record.config != settings or record.stopped or record.topics != list(topics):
            record = await self._update(actor_id, settings, list(topics))
        for pattern in await subscriptions(self.mesh, actor_id):
            if pattern not in topics:
                await unsubscribe(self.mesh, actor_id, pattern)
        for pattern in topics:
            await subscribe(self.mesh, actor_id, pattern, start=start, backlog=True)
        return record

    async def _update(
        self, actor_id: str, config: dict[str, Any], topics: list[str]
    ) -> ActorRecord:
        while True:
            entry = await self.mesh.get(actor_key(actor_id))
            if entry is None:
                raise ActorNotFound(f"no actor {actor_id!r}")
            record = ActorRecord.model_validate(entry.value)
            if record.kind != AGENT_KIND:
                raise ActorError(f"actor {actor_id!r} is not an agent actor")
            record = record.model_copy(
                update={"config": config, "topics": topics, "stopped": False}
            )
            try:
                await self.mesh.put(
                    actor_key(actor_id), record.model_dump(), if_version=entry.version
                )
            except VersionConflict:
                continue
            return record

    async def get(self, name: str) -> ActorRecord:
        """The record of agent actor ``name``.

        Raises:
            ActorNotFound: there is no such agent actor.
        """
        return await self._record(name)

    async def _record(self, name: str) -> ActorRecord:
        record = await find_record(self.mesh, agent_actor_id(name))
        if record is None or record.kind != AGENT_KIND:
            raise ActorNotFound(f"no agent actor {name!r}: start it with plait agents start {name}")
        return record

    async def tell(self, name: str, message: str, *, untrusted: bool = False) -> str:
        """Send agent actor ``name`` (or its actor id, ``agent:NAME``) a message; its id.

        ``untrusted`` marks the message as outside content (a forwarded mail, a
        document): the turn handling it, and the later turns carrying its
        conversation, run untrusted and lose the profile's pre-approved tools.

        Raises:
            ActorNotFound: it was never started.
            ActorError: it is stopped.
        """
        record = await self._record(agent_name(name) or name)
        if record.stopped:
            raise ActorError(f"agent actor {name!r} is stopped: start it again first")
        body: dict[str, Any] = {"text": message}
        if untrusted:
            body[UNTRUSTED] = True
        return await tell_tracked(self.mesh, record.id, body)

    async def stop(self, name: str) -> None:
        """Stop agent actor ``name``: drop its subscriptions; later messages are dropped."""
        record = await self._record(name)
        for pattern in await subscriptions(self.mesh, record.id):
            await unsubscribe(self.mesh, record.id, pattern)
        await stop_record(self.mesh, record.id)

    async def reset(self, name: str, *, by: Principal) -> int:
        """Let go of agent actor ``name``'s conversation, and with it its taint: the
        next turn starts afresh, trusted unless its own message is outside content.

        A person only: a turn that read outside content must not be able to clear its
        own taint. A turn in flight meanwhile finds its conversation moved at its
        commit and runs again on the empty one. Returns how many messages it let go.

        Raises:
            NotPermitted: ``by`` is not a person.
            ActorNotFound: there is no such agent actor.
        """
        require_human(by, "reset an agent actor's conversation")
        await self._record(name)
        while True:
            conversation, version = await read_conversation(self.mesh, name)
            cleared = conversation.reset(by.name, time.time())
            try:
                await self.mesh.put(
                    conversation_key(name), cleared.model_dump(), if_version=version
                )
            except VersionConflict:
                continue  # a turn committed meanwhile: reset what it left
            return len(conversation.messages)

    async def list(self) -> list[AgentInfo]:
        """Every agent actor, by name."""
        found: list[AgentInfo] = []
        async for entry in self.mesh.scan(actor_key(AGENT_PREFIX)):
            record = ActorRecord.model_validate(entry.value)
            if record.kind == AGENT_KIND:
                found.append(await self._info(record))
        return found

    async def _info(self, record: ActorRecord) -> AgentInfo:
        name = record.id[len(AGENT_PREFIX) :]
        state, _ = await read_state(self.mesh, name)
        return AgentInfo(
            name=name,
            record=record,
            topics=list(await subscriptions(self.mesh, record.id)),
            backlog=len(await backlog(self.mesh, record.id)),
            state=state,
        )

    async def show(self, name: str, *, turns: int = 10) -> AgentDetails:
        """Agent actor ``name``: its backlog's messages, its last ``turns`` turns.

        The parts agree: a message is either in the backlog or among the turns, never
        both or neither, and the day's figures count exactly the turns listed. Every
        change that takes a message off the backlog also writes the actor's state, so
        the parts are read between two reads of the state and read again (at most
        :data:`SHOW_READS` times) if it changed in between.
        """
        record = await self._record(name)
        for attempt in range(SHOW_READS):
            if attempt:
                # A busy actor can commit a turn within every round of reads: wait a
                # little longer each time, so the view is not starved by a fast actor.
                await anyio.sleep(min(0.001 * 2**attempt, 0.05))
            state, version = await read_state(self.mesh, name)
            conversation, _ = await read_conversation(self.mesh, name)
            messages = await backlog(self.mesh, record.id)
            summaries = await last_turns(self.mesh, name, turns)
            topics = list(await subscriptions(self.mesh, record.id))
            if (await read_state(self.mesh, name))[1] == version:
                break
        return AgentDetails(
            name=name,
            record=record,
            topics=topics,
            backlog=len(messages),
            state=state,
            messages=messages,
            turns=summaries,
            conversation=len(conversation.messages) + conversation.dropped,
            tainted=conversation.tainted,
        )

    # -- the agents capability ----------------------------------------------------------

    async def create(self, name: str, **options: Any) -> dict[str, Any]:
        """Start agent actor ``name`` (options as :meth:`start`); its record as a dict.

        ``residency="durable"`` may be given (every agent actor is durable: its mailbox,
        conversation and state live in the mesh); no other residency is offered.

        Raises:
            ConfigError: another ``residency``.
        """
        residency = options.pop("residency", "durable")
        if residency != "durable":
            raise ConfigError(
                f"agents.create(residency={residency!r}): agent actors are durable only "
                "(residency='durable')"
            )
        record = await self.start(name, **options)
        return record.model_dump(mode="json")

    async def run(
        self, task: str, *, budget: CallBudget | None = None, **options: Any
    ) -> dict[str, Any]:
        """One turn of an agent on ``task`` in this process, no actor:
        ``{status, text, seconds, usage}``; ``status`` is ``completed`` once the agent
        answered, ``waiting`` if it waits on a person.

        Options: ``agent`` (default ``assistant``), ``name`` (what the turn is called:
        the model call's instance, shown in traces), ``max_rounds`` (default 8),
        ``untrusted`` (the task is outside content: the turn loses the agent's
        pre-approved tools). Its mesh effects commit when it answers (nothing of a turn
        that failed). Every model and tool call is checked against ``budget`` first
        and its cost counted there (the caller's: a program's, within its run's);
        ``usage`` reports what the turn spent.

        Raises:
            ConfigError: an unknown option.
            BudgetExhausted: the next call would pass ``budget``; what the turn spent
                until then is counted in it.
        """
        unknown = sorted(set(options) - {"agent", "name", "max_rounds", "untrusted"})
        if unknown:
            raise ConfigError(
                "agents.run takes agent=, name=, max_rounds= and untrusted=, not "
                + ", ".join(unknown)
            )
        untrusted = options.get("untrusted") is True
        agent = str(options.get("agent", "assistant"))
        max_rounds = int(options.get("max_rounds", 8))
        profile = await get_profile(self.mesh, agent)
        effects = TurnEffects()
        effects.tainted = untrusted
        prepared = prepare_turn(
            self.mesh,
            actor_id=f"{AGENT_PREFIX}{agent}",
            message_id=new_id("task-"),
            profile=profile,
            prompt=task,
            effects=effects,
            tools=self.tools,
            model=self.model,
            context=CallContext(
                node=agent,
                instance=str(options["name"]) if options.get("name") else None,
                prompt=task,
            ),
            max_rounds=max_rounds,
            programs=self.programs,
        )
        if budget is not None:
            prepared.turn.budget = budget
        started = time.monotonic()
        with prepared.tools.bound():
            result = await run_turn(prepared.turn, prepared.messages)
        if not effects.empty:
            async with self.mesh.transact() as tx:
                effects.apply(tx)
        status = "waiting" if result.waiting is not None else "completed"
        return {
            "status": status,
            "text": result.text,
            "seconds": round(time.monotonic() - started, 3),
            "usage": {
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
                "dollars": result.dollars,
            },
        }


__all__ = ["AgentDetails", "AgentInfo", "Agents"]
