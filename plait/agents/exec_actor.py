"""Exec actors: agent actors (``runner="pi"``) whose model writes one program per message.

An agent actor started with ``runner="pi"`` (``agents.create(name, runner="pi",
residency="durable", topics=[...], instructions=...)``) handles each message — told, or
an event of a topic it subscribes to — with one model turn: the model is given the
actor's ``instructions``, the message, and one tool, ``exec``; it answers by calling
``exec`` once with a program text (and its ``payloads``). That program runs in the
program sandbox (:mod:`plait.programs.sandbox`) with the capabilities of a program an
actor runs (:func:`~plait.agents.program_actor.actor_grants`: its tools gated by the
actor's profile, default ``assistant``; ``mesh.self()`` naming the actor; decisions
raised once per message and waking the actor when they close), untrusted if the
message is outside content. What the program returns ends the turn: the model is not
called again, so a message is exactly one program.

The mesh record a program keeps decides what happens, never the mailbox text: an event
carrying ``data["fabricProgram"] = {"ref", "input"}`` runs nothing by itself; it is a
message like any other, and the program the model writes may ``programs.run`` it.

Like a program actor's, the program's effects are not held back: it makes itself
idempotent (compare-and-swap on the record it owns), as a message is delivered again
after a crash (its in-flight mark then says so, and ``on_indeterminate`` decides). A
program stopped by :class:`~plait.errors.VersionConflict` lost a race on a key it owns
and the message settles as a ``conflict``; a program that fails settles as ``failed``
with its one-line error; a model that answers without calling ``exec`` settles as
``answered`` with its text, having run nothing.
"""

from __future__ import annotations

import json
from typing import Any

from plait.actors import ActorContext, Mail
from plait.agents.config import AgentActorConfig
from plait.agents.message import AgentMessage
from plait.agents.program_actor import actor_grants
from plait.agents.store import settle_turn
from plait.errors import ConfigError, ProgramError, VersionConflict
from plait.models import CallContext, Message, ModelReply, load_model
from plait.profiles import DEFAULT_ASSISTANT, get_profile
from plait.programs import Grants, run_source
from plait.runs import RunServices
from plait.tools.spec import ToolSpec

EXEC = "exec"
"""The name of the one tool an exec actor's model is given."""

EXEC_TOOL = ToolSpec(
    name=EXEC,
    description=(
        "Run one Python program and end the turn with its result. The program's body may "
        "`await` and `return` at top level. Its globals: mesh (get, put with ifVersion, "
        "publish, scan, self), agents (create, tell, run), decisions (wait; raise through "
        "tools.call(ref='decisions.raise', args={...})), tools (call, bash), programs "
        "(run), payload, and π (also pi): π.NAME reads payloads.NAME, π.bash(command=...) "
        "runs a shell command."
    ),
    parameters={
        "type": "object",
        "properties": {
            "program": {"type": "string", "minLength": 1},
            "payloads": {"type": "object"},
        },
        "required": ["program"],
        "additionalProperties": False,
    },
)
"""The ``exec`` tool as the model is told of it."""

GUIDE = (
    "Answer every message by calling the exec tool exactly once, with one complete Python "
    "program (and its payloads); its result ends your turn."
)
"""Appended to the actor's instructions: the shape of every turn."""


async def handle_exec(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    cfg: AgentActorConfig,
    message: AgentMessage,
    services: RunServices,
    *,
    trusted: bool = True,
) -> None:
    """One turn for ``mail``: the model writes one program, which runs; settle the message.

    Raises:
        ConfigError: no model answers for this actor (none in its settings, none given
            to the serving process).
    """
    model = load_model(cfg.model) if cfg.model else services.model
    if model is None:
        raise ConfigError(
            f"agent actor {name!r} runs programs its model writes, and has no model: start "
            "it with model=, or serve it with --model (or PLAIT_MODEL)"
        )
    prompt = message.prompt
    profile = await get_profile(ctx.mesh, cfg.profile or DEFAULT_ASSISTANT.name)
    instructions = cfg.instructions or profile.system_prompt or ""
    messages = [
        Message(role="system", content=f"{instructions}\n\n{GUIDE}".strip()),
        Message(role="user", content=prompt),
    ]
    reply = await model.complete(
        messages, tools=[EXEC_TOOL], context=CallContext(node=name, instance=name, prompt=prompt)
    )
    spent = (reply.usage.input_tokens + reply.usage.output_tokens, 0.0)
    grants = actor_grants(ctx, mail, message, services, profile, trusted=trusted)
    outcome, text, called = await _run_reply(name, reply, grants)
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
        drop_inflight=True,
        tools=called,
        spent=spent,
    )


async def _run_reply(name: str, reply: ModelReply, grants: Grants) -> tuple[str, str, list[str]]:
    """Run the program the reply's ``exec`` call holds: ``(outcome, text, tools called)``."""
    calls = [c for c in reply.tool_calls if c.name == EXEC]
    if not calls:
        return "answered", reply.text, []
    if len(reply.tool_calls) > 1:
        names = ", ".join(c.name for c in reply.tool_calls)
        return "failed", f"one program per turn: the model called {names}; none ran", []
    args = calls[0].arguments
    program, payloads = args.get("program"), args.get("payloads") or {}
    if not isinstance(program, str) or not program.strip():
        return "failed", "exec needs a program (a non-empty string); none ran", [EXEC]
    if not isinstance(payloads, dict):
        return "failed", "exec's payloads must be an object; the program did not run", [EXEC]
    try:
        result: Any = await run_source(program, payloads, grants, filename=f"{name}:exec")
    except VersionConflict as exc:
        return "conflict", f"stopped on a conflict: {exc}", [EXEC]
    except ProgramError as exc:
        return "failed", str(exc), [EXEC]
    return "answered", json.dumps(result, ensure_ascii=False, default=str), [EXEC]


__all__ = ["EXEC", "EXEC_TOOL", "GUIDE", "handle_exec"]
