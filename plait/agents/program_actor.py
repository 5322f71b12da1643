"""Program actors: agent actors whose every message runs one program, not a model turn.

An agent actor started with ``program=REF`` (``agents.create(name, program=REF,
input={...})``) handles each message — told, or an event of a topic it subscribes to —
by running ``REF`` once, promoted as required, with the capabilities of a program an
agent runs (mesh, agents, programs, decisions, tools gated by its profile, default
``assistant``). The program's payload is the actor's ``input`` and ``message`` (what
the message says, as a turn's prompt would); ``mesh.self()`` names the actor, so the
program can tell itself to go on.

Unlike a model turn, the program's effects are not held back: the program is what
makes itself idempotent (a compare-and-swap on the record it owns, a check of an effect
before repeating it), as a message may be delivered again after a crash. A program that
raises :class:`~plait.errors.VersionConflict` lost a race on a key it owns — another
message already moved it on — so the message is settled as a ``conflict`` rather than
delivered again. Each message ends with a turn summary (``plait agents show``), its
backlog marker cleared and its ack, in one transaction.

A message that is outside content (told as untrusted, or an event of one of the
actor's ``untrusted_topics``) runs the program untrusted: its gated tools lose their
pre-approvals, and what it tells an agent is marked untrusted.
"""

from __future__ import annotations

import json
import time

from plait.actors import ActorContext, Mail, clear_backlog_in
from plait.agents.config import AgentActorConfig
from plait.agents.service import Agents
from plait.agents.store import TurnSummary, read_state, state_key, turn_key
from plait.errors import VersionConflict
from plait.profiles import DEFAULT_ASSISTANT, get_profile
from plait.programs import grant_all, run_program
from plait.runs import RunHost


async def handle_program(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    prompt: str,
    *,
    trusted: bool = True,
) -> None:
    """Run the actor's program once for ``mail`` (untrusted if the message is outside
    content) and settle the message."""
    assert cfg.program is not None
    mesh = ctx.mesh
    host = ctx.service(RunHost)
    profile = await get_profile(mesh, cfg.profile or DEFAULT_ASSISTANT.name)
    grants = grant_all(
        mesh,
        tools=host.tools,
        profile=profile,
        by=ctx.id,
        me={"id": ctx.id, "run": None, "node": None},
        agents=Agents(mesh, model=host.env.model, tools=host.tools),
        trusted=trusted,
    )
    outcome = "answered"
    try:
        result = await run_program(
            cfg.program, {**cfg.input, "message": prompt}, grants, require_promoted=True
        )
        text = json.dumps(result, ensure_ascii=False, default=str)
    except VersionConflict as exc:
        outcome, text = "conflict", f"stopped on a conflict: {exc}"
    await _settle(ctx, mail, name, prompt, text, outcome, cfg.turns_kept, tainted=not trusted)


async def _settle(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    prompt: str,
    text: str,
    outcome: str,
    kept: int,
    *,
    tainted: bool = False,
) -> None:
    mesh = ctx.mesh
    while True:
        state, version = await read_state(mesh, name)
        state.turns += 1
        summary = TurnSummary(
            seq=state.turns,
            message=mail.id,
            prompt=prompt,
            text=text,
            tools=[],
            outcome=outcome,
            tainted=tainted,
            at=time.time(),
        )
        tx = mesh.transact()
        tx.put(state_key(name), state.model_dump(), version)
        tx.put(turn_key(name, summary.seq), summary.model_dump(), if_version=0)
        if summary.seq > kept:
            tx.delete(turn_key(name, summary.seq - kept))
        clear_backlog_in(tx, ctx.id, mail.id)
        mail.ack_in(tx)
        try:
            await tx.commit()
        except VersionConflict as exc:
            mail.acked = False
            if exc.key in (state_key(name), turn_key(name, summary.seq)):
                continue  # another message of this actor settled first: count after it
            raise
        return


__all__ = ["handle_program"]
