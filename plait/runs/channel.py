"""A run's live channel: what its watchers see as it happens, written by the serving process.

One mesh live channel per run (``run/<run_id>``, see :mod:`plait.mesh._live`) carries,
in order, :class:`LiveEvent` items of three kinds:

- ``attempt``: a node's visit starts streaming; ``attempt`` counts the tries of that
  visit, and ``restart`` says a try before it (a process that died, an error retried)
  was cut off, so its text is not to be joined with this one's;
- ``delta``: a piece of the text a node's model streams;
- ``progress``: the :class:`~plait.runs.progress.Progress` of a committed transition,
  which supersedes the deltas of the visit it commits; a terminal one ends the run.

Nothing here is durable or audited, and nothing is replayed into a model: the committed
output stays the only truth. The channel keeps its last ``keep_bytes`` (see
:data:`~plait.mesh.DEFAULT_KEEP_BYTES`), so a watcher that comes late or back with an
offset gets what it missed, then live data.

Off the hot path. A model's ``on_delta`` only appends to a small per-run queue in
memory. While nobody watches the run (:meth:`plait.mesh.LiveChannels.watched`, no
round trip), nothing more happens: the queue keeps the latest ``keep_bytes`` of deltas
of the visits in flight, and a commit drops those of its visit. Once someone watches,
a task per run writes what queued in one append per batch: the model never waits on
the mesh, and a watcher that came mid-visit gets that visit's text so far.

Attempts across processes. A process that starts streaming a visit it has not seen
reads the channel once for the attempts already there: a different claim (its nonce,
hashed) before it makes this one attempt n + 1 with ``restart``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from plait.errors import MeshError
from plait.graphs.ports import LivePort
from plait.graphs.state import Attempt
from plait.mesh import DEFAULT_KEEP_BYTES, LiveChannels, Mesh
from plait.runs.progress import Progress

log = logging.getLogger("plait.runs")

LiveKind = Literal["attempt", "delta", "progress"]
"""What a live event is.

- ``"attempt"``: a node's visit starts streaming (``restart``: an earlier try was cut off).
- ``"delta"``: a piece of a node's streamed model reply (``text``).
- ``"progress"``: a committed transition (``progress``).
"""

RUNS_KEPT = 4096
"""How many runs' queues a process keeps at most (the least recently streamed go)."""

ITEM_OVERHEAD = 48
"""Roughly what an item adds to its text when encoded, for the queue's byte budget."""

UNWATCHED_TRUSTED_NS = 20_000_000
"""How long a run found unwatched is taken as still unwatched when its nodes stream
(20 ms): a delta is only queued, and a watcher that came meanwhile gets it with the
next check or commit, so each delta need not ask the mesh again (a commit always asks)."""


def channel_of(run_id: str) -> str:
    """The live channel of ``run_id``."""
    return f"run/{run_id}"


class LiveEvent(BaseModel):
    """One event of a run's live channel.

    Attributes:
        offset: its offset in the channel (the SSE event id); 0 for one read elsewhere.
        kind: what it is (see :data:`LiveKind`).
        node: the node (or fan-out instance) it is about.
        visit: the node's visit.
        attempt: which try of that visit (from 1).
        restart: for ``attempt``: an earlier try of the visit was cut off.
        text: for ``delta``: the piece of text.
        progress: for ``progress``: the transition's progress.
    """

    offset: int = 0
    kind: LiveKind
    node: str | None = None
    visit: int | None = None
    attempt: int | None = None
    restart: bool = False
    text: str | None = None
    progress: Progress | None = None

    @property
    def ends(self) -> bool:
        """Whether this event ends the run (a terminal progress)."""
        return self.progress is not None and self.progress.status in (
            "done",
            "failed",
            "cancelled",
        )

    @property
    def settles(self) -> bool:
        """Whether the run stops here until something outside it acts: it ended, or it
        waits on a person or a child run."""
        return self.progress is not None and (
            self.ends or self.progress.status.startswith("waiting")
        )

    @classmethod
    def parse(cls, offset: int, data: Any) -> LiveEvent | None:
        """The event stored at ``offset`` (None for an item that is not one)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls.model_validate({**data, "offset": offset})
        except ValidationError:
            return None


class Queued(Protocol):
    """Items waiting for a live channel, and their size for the byte budget."""

    items: deque[dict[str, Any]]
    bytes: int


class PendingWrites:
    """Items one process has yet to write to a live channel, and the task writing them
    (a :class:`Queued` for :func:`write_queued`)."""

    __slots__ = ("bytes", "items", "task")

    def __init__(self) -> None:
        self.items: deque[dict[str, Any]] = deque()
        self.bytes = 0
        self.task: asyncio.Task[None] | None = None


async def write_queued(
    live: LiveChannels,
    channel: str,
    queue: Queued,
    keep_bytes: int,
    prepare: Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]] | None,
    what: str,
) -> None:
    """Append what ``queue`` holds to ``channel``, batch by batch (each through
    ``prepare``, if given), until it is empty. A mesh error drops what is queued and is
    logged for ``what``: only watchers miss it, and they see the commit that supersedes it.
    """
    try:
        while queue.items:
            batch = list(queue.items)
            queue.items.clear()
            queue.bytes = 0
            items = batch if prepare is None else await prepare(batch)
            await live.append(channel, items, keep_bytes=keep_bytes)
    except MeshError as exc:
        log.warning("%s: its live channel missed some events: %s", what, exc)
        queue.items.clear()
        queue.bytes = 0


class _Queue:
    """One run's events not yet written, and the attempts its process numbered."""

    __slots__ = ("attempts", "bytes", "done", "items", "read_back", "task")

    def __init__(self) -> None:
        self.items: deque[dict[str, Any]] = deque()
        self.bytes = 0
        self.task: asyncio.Task[None] | None = None
        self.attempts: dict[tuple[str, int], tuple[str, int]] = {}
        self.read_back = False
        self.done = False


