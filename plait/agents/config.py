"""An agent actor's settings and the names it lives under in the mesh.

An agent actor runs the agent profile of the same name (``plait agents put NAME``) as
the durable actor ``agent:NAME`` (:func:`agent_actor_id`). Its settings are the actor
record's ``config`` (:class:`AgentActorConfig`); what it keeps between messages lives
under ``agent-actors/NAME/`` (:mod:`plait.agents.store`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AGENT_KIND = "plait.agents.actor:handle"
"""The actor kind of agent actors."""

AGENT_PREFIX = "agent:"
"""Agent actor ids are this and the profile name."""

OnIndeterminate = Literal["retry", "skip", "escalate"]
"""What an agent actor does with a message whose turn a crash interrupted.

- ``"retry"``: run the turn again. Always safe when the turn had called no tool with
  effects outside the mesh (its mesh writes commit only with the turn), so it is what
  such a turn does whatever the setting.
- ``"skip"``: ack the message unhandled, noting it in the turns log.
- ``"escalate"``: park the actor and raise a decision a person answers (``retry`` or
  ``skip``).
"""


Runner = Literal["model", "pi"]
"""What handles an agent actor's messages.

- ``"model"``: a model turn per message: the profile's instructions, the conversation,
  the profile's tools and the capability tools, until the model answers.
- ``"pi"``: per message, the model writes exactly one program and runs it with the
  ``exec`` tool; the program runs sandboxed with the actor's capabilities
  (:mod:`plait.agents.exec_actor`).
"""


def agent_actor_id(name: str) -> str:
    """The actor id of the agent actor running profile ``name``."""
    return f"{AGENT_PREFIX}{name}"


def agent_name(actor_id: str) -> str | None:
    """The profile name of an agent actor id, or None for another actor."""
    return actor_id[len(AGENT_PREFIX) :] if actor_id.startswith(AGENT_PREFIX) else None


class AgentBudget(BaseModel):
    """What an agent actor may spend per UTC day (None: no limit).

    A turn whose next model call would pass a limit stops; the actor parks and raises
    a decision only a person can answer (``raise`` lifts the limit for the day).
    """

    model_config = ConfigDict(extra="forbid")

    tokens_per_day: int | None = Field(default=None, ge=0)
    dollars_per_day: float | None = Field(default=None, ge=0)


class AgentActorConfig(BaseModel):
    """An agent actor's settings (its actor record's ``config``).

    Attributes:
        profile: the agent profile it runs (None: the one named as the actor).
        max_concurrency: messages handled at once (turns then share the conversation:
            each appends its exchange when it commits).
        window: conversation messages carried into a turn (the newest; the rest are
            summarised away: only a count of them is kept).
        max_rounds: model calls one turn may make.
        on_indeterminate: see :data:`OnIndeterminate`.
        budget: per-day limits, see :class:`AgentBudget`.
        model: a model spec overriding the profile's (None: the profile's, or the
            serving process's ``--model``).
        turns_kept: how many turn summaries ``agents show`` can list.
        approval_wait_s: how long a turn waits for a person to approve a gated tool.
        program: a program ref (a promoted saved program, or a registered one): each
            message runs it once instead of a model turn (a program actor, see
            :mod:`plait.agents.program_actor`); None: a model turn per message.
        input: what such a program's payload holds besides ``message``.
        runner: see :data:`Runner`.
        instructions: the actor's own instructions (its system prompt), in place of
            its profile's.
        untrusted_topics: topics (or prefixes like ``hooks.*``) that carry outside
            content (a webhook, a feed): a turn handling one of their events runs
            untrusted and loses its pre-approved tools, and so do the turns after it
            that carry its conversation.
    """

    model_config = ConfigDict(extra="forbid")

    profile: str | None = None
    max_concurrency: int = Field(default=1, ge=1)
    window: int = Field(default=40, ge=2)
    max_rounds: int = Field(default=8, ge=1)
    on_indeterminate: OnIndeterminate = "retry"
    budget: AgentBudget = Field(default_factory=AgentBudget)
    model: str | None = None
    turns_kept: int = Field(default=20, ge=1)
    approval_wait_s: float = Field(default=3600.0, ge=0)
    program: str | None = Field(default=None, min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    runner: Runner = "model"
    instructions: str | None = None
    untrusted_topics: list[str] = Field(default_factory=list)


__all__ = [
    "AGENT_KIND",
    "AGENT_PREFIX",
    "AgentActorConfig",
    "AgentBudget",
    "OnIndeterminate",
    "Runner",
    "agent_actor_id",
    "agent_name",
]
