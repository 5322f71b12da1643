"""A run's events as server-sent events: the progress of its log, until it settles."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

from plait.runs import RunRecord, Runs
from plait.runs.log import LogFollower

BATCH_S = 0.25
"""How long the stream waits before it reads the run's log and record again."""


def sse(event: str, data: Any) -> str:
    """One server-sent event (the data as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


async def run_events(
    runs: Runs, rec: RunRecord, settled: Callable[[], Awaitable[dict[str, Any]]]
) -> AsyncIterator[str]:
    """``progress`` events of ``rec``'s run from its first, then ``settled`` with the run
    (what ``settled()`` returns) once it is done, failed, cancelled or waits on a person.

    The events are the progress of the run's log entries, read as they are appended
    (:class:`plait.runs.log.LogFollower`), so following a run changes nothing.
    """
    follower = LogFollower(runs.mesh, rec.run_id)
    yield ": following run " + rec.run_id + "\n\n"
    last_round = False
    while True:
        for entry in await follower.poll():
            if entry.progress is not None:
                yield sse("progress", entry.progress.model_dump(mode="json"))
        if last_round:
            yield sse("settled", await settled())
            return
        current = await runs.get(rec.run_id)
        # One more round once settled: the commit that settled it wrote its entry with it.
        last_round = current.terminal or await runs.asks(current) is not None
        if not last_round:
            await anyio.sleep(BATCH_S)


__all__ = ["BATCH_S", "run_events", "sse"]
