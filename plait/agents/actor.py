"""The agent actor kind: each message is one agent turn, committed with its ack.

A message (a ``{"text": ...}`` told to the actor, or an event of a topic it subscribes
to) becomes the user message of one turn: the agent node's loop (model, tool calls,
until it answers) with the profile's instructions, the conversation so far (its last
``window`` messages) and the capabilities as tools (:mod:`plait.agents.tools`).

A program actor (started with ``program=REF``) runs that program once per message
instead (:mod:`plait.agents.program_actor`).

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

Budgets. Before every model call the day's spending is checked against the actor's
``budget``; a turn that would pass it stops, the actor parks (later messages are held)
and raises a decision only a person answers: ``raise`` lifts the day's limits by as
much again and tells the held messages again; ``keep parked`` leaves it parked.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from plait.actors import (
    ActorContext,
    Mail,
    clear_backlog_in,
    mail_data,
    mailbox_of,
    tell_tracked_in,
)
from plait.actors.directory import MAIL_KIND
from plait.actors.topics import matches, topic_event
from plait.agents.config import AgentActorConfig, agent_name
from plait.agents.program_actor import handle_program
from plait.agents.service import Agents
from plait.agents.store import (
    InFlight,
    TurnSummary,
    conversation_key,
    held_key,
    held_messages,
    inflight_key,
    message_identity,
    read_conversation,
    read_state,
    settle_turn,
    settle_turn_in,
    state_key,
    turn_key,
)
from plait.agents.tools import UNTRUSTED, TurnEffects, TurnTools, with_capabilities
from plait.decisions import Agent, DecisionBoard, DecisionId
from plait.decisions.model import Notify
from plait.errors import ActorError, BudgetExhausted, VersionConflict
from plait.graphs.agent_loop import Turn, TurnResult, run_turn
from plait.graphs.budget import VisitBudget
from plait.graphs.ports import ExecEnv
from plait.ids import derived_id
from plait.models import CallContext, Message, load_model
from plait.profiles import AgentProfile, get_profile
from plait.programs import grant_all, run_program
from plait.runs import RunHost

log = logging.getLogger("plait.agents")

TURN_REPEATS = 5
"""How often a turn runs again after a conflict on a key it wrote, before it fails
(the message is then delivered again, as after any error)."""

RESUME = "resume"
"""The control message a parked actor's decision sends it once closed."""


def prompt_of(body: Any) -> str:
    """The user message a mailbox body becomes."""
    event = topic_event(body)
    if event is not None:
        return json.dumps(
            {"topic": event.topic, "kind": event.kind, "data": event.data, "event": event.id},
            ensure_ascii=False,
            default=str,
        )
    if isinstance(body, dict) and isinstance(body.get("text"), str):
        return str(body["text"])
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)


def is_outside_content(body: Any, cfg: AgentActorConfig) -> bool:
    """Whether a mailbox body is outside content: a message told as untrusted, an event
    published tainted (by a turn or program that had read some), or an event of one of
    the actor's ``untrusted_topics``."""
    event = topic_event(body)
    if event is not None:
        if event.tainted:
            return True
        return any(matches(pattern, event.topic) for pattern in cfg.untrusted_topics)
    return isinstance(body, dict) and body.get(UNTRUSTED) is True


class DecisionApprovals:
    """Approvals of gated tools for an agent turn: a decision a person answers."""

    def __init__(self, board: DecisionBoard, actor_id: str, message_id: str, wait_s: float) -> None:
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


def _left(limit: float | None, raised: float, spent: float) -> float | None:
    return None if limit is None else limit + raised - spent


