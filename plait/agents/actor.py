"""The agent actor kind: each message is one agent turn, committed with its ack.

A message (a ``{"text": ...}`` told to the actor, or an event of a topic it subscribes
to), parsed once into an :class:`~plait.agents.message.AgentMessage`, becomes the user
message of one turn: the agent node's loop (model, tool calls, until it answers) with
the profile's instructions, the conversation so far (its last ``window`` messages) and
the capabilities as tools (:mod:`plait.agents.tools`), assembled by
:func:`~plait.agents.turn.prepare_turn`. The actor's state and conversation are read
once per turn (again only when its commit finds another writer came first); what the
serving process gives it (tools, model, programs, the agents service) comes from its
:class:`~plait.runs.RunServices`.

A program actor (started with ``program=REF``) runs that program once per message
instead (:mod:`plait.agents.program_actor`); an exec actor (``runner="pi"``) has its
model write one program per message, and runs it (:mod:`plait.agents.exec_actor`).

Exactly once on the mesh. The turn's mesh writes, publishes and tells are held until it
answers, then committed in one transaction with the conversation, the actor's state,
the turn's summary, the removal of its backlog marker and the ack (fenced by the
partition lease). A conflict on a key the turn wrote (another worker claimed the task
first) runs the turn again from the start: its tools then see the value as it is.

Crashes. A turn marks itself in flight before its first model call. A message found
with such a mark was interrupted: if the turn had called no tool with effects outside
the mesh it simply runs again (nothing of it was committed); otherwise the actor's
``on_indeterminate`` decides (``retry``, ``skip``, ``escalate``).

Trust. A turn runs untrusted, and so loses its profile's pre-approved tools, when its
message is outside content (told with ``untrusted``, an event published tainted, or an
event of one of the actor's ``untrusted_topics``), when the conversation it carries
took some in earlier, or, from the call on, once a tool brought some in (``http_get``,
a ``mesh_get`` of a tainted value). Such a turn commits its conversation tainted, so
every later turn carrying it runs untrusted too; what it tells another agent is marked
untrusted, what it writes and publishes is stored tainted, the runs it starts take
untrusted input, and the programs it runs lose their pre-approvals.

Live. Each try of a turn streams on the actor's live channel while someone watches
(:mod:`plait.agents.live`): its start (a try after a cut-off one marked as a restart),
its model's reply piece by piece, and the summary it committed.

Budgets. Before every model call the day's spending is checked against the actor's
``budget``; a turn that would pass it stops, the actor parks (later messages are held)
and raises a decision only a person answers: ``raise`` lifts the day's limits by as
much again and tells the held messages again; ``keep parked`` leaves it parked.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from plait.actors import (
    ActorContext,
    ActorKind,
    Mail,
    clear_backlog_in,
    mail_data,
    mailbox_of,
    tell_tracked_in,
)
from plait.actors.directory import MAIL_KIND
from plait.agents.config import AgentActorConfig, agent_name
from plait.agents.exec_actor import EXEC, handle_exec
from plait.agents.live import TurnStream, agent_channels
from plait.agents.message import RESUME, AgentMessage
from plait.agents.program_actor import handle_program
from plait.agents.store import (
    AgentState,
    Conversation,
    InFlight,
    TurnSummary,
    conversation_key,
    held_key,
    held_messages,
    inflight_key,
    read_conversation,
    read_state,
    settle_turn,
    settle_turn_in,
    state_key,
    turn_key,
)
from plait.agents.tools import TurnEffects
from plait.agents.turn import PreparedTurn, prepare_turn
from plait.decisions import Agent, DecisionAsker, DecisionId
from plait.decisions.model import Notify
from plait.errors import ActorError, BudgetExhausted, VersionConflict
from plait.graphs.agent_loop import TurnResult, run_turn
from plait.graphs.budget import VisitBudget
from plait.ids import derived_id
from plait.models import CallContext, Usage, load_model
from plait.profiles import AgentProfile, get_profile
from plait.programs import SharedBudget, grant_all, run_program
from plait.runs import RunServices
from plait.telemetry import STATE, current, turn_span

log = logging.getLogger("plait.agents")

TURN_REPEATS = 5
"""How often a turn runs again after a conflict on a key it wrote, before it fails
(the message is then delivered again, as after any error)."""


def is_outside_content(message: AgentMessage, cfg: AgentActorConfig) -> bool:
    """Whether a message is outside content: told as untrusted, or an event of one of
    the actor's ``untrusted_topics``."""
    return message.is_outside_content(cfg)


