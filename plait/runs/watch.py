"""Watching a run as it happens: its live channel's events, from an offset, until it settles.

:func:`follow_run` is what ``plait graph watch``, the API's server-sent events and
in-session watchers read (see :mod:`plait.runs.channel` for what the channel holds). It
opens a watch on the run's channel, so the serving process starts writing to it, and
waits on the channel's wake-ups: no polling. It reads the run's record only at the
start and when the channel stays quiet for :data:`QUIET_S` (a run that settled without
a watcher being counted in time, or a mesh that lost a wake-up), so a watch always ends.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from plait.errors import ConfigError, RunNotFound
from plait.mesh import LiveItem, Mesh
from plait.runs.channel import LiveEvent, channel_of
from plait.runs.progress import Progress
from plait.runs.record import RunRecord
from plait.runs.store import RunStore

QUIET_S = 5.0
"""How long a watch waits on a quiet channel before it reads the run's record again."""

K = TypeVar("K")
V = TypeVar("V")


class SharedResults(Generic[K, V]):
    """What a function made of each of the last ``size`` objects it was given, by the
    object's identity: the watches of one channel in a process share its items (see
    :mod:`plait.mesh._live`), so what each item becomes (an event, a server-sent frame)
    is made once for all of them, not once per watcher. It holds the objects it
    answers for, so an id is not reused while it is kept."""

    def __init__(self, make: Callable[[K], V], size: int = 4096) -> None:
        self.make = make
        self.size = size
        self._kept: OrderedDict[int, tuple[K, V]] = OrderedDict()

    def __call__(self, obj: K) -> V:
        found = self._kept.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        made = self.make(obj)
        self._kept[id(obj)] = (obj, made)
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return made


parsed_event = SharedResults[LiveItem, "LiveEvent | None"](
    lambda item: LiveEvent.parse(item.offset, item.data)
)
"""The event a live item of a run's channel holds (None if it holds none), made once
per item for every watch in the process: read it, never change it."""


def settled(rec: RunRecord) -> bool:
    """Whether ``rec``'s run stops until something outside it acts: it ended, or it
    waits on a person or a child run."""
    return rec.terminal or rec.waiting is not None


def closing_event(rec: RunRecord) -> LiveEvent:
    """The progress event that says where a settled run stands, for a watch that found
    it settled with no such event in the channel; read from the record, so its offset
    is 0 (the run's log has the transitions the channel did not carry)."""
    progress = Progress(
        status=rec.status,
        audit_seq=rec.audit_seq,
        ended_detail=rec.ended_detail,
        waiting=rec.waiting,
    )
    return LiveEvent(kind="progress", progress=progress)


async def channel_end(mesh: Mesh, run_id: str) -> int:
    """The newest offset of ``run_id``'s live channel (0: none yet): where a watcher
    that wants only what comes next starts."""
    live = mesh.live
    return 0 if live is None else (await live.read(channel_of(run_id), limit=0)).last


async def in_flight_start(mesh: Mesh, rec: RunRecord) -> int:
    """Where a watcher that comes now starts so as to see the visits ``rec`` has in
    flight from their start (as far as the channel keeps them): just before the first
    ``attempt`` event of one of them, else the channel's end."""
    end = await channel_end(mesh, rec.run_id)
    live = mesh.live
    flight = {(attempt.node, attempt.visit) for attempt in rec.attempts.values()}
    if live is None or not flight:
        return end
    after = 0
    while after < end:
        found = await live.read(channel_of(rec.run_id), after)
        for item in found.items:
            data = item.data
            if (
                isinstance(data, dict)
                and data.get("kind") == "attempt"
                and (data.get("node"), data.get("visit")) in flight
            ):
                return item.offset - 1
        if not found.items:
            break
        after = found.items[-1].offset
    return end


async def follow_run(
    mesh: Mesh, run_id: str, *, after: int = 0, quiet_s: float = QUIET_S
) -> AsyncIterator[LiveEvent]:
    """The live events of ``run_id`` after offset ``after``, as they come, ending with
    the one that settles the run (see :attr:`LiveEvent.settles`).

    A run settled already gives what its channel still holds after ``after``, then a
    closing progress made from its record (offset 0) if the channel held none.

    Raises:
        ConfigError: the mesh has no live channels.
        RunNotFound: there is no such run.
    """
    live = mesh.live
    if live is None:
        raise ConfigError(f"the mesh {mesh.url} has no live channels to watch runs with")
    store = RunStore(mesh)
    channel = channel_of(run_id)
    async with live.watch(channel) as watch:
        rec = await _record(store, run_id)
        done = settled(rec)
        while True:
            found = await watch.next(after, 0 if done else quiet_s)
            if found.last < after:  # the channel was dropped and began again
                after = 0
                continue
            for item in found.items:
                after = item.offset
                event = parsed_event(item)
                if event is None:
                    continue
                yield event
                if event.settles:
                    return
            if found.items and after < found.last:
                continue  # more than one read's worth came
            if done:
                yield closing_event(rec)
                return
            if not found.items:
                rec = await _record(store, run_id)
                done = settled(rec)


async def _record(store: RunStore, run_id: str) -> RunRecord:
    rec, _ = await store.record(run_id, fresh=True)
    if rec is None:
        raise RunNotFound(f"no run {run_id!r} in {store.mesh.url}")
    return rec


__all__ = [
    "QUIET_S",
    "SharedResults",
    "channel_end",
    "closing_event",
    "follow_run",
    "in_flight_start",
    "parsed_event",
    "settled",
]
