"""The runs feed: every run's listing status as it changes, for watchers of run lists.

One mesh live channel (``runs``, see :mod:`plait.mesh._live`) carries a
:class:`~plait.runs.record.RunSummary` each time a commit changes a run's listing status
(it starts, parks, goes on, ends, is cancelled, retried or forked): the same commits
that write the run's listing (:func:`plait.runs.live.list_run`). A console's runs list
follows it instead of polling; a watcher that reconnects with an offset gets what it
missed, as far as the channel keeps it.

Off the hot path. A commit asks :meth:`plait.mesh.LiveChannels.watched` (no round trip)
and queues the summary only while someone watches the feed; a task per process writes
what queued, in one append per batch, in commit order. Nothing is durable here: the
listing stays the truth, and a watcher reads it once when it starts following.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator

from pydantic import ValidationError

from plait.errors import ConfigError
from plait.graphs.state import RunState
from plait.mesh import LiveChannels, Mesh
from plait.runs.channel import ITEM_OVERHEAD, PendingWrites, write_queued
from plait.runs.record import RunSummary, listing_status, summary_of

FEED_CHANNEL = "runs"
"""The live channel of the runs feed."""

FEED_KEEP_BYTES = 64 * 1024
"""What the feed's channel keeps: its last 64 KiB of summaries."""

WAIT_S = 15.0
"""How long a follower waits for a change before it says it is still there."""


_feeds: weakref.WeakKeyDictionary[LiveChannels, PendingWrites] = weakref.WeakKeyDictionary()


def announce(mesh: Mesh, record: RunState) -> None:
    """Queue ``record``'s listing summary for the feed, if someone watches it (call
    after the commit that changed its listing status landed)."""
    live = mesh.live
    if live is None or not live.watched(FEED_CHANNEL):
        return
    summary = summary_of(record).model_dump(mode="json")
    summary["status"] = listing_status(record.status)
    feed = _feeds.get(live)
    if feed is None:
        feed = _feeds[live] = PendingWrites()
    feed.items.append(summary)
    feed.bytes += ITEM_OVERHEAD
    if feed.task is None:
        feed.task = asyncio.get_running_loop().create_task(_write(live, feed))


async def _write(live: LiveChannels, feed: PendingWrites) -> None:
    try:
        await write_queued(live, FEED_CHANNEL, feed, FEED_KEEP_BYTES, None, "the runs feed")
    finally:
        feed.task = None


async def follow_runs(
    mesh: Mesh, *, after: int | None = None, wait_s: float = WAIT_S
) -> AsyncIterator[tuple[int, RunSummary] | None]:
    """The feed's summaries as they come, each with its offset: after offset ``after``
    (None: from now on). Yields None first, once it watches (what changes from then on
    comes: read the list after it), then each time nothing came for ``wait_s``
    seconds, so a caller may show it is still there. Follows until the caller stops.

    Raises:
        ConfigError: the mesh has no live channels.
    """
    live = mesh.live
    if live is None:
        raise ConfigError(f"the mesh {mesh.url} has no live channels to follow runs with")
    async with live.watch(FEED_CHANNEL) as watch:
        if after is None:
            after = (await live.read(FEED_CHANNEL, limit=1)).last
        yield None
        while True:
            found = await watch.next(after, wait_s)
            if found.last < after:
                after = 0  # the channel began again: all it holds is new
                continue
            if not found.items:
                yield None
                continue
            for item in found.items:
                after = item.offset
                try:
                    summary = RunSummary.model_validate(item.data)
                except ValidationError:
                    continue  # not a summary this version knows: skip it
                yield item.offset, summary


__all__ = ["FEED_CHANNEL", "FEED_KEEP_BYTES", "announce", "follow_runs"]
