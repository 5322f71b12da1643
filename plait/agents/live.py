"""An agent actor's live channel: its turns as they happen, token by token.

One mesh live channel per agent actor (``agent/NAME``, see :mod:`plait.mesh._live`)
carries, in order, :class:`AgentEvent` items of three kinds:

- ``turn``: a turn on a message starts; ``attempt`` counts its tries (a delivery after
  a crash, or a run again after a conflict on a key it wrote), and ``restart`` says a
  try before it was cut off, so its text is not to be joined with this one's;
- ``delta``: a piece of the text the turn's model streams;
- ``end``: the turn committed (or was settled without an answer): its
  :class:`~plait.agents.store.TurnSummary`, the only truth of what it said; or, with
  no summary and a ``text`` saying why, the try stopped with nothing committed (the
  actor parked, or the turn failed and its message comes again).

As a run's channel (:mod:`plait.runs.channel`), nothing here is durable, and it costs
nothing while nobody watches: the serving process keeps the events of the turns in
flight in memory (at most ``keep_bytes`` of them), drops them when the turn ends, and
appends only once someone watches (:meth:`plait.mesh.LiveChannels.watched`), so a
watcher that comes mid-turn gets that turn's text so far. ``plait agents watch NAME``
and ``GET /api/agents/{name}/events`` read it with :func:`follow_agent`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from plait.agents.store import TurnSummary
from plait.errors import ConfigError
from plait.mesh import DEFAULT_KEEP_BYTES, LiveChannels, LiveItem, Mesh
from plait.runs.channel import ITEM_OVERHEAD, PendingWrites, write_queued
from plait.runs.watch import SharedResults

log = logging.getLogger("plait.agents")

AgentEventKind = Literal["turn", "delta", "end"]
"""What an agent event is: a turn starts, a piece of its reply, the turn ended."""

WAIT_S = 60.0
"""How long one wait of a watcher on a quiet channel lasts (it then waits again)."""


def agent_channel(name: str) -> str:
    """The live channel of agent actor ``name``."""
    return f"agent/{name}"


class AgentEvent(BaseModel):
    """One event of an agent actor's live channel.

    Attributes:
        offset: its offset in the channel (the SSE event id).
        kind: what it is (see :data:`AgentEventKind`).
        message: the id of the message the turn handles.
        attempt: for ``turn``: which try of the message's turn (from 1).
        restart: for ``turn``: an earlier try was cut off.
        prompt: for ``turn``: the message the model is given.
        text: for ``delta``: the piece of text; for an ``end`` with no summary: why
            the try stopped.
        summary: for ``end``: the turn as committed (None: nothing was).
    """

    offset: int = 0
    kind: AgentEventKind
    message: str
    attempt: int | None = None
    restart: bool = False
    prompt: str | None = None
    text: str | None = None
    summary: TurnSummary | None = None

    @classmethod
    def parse(cls, item: LiveItem) -> AgentEvent | None:
        """The event a channel item holds (None for an item that is not one)."""
        if not isinstance(item.data, dict):
            return None
        try:
            return cls.model_validate({**item.data, "offset": item.offset})
        except ValidationError:
            return None


class AgentChannels:
    """The live channels of the agent actors one process serves (see the module
    docstring); one per mesh's live channels (:func:`agent_channels`)."""

    def __init__(self, live: LiveChannels, keep_bytes: int = DEFAULT_KEEP_BYTES) -> None:
        self.live = live
        self.keep_bytes = keep_bytes
        self._pending: dict[str, PendingWrites] = {}
        live.on_watched(self._now_watched)

    def turn(self, name: str, message: str, attempt: int, prompt: str) -> TurnStream:
        """Announce a try of the turn on ``message``; where its model streams."""
        self._put(
            name,
            {
                "kind": "turn",
                "message": message,
                "attempt": attempt,
                "restart": attempt > 1,
                "prompt": prompt,
            },
        )
        return TurnStream(self, name, message)

    def end(self, name: str, summary: TurnSummary) -> None:
        """The turn on ``summary.message`` ended as ``summary`` says."""
        self._ended(
            name, {"kind": "end", "message": summary.message, "summary": summary.model_dump()}
        )

    def stopped(self, name: str, message: str, why: str) -> None:
        """The try of the turn on ``message`` stopped with nothing committed (it parked,
        or failed and is delivered again): an ``end`` with ``why`` as its text."""
        self._ended(name, {"kind": "end", "message": message, "text": why})

    def _ended(self, name: str, item: dict[str, Any]) -> None:
        pending = self._pending.get(name)
        if not self.live.watched(agent_channel(name)):
            if pending is not None and pending.task is None:
                kept = [i for i in pending.items if i["message"] != item["message"]]
                pending.items = deque(kept)
                pending.bytes = sum(_size(i) for i in kept)
                if not kept:
                    del self._pending[name]  # no turn in flight: nothing kept
            return
        self._put(name, item)

    def _put(self, name: str, item: dict[str, Any]) -> None:
        pending = self._pending.get(name)
        if pending is None:
            pending = self._pending[name] = PendingWrites()
        pending.items.append(item)
        pending.bytes += _size(item)
        self._kick(name, pending)

    def _now_watched(self, channel: str) -> None:
        """Write what an agent's queue holds now that someone watches it."""
        name = channel.removeprefix("agent/")
        pending = self._pending.get(name)
        if channel.startswith("agent/") and pending is not None and pending.items:
            self._kick(name, pending)

    def _kick(self, name: str, pending: PendingWrites) -> None:
        """Start writing ``pending`` if its agent is watched; else keep it in budget."""
        if pending.task is not None:
            return
        if self.live.watched(agent_channel(name)):
            loop = asyncio.get_running_loop()
            pending.task = loop.create_task(self._write(name, pending))
            return
        while pending.bytes > self.keep_bytes and len(pending.items) > 1:
            pending.bytes -= _size(pending.items.popleft())

    async def _write(self, name: str, pending: PendingWrites) -> None:
        """Append what ``pending`` holds, batch by batch, until it is empty."""
        channel = agent_channel(name)
        try:
            await write_queued(self.live, channel, pending, self.keep_bytes, None, f"agent {name}")
        finally:
            pending.task = None
            if not pending.items and self._pending.get(name) is pending:
                del self._pending[name]