async def handle(ctx: ActorContext, mail: Mail) -> None:
    """Handle one message of an agent actor (the kind ``plait.agents.actor:handle``)."""
    name = agent_name(ctx.id)
    if name is None:
        raise ActorError(f"actor {ctx.id!r} is not an agent actor (ids are agent:NAME)")
    cfg = AgentActorConfig.model_validate(ctx.record.config)
    body = mail.body
    state, _ = await read_state(ctx.mesh, name)
    if message_identity(mail) in state.settled:
        await _drop_settled(ctx, mail, name)
        return
    if cfg.program is not None:  # a program actor: the program, not a model, handles it
        trusted = not is_outside_content(body, cfg)
        await handle_program(ctx, mail, name, cfg, prompt_of(body), trusted=trusted)
        return
    if isinstance(body, dict) and body.get("control") == RESUME:
        await _resume(ctx, mail, name, str(body.get("decision")))
        return
    if state.parked:
        await _hold(ctx, mail, name)
        return
    found = await ctx.mesh.get(inflight_key(name, mail.id))
    if found is not None:
        crashed = InFlight.model_validate(found.value)
        if crashed.effects and cfg.on_indeterminate != "retry":
            await _indeterminate(ctx, mail, name, cfg, crashed)
            return
        log.warning("agent %s: message %s was interrupted; its turn runs again", name, mail.id)
    await ctx.mesh.put(
        inflight_key(name, mail.id), InFlight(host=ctx.host, attempt=mail.attempt).model_dump()
    )
    host = ctx.service(RunHost)
    profile = await get_profile(ctx.mesh, cfg.profile or name)
    for _ in range(TURN_REPEATS):
        effects = TurnEffects()
        try:
            result, messages, prompt = await _turn(ctx, mail, name, cfg, host, profile, effects)
        except BudgetExhausted as exc:
            await _park_for_budget(ctx, mail, name, cfg, str(exc))
            return
        try:
            await _commit(ctx, mail, name, cfg, effects, result, messages, prompt)
        except VersionConflict as exc:
            if exc.key in effects.puts:
                continue  # another writer came first: the turn sees its value this time
            raise
        return
    raise ActorError(f"agent {name}: message {mail.id} kept conflicting on the keys it writes")


async def _drop_settled(ctx: ActorContext, mail: Mail, name: str) -> None:
    """Ack a copy of a message already settled (delivered again), with no turn."""
    log.info("agent %s: message %s was settled already: dropped", name, mail.id)
    tx = ctx.mesh.transact()
    clear_backlog_in(tx, ctx.id, mail.id)
    mail.ack_in(tx)
    await tx.commit()


async def _turn(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    host: RunHost,
    profile: AgentProfile,
    effects: TurnEffects,
) -> tuple[TurnResult, list[Message], str]:
    mesh = ctx.mesh
    state, _ = await read_state(mesh, name)
    state = state.for_today()
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
        agents = Agents(mesh, model=host.env.model, tools=host.tools)
        grants = grant_all(
            mesh, tools=host.tools, profile=profile, by=ctx.id, agents=agents, trusted=trusted
        )
        result = await run_program(ref, input, grants)
        if grants.taint.tainted:
            effects.tainted = True  # what it returns carries what it read
        return result

    tools = TurnTools(mesh, ctx.id, mail.id, effects, run_program=program, on_outside=outside)
    registry = with_capabilities(host.tools)
    board = DecisionBoard(mesh)
    env = ExecEnv(
        agent=profile.name,
        model=load_model(cfg.model) if cfg.model else host.env.model,
        profiles={profile.name: profile},
        tools=registry,
        approvals=DecisionApprovals(board, ctx.id, mail.id, cfg.approval_wait_s),
        cwd=host.env.cwd,
        protected=mesh.local_files,
        mesh=mesh,
    )
    conversation, _ = await read_conversation(mesh, name)
    effects.tainted = conversation.tainted or is_outside_content(mail.body, cfg)
    prompt = prompt_of(mail.body)
    messages = (
        [Message(role="system", content=profile.system_prompt)] if profile.system_prompt else []
    )
    messages += [*conversation.messages, Message(role="user", content=prompt)]
    turn = Turn(
        env=env,
        profile=profile,
        model=env.model_for(profile),
        context=CallContext(node=profile.name, visit=state.turns + 1, instance=name, prompt=prompt),
        tools=list(profile.tools),
        trusted=not effects.tainted,
        max_rounds=cfg.max_rounds,
        budget=budget,
        on_untrusted=lambda: setattr(effects, "tainted", True),
        read_taint=lambda: effects.tainted,  # a capability tool read a tainted value
    )
    with tools.bound():
        result = await run_turn(turn, messages)
    effects.called = [  # this turn's calls, not those of the conversation it carried
        call.name
        for m in result.messages[len(messages) :]
        if m.role == "assistant"
        for call in m.tool_calls
    ]
    return result, messages, prompt


