"""Every run's listing status as it changes, as server-sent events.

``GET /api/runs/events`` follows the runs feed (:func:`plait.runs.feed.follow_runs`):
one ``run`` event per change of a run's listing status (it starts, parks, goes on,
ends), its data the run as the runs list shows it (:class:`~plait.api.views.RunRow`),
its id the feed's offset. Without ``Last-Event-ID`` it begins with what changes from
now on (its first line, a comment, says the feed is watched: read the list once after
it); with ``Last-Event-ID: N`` it resumes after offset N, as far as the feed still
keeps it. A comment every while it has nothing keeps proxies from closing it. It
follows until the client goes (or, with ``?changes=N``, until N events came); nothing
polls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from plait.api.events import sse, stream_response, stream_schema
from plait.api.run_search import row_of
from plait.api.spec import Spec
from plait.api.views import RunRow
from plait.mesh import Mesh
from plait.runs.feed import follow_runs

_EVENTS = {"run": ("RunRow", "A run's listing status changed: the run as listed now.")}
"""Each event's name: the schema of its data, and what it says."""

RUNS_FEED_RESPONSE = stream_response(
    "One ``run`` event per change of a run's listing status, each event's id its offset "
    "in the runs feed, from now on (or after Last-Event-ID).",
    "RunsFeedEvent",
)
"""The OpenAPI ``responses`` entry of the runs feed route."""


def declare_runs_feed(spec: Spec) -> None:
    """Put the schemas :data:`RUNS_FEED_RESPONSE` refers to in ``spec``."""
    schemas = spec["components"]["schemas"]
    if RunRow.__name__ not in schemas:  # the runs list's response put it there
        raise ValueError("the runs feed's data schema RunRow is not in the spec")
    schemas["RunsFeedEvent"] = stream_schema(
        "One server-sent event of the runs feed (the id: its offset).", _EVENTS
    )


async def runs_feed(
    mesh: Mesh, *, last_event_id: int | None = None, changes: int | None = None
) -> AsyncIterator[str]:
    """The frames of the runs feed (see the module docstring)."""
    sent = 0
    said = ": following runs\n\n"  # once the feed is watched: a list read now misses nothing
    async for found in follow_runs(mesh, after=last_event_id):
        if found is None:
            yield said
            said = ": still here\n\n"
            continue
        offset, summary = found
        yield sse("run", row_of(summary).model_dump(mode="json"), id=offset)
        sent += 1
        if changes is not None and sent >= changes:
            return


__all__ = ["RUNS_FEED_RESPONSE", "declare_runs_feed", "runs_feed"]