class DecisionApprovals:
    """Approvals of gated tools for an agent turn: a decision a person answers."""

    def __init__(self, board: DecisionAsker, actor_id: str, message_id: str, wait_s: float) -> None:
        self.board, self.actor_id, self.message_id, self.wait_s = (
            board,
            actor_id,
            message_id,
            wait_s,
        )

    async def approve(self, *, key: str, visit: int, tool: str, args: dict[str, Any]) -> bool:
        """Raise (once per message and tool) and wait for the answer; False if none came."""
        did = DecisionId(derived_id("dec_", self.actor_id, self.message_id, "approve", tool))
        await self.board.raise_(
            f"Approve {self.actor_id} calling {tool}?",
            "choice",
            ["approve", "reject"],
            id=did,
            data={"tool": tool, "args": args},
            by=Agent(self.actor_id),
        )
        decision = await self.board.wait(did, self.wait_s)
        return decision.answer is not None and decision.answer.option == "approve"


@dataclass
class _Read:
    """The actor's state and conversation as read for a turn, with their versions: read
    once per turn, and again only when a commit finds another writer came first."""

    state: AgentState
    state_version: int
    conversation: Conversation
    conversation_version: int


async def _read(ctx: ActorContext, name: str) -> _Read:
    state, state_version = await read_state(ctx.mesh, name)
    conversation, conversation_version = await read_conversation(ctx.mesh, name)
    return _Read(state, state_version, conversation, conversation_version)


def _left(limit: float | None, raised: float, spent: float) -> float | None:
    return None if limit is None else limit + raised - spent


async def handle(ctx: ActorContext, mail: Mail) -> None:
    """Handle one message of an agent actor (the kind ``plait.agents.actor:handle``)."""
    name = agent_name(ctx.id)
    if name is None:
        raise ActorError(f"actor {ctx.id!r} is not an agent actor (ids are agent:NAME)")
    cfg = AgentActorConfig.model_validate(ctx.record.config)
    message = AgentMessage.parse(mail.body)
    if not STATE.tracing:
        await _handle(ctx, mail, name, cfg, message)
        return
    span = turn_span(
        name,
        message.traceparent,
        attributes={
            "plait.actor.id": ctx.id,
            "plait.mail.attempt": mail.attempt,
            "plait.taint": is_outside_content(message, cfg),
            "messaging.destination.name": message.event.topic if message.event else None,
        },
    )
    with current(span):
        await _handle(ctx, mail, name, cfg, message)


