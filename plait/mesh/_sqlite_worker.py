"""Where a SQLite mesh's statements run: on the event loop when they cannot block,
else on threads that own a connection each; and the error boundary around them.

What can wait on a lock or a disk stays off the event loop; what cannot may run on it.
A commit in WAL with ``synchronous=NORMAL`` on a connection with ``busy_timeout=0``
cannot wait: it writes to the page cache (no fsync), and a write lock held by another
process fails it at once with ``SQLITE_BUSY`` instead of waiting. Measured here, such a
commit costs less than the two thread hops it would otherwise take, so
:class:`LoopWriter` runs it on the loop, once per loop iteration for every request
submitted in that iteration. What can wait goes to a :class:`Worker` thread: a batch
that met ``SQLITE_BUSY`` (the thread waits with ``busy_timeout``), every commit under
``synchronous=FULL`` (each fsyncs), checkpoints (they fsync the database), opening a
connection (it may wait on recovery or the schema lock).

A batch commits in one ``BEGIN IMMEDIATE`` transaction, so a request that fails (a CAS
conflict) is rolled back alone while the others commit together: the batch runs under
one ``SAVEPOINT``, and once a request fails it is rolled back to it and runs again,
each request inside a ``SAVEPOINT`` of its own. A request of one
write statement (a put, a delete) skips the savepoint: its version check is part of
the statement, so a conflict has written nothing, and SQLite undoes a failed statement
whole. One commit, and so one WAL append, then serves the whole batch: concurrent
writers pay for a commit together instead of one each. The loop and the threads run
the same :func:`write_batch`.

Every ``sqlite3`` exception is translated here, before it reaches a caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from plait.errors import ConfigError, InvalidKey, MeshError, MeshUnavailable
from plait.mesh._sqlite_ops import BUSY_CODES, checkpoint, open_connection

Request = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any] | None", bool]
"""``fn`` run as ``fn(conn, *args)``, ``args``, the caller's future, and whether ``fn``
needs a savepoint of its own (False when it makes at most one write statement, which
SQLite applies or undoes whole)."""

Outcome = tuple[bool, Any]
"""``(True, result)`` or ``(False, exception)``."""

_Item = tuple[list[Request], Callable[[], None] | None, bool]
"""What a worker's queue holds: requests served together, what to call after, and
whether they run alone, outside any transaction."""

_MAX_BATCH = 512
_CONFIG_CODES = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB)
_MX_FRAME = struct.Struct("=I")
"""The wal-index header's ``mxFrame``: frames in the WAL, at offset 16 of the -shm file
(https://sqlite.org/walformat.html), in the machine's byte order."""

DEFAULT_CHECKPOINT_PAGES = 1000
"""WAL pages after which a checkpoint is asked for (SQLite's own autocheckpoint)."""

_CHECK_EVERY = 16
"""Writes committed on the loop between two reads of the WAL's size."""


def translate(exc: BaseException, path: Path, busy_timeout_ms: int) -> BaseException:
    """The plait error for an exception raised while talking to SQLite.

    Plait errors and programming errors pass through; ``sqlite3`` errors become
    :class:`ConfigError` (a file that cannot be written), :class:`MeshUnavailable`
    (retryable: locked, I/O) or :class:`MeshError`.
    """
    if isinstance(exc, UnicodeEncodeError):
        return InvalidKey(f"a mesh key, topic or kind must be valid Unicode text: {exc.reason}")
    code = _code(exc)
    if code in _CONFIG_CODES:
        return ConfigError(f"the SQLite mesh {path} cannot be written: {exc}")
    if isinstance(exc, sqlite3.OperationalError):
        if code in BUSY_CODES:
            return MeshUnavailable(
                f"the SQLite mesh {path} stayed locked by another connection for longer "
                f"than busy_timeout ({busy_timeout_ms} ms): {exc}"
            )
        return MeshUnavailable(f"the SQLite mesh {path} failed: {exc}")
    if isinstance(exc, sqlite3.Error):
        return MeshError(f"the SQLite mesh {path} failed: {exc}")
    return exc


def _code(exc: BaseException) -> int:
    return int(getattr(exc, "sqlite_errorcode", 0)) & 0xFF


def call(conn: sqlite3.Connection, request: Request, path: Path, busy_ms: int) -> Outcome:
    """Run one request on ``conn``; its result or its translated exception."""
    try:
        return True, request[0](conn, *request[1])
    except Exception as exc:  # forwarded to the caller that queued the request
        return False, translate(exc, path, busy_ms)


def write_batch(
    conn: sqlite3.Connection, batch: list[Request], path: Path, busy_ms: int
) -> list[Outcome]:
    """Run ``batch`` in the transaction ``BEGIN IMMEDIATE`` opened on ``conn``, then commit.

    A request that fails is rolled back alone: the batch runs again, each request in
    a savepoint of its own (see :func:`_write_each`).
    """
    try:
        if len(batch) == 1:
            outcome = call(conn, batch[0], path, busy_ms)
            if outcome[0]:
                conn.execute("COMMIT")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
            return [outcome]
        # Most batches have no failing request: run them under one savepoint, and only
        # when a request fails roll the batch back to it and run it again with a
        # savepoint per request (the requests only read and write this connection, so
        # the second run meets the state the first did). Two statements less per
        # request, measured at 2 us of a 23 us CAS update.
        conn.execute("SAVEPOINT batch")
        outcomes = []
        for request in batch:
            outcome = call(conn, request, path, busy_ms)
            if not outcome[0]:
                if not conn.in_transaction:
                    # SQLite rolled the whole transaction back (disk full, I/O error).
                    return [outcome] * len(batch)
                conn.execute("ROLLBACK TO batch")
                return _write_each(conn, batch, path, busy_ms)
            outcomes.append(outcome)
        conn.execute("COMMIT")
        return outcomes
    except sqlite3.Error as exc:
        return fail_all(conn, batch, exc, path, busy_ms)


def _write_each(
    conn: sqlite3.Connection, batch: list[Request], path: Path, busy_ms: int
) -> list[Outcome]:
    """:func:`write_batch` with each request in a savepoint of its own (unless it
    declared it needs none), so one that fails is rolled back alone."""
    try:
        outcomes = []
        for request in batch:
            savepoint = request[3]
            if savepoint:
                conn.execute("SAVEPOINT request")
            outcome = call(conn, request, path, busy_ms)
            if not outcome[0] and not conn.in_transaction:
                # SQLite rolled the whole transaction back (disk full, I/O error).
                return [outcome] * len(batch)
            if savepoint:
                if not outcome[0]:
                    conn.execute("ROLLBACK TO request")
                conn.execute("RELEASE request")
            outcomes.append(outcome)
        conn.execute("COMMIT")
        return outcomes
    except sqlite3.Error as exc:
        return fail_all(conn, batch, exc, path, busy_ms)


def fail_all(
    conn: sqlite3.Connection, batch: list[Request], exc: sqlite3.Error, path: Path, busy_ms: int
) -> list[Outcome]:
    """Roll back what ``conn`` has open; ``exc``, translated, for every request."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the original error is the one worth reporting
    return [(False, translate(exc, path, busy_ms))] * len(batch)


class Worker:
    """A thread owning one connection to the mesh file; ``writer`` commits in groups.

    The connection is opened by the thread on its first request and opened again on a
    later one if that failed (a lock held by another process at start is transient).
    """

    def __init__(
        self, path: Path, busy_timeout_ms: int, *, writer: bool, synchronous: str = "NORMAL"
    ) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.writer = writer
        self.synchronous = synchronous
        self._queue: SimpleQueue[_Item | None] = SimpleQueue()
        self._held: _Item | None = None  # taken from the queue, served next
        self._thread = threading.Thread(
            target=self._run, name=f"plait-sqlite-{'writer' if writer else 'reader'}", daemon=True
        )
        self._thread.start()

    def submit(
        self, fn: Callable[..., Any], *args: Any, savepoint: bool = True
    ) -> asyncio.Future[Any]:
        """Queue ``fn(conn, *args)`` and return a future of its result (on this loop).

        Pass ``savepoint=False`` only for a ``fn`` that writes with at most one
        statement and raises only before or after it: a batch then skips the savepoint.
        """
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put(([(fn, args, future, savepoint)], None, False))
        return future

    def submit_alone(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue ``fn(conn, *args)`` to run between batches, outside any transaction."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put(([(fn, args, future, False)], None, True))
        return future

    def submit_batch(self, batch: list[Request], then: Callable[[], None]) -> None:
        """Queue requests to be served in one transaction; ``then()`` runs on the thread
        once their outcomes are handed to their loops."""
        self._queue.put((batch, then, False))

    def stop(self) -> None:
        """Ask the thread to finish what is queued, close its connection and exit."""
        self._queue.put(None)

    def join(self) -> None:
        """Wait for the thread to exit (after :meth:`stop`)."""
        self._thread.join()

    # -- on the thread ----------------------------------------------------------------

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                batch, then, alone, stopping = self._take()
                if batch:
                    conn = self._serve(conn, batch, alone)
                for callback in then:
                    callback()
                if stopping:
                    return
        finally:
            if conn is not None:
                conn.close()

    def _take(self) -> tuple[list[Request], list[Callable[[], None]], bool, bool]:
        """Wait for requests, then take every one queued behind them up to one that runs
        alone; whether they run alone, and whether to stop."""
        queue = self._queue
        batch: list[Request] = []
        then: list[Callable[[], None]] = []
        item, self._held = self._held or queue.get(), None
        if item is not None and item[2]:
            return item[0], [], True, False
        while item is not None:
            batch += item[0]
            if item[1] is not None:
                then.append(item[1])
            if len(batch) >= _MAX_BATCH or queue.empty():
                return batch, then, False, False
            item = queue.get()
            if item is not None and item[2]:
                self._held = item
                return batch, then, False, False
        return batch, then, False, True

    def _serve(
        self, conn: sqlite3.Connection | None, batch: list[Request], alone: bool
    ) -> sqlite3.Connection | None:
        try:
            if conn is None:
                conn = open_connection(
                    self.path,
                    self.busy_timeout_ms,
                    writer=self.writer,
                    synchronous=self.synchronous,
                )
            if self.writer and not alone:
                outcomes = self._write(conn, batch)
            else:
                outcomes = [call(conn, r, self.path, self.busy_timeout_ms) for r in batch]
        except Exception as exc:  # forwarded to every caller of the batch, none left hanging
            outcomes = [(False, translate(exc, self.path, self.busy_timeout_ms))] * len(batch)
        _resolve(batch, outcomes)
        return conn

    def _write(self, conn: sqlite3.Connection, batch: list[Request]) -> list[Outcome]:
        # IMMEDIATE takes the write lock up front, waiting up to busy_timeout for other
        # processes: a deferred transaction that reads and then writes can instead fail
        # at once with SQLITE_BUSY when another process wrote in between.
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return fail_all(conn, batch, exc, self.path, self.busy_timeout_ms)
        return write_batch(conn, batch, self.path, self.busy_timeout_ms)


class LoopConnection:
    """Commits and reads on the event loop's thread, on a connection that never waits.

    Writes submitted during one loop iteration are committed together at the start of
    the next by :func:`write_batch`. A batch whose ``BEGIN IMMEDIATE`` meets another
    process's write lock (``SQLITE_BUSY`` at once, as ``busy_timeout`` is 0) goes to the
    writer thread, which waits for the lock; so do the batches after it until the
    thread has committed them, so writes still commit in the order they were submitted.
    With ``commits=False`` (``synchronous=FULL``) every batch goes to the writer thread.
    A read that meets ``SQLITE_BUSY`` (a WAL being recovered) goes to the reader thread.

    The connection is opened on the reader thread (opening can wait) once the writer
    thread has opened its own (so the two never race to create the file); until then,
    every batch goes to the writer thread. Its WAL never checkpoints on the loop
    (``wal_autocheckpoint=0``): past ``checkpoint_pages`` pages the reader thread copies
    the WAL while the loop commits on, then the writer thread copies the rest holding
    the write lock, between its batches (:func:`~plait.mesh._sqlite_ops.checkpoint`).

    While the writer thread holds the lock for the loop (that last copy, or a handed
    batch not committed yet), the loop's writes wait on the loop, as one batch that
    commits on the loop as soon as the thread is done, instead of going to the thread
    one small batch each: the thread then commits each of them while the busy loop
    holds the GIL its every statement must take back (measured with 200 runs at once:
    one round sent 127 batches of one or two writes each there, and ran 27% slower
    than the rounds that sent a few). A busy handler would instead sleep in steps of
    milliseconds (measured: 3.5-27 ms per batch when the reader thread restarted).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: Worker,
        reader: Worker,
        *,
        commits: bool = True,
        checkpoint_pages: int = DEFAULT_CHECKPOINT_PAGES,
    ) -> None:
        self.loop = loop
        self._commits = commits
        self._writer = writer
        self._reader = reader
        self._path = writer.path
        self._busy_ms = writer.busy_timeout_ms
        self._checkpoint_pages = checkpoint_pages
        self._conn: sqlite3.Connection | None = None
        self._shm: int | None = None
        self._opening: asyncio.Future[Any] | None = None
        self._pending: list[Request] = []
        self._handed = 0  # batches on the writer thread not committed yet
        self._checkpointing = False
        self._restarting = False  # the writer thread holds the lock for the last copy
        self._unchecked = 0  # writes committed since the WAL's size was last read
        self._closed = False

    def open(self) -> asyncio.Future[Any]:
        """Open the loop's connection on the reader thread (once; again after a failure)."""
        if self._opening is None:
            self._opening = self._reader.submit(
                _open_for_loop, self._path, self._busy_ms, self._writer.synchronous
            )
            self._opening.add_done_callback(self._opened)
        return self._opening

    def _opened(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._opening = None  # the writer thread reports the error; try again later
            return
        conn, shm = future.result()
        if self._closed:
            self._reader.submit_batch([(_close, (conn, shm), None, False)], _nothing)
            return
        self._conn, self._shm = conn, shm

    def write(self, fn: Callable[..., Any], *args: Any, savepoint: bool) -> asyncio.Future[Any]:
        """Queue ``fn(conn, *args)`` for this iteration's batch; a future of its result."""
        future = self.loop.create_future()
        if not self._pending:
            # Runs after every callback already ready, so after every task this iteration
            # wakes: all the writes they submit share one commit.
            self.loop.call_soon(self.flush)
        self._pending.append((fn, args, future, savepoint))
        return future

    def read(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(conn, *args)`` now, unless it would wait (then on the reader thread)."""
        conn = self._conn
        if conn is None:
            return self._reader.submit(fn, *args)
        future = self.loop.create_future()
        try:
            future.set_result(fn(conn, *args))
        except sqlite3.Error as exc:
            if _code(exc) in BUSY_CODES:
                return self._reader.submit(fn, *args)
            future.set_exception(translate(exc, self._path, self._busy_ms))
        except Exception as exc:  # forwarded to the caller, as a worker thread does
            future.set_exception(translate(exc, self._path, self._busy_ms))
        return future

    def flush(self) -> None:
        """Commit the writes queued so far (on the loop, or on the writer thread)."""
        conn = self._conn
        if conn is not None and self._commits and (self._handed or self._restarting):
            return  # they wait their turn here: _resume flushes them once it comes
        batch, self._pending = self._pending, []
        if not batch:
            return
        if conn is None or not self._commits:
            self._hand(batch)
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if _code(exc) in BUSY_CODES:
                self._hand(batch)  # another process writes: wait for it off the loop
            else:
                _settle(_pairs(batch, fail_all(conn, batch, exc, self._path, self._busy_ms)))
            return
        _settle(_pairs(batch, write_batch(conn, batch, self._path, self._busy_ms)))
        self._maybe_checkpoint(len(batch))

    def _hand(self, batch: list[Request]) -> None:
        self._handed += 1
        self._writer.submit_batch(batch, self._handed_back)

    def _handed_back(self) -> None:  # on the writer thread
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self.loop.call_soon_threadsafe(self._done_handing)

    def _done_handing(self) -> None:
        self._handed -= 1
        if self._conn is None and not self._closed:
            self.open()  # the writer's connection exists now: the file has its schema
        self._resume()

    def _resume(self) -> None:
        """Flush the writes that waited for the writer thread, once it is done."""
        if self._pending and not self._handed and not self._restarting and not self._closed:
            self.loop.call_soon(self.flush)

    def _maybe_checkpoint(self, written: int) -> None:
        # The WAL's size is read every _CHECK_EVERY writes, not after every commit: a
        # system call that cost 2% of a run's transition, for a threshold that a few
        # dozen pages more or less do not change.
        self._unchecked += written
        if self._checkpointing or self._shm is None or self._unchecked < _CHECK_EVERY:
            return
        self._unchecked = 0
        try:
            frames = _MX_FRAME.unpack(os.pread(self._shm, 4, 16))[0]
        except (OSError, struct.error):
            return
        if frames >= self._checkpoint_pages:
            self._checkpointing = True
            passive = self._reader.submit(checkpoint, False)
            passive.add_done_callback(self._copied)

    def _copied(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None or self._closed:
            self._checkpointing = False  # retried after the next commit
            return
        self._restarting = True
        self._writer.submit_alone(checkpoint, True).add_done_callback(self._checkpointed)

    def _checkpointed(self, future: asyncio.Future[Any]) -> None:
        self._checkpointing = self._restarting = False
        if not future.cancelled():
            future.exception()  # a failed checkpoint is retried after the next commit
        self._resume()

    def close(self) -> None:
        """Commit what is queued, then close the connection on the reader thread (closing
        may checkpoint, which writes to disk)."""
        if self._pending and (self._handed or self._restarting):
            batch, self._pending = self._pending, []
            self._hand(batch)  # behind what the writer thread has, in order
        self.flush()
        self._closed = True
        conn, shm, self._conn, self._shm = self._conn, self._shm, None, None
        if conn is not None:
            self._reader.submit_batch([(_close, (conn, shm), None, False)], _nothing)


def _open_for_loop(
    _conn: object, path: Path, busy_ms: int, synchronous: str
) -> tuple[sqlite3.Connection, int | None]:
    conn = open_connection(path, busy_ms, writer=True, synchronous=synchronous)
    try:
        # Never wait on the loop: another process's lock fails at once (and the batch
        # moves to the writer thread); checkpoints run on the writer thread.
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        shm: int | None = os.open(f"{path}-shm", os.O_RDONLY)
    except OSError:
        shm = None  # no WAL size to read: the writer thread's own checkpoints remain
    except BaseException:
        conn.close()
        raise
    return conn, shm


def _close(_conn: object, conn: sqlite3.Connection, shm: int | None) -> None:
    conn.close()
    if shm is not None:
        os.close(shm)


def _nothing() -> None:
    """Nothing to do once a request is served."""


def _pairs(
    batch: list[Request], outcomes: list[Outcome]
) -> list[tuple[asyncio.Future[Any], Outcome]]:
    return [(r[2], o) for r, o in zip(batch, outcomes, strict=True) if r[2] is not None]


def _resolve(batch: list[Request], outcomes: list[Outcome]) -> None:
    """Hand each outcome to its caller's loop: one wake-up per loop, not per request."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
    for future, outcome in _pairs(batch, outcomes):
        by_loop.setdefault(future.get_loop(), []).append((future, outcome))
    for loop, settled in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, settled)
        except RuntimeError:
            pass  # that loop is closed: nobody is left to wait for these results


def _settle(settled: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    for future, (ok, value) in settled:
        if future.done():
            continue  # the caller was cancelled
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


__all__ = ["DEFAULT_CHECKPOINT_PAGES", "LoopConnection", "Request", "Worker", "translate"]
