"""The SQLite mesh: one file shared by the processes of one machine (``sqlite:///PATH``).

The file is in WAL mode, so readers and the writer never block each other, and every
write is a ``BEGIN IMMEDIATE`` transaction, so writers from several processes queue on
SQLite's lock (for up to ``busy_timeout``) instead of failing halfway. Within one mesh
object, the writes of one event-loop iteration commit together (group commit) on the
loop itself, where such a commit cannot wait; a writer thread takes over when it could
(another process holds the lock, or ``synchronous=FULL`` fsyncs every commit) and
runs the checkpoints. See :mod:`plait.mesh._sqlite_worker`,
:mod:`plait.mesh._sqlite_ops` and :mod:`plait.mesh._sqlite_delivery`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import plait.mesh._sqlite_ops as ops
from plait.errors import ConfigError, MeshUnavailable
from plait.mesh._base import (
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    Delivery,
    Entry,
    Event,
    InsertOp,
    Mesh,
    Op,
    PublishOp,
    PutOp,
    StartFrom,
    Subscription,
    TransactionResult,
    _check_version,
    check_prefix,
    scan_bounds,
)
from plait.mesh._codec import (
    DEFAULT_MAX_VALUE_BYTES,
    OnCorrupt,
    check_key,
    decode,
    decode_scanned,
    encode,
    prefix_end,
    topic_names,
)
from plait.mesh._sqlite_delivery import MeshLink, SqliteSubscription
from plait.mesh._sqlite_live import SqliteLive
from plait.mesh._sqlite_worker import LoopConnection, Worker

DEFAULT_BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another process's lock before :class:`MeshUnavailable`."""

DEFAULT_POLL_INTERVAL_MS = 50
"""How often an idle subscription looks for events written by other processes."""

MAX_VALUE_CEILING = 1_000_000_000
"""SQLite's own limit on one value (``SQLITE_MAX_LENGTH``)."""

_SCAN_PAGE = 256
_JOURNALS = ("-wal", "-shm", "-journal")