async def _handle(
    ctx: ActorContext, mail: Mail, name: str, cfg: AgentActorConfig, message: AgentMessage
) -> None:
    """Handle ``message``, the agent actor ``name``'s mail ``mail``."""
    read = await _read(ctx, name)
    if message.identity(mail.id) in read.state.settled:
        await _drop_settled(ctx, mail, name)
        return
    services = ctx.service(RunServices)
    if cfg.program is not None:  # a program actor: the program, not a model, handles it
        trusted = not is_outside_content(message, cfg)
        await handle_program(ctx, mail, name, cfg, message, services, trusted=trusted)
        return
    if message.control == RESUME:
        await _resume(ctx, mail, name, services, str(message.decision))
        return
    if read.state.parked:
        await _hold(ctx, mail, name)
        return
    found = await ctx.mesh.get(inflight_key(name, mail.id))
    if found is not None:
        crashed = InFlight.model_validate(found.value)
        if crashed.effects and cfg.on_indeterminate != "retry":
            await _indeterminate(ctx, mail, name, cfg, services, message, crashed)
            return
        log.warning("agent %s: message %s was interrupted; its turn runs again", name, mail.id)
    if cfg.runner == "pi":  # the model writes one program, which runs: effects outside
        marker = InFlight(host=ctx.host, attempt=mail.attempt, effects=[EXEC])
        await ctx.mesh.put(inflight_key(name, mail.id), marker.model_dump())
        trusted = not is_outside_content(message, cfg)
        await handle_exec(ctx, mail, name, cfg, message, services, trusted=trusted)
        return
    await ctx.mesh.put(
        inflight_key(name, mail.id), InFlight(host=ctx.host, attempt=mail.attempt).model_dump()
    )
    profile = await get_profile(ctx.mesh, cfg.profile or name)
    if cfg.instructions:  # the actor's own instructions stand in for its profile's
        profile = profile.model_copy(update={"system_prompt": cfg.instructions})
    channels = agent_channels(ctx.mesh, services.owner_services.channels.keep_bytes)
    try:
        for repeat in range(TURN_REPEATS):
            effects = TurnEffects()
            # A delivery after a crash, or a run again after a conflict, is a new try.
            stream = None
            if channels is not None:
                stream = channels.turn(name, mail.id, mail.attempt + repeat, message.prompt)
            try:
                result, prepared = await _turn(
                    ctx, mail, name, cfg, services, profile, message, read, effects, stream
                )
            except _OverBudget as exc:
                await _park_for_budget(ctx, mail, name, cfg, services, message, str(exc), exc.spent)
                if channels is not None:
                    channels.stopped(name, mail.id, "parked: the day's budget is spent")
                return
            try:
                summary = await _commit(
                    ctx, mail, name, cfg, effects, result, prepared, message, read
                )
                if channels is not None:
                    channels.end(name, summary)
            except VersionConflict as exc:
                if exc.key in effects.puts:
                    # another writer came first: the turn sees its value this time, and
                    # whatever the actor committed meanwhile
                    read = await _read(ctx, name)
                    continue
                raise
            return
        raise ActorError(f"agent {name}: message {mail.id} kept conflicting on the keys it writes")
    except BaseException as exc:
        if channels is not None:  # its watchers learn the try ended with nothing committed
            channels.stopped(name, mail.id, f"stopped: {type(exc).__name__}")
        raise


async def _drop_settled(ctx: ActorContext, mail: Mail, name: str) -> None:
    """Ack a copy of a message already settled (delivered again), with no turn."""
    log.info("agent %s: message %s was settled already: dropped", name, mail.id)
    tx = ctx.mesh.transact()
    clear_backlog_in(tx, ctx.id, mail.id)
    mail.ack_in(tx)
    await tx.commit()


class _OverBudget(Exception):
    """A turn the day's budget stopped, with what its calls spent until then.

    That spend counts in the day's figures: the call that exhausted the budget was
    made and paid for; only the next one was refused.
    """

    def __init__(self, exc: BudgetExhausted, budget: VisitBudget) -> None:
        super().__init__(str(exc))
        self.spent = (budget.input_tokens + budget.output_tokens, budget.spent_dollars)


async def _turn(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    services: RunServices,
    profile: AgentProfile,
    message: AgentMessage,
    read: _Read,
    effects: TurnEffects,
    stream: TurnStream | None,
) -> tuple[TurnResult, PreparedTurn]:
    mesh = ctx.mesh
    state = read.state.for_today()
    budget = VisitBudget(
        tokens=_left(cfg.budget.tokens_per_day, state.raised_tokens, state.tokens),
        dollars=_left(cfg.budget.dollars_per_day, state.raised_dollars, state.dollars),
        node=ctx.id,
    )

    async def outside(tool: str) -> None:
        effects.outside.append(tool)
        marker = InFlight(host=ctx.host, attempt=mail.attempt, effects=effects.outside)
        await mesh.put(inflight_key(name, mail.id), marker.model_dump())

    async def program(ref: str, input: Any, trusted: bool) -> Any:
        grants = grant_all(
            mesh,
            tools=services.tools,
            profile=profile,
            by=ctx.id,
            agents=services.agents,
            trusted=trusted,
            programs=services.programs,
            budget=SharedBudget(within=budget, node=ctx.id),  # the day's, as the turn's
        )
        result = await run_program(ref, input, grants)
        if grants.taint.tainted:
            effects.tainted = True  # what it returns carries what it read
        return result

    effects.tainted = read.conversation.tainted or is_outside_content(message, cfg)
    prompt = message.prompt
    prepared = prepare_turn(
        mesh,
        actor_id=ctx.id,
        message_id=mail.id,
        profile=profile,
        prompt=prompt,
        effects=effects,
        tools=services.tools,
        model=load_model(cfg.model) if cfg.model else services.model,
        context=CallContext(node=profile.name, visit=state.turns + 1, instance=name, prompt=prompt),
        conversation=read.conversation.messages,
        max_rounds=cfg.max_rounds,
        budget=budget,
        approvals=DecisionApprovals(
            services.owner_services.board, ctx.id, mail.id, cfg.approval_wait_s
        ),
        cwd=services.cwd,
        programs=services.programs,
        run_program=program,
        on_outside=outside,
        read_taint=lambda: effects.tainted,  # a capability tool read a tainted value
        live=stream,
    )
    with prepared.tools.bound():
        try:
            result = await run_turn(prepared.turn, prepared.messages)
        except BudgetExhausted as exc:
            raise _OverBudget(exc, budget) from exc
    # What the programs it ran spent (their agents.run turns) is the turn's spend too.
    result.usage = Usage(input_tokens=budget.input_tokens, output_tokens=budget.output_tokens)
    result.dollars = budget.spent_dollars
    effects.called = [  # this turn's calls, not those of the conversation it carried
        call.name
        for m in result.messages[len(prepared.messages) :]
        if m.role == "assistant"
        for call in m.tool_calls
    ]
    return result, prepared


