"""An agent actor's turns as server-sent events: its live channel, resumable by offset.

``GET /api/agents/{name}/events`` follows the actor's live channel
(:func:`plait.agents.live.follow_agent`): ``turn``, ``delta`` and ``end`` events, each
with its channel offset as its SSE id and the :class:`~plait.agents.live.AgentEvent` as
its data. Without ``Last-Event-ID`` it starts at the turn in flight (from its first
piece, as far as the channel keeps it), else at what comes next; with
``Last-Event-ID: N`` it resumes after offset N: no gap, no duplicate. It follows until
the client goes, or, with ``?turns=N``, until N turns ended. Each event is encoded once
for every connection of the process that follows the actor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from plait.agents.live import AgentEvent, follow_agent
from plait.api.events import sse, stream_response, stream_schema
from plait.api.spec import Spec, add_model
from plait.mesh import Mesh
from plait.runs.watch import SharedResults

_EVENTS = {
    "turn": ("AgentEvent", "A turn on a message starts (restart: an earlier try was cut off)."),
    "delta": ("AgentEvent", "A piece of the reply the turn's model streams."),
    "end": ("AgentEvent", "The turn ended: its summary, the only truth of what it said."),
}
"""Each event's name: the schema of its data, and what it says."""

AGENT_EVENTS_RESPONSE = stream_response(
    "The agent actor's live channel, each event's id its offset: ``turn``, ``delta`` "
    "and ``end``, from the turn in flight (or after Last-Event-ID).",
    "AgentStreamEvent",
)
"""The OpenAPI ``responses`` entry of the agent events route."""


def declare_agent_events(spec: Spec) -> None:
    """Put the schemas :data:`AGENT_EVENTS_RESPONSE` refers to in ``spec``."""
    add_model(spec, AgentEvent)
    spec["components"]["schemas"]["AgentStreamEvent"] = stream_schema(
        "One server-sent event of an agent actor (the id: its live channel offset).", _EVENTS
    )


def _frame(event: AgentEvent) -> str:
    return sse(event.kind, event.model_dump(mode="json", exclude_none=True), id=event.offset)


agent_frame = SharedResults(_frame)
"""The frame of an agent event, encoded once for every connection that follows it."""


async def agent_events(
    mesh: Mesh, name: str, *, last_event_id: int | None = None, turns: int | None = None
) -> AsyncIterator[str]:
    """The frames of agent actor ``name``'s events (see the module docstring)."""
    yield ": following agent " + name + "\n\n"
    async for event in follow_agent(mesh, name, after=last_event_id, turns=turns):
        yield agent_frame(event)


__all__ = [
    "AGENT_EVENTS_RESPONSE",
    "agent_events",
    "agent_frame",
    "declare_agent_events",
]
