"""A run's events as server-sent events: its progress as published, until it settles."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

from plait.errors import MeshUnavailable
from plait.ids import new_id
from plait.runs import RunRecord, Runs
from plait.runs.record import events_topic

BATCH_S = 0.25
"""How long events are gathered before they are sent and the run is read again."""


def sse(event: str, data: Any) -> str:
    """One server-sent event (the data as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


async def run_events(
    runs: Runs, rec: RunRecord, settled: Callable[[], Awaitable[dict[str, Any]]]
) -> AsyncIterator[str]:
    """``progress`` events of ``rec``'s run from its first, then ``settled`` with the run
    (what ``settled()`` returns) once it is done, failed, cancelled or waits on a person.

    The events are read in a consumer group of this stream's own, dropped at the end, so
    following a run changes nothing its owner reads.
    """
    topic = events_topic(rec.run_id)
    group = new_id("sse-")
    sub = runs.mesh.subscribe(topic, group, "sse", start="begin")
    try:
        yield ": following run " + rec.run_id + "\n\n"
        last_round = False
        while True:
            batch: list[dict[str, Any]] = []
            # Gathered inside the scope, sent outside it: a generator must not yield
            # from within a cancel scope.
            with anyio.move_on_after(BATCH_S):
                async for delivery in sub:
                    await delivery.ack()
                    batch.append(delivery.data)
            for data in batch:
                yield sse("progress", data)
            if last_round:
                yield sse("settled", await settled())
                return
            current = await runs.get(rec.run_id)
            # One more round once settled: the commit that settled it published with it.
            last_round = current.terminal or await runs.asks(current) is not None
    finally:
        await sub.close()
        with anyio.CancelScope(shield=True), contextlib.suppress(MeshUnavailable):
            await runs.mesh.drop_group(topic, group)


__all__ = ["BATCH_S", "run_events", "sse"]