async def _commit(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    effects: TurnEffects,
    result: TurnResult,
    prepared: PreparedTurn,
    message: AgentMessage,
    read: _Read,
) -> TurnSummary:
    """Commit the turn: its effects, conversation, state, summary, backlog and ack; the
    summary committed."""
    mesh = ctx.mesh
    added = result.messages[prepared.first_new :]  # the user message, then the turn's own
    tokens = result.usage.input_tokens + result.usage.output_tokens
    while True:
        state = read.state.for_today()
        state.tokens += tokens
        state.dollars += result.dollars
        state.turns += 1
        summary = TurnSummary(
            seq=state.turns,
            message=mail.id,
            prompt=message.prompt,
            text=result.text,
            tools=effects.called,
            tokens=tokens,
            dollars=result.dollars,
            tainted=effects.tainted,
            at=time.time(),
        )
        tx = mesh.transact()
        effects.apply(tx)
        tx.put(
            conversation_key(name),
            read.conversation.extended(added, cfg.window, tainted=effects.tainted).model_dump(),
            read.conversation_version,
        )
        settle_turn_in(
            tx,
            ctx,
            mail,
            name,
            state,
            read.state_version,
            summary,
            settled=message.identity(mail.id),
            kept=cfg.turns_kept,
            drop_inflight=True,
        )
        try:
            await tx.commit()
        except VersionConflict as exc:
            mail.acked = False
            if exc.key in (conversation_key(name), state_key(name), turn_key(name, summary.seq)):
                # a concurrent turn of this actor committed first: append after it
                fresh = await _read(ctx, name)
                read.state, read.state_version = fresh.state, fresh.state_version
                read.conversation = fresh.conversation
                read.conversation_version = fresh.conversation_version
                continue
            raise
        return summary


async def _hold(ctx: ActorContext, mail: Mail, name: str) -> None:
    """Keep a message that came while parked, to tell again on resuming."""
    async with ctx.mesh.transact() as tx:
        tx.put(held_key(name, mail.id), {"body": mail.body})
        mail.ack_in(tx)


async def _park(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    services: RunServices,
    reason: str,
    title: str,
    options: list[str],
    data: dict[str, Any],
    spent: tuple[int, float] = (0, 0.0),
) -> None:
    """Park the actor, hold ``mail`` and raise the decision that unparks it; ``spent``
    (tokens, dollars) is what the stopped turn spent, counted in the day's figures."""
    mesh = ctx.mesh
    state, version = await read_state(mesh, name)  # fresh: the turn may have run long
    did = DecisionId(derived_id("dec_", ctx.id, "park", reason, str(state.turns), mail.id))
    notify = Notify(
        topic=mailbox_of(mesh, ctx.id),
        kind=MAIL_KIND,
        data=mail_data(ctx.id, {"control": RESUME, "decision": did}),
    )
    await services.owner_services.board.raise_(
        title, "choice", options, id=did, data=data, notify=notify, by=Agent(ctx.id)
    )
    state = state.for_today()
    state.parked, state.decision = reason, did
    state.tokens += spent[0]
    state.dollars += spent[1]
    async with mesh.transact() as tx:
        tx.put(state_key(name), state.model_dump(), version)
        tx.put(held_key(name, mail.id), {"body": mail.body, "parked": True})
        tx.delete(inflight_key(name, mail.id))
        mail.ack_in(tx)
    log.warning("agent %s parked (%s): decision %s", name, reason, did)


