"""Live channels of the SQLite mesh: rows in the mesh file, watchers woken by datagrams.

::

    live        (channel, offset) -> data      the items each channel keeps
    live_heads  channel -> last, bytes         its newest offset, the bytes it keeps

Appends are writes of the mesh's writer (batched with its other writes on the loop).
Wake-ups cross processes without polling: each process watching a channel (however
many watches it has open) leaves a marker file in the folder beside the mesh file
(``PATH.live/``), named for the channel and for a Unix socket of that process (in
Linux's abstract namespace, so no path length limit); an append sends one empty
datagram to each socket of its channel, and a writer asks whether a channel is watched
by listing that folder, listed again only when its modification time changed. A
marker whose socket is gone (its process died) is removed by the next append that
finds it so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from plait.ids import new_id
from plait.mesh._codec import check_key, decode, encode
from plait.mesh._live import READ_LIMIT, LiveChannels, LiveItem, LiveSlice, LiveWatch

SCHEMA = """
CREATE TABLE IF NOT EXISTS live (
    channel TEXT NOT NULL, offset INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (channel, offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS live_heads (
    channel TEXT PRIMARY KEY NOT NULL, last INTEGER NOT NULL, bytes INTEGER NOT NULL
) WITHOUT ROWID;
"""
"""The live channel tables (created with the rest of the mesh schema)."""

_SOCKET_PREFIX = "\0plait-live-"

_COARSE_NS = 50_000_000
"""How recent a folder's modification time is not trusted to tell changes apart."""


def append(conn: sqlite3.Connection, channel: str, items: list[bytes], keep_bytes: int) -> int:
    """Append encoded ``items`` to ``channel`` and trim it to ``keep_bytes``; the last offset."""
    head = conn.execute(
        "SELECT last, bytes FROM live_heads WHERE channel = ?", (channel,)
    ).fetchone()
    last, kept = head if head is not None else (0, 0)
    rows = []
    for data in items:
        last += 1
        kept += len(data)
        rows.append((channel, last, data))
    conn.executemany("INSERT INTO live (channel, offset, data) VALUES (?, ?, ?)", rows)
    if kept > keep_bytes:
        cut, dropped = 0, 0
        for offset, size in conn.execute(
            "SELECT offset, length(data) FROM live WHERE channel = ? AND offset < ? "
            "ORDER BY offset",
            (channel, last),
        ):
            if kept - dropped <= keep_bytes:
                break
            cut, dropped = offset, dropped + size
        conn.execute("DELETE FROM live WHERE channel = ? AND offset <= ?", (channel, cut))
        kept -= dropped
    conn.execute(
        "INSERT INTO live_heads (channel, last, bytes) VALUES (?, ?, ?) "
        "ON CONFLICT (channel) DO UPDATE SET last = excluded.last, bytes = excluded.bytes",
        (channel, last, kept),
    )
    return last


def read(
    conn: sqlite3.Connection, channel: str, after: int, limit: int
) -> tuple[list[tuple[int, bytes]], int, int]:
    """The rows of ``channel`` after ``after`` (at most ``limit``), its first and last,
    all read from one snapshot (an append between the reads would leave ``last``
    behind the rows)."""
    conn.execute("BEGIN")
    try:
        head = conn.execute("SELECT last FROM live_heads WHERE channel = ?", (channel,)).fetchone()
        if head is None:
            return [], 1, 0
        first_row = conn.execute(
            "SELECT min(offset) FROM live WHERE channel = ?", (channel,)
        ).fetchone()
        rows = conn.execute(
            "SELECT offset, data FROM live WHERE channel = ? AND offset > ? "
            "ORDER BY offset LIMIT ?",
            (channel, after, limit),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    last = int(head[0])
    first = int(first_row[0]) if first_row[0] is not None else last + 1
    return rows, first, last


def drop(conn: sqlite3.Connection, channel: str) -> None:
    """Forget ``channel``."""
    conn.execute("DELETE FROM live WHERE channel = ?", (channel,))
    conn.execute("DELETE FROM live_heads WHERE channel = ?", (channel,))


def channel_tag(channel: str) -> str:
    """The part of a marker file's name that names its channel."""
    return hashlib.blake2b(channel.encode(), digest_size=10).hexdigest()


Runner = Callable[..., "asyncio.Future[Any]"]


class SqliteLive(LiveChannels):
    """The live channels of one :class:`~plait.mesh.sqlite.SqliteMesh`.

    Args:
        folder: the marker folder (``PATH.live`` beside the mesh file).
        write: runs a function on the mesh's writer connection.
        read: runs a function on a reader connection.
    """

    def __init__(self, folder: Path, write: Runner, read: Runner) -> None:
        self.folder = folder
        self._write = write
        self._read = read
        self._listed: tuple[int, dict[str, list[str]]] = (-1, {})
        self._sender: socket.socket | None = None
        self._listeners: dict[str, _Listener] = {}

    def _markers(self) -> dict[str, list[str]]:
        """The folder's markers by channel tag, listed again when the folder changed."""
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return {}
        # A folder's times tick with the kernel's coarse clock (a few milliseconds): two
        # changes within one tick leave one time, so a recent time is never trusted.
        if mtime != self._listed[0] or time.time_ns() - mtime < _COARSE_NS:
            found: dict[str, list[str]] = {}
            with contextlib.suppress(FileNotFoundError):
                for name in os.listdir(self.folder):
                    tag, _, token = name.partition(".")
                    found.setdefault(tag, []).append(token)
            self._listed = (mtime, found)
        return self._listed[1]

    def watched(self, channel: str) -> bool:
        return channel_tag(channel) in self._markers()

    async def append(self, channel: str, items: Sequence[Any], *, keep_bytes: int) -> int:
        check_key(channel, "channel")
        encoded = [encode(channel, item) for item in items]
        last: int = await self._write(append, channel, encoded, keep_bytes, savepoint=True)
        self._wake(channel)
        return last

    def _wake(self, channel: str) -> None:
        tag = channel_tag(channel)
        tokens = self._markers().get(tag)
        if not tokens:
            return
        if self._sender is None:
            self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sender.setblocking(False)
        for token in tokens:
            try:
                self._sender.sendto(b"", _SOCKET_PREFIX + token)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(FileNotFoundError):  # its process is gone
                    os.unlink(self.folder / f"{tag}.{token}")
            except BlockingIOError:
                pass  # its queue is full: it has wake-ups enough to read

    async def read(self, channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
        check_key(channel, "channel")
        rows, first, last = await self._read(read, channel, after, limit)
        return LiveSlice([LiveItem(o, decode(d, channel)) for o, d in rows], first, last)

    def watch(self, channel: str) -> LiveWatch:
        check_key(channel, "channel")
        return _SqliteWatch(self, channel)

    async def drop(self, channel: str) -> None:
        check_key(channel, "channel")
        await self._write(drop, channel, savepoint=True)

    def close(self) -> None:
        """Close the socket appends wake watchers through."""
        if self._sender is not None:
            self._sender.close()
            self._sender = None


class _Listener:
    """One socket and marker for the watches of one channel in this process: an append
    sends one datagram per watching process, however many watch there."""

    def __init__(self, live: SqliteLive, channel: str) -> None:
        token = new_id()
        self.watches: set[LiveWatch] = set()
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.setblocking(False)
        self.socket.bind(_SOCKET_PREFIX + token)
        asyncio.get_running_loop().add_reader(self.socket.fileno(), self._readable)
        live.folder.mkdir(parents=True, exist_ok=True)
        self.marker = live.folder / f"{channel_tag(channel)}.{token}"
        self.marker.touch()

    def _readable(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while True:
                self.socket.recv(16)
        for watch in list(self.watches):
            watch.notify()

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()
        asyncio.get_running_loop().remove_reader(self.socket.fileno())
        self.socket.close()


class _SqliteWatch(LiveWatch):
    live: SqliteLive

    def __init__(self, live: SqliteLive, channel: str) -> None:
        super().__init__(live, channel)
        self._open = False

    async def open(self) -> None:
        listeners = self.live._listeners
        listener = listeners.get(self.channel)
        if listener is None:
            listener = listeners[self.channel] = _Listener(self.live, self.channel)
        listener.watches.add(self)
        self._open = True

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        listener = self.live._listeners.get(self.channel)
        if listener is not None:
            listener.watches.discard(self)
            if not listener.watches:
                del self.live._listeners[self.channel]
                listener.close()


__all__ = ["SCHEMA", "SqliteLive", "append", "channel_tag", "drop", "read"]
