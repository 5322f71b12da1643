"""A run's events as server-sent events: its live channel, resumable by offset.

Without ``Last-Event-ID`` the stream begins with the ``progress`` of every transition
the run's log holds (those frames carry no id), then follows the run's live channel
(:func:`plait.runs.watch.follow_run`) from the start of the visits in flight, so a
client that comes mid-reply sees it from its first piece: ``attempt``, ``delta`` and
``progress`` events, each with its channel offset as its SSE id. A client that reconnects with
``Last-Event-ID: N`` (an ``EventSource`` does so by itself) gets what followed offset
N, as far as the channel still keeps it, then live data: no gap, no duplicate. Once
the run is done, failed, cancelled or waits, one ``settled`` event ends the stream.

The stream waits on the channel's wake-ups; nothing polls per connection.

:data:`EVENTS_RESPONSE` documents the stream in the OpenAPI spec: OpenAPI 3.2's
``itemSchema`` of ``text/event-stream``, one schema per event name, each event's
``data`` a JSON document (``contentMediaType``) of the schema its name says.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Header
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from plait.api.spec import Spec, add_model
from plait.runs import RunRecord, Runs
from plait.runs.channel import LiveEvent, channel_of
from plait.runs.log import LogFollower
from plait.runs.watch import SharedResults, follow_run, in_flight_start


class AttemptData(BaseModel):
    """The data of an ``attempt`` event: a visit starts streaming."""

    offset: int = Field(description="Its offset in the run's live channel (the event id).")
    node: str = Field(description="The node (or fan-out instance) that streams.")
    visit: int
    attempt: int = Field(ge=1, description="Which try of the visit (from 1).")
    restart: bool = Field(description="An earlier try was cut off: do not join their text.")


class DeltaData(AttemptData):
    """The data of a ``delta`` event: a piece of the text a node's model streams."""

    text: str


_SCHEMAS = "#/components/schemas/"

_EVENTS = {
    "progress": ("Progress", "A committed transition (no id when read from the run's log)."),
    "attempt": ("AttemptData", "A visit starts streaming."),
    "delta": ("DeltaData", "A piece of a model's reply."),
    "settled": ("RunView", "The last event: the run, once it ended or waits."),
}
"""Each event's name: the schema of its data, and what it says."""


def stream_response(description: str, item: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entry of a server-sent events route whose events are
    the component schema ``item`` (see :func:`stream_schema`)."""
    return {
        200: {
            "description": description,
            "content": {
                "text/event-stream": {
                    "schema": {"type": "array", "items": {"$ref": _SCHEMAS + item}},
                    "itemSchema": {"$ref": _SCHEMAS + item},
                }
            },
        }
    }


def stream_schema(description: str, events: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The schema of one server-sent event of a stream: for each event name, the
    component schema of its data (a JSON document) and what it says."""
    return {
        "description": description,
        "oneOf": [
            {
                "type": "object",
                "description": doc,
                "required": ["event", "data"],
                "properties": {
                    "event": {"const": name},
                    "id": {"type": "string", "pattern": "^[0-9]+$"},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": _SCHEMAS + schema},
                    },
                },
            }
            for name, (schema, doc) in events.items()
        ],
    }


EVENTS_RESPONSE = stream_response(
    "Without Last-Event-ID, first a ``progress`` event (no id) per transition so far; "
    "then the run's live channel, each event's id its offset: ``attempt``, ``delta`` "
    "and ``progress``; then one ``settled`` event with the run.",
    "RunEvent",
)
"""The OpenAPI ``responses`` entry of the events route (see :func:`declare_events`)."""


def declare_events(spec: Spec) -> None:
    """Put the schemas :data:`EVENTS_RESPONSE` refers to in ``spec``."""
    add_model(spec, AttemptData)
    add_model(spec, DeltaData)
    schemas = spec["components"]["schemas"]
    missing = {name for name, _ in _EVENTS.values()} - set(schemas)
    if missing:
        raise ValueError(f"the run events' data schemas {sorted(missing)} are not in the spec")
    schemas["RunEvent"] = stream_schema(
        "One server-sent event of a run (the id: its live channel offset).", _EVENTS
    )


LastEventId = Annotated[
    int | None,
    Header(
        alias="Last-Event-ID",
        ge=0,
        description="Resume after this event id (an offset): what follows it, as far "
        "as the live channel still keeps it, then live events.",
    ),
]
"""The ``Last-Event-ID`` header a server-sent events client resumes with."""


def sse_response(frames: AsyncIterator[str]) -> StreamingResponse:
    """A response streaming ``frames`` as server-sent events, past any buffering proxy."""
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def sse(event: str, data: Any, id: int | None = None) -> str:
    """One server-sent event (the data as one line of JSON), with an id if given."""
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def event_data(event: LiveEvent) -> dict[str, Any]:
    """The data of a live event's frame: a progress as the log holds it, else the
    event's own fields (node, visit, attempt, and ``restart`` or ``text``)."""
    if event.progress is not None:
        return event.progress.model_dump(mode="json")
    return event.model_dump(mode="json", exclude_none=True, exclude={"kind", "progress"})


def _live_frame(event: LiveEvent) -> str:
    return sse(event.kind, event_data(event), id=event.offset or None)


live_frame = SharedResults(_live_frame)
"""The frame of a live event, encoded once for every connection of the process that
follows its run (they share its events: see :data:`plait.runs.watch.parsed_event`)."""


async def run_events(
    runs: Runs,
    rec: RunRecord,
    settled: Callable[[], Awaitable[dict[str, Any]]],
    *,
    last_event_id: int | None = None,
) -> AsyncIterator[str]:
    """The events of ``rec``'s run (see the module docstring), then ``settled`` with
    the run (what ``settled()`` returns) once it is done, failed, cancelled or waits."""
    mesh = runs.mesh
    run_id = rec.run_id
    yield ": following run " + run_id + "\n\n"
    live = mesh.live
    if live is None:
        for entry in await LogFollower(mesh, run_id).poll():
            if entry.progress is not None:
                yield sse("progress", entry.progress.model_dump(mode="json"))
        yield sse("settled", await settled())
        return
    shown_seq = -1
    after = last_event_id or 0
    # Watched from before the log is read: a commit after the read is in the channel.
    async with live.watch(channel_of(run_id)):
        if last_event_id is None:
            after = await in_flight_start(mesh, await runs.get(run_id))
            for entry in await LogFollower(mesh, run_id).poll():
                if entry.progress is not None:
                    shown_seq = max(shown_seq, entry.progress.audit_seq)
                    yield sse("progress", entry.progress.model_dump(mode="json"))
        async for event in follow_run(mesh, run_id, after=after):
            if event.offset == 0:
                # Read from the record: the log holds what the channel did not carry
                # (a commit made while this watch was not yet counted by its writer).
                for entry in await LogFollower(mesh, run_id, max(0, shown_seq)).poll():
                    if entry.progress is not None and entry.progress.audit_seq > shown_seq:
                        shown_seq = entry.progress.audit_seq
                        yield sse("progress", entry.progress.model_dump(mode="json"))
            if event.progress is not None:
                if event.progress.audit_seq <= shown_seq:
                    continue  # the log's part of the stream showed it
                shown_seq = event.progress.audit_seq
            yield live_frame(event)
    yield sse("settled", await settled())


__all__ = [
    "EVENTS_RESPONSE",
    "AttemptData",
    "DeltaData",
    "LastEventId",
    "declare_events",
    "event_data",
    "live_frame",
    "run_events",
    "sse",
    "sse_response",
    "stream_response",
    "stream_schema",
]
