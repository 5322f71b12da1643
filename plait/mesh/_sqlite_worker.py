"""The threads that own a SQLite mesh's connections, and the error boundary around them.

sqlite3 calls block (on disk and on other processes' locks), so none runs on the event
loop: each :class:`Worker` is a thread that owns one connection and answers requests
queued by coroutines, resolving their futures through ``call_soon_threadsafe``.

The writer commits in groups. It takes every request queued since its last commit and
runs them in one ``BEGIN IMMEDIATE`` transaction, each inside a ``SAVEPOINT`` of its own
when there are several, so a request that fails (a CAS conflict) is rolled back alone
while the others commit together. A request of one write statement (a put, a delete)
skips the savepoint: its version check is part of the statement, so a conflict has
written nothing, and SQLite undoes a failed statement whole. One commit, and so one WAL
append, then serves the whole batch: concurrent writers pay for a commit together
instead of one each.

Every ``sqlite3`` exception is translated here, before it reaches a caller.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from plait.errors import ConfigError, InvalidKey, MeshError, MeshUnavailable
from plait.mesh._sqlite_ops import BUSY_CODES, open_connection

Request = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any] | None", bool]
"""``fn`` run as ``fn(conn, *args)``, ``args``, the caller's future, and whether ``fn``
needs a savepoint of its own (False when it makes at most one write statement, which
SQLite applies or undoes whole)."""

Outcome = tuple[bool, Any]
"""``(True, result)`` or ``(False, exception)``."""

_MAX_BATCH = 512
_CONFIG_CODES = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB)


def translate(exc: BaseException, path: Path, busy_timeout_ms: int) -> BaseException:
    """The plait error for an exception raised while talking to SQLite.

    Plait errors and programming errors pass through; ``sqlite3`` errors become
    :class:`ConfigError` (a file that cannot be written), :class:`MeshUnavailable`
    (retryable: locked, I/O) or :class:`MeshError`.
    """
    if isinstance(exc, UnicodeEncodeError):
        return InvalidKey(f"a mesh key, topic or kind must be valid Unicode text: {exc.reason}")
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
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


class Worker:
    """A thread owning one connection to the mesh file; ``writer`` commits in groups.

    The connection is opened by the thread on its first request and opened again on a
    later one if that failed (a lock held by another process at start is transient).
    """

    def __init__(self, path: Path, busy_timeout_ms: int, *, writer: bool) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.writer = writer
        self._queue: SimpleQueue[Request | None] = SimpleQueue()
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
        self._queue.put((fn, args, future, savepoint))
        return future

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
                batch, stopping = self._take()
                if batch:
                    conn = self._serve(conn, batch)
                if stopping:
                    return
        finally:
            if conn is not None:
                conn.close()

    def _take(self) -> tuple[list[Request], bool]:
        """Wait for a request, then take every one queued behind it; and whether to stop."""
        queue = self._queue
        first = queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < _MAX_BATCH and not queue.empty():
            item = queue.get()
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _serve(
        self, conn: sqlite3.Connection | None, batch: list[Request]
    ) -> sqlite3.Connection | None:
        try:
            if conn is None:
                conn = open_connection(self.path, self.busy_timeout_ms, writer=self.writer)
            if self.writer:
                outcomes = self._write(conn, batch)
            else:
                outcomes = [self._call(conn, request) for request in batch]
        except Exception as exc:  # forwarded to every caller of the batch, none left hanging
            outcomes = [(False, translate(exc, self.path, self.busy_timeout_ms))] * len(batch)
        _resolve(batch, outcomes)
        return conn

    def _call(self, conn: sqlite3.Connection, request: Request) -> Outcome:
        try:
            return True, request[0](conn, *request[1])
        except Exception as exc:  # forwarded to the caller that queued the request
            return False, translate(exc, self.path, self.busy_timeout_ms)

    def _write(self, conn: sqlite3.Connection, batch: list[Request]) -> list[Outcome]:
        # IMMEDIATE takes the write lock up front, waiting up to busy_timeout for other
        # processes: a deferred transaction that reads and then writes can instead fail
        # at once with SQLITE_BUSY when another process wrote in between.
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return self._fail_all(conn, batch, exc)
        try:
            if len(batch) == 1:
                outcome = self._call(conn, batch[0])
                if outcome[0]:
                    conn.execute("COMMIT")
                elif conn.in_transaction:
                    conn.execute("ROLLBACK")
                return [outcome]
            outcomes = []
            for request in batch:
                savepoint = request[3]
                if savepoint:
                    conn.execute("SAVEPOINT request")
                outcome = self._call(conn, request)
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
            return self._fail_all(conn, batch, exc)

    def _fail_all(
        self, conn: sqlite3.Connection, batch: list[Request], exc: sqlite3.Error
    ) -> list[Outcome]:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original error is the one worth reporting
        error = translate(exc, self.path, self.busy_timeout_ms)
        return [(False, error)] * len(batch)


def _resolve(batch: list[Request], outcomes: list[Outcome]) -> None:
    """Hand each outcome to its caller's loop: one wake-up per loop, not per request."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
    for request, outcome in zip(batch, outcomes, strict=True):
        future = request[2]
        if future is not None:
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


__all__ = ["Request", "Worker", "translate"]
