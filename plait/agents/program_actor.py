"""Program actors: agent actors whose every message runs one program, not a model turn.

An agent actor started with ``program=REF`` (``agents.create(name, program=REF,
input={...})``) handles each message — told, or an event of a topic it subscribes to —
by running ``REF`` once, promoted as required, with the capabilities of a program an
agent runs (mesh, agents, programs, decisions, tools gated by its profile, default
``assistant``). The program's payload is the actor's ``input`` and ``message`` (what
the message says, as a turn's prompt would); ``mesh.self()`` names the actor, so the
program can tell itself to go on.

A decision the program raises wakes the actor when it closes (a message telling it
so), and one raised without an ``id`` gets an id derived from the actor, the message
and the raise's place in the run: the message delivered again raises none twice.

Unlike a model turn, the program's effects are not held back: the program is what
makes itself idempotent (a compare-and-swap on the record it owns, a check of an effect
before repeating it), as a message may be delivered again after a crash. A program that
raises :class:`~plait.errors.VersionConflict` lost a race on a key it owns — another
message already moved it on — so the message is settled as a ``conflict`` rather than
delivered again. Each message ends with a turn summary (``plait agents show``), its
backlog marker cleared and its ack, in one transaction.

A message that is outside content (told as untrusted, an event published tainted, or
an event of one of the actor's ``untrusted_topics``) runs the program untrusted: its
gated tools lose their pre-approvals, what it tells an agent is marked untrusted, and
what it writes and publishes on the mesh is stored tainted.
"""

from __future__ import annotations

import json

from plait.actors import ActorContext, Mail, mail_data, mailbox_of
from plait.actors.directory import MAIL_KIND
from plait.agents.config import AgentActorConfig
from plait.agents.message import AgentMessage
from plait.agents.store import settle_turn
from plait.decisions import Notify
from plait.errors import VersionConflict
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile, get_profile
from plait.programs import Grants, grant_all, run_program
from plait.runs import RunServices


def actor_grants(
    ctx: ActorContext,
    mail: Mail,
    message: AgentMessage,
    services: RunServices,
    profile: AgentProfile,
    *,
    trusted: bool,
) -> Grants:
    """The capabilities a program an actor runs for ``mail`` gets: every one, its tools
    gated by ``profile``, ``mesh.self()`` naming the actor. A decision it raises without
    an id is raised once per message and call (a message delivered again after a crash
    finds it raised), and wakes the actor when it closes."""
    mesh = ctx.mesh
    actor_id = ctx.id

    def wake(decision_id: str) -> Notify:
        body = {"text": f"Decision {decision_id}, which you raised, has closed."}
        return Notify(
            topic=mailbox_of(mesh, actor_id), kind=MAIL_KIND, data=mail_data(actor_id, body)
        )

    return grant_all(
        mesh,
        tools=services.tools,
        profile=profile,
        by=actor_id,
        me={"id": actor_id, "run": None, "node": None},
        agents=services.agents,
        trusted=trusted,
        programs=services.programs,
        raise_scope=(actor_id, message.identity(mail.id)),
        wake=wake,
    )


async def handle_program(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    message: AgentMessage,
    services: RunServices,
    *,
    trusted: bool = True,
) -> None:
    """Run the actor's program once for ``mail`` (untrusted if the message is outside
    content) and settle the message."""
    assert cfg.program is not None
    mesh = ctx.mesh
    prompt = message.prompt
    profile = await get_profile(mesh, cfg.profile or DEFAULT_ASSISTANT.name)
    grants = actor_grants(ctx, mail, message, services, profile, trusted=trusted)
    outcome = "answered"
    try:
        result = await run_program(
            cfg.program, {**cfg.input, "message": prompt}, grants, require_promoted=True
        )
        text = json.dumps(result, ensure_ascii=False, default=str)
    except VersionConflict as exc:
        outcome, text = "conflict", f"stopped on a conflict: {exc}"
    await settle_turn(
        ctx,
        mail,
        name,
        settled=message.identity(mail.id),
        prompt=prompt,
        text=text,
        outcome=outcome,
        tainted=not trusted,
        kept=cfg.turns_kept,
    )


__all__ = ["actor_grants", "handle_program"]
