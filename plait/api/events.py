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
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from plait.runs import RunRecord, Runs
from plait.runs.channel import LiveEvent, channel_of
from plait.runs.log import LogFollower
from plait.runs.watch import follow_run, in_flight_start


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
            yield sse(event.kind, event_data(event), id=event.offset or None)
    yield sse("settled", await settled())


__all__ = ["event_data", "run_events", "sse"]