class RunChannels:
    """The live channels of the runs one process serves (see the module docstring).

    Args:
        mesh: the mesh of the runs; one without live channels streams nothing.
        keep_bytes: what each run's channel (and its queue while unwatched) keeps.
    """

    def __init__(self, mesh: Mesh, *, keep_bytes: int = DEFAULT_KEEP_BYTES) -> None:
        self.live: LiveChannels | None = mesh.live
        self.keep_bytes = keep_bytes
        self._queues: OrderedDict[str, _Queue] = OrderedDict()
        self._unwatched: OrderedDict[str, int] = OrderedDict()
        """When each run was last found unwatched (monotonic ns)."""
        if self.live is not None:
            self.live.on_watched(self._now_watched)

    def _now_watched(self, channel: str) -> None:
        """Write what a run's queue holds now that someone watches it."""
        run_id = channel.removeprefix("run/")
        self._unwatched.pop(run_id, None)
        queue = self._queues.get(run_id)
        if queue is not None and queue.items:
            self._kick(run_id, queue)

    def port(self, run_id: str, attempts: dict[str, Attempt]) -> LivePort | None:
        """Where the nodes of ``run_id`` stream, their claims being ``attempts`` (None
        when the mesh has no live channels: the nodes do not stream)."""
        return None if self.live is None else _RunPort(self, run_id, attempts)

    def delta(self, run_id: str, key: str, visit: int, claim: str, text: str) -> None:
        """Queue a piece of the text node ``key`` streams under the claim ``claim``."""
        queue = self._queue(run_id)
        queue.items.append({"kind": "delta", "node": key, "visit": visit, "c": claim, "text": text})
        queue.bytes += len(text) + ITEM_OVERHEAD
        self._kick(run_id, queue)

    def progress(self, run_id: str, progress: Progress) -> None:
        """Queue the progress of a committed transition of ``run_id``, if it is watched;
        either way, drop the queued deltas of the visit it committed."""
        live = self.live
        if live is None:
            return
        queue = self._queues.get(run_id)
        ends = progress.status in ("done", "failed", "cancelled")
        if not self._watched(run_id, ends=ends):
            if queue is not None:
                if progress.node is not None:
                    kept = [i for i in queue.items if i.get("node") != progress.node]
                    queue.items = deque(kept)
                    queue.bytes = sum(len(i.get("text", "")) + ITEM_OVERHEAD for i in kept)
                if ends or not queue.items:
                    # Nothing in flight to show a watcher that comes: a parked run
                    # keeps no queue (what it numbered is read back if it streams again).
                    self._forget(run_id, queue)
            return
        queue = queue or self._queue(run_id)
        queue.items.append({"kind": "progress", "progress": progress.stored()})
        queue.done = ends
        self._kick(run_id, queue)

    def _watched(self, run_id: str, *, ends: bool = False, recent: bool = False) -> bool:
        """Whether ``run_id``'s channel is watched; with ``recent``, a run found unwatched
        less than UNWATCHED_TRUSTED_NS ago is taken as still unwatched. ``ends``: the
        run ends, and its answer is not kept."""
        assert self.live is not None
        now = time.monotonic_ns()
        if recent:
            seen = self._unwatched.get(run_id)
            if seen is not None and now - seen < UNWATCHED_TRUSTED_NS:
                return False
        watched = self.live.watched(channel_of(run_id))
        if watched or ends:
            self._unwatched.pop(run_id, None)
        else:
            self._unwatched[run_id] = now
            self._unwatched.move_to_end(run_id)
            if len(self._unwatched) > RUNS_KEPT:
                self._unwatched.popitem(last=False)
        return watched

    def _queue(self, run_id: str) -> _Queue:
        queue = self._queues.get(run_id)
        if queue is None:
            queue = self._queues[run_id] = _Queue()
            while len(self._queues) > RUNS_KEPT:
                old_id, old = next(iter(self._queues.items()))
                self._forget(old_id, old)
        else:
            self._queues.move_to_end(run_id)
        return queue

    def _forget(self, run_id: str, queue: _Queue) -> None:
        if self._queues.get(run_id) is queue:
            del self._queues[run_id]
        if queue.task is not None:
            queue.done = True  # its task ends once it wrote what it holds

    def _kick(self, run_id: str, queue: _Queue) -> None:
        """Start writing ``queue`` if its run is watched; else keep it in budget."""
        assert self.live is not None
        if queue.task is not None:
            return
        if self._watched(run_id, recent=True):
            queue.task = asyncio.get_running_loop().create_task(self._write(run_id, queue))
            return
        while queue.bytes > self.keep_bytes and len(queue.items) > 1:
            dropped = queue.items.popleft()
            queue.bytes -= len(dropped.get("text", "")) + ITEM_OVERHEAD

    async def _write(self, run_id: str, queue: _Queue) -> None:
        """Append what ``queue`` holds, batch by batch, until it is empty."""
        assert self.live is not None
        channel = channel_of(run_id)
        try:
            await write_queued(
                self.live,
                channel,
                queue,
                self.keep_bytes,
                lambda batch: self._numbered(channel, queue, batch),
                f"run {run_id}",
            )
        finally:
            queue.task = None
            if queue.done:
                self._forget(run_id, queue)

    async def _numbered(
        self, channel: str, queue: _Queue, batch: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``batch`` with each delta's claim turned into an attempt number, and an
        ``attempt`` event before the first delta of each try."""
        out: list[dict[str, Any]] = []
        for item in batch:
            claim = item.pop("c", None)
            if claim is None:
                out.append(item)
                continue
            visit_key = (item["node"], item["visit"])
            known = queue.attempts.get(visit_key)
            if known is None and not queue.read_back:
                await self._read_back(channel, queue)
                known = queue.attempts.get(visit_key)
            if known is None or known[0] != claim:
                number = 1 if known is None else known[1] + 1
                queue.attempts[visit_key] = (claim, number)
                out.append(
                    {
                        "kind": "attempt",
                        "node": item["node"],
                        "visit": item["visit"],
                        "attempt": number,
                        "restart": known is not None,
                        "c": claim,
                    }
                )
            item["attempt"] = queue.attempts[visit_key][1]
            out.append(item)
        return out

    async def _read_back(self, channel: str, queue: _Queue) -> None:
        """Learn the attempts the channel holds already (another process's, before it died)."""
        assert self.live is not None
        queue.read_back = True
        after = 0
        while True:
            found = await self.live.read(channel, after)
            for item in found.items:
                data = item.data
                if isinstance(data, dict) and data.get("kind") == "attempt":
                    key = (str(data.get("node")), int(data.get("visit", 1)))
                    queue.attempts[key] = (str(data.get("c")), int(data.get("attempt", 1)))
            if not found.items or found.items[-1].offset >= found.last:
                return
            after = found.items[-1].offset


class _RunPort:
    """The :class:`~plait.graphs.ports.LivePort` of one run's nodes in this process."""

    __slots__ = ("attempts", "channels", "run_id")

    def __init__(self, channels: RunChannels, run_id: str, attempts: dict[str, Attempt]) -> None:
        self.channels = channels
        self.run_id = run_id
        self.attempts = attempts

    def delta(self, key: str, visit: int, text: str) -> None:
        attempt = self.attempts.get(key)
        self.channels.delta(self.run_id, key, visit, claim_tag(attempt), text)


def claim_tag(attempt: Attempt | None) -> str:
    """What names a claim in a live channel: a hash of its nonce (the nonce itself
    fences commits, so it is not shown to watchers)."""
    if attempt is None:
        return "-"
    return hashlib.blake2b(attempt.nonce.encode(), digest_size=6).hexdigest()


__all__ = [
    "ITEM_OVERHEAD",
    "RUNS_KEPT",
    "LiveEvent",
    "LiveKind",
    "PendingWrites",
    "Queued",
    "RunChannels",
    "channel_of",
    "claim_tag",
    "write_queued",
]