class SqliteMesh(Mesh):
    """A mesh in a SQLite file (URL ``sqlite:///PATH``).

    Args:
        path: the database file, relative to the working directory unless absolute;
            its directory is created if needed.
        max_value_bytes: the largest encoded value or event payload accepted.
        busy_timeout: milliseconds a write waits for a lock held by another process.
        poll_interval_ms: how often an idle subscription checks for other processes'
            events (writes through this object wake it at once).
        synchronous: ``"normal"`` (the default) or ``"full"``. In WAL, NORMAL loses no
            commit when the process crashes, but a power loss may drop the last ones;
            FULL fsyncs every commit so that it survives a power loss too, and costs
            that fsync (so its commits run on the writer thread, never on the loop).

    Raises:
        ConfigError: an option is out of range. A path that cannot be created or
            written raises :class:`ConfigError` from :meth:`open` (or the first call).
    """

    commit_yields = True  # every commit awaits its batch's flush, on the loop or a thread
    shares_across_processes = True  # the processes of this machine open the same file
    reach = "this machine"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        busy_timeout: int = DEFAULT_BUSY_TIMEOUT_MS,
        poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        synchronous: str = "normal",
    ) -> None:
        for name, value in (("busy_timeout", busy_timeout), ("poll_interval_ms", poll_interval_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"the SQLite option {name} must be an int >= 0, got {value!r}")
        level = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if level not in ops.SYNCHRONOUS:
            raise ConfigError(
                f"the SQLite option synchronous must be 'normal' or 'full', got {synchronous!r}"
            )
        if not os.fspath(path) or "\x00" in os.fspath(path):
            raise ConfigError(
                f"the SQLite mesh needs a file path, e.g. sqlite:///.plait/mesh.db, got {path!r}"
            )
        self.url = f"sqlite:///{os.fspath(path)}"
        self.path = Path(path).absolute()
        self._local_files = (
            self.path,
            *(self.path.with_name(self.path.name + s) for s in _JOURNALS),
        )
        if max_value_bytes > MAX_VALUE_CEILING:
            raise ConfigError(
                f"max_value_bytes {max_value_bytes} is over SQLite's limit of "
                f"{MAX_VALUE_CEILING} bytes on one value"
            )
        self.max_value_bytes = max_value_bytes
        self.busy_timeout = busy_timeout
        self.synchronous = level
        self._poll_s = max(poll_interval_ms, 1) / 1000
        self._writer: Worker | None = None
        self._reader: Worker | None = None
        self._loop_conn: LoopConnection | None = None
        self._closed = False
        self._subs: set[SqliteSubscription] = set()
        self._stop_workers: weakref.finalize[Any, SqliteMesh] | None = None
        self._live = SqliteLive(
            self.path.with_name(self.path.name + ".live"), self._write, self._read
        )

    @property
    def live(self) -> SqliteLive:
        """The mesh's live channels (see :mod:`plait.mesh._sqlite_live`)."""
        return self._live

    @property
    def location(self) -> str:
        """The SQLite file, as an absolute path."""
        return f"the SQLite file {self.path}"

    @property
    def local_files(self) -> tuple[Path, ...]:
        """The database file and the journals SQLite keeps beside it."""
        return self._local_files  # built once: every node's environment asks

    # lifecycle ----------------------------------------------------------------------

    def _start(self) -> tuple[Worker, Worker]:
        if self._closed:
            raise MeshUnavailable(f"the SQLite mesh {self.path} is closed")
        if self._writer is None or self._reader is None:
            self._writer = Worker(
                self.path, self.busy_timeout, writer=True, synchronous=self.synchronous
            )
            self._reader = Worker(self.path, self.busy_timeout, writer=False)
            # A mesh dropped without close() still lets its threads end.
            self._stop_workers = weakref.finalize(self, _stop, self._writer, self._reader)
        return self._writer, self._reader

    def _on_loop(self) -> LoopConnection | None:
        """The connection on the running loop (None: the mesh was first used elsewhere)."""
        conn = self._loop_conn
        if conn is None:
            writer, reader = self._start()
            # Under FULL every commit fsyncs, which waits on a disk: the loop batches
            # them and the writer thread commits.
            commits = self.synchronous == "NORMAL"
            loop = asyncio.get_running_loop()
            conn = self._loop_conn = LoopConnection(loop, writer, reader, commits=commits)
        elif getattr(conn.loop, "_thread_id", None) != threading.get_ident():
            # A loop runs in one thread at a time, and asyncio's loops record which
            # (``_thread_id``): when ours runs in this thread it is the running loop.
            # Otherwise ask, which costs a getpid() system call on Python 3.11, three
            # times per transition.
            if conn.loop is not asyncio.get_running_loop():
                return None  # the mesh is used from another loop too: its threads serve that
        return conn

    def _write(
        self, fn: Callable[..., Any], *args: Any, savepoint: bool = True
    ) -> asyncio.Future[Any]:
        loop_conn = self._on_loop()
        if loop_conn is not None:
            return loop_conn.write(fn, *args, savepoint=savepoint)
        writer = self._writer or self._start()[0]
        return writer.submit(fn, *args, savepoint=savepoint)

    def _read(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        # On the loop too: a WAL reader never waits on a writer, and measured here a
        # read of a key on the loop took 5-9 us against 41-52 us through the reader
        # thread (8-9 against 11-12 us with 64 concurrent readers). The cost is a page
        # the OS no longer caches, read from disk while the loop waits.
        loop_conn = self._on_loop()
        if loop_conn is not None:
            return loop_conn.read(fn, *args)
        reader = self._reader or self._start()[1]
        return reader.submit(fn, *args)

    async def open(self) -> None:
        """Create or open the file and check it can be written.

        Raises:
            ConfigError: the path cannot be created, opened or written (the message
                names the path and the reason).
            MeshUnavailable: another process kept the file locked beyond busy_timeout.
        """
        await self._write(_noop)
        await self._read(_noop)
        loop_conn = self._on_loop()
        if loop_conn is not None:
            await loop_conn.open()

    async def close(self) -> None:
        """End every subscription, finish queued requests, stop the threads; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._live.close()
        for sub in list(self._subs):
            await sub.close()
        if self._loop_conn is not None:
            self._loop_conn.close()
            self._loop_conn = None
        workers = [w for w in (self._writer, self._reader) if w is not None]
        self._writer = self._reader = None
        if self._stop_workers is not None:
            self._stop_workers()
            await asyncio.to_thread(_join, workers)

    # keys ---------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        row = await self._read(ops.get, key)
        return None if row is None else Entry(key, decode(row[0], key), row[1], bool(row[2]))

    async def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> Entry:
        check_key(key)
        _check_version(if_version)
        data = encode(key, value, self.max_value_bytes)
        version = await self._write(ops.put, key, data, if_version, tainted, savepoint=False)
        return Entry(key, value, version, tainted)

    async def delete(self, key: str, if_version: int | None = None) -> bool:
        check_key(key)
        _check_version(if_version)
        existed: bool = await self._write(ops.delete, key, if_version, savepoint=False)
        return existed

    async def get_many(self, keys: Sequence[str]) -> list[Entry | None]:
        names = list(keys)
        for key in names:
            check_key(key)
        rows = await self._read(ops.get_many, names) if names else {}
        return [None if (row := rows.get(key)) is None else _entry(key, *row) for key in names]

    async def delete_prefix(self, prefix: str) -> int:
        check_prefix(prefix)
        removed: int = await self._write(ops.delete_prefix, prefix, savepoint=False)
        return removed

    async def scan(
        self,
        prefix: str = "",
        *,
        on_corrupt: OnCorrupt | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[Entry]:
        low, high, low_in, high_in = scan_bounds(prefix, reverse, limit, after)
        left = limit
        while left is None or left > 0:
            page = _SCAN_PAGE if left is None else min(left, _SCAN_PAGE)
            rows = await self._read(ops.scan_page, low, low_in, high, high_in, reverse, page)
            for key, data, version, tainted in rows:
                value = decode_scanned(data, key, on_corrupt)
                if value is not None:
                    yield Entry(key, value[0], version, bool(tainted))
            if left is not None:
                left -= len(rows)
            if len(rows) < page:
                return
            if reverse:
                high, high_in = rows[-1][0], False
            else:
                low, low_in = rows[-1][0], False

    # transactions -------------------------------------------------------------------

    async def _commit(self, ops_: Sequence[Op]) -> TransactionResult:
        batch = list(ops_)
        versions: list[int] = []
        took: list[Any] = []
        if batch:
            versions, took = await self._write(ops.commit, batch, savepoint=len(batch) > 1)
        entries: dict[str, Entry] = {}
        event_ids: list[str] = []
        topics: set[str] = set()
        put_versions = iter(versions)
        for op in batch:
            if isinstance(op, PutOp):
                entries[op.key] = Entry(op.key, op.value, next(put_versions), op.tainted)
            elif isinstance(op, InsertOp):
                if next(put_versions):
                    entries[op.key] = Entry(op.key, op.value, 1, op.tainted)
            elif isinstance(op, PublishOp):
                event_ids.append(op.event_id)
                topics.add(op.topic)
        taken = [
            Delivery(
                Event(event_id, op.topic, kind, decode(data), at_ms, bool(tainted)),
                op.group, op.consumer, 1, seq, self._ack,
            )
            for op, seq, event_id, kind, data, at_ms, tainted in took
        ]  # fmt: skip
        # A topic whose new events this very transaction took needs no reader woken.
        untaken = {
            t for t in topics
            if sum(isinstance(o, PublishOp) and o.topic == t for o in batch)
            > sum(d.topic == t for d in taken)
        }  # fmt: skip
        if untaken:
            self._notify(untaken)
        return TransactionResult(entries, event_ids, taken)

    # topics -------------------------------------------------------------------------

    def subscribe(
        self,
        topics: str | Sequence[str],
        group: str,
        consumer: str,
        *,
        start: StartFrom = "new",
        visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> Subscription:
        names = topic_names(topics)
        check_key(group, "group")
        check_key(consumer, "consumer")
        link = MeshLink(self._write, self._read, self._ack, self._notify, self._subs.discard)
        sub = SqliteSubscription(
            link, names, group, consumer, start, visibility_timeout_ms, self._poll_s
        )
        self._subs.add(sub)
        return sub

    async def _ack(self, delivery: Delivery) -> None:
        await self._write(
            ops.ack,
            delivery.topic,
            delivery.group,
            delivery.position,
            delivery.consumer,
            savepoint=False,
        )

    async def trim(self, topic: str) -> int:
        check_key(topic, "topic")
        removed: int = await self._write(ops.trim, topic, savepoint=False)
        return removed

    async def topics(self, prefix: str = "") -> list[str]:
        found: list[str] = await self._read(ops.topics, prefix, prefix_end(prefix))
        return found

    async def delete_topic(self, topic: str) -> None:
        check_key(topic, "topic")
        await self._write(ops.delete_topic, topic)

    async def backlog(self, topic: str, group: str) -> int:
        check_key(topic, "topic")
        # Scheduled events that fell due count once a claim moves them: a read moves none.
        found: int = await self._read(ops.backlog, topic, group)
        return found

    async def drop_group(self, topics: str | Sequence[str], group: str) -> None:
        await self._write(ops.drop_group, topic_names(topics), group)

    async def extend(self, delivery: Delivery) -> None:
        await self._write(
            ops.extend,
            delivery.topic,
            delivery.group,
            delivery.position,
            delivery.consumer,
            savepoint=False,
        )

    def _notify(self, topics: set[str] | None = None) -> None:
        """Wake the subscriptions reading any of ``topics`` (None: every subscription)."""
        for sub in self._subs:
            if topics is None or not topics.isdisjoint(sub.topics):
                sub.wake()


def _entry(key: str, data: bytes, version: int, tainted: int) -> Entry:
    return Entry(key, decode(data, key), version, bool(tainted))


def _noop(conn: object) -> None:
    """A request that only makes its worker open the connection."""


def _stop(writer: Worker, reader: Worker) -> None:
    writer.stop()
    reader.stop()


def _join(workers: list[Worker]) -> None:
    for worker in workers:
        worker.join()


__all__ = ["DEFAULT_BUSY_TIMEOUT_MS", "DEFAULT_POLL_INTERVAL_MS", "MAX_VALUE_CEILING", "SqliteMesh"]