class TurnStream:
    """The :class:`~plait.graphs.ports.LivePort` of one turn: its model's pieces go to
    the agent's channel."""

    __slots__ = ("channels", "message", "name")

    def __init__(self, channels: AgentChannels, name: str, message: str) -> None:
        self.channels = channels
        self.name = name
        self.message = message

    def delta(self, key: str, visit: int, text: str) -> None:
        """One piece of the turn's reply (``key`` and ``visit`` name the agent's turn)."""
        self.channels._put(self.name, {"kind": "delta", "message": self.message, "text": text})


parsed_agent_event = SharedResults[LiveItem, "AgentEvent | None"](AgentEvent.parse)
"""The event of a channel item, made once for every watch of the process (they share
the channel's items): read it, never change it."""


def _size(item: dict[str, Any]) -> int:
    return len(item.get("text") or item.get("prompt") or "") + ITEM_OVERHEAD


_BY_LIVE: weakref.WeakKeyDictionary[LiveChannels, AgentChannels] = weakref.WeakKeyDictionary()


def agent_channels(mesh: Mesh, keep_bytes: int = DEFAULT_KEEP_BYTES) -> AgentChannels | None:
    """The agent channels of ``mesh`` in this process (None: it has no live channels)."""
    live = mesh.live
    if live is None:
        return None
    found = _BY_LIVE.get(live)
    if found is None:
        found = _BY_LIVE[live] = AgentChannels(live, keep_bytes)
    return found


async def turn_in_flight_start(live: LiveChannels, channel: str) -> int:
    """Where a watcher that comes now starts: just before the ``turn`` event of the
    oldest turn the channel shows not ended (as far as it keeps it), else its end."""
    open_turns: dict[str, int] = {}
    after = 0
    while True:
        found = await live.read(channel, after)
        for item in found.items:
            data = item.data
            if isinstance(data, dict) and data.get("kind") == "turn":
                open_turns.setdefault(str(data.get("message")), item.offset - 1)
            elif isinstance(data, dict) and data.get("kind") == "end":
                open_turns.pop(str(data.get("message")), None)
        if not found.items or found.items[-1].offset >= found.last:
            return min(open_turns.values(), default=found.last)
        after = found.items[-1].offset


async def follow_agent(
    mesh: Mesh, name: str, *, after: int | None = None, turns: int | None = None
) -> AsyncIterator[AgentEvent]:
    """The live events of agent actor ``name`` after offset ``after`` (None: from the
    start of the turn in flight, if any), as they come; with ``turns``, until that many
    turns ended with a summary, else for as long as the caller reads.

    Raises:
        ConfigError: the mesh has no live channels.
    """
    live = mesh.live
    if live is None:
        raise ConfigError(f"the mesh {mesh.url} has no live channels to watch agents with")
    channel = agent_channel(name)
    ended = 0
    async with live.watch(channel) as watch:
        position = await turn_in_flight_start(live, channel) if after is None else after
        while turns is None or ended < turns:
            found = await watch.next(position, WAIT_S)
            if found.last < position:  # the channel was dropped and began again
                position = 0
                continue
            for event in filter(None, map(parsed_agent_event, found.items)):
                position = event.offset
                yield event
                ended += event.summary is not None  # a turn that committed
                if ended == turns:
                    return
            if found.items:
                position = max(position, found.items[-1].offset)


__all__ = [
    "AgentChannels",
    "AgentEvent",
    "AgentEventKind",
    "TurnStream",
    "agent_channel",
    "agent_channels",
    "follow_agent",
    "parsed_agent_event",
    "turn_in_flight_start",
]