async def _commit(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    effects: TurnEffects,
    result: TurnResult,
    messages: list[Message],
    prompt: str,
) -> None:
    """Commit the turn: its effects, conversation, state, summary, backlog and ack."""
    mesh = ctx.mesh
    first_new = len(messages) - 1  # the user message, then what the turn added
    added = result.messages[first_new:]
    tokens = result.usage.input_tokens + result.usage.output_tokens
    while True:
        state, state_version = await read_state(mesh, name)
        conversation, conv_version = await read_conversation(mesh, name)
        state = state.for_today()
        state.tokens += tokens
        state.dollars += result.dollars
        state.turns += 1
        summary = TurnSummary(
            seq=state.turns,
            message=mail.id,
            prompt=prompt,
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
            conversation.extended(added, cfg.window, tainted=effects.tainted).model_dump(),
            conv_version,
        )
        settle_turn_in(
            tx,
            ctx,
            mail,
            name,
            state,
            state_version,
            summary,
            kept=cfg.turns_kept,
            drop_inflight=True,
        )
        try:
            await tx.commit()
        except VersionConflict as exc:
            mail.acked = False
            if exc.key in (conversation_key(name), state_key(name), turn_key(name, summary.seq)):
                continue  # a concurrent turn of this actor committed first: append after it
            raise
        return


async def _hold(ctx: ActorContext, mail: Mail, name: str) -> None:
    """Keep a message that came while parked, to tell again on resuming."""
    async with ctx.mesh.transact() as tx:
        tx.put(held_key(name, mail.id), {"body": mail.body})
        mail.ack_in(tx)


async def _park(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    reason: str,
    title: str,
    options: list[str],
    data: dict[str, Any],
) -> None:
    """Park the actor, hold ``mail`` and raise the decision that unparks it."""
    mesh = ctx.mesh
    state, version = await read_state(mesh, name)
    did = DecisionId(derived_id("dec_", ctx.id, "park", reason, str(state.turns), mail.id))
    notify = Notify(
        topic=mailbox_of(mesh, ctx.id),
        kind=MAIL_KIND,
        data=mail_data(ctx.id, {"control": RESUME, "decision": did}),
    )
    await DecisionBoard(mesh).raise_(
        title, "choice", options, id=did, data=data, notify=notify, by=Agent(ctx.id)
    )
    state = state.for_today()
    state.parked, state.decision = reason, did
    async with mesh.transact() as tx:
        tx.put(state_key(name), state.model_dump(), version)
        tx.put(held_key(name, mail.id), {"body": mail.body, "parked": True})
        tx.delete(inflight_key(name, mail.id))
        mail.ack_in(tx)
    log.warning("agent %s parked (%s): decision %s", name, reason, did)


async def _park_for_budget(
    ctx: ActorContext, mail: Mail, name: str, cfg: AgentActorConfig, reason: str
) -> None:
    await _park(
        ctx,
        mail,
        name,
        "budget",
        f"Agent {name} has spent its daily budget ({reason}). Raise it for today?",
        ["raise", "keep parked"],
        {"budget": cfg.budget.model_dump(), "reason": reason},
    )


async def _indeterminate(
    ctx: ActorContext, mail: Mail, name: str, cfg: AgentActorConfig, crashed: InFlight
) -> None:
    if cfg.on_indeterminate == "skip":
        await _skip(ctx, mail, name, f"interrupted after {', '.join(crashed.effects)}")
        return
    await _park(
        ctx,
        mail,
        name,
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
        await _skip(ctx, mail, name, reason, outcome="failed")


async def _skip(
    ctx: ActorContext, mail: Mail, name: str, why: str, *, outcome: str = "skipped"
) -> None:
    await settle_turn(
        ctx, mail, name, prompt=prompt_of(mail.body), text=why, outcome=outcome, drop_inflight=True
    )


async def _resume(ctx: ActorContext, mail: Mail, name: str, decision_id: str) -> None:
    """A parked actor's decision closed: unpark as it says, and tell the held mail again."""
    mesh = ctx.mesh
    cfg = AgentActorConfig.model_validate(ctx.record.config)
    state, version = await read_state(mesh, name)
    decision = await DecisionBoard(mesh).get(DecisionId(decision_id))
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


__all__ = [
    "RESUME",
    "DecisionApprovals",
    "handle",
    "is_outside_content",
    "on_dead_letter",
    "prompt_of",
]