async def _park_for_budget(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    services: RunServices,
    message: AgentMessage,
    reason: str,
    spent: tuple[int, float],
) -> None:
    await _park(
        ctx,
        mail,
        name,
        services,
        "budget",
        f"Agent {name} has spent its daily budget ({reason}). Raise it for today?",
        ["raise", "keep parked"],
        {"budget": cfg.budget.model_dump(), "reason": reason},
        spent,
    )


async def _indeterminate(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    services: RunServices,
    message: AgentMessage,
    crashed: InFlight,
) -> None:
    if cfg.on_indeterminate == "skip":
        await _skip(ctx, mail, name, message, f"interrupted after {', '.join(crashed.effects)}")
        return
    await _park(
        ctx,
        mail,
        name,
        services,
        "indeterminate",
        f"Agent {name}'s turn on message {mail.id} was interrupted after calling "
        f"{', '.join(crashed.effects)}. Run it again, or skip it?",
        ["retry", "skip"],
        {"message": mail.id, "effects": crashed.effects, "host": crashed.host},
    )


async def on_dead_letter(ctx: ActorContext, mail: Mail, reason: str) -> None:
    """Before a message that kept failing is dead-lettered: note the failed turn, and
    clear its backlog marker and in-flight mark, with the ack."""
    name = agent_name(ctx.id)
    if name is not None:
        message = AgentMessage.parse(mail.body)
        await _skip(ctx, mail, name, message, reason, outcome="failed")


async def _skip(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    message: AgentMessage,
    why: str,
    *,
    outcome: str = "skipped",
) -> None:
    summary = await settle_turn(
        ctx,
        mail,
        name,
        settled=message.identity(mail.id),
        prompt=message.prompt,
        text=why,
        outcome=outcome,
        drop_inflight=True,
    )
    channels = agent_channels(ctx.mesh)
    if channels is not None:
        channels.end(name, summary)


async def _resume(
    ctx: ActorContext, mail: Mail, name: str, services: RunServices, decision_id: str
) -> None:
    """A parked actor's decision closed: unpark as it says, and tell the held mail again."""
    mesh = ctx.mesh
    cfg = AgentActorConfig.model_validate(ctx.record.config)
    state, version = await read_state(mesh, name)
    decision = await services.owner_services.board.get(DecisionId(decision_id))
    option = decision.answer.option if decision.answer is not None else None
    if state.decision != decision_id or decision.is_open or option in (None, "keep parked"):
        await mail.ack()  # not the decision it waits on, or the answer keeps it parked
        return
    held = await held_messages(mesh, name)
    state = state.for_today()
    if state.parked == "budget":
        state.raised_tokens += cfg.budget.tokens_per_day or 0
        state.raised_dollars += cfg.budget.dollars_per_day or 0.0
    state.parked = state.decision = None
    async with mesh.transact() as tx:
        tx.put(state_key(name), state.model_dump(), version)
        for entry in held:
            message_id = entry.key.rsplit("/", 1)[1]
            tx.delete(entry.key)
            clear_backlog_in(tx, ctx.id, message_id)
            if entry.value.get("parked") and option in ("skip", "retry"):
                tx.delete(inflight_key(name, message_id))
                if option == "skip":
                    continue
            tell_tracked_in(tx, ctx.id, entry.value["body"])
        mail.ack_in(tx)


KIND = ActorKind(handle, on_dead_letter)
"""The agent actor kind, for a serving process's table of kinds (``AGENT_KIND``)."""


__all__ = [
    "KIND",
    "RESUME",
    "DecisionApprovals",
    "handle",
    "is_outside_content",
    "on_dead_letter",
]
