"""The PostgreSQL mesh: many hosts share one database (``postgresql://`` or ``postgres://``).

``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME&pool=N&timeout=S]``: the
mesh's tables live in schema ``NAME`` (default ``plait``, created if missing), laid out
as :mod:`plait.mesh._pg_schema` describes; ``pool`` bounds the connections one mesh
object opens (default 16) and ``timeout`` (seconds, default 30) how long one operation
waits, for a connection or an answer, before :class:`MeshUnavailable`. Other query
options go to libpq as they are (``sslmode``, ``application_name``...).

Every write is one transaction at READ COMMITTED: ``transact()`` is one Postgres
transaction, a CAS is ``UPDATE ... WHERE version = N`` (whose row lock makes concurrent
writers of a key wait, then re-check). What each request runs is in
:mod:`plait.mesh._pg_ops`; topic delivery (``FOR UPDATE SKIP LOCKED`` claims,
``LISTEN``/``NOTIFY`` wake-ups) in :mod:`plait.mesh._pg_delivery`. An ack applies only
while the acking consumer holds the delivery: one that outlived its visibility timeout
and went to another consumer stays pending for that one (see :func:`~plait.mesh._pg_ops.ack`).

Retries. A transaction that was not committed is not applied, so the mesh retries
what provably did not apply and nothing else: a transaction that failed on a
serialization failure or a deadlock (rolled back by the server), and one whose
connection was lost before ``COMMIT`` was sent (a server restart, a backend ended by
``pg_terminate_backend``: the server rolls it back) run again, on a new connection.
A connection lost while ``COMMIT`` is in flight leaves the outcome unknown: that raises
:class:`MeshUnavailable`, and the caller retries what a version check or an idempotent
key makes safe, as on every backend. Reads are retried on a lost connection. When
every connection is busy, a call waits for one (up to ``timeout``): back-pressure,
not an error.

The schema is created and migrated on open (under an advisory lock, so processes
opening a new mesh at once do it one at a time), and by ``plait mesh migrate``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

import plait.mesh._pg_batch as batch_ops
import plait.mesh._pg_ops as ops
from plait.errors import ConfigError, MeshError, MeshUnavailable
from plait.mesh._backoff import Backoff
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
from plait.mesh._pg_delivery import PgLink, PgSubscription
from plait.mesh._pg_live import PgLive
from plait.mesh._pg_schema import (
    DEFAULT_SCHEMA,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    lock_id,
    migrations,
)
from plait.mesh._urls import redact_url, url_secrets

T = TypeVar("T")

DEFAULT_POOL_SIZE = 16
"""Connections one mesh object opens at most, unless ``?pool=N`` says otherwise."""

MAX_VALUE_CEILING = 1 << 30
"""PostgreSQL's own limit on one ``bytea`` value: 1 GiB."""

_RETRIES = 8
"""Attempts of one transaction that failed before its commit (a lost connection, a
deadlock, a serialization failure) before it gives up."""

_SCAN_PAGE = 256
_OWN_OPTIONS = ("schema", "pool", "timeout")

_log = logging.getLogger("plait.mesh")


_BEGIN = "BEGIN"
_BEGIN_MOVE = "BEGIN; SET LOCAL synchronous_commit = off"


class _Uncommitted(Exception):
    """A transaction failed before its COMMIT was sent: nothing of it applied."""


class PostgresMesh(Mesh):
    """A mesh in a PostgreSQL database (14 or later), in one schema of it.

    Attributes:
        schema: the schema holding the mesh's tables.
        timeout: seconds one operation may wait before :class:`MeshUnavailable`.

    Args:
        url: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME&pool=N&timeout=S]``
            (or ``postgres://``).
        max_value_bytes: the largest encoded value or event payload accepted (at most
            1 GiB, PostgreSQL's limit on a ``bytea``).
        connect_timeout: seconds to wait for the first connection.

    Raises:
        ConfigError: the URL or an option is malformed.
    """

    commit_yields = True  # every commit is a round trip
    shares_across_processes = True
    shares_across_machines = True  # any machine that reaches the server
    reach: ClassVar[str] = "any machine that reaches its server"

    def __init__(
        self,
        url: str,
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        connect_timeout: float = 5.0,
    ) -> None:
        self.url = redact_url(url)
        self._secrets = url_secrets(url)
        if max_value_bytes > MAX_VALUE_CEILING:
            raise ConfigError(
                f"max_value_bytes {max_value_bytes} is over PostgreSQL's limit of 1 GiB "
                f"({MAX_VALUE_CEILING} bytes) on one value"
            )
        self.max_value_bytes = max_value_bytes
        try:
            parts = urlsplit(url)
            query = parse_qsl(parts.query, keep_blank_values=True)
        except ValueError as exc:
            raise ConfigError(f"malformed PostgreSQL mesh URL {self.url!r}: {exc}") from None
        own = {name: value for name, value in query if name in _OWN_OPTIONS}
        libpq = [(name, value) for name, value in query if name not in _OWN_OPTIONS]
        self.schema = own.get("schema", DEFAULT_SCHEMA)
        if not SCHEMA_NAME.match(self.schema):
            raise ConfigError(
                f"the PostgreSQL mesh URL {self.url!r} names schema {self.schema!r}: a schema "
                "name is lower-case letters, digits and _, not starting with a digit"
            )
        self._pool_size = _number(self.url, "pool", own.get("pool", DEFAULT_POOL_SIZE), int)
        self.timeout = _number(self.url, "timeout", own.get("timeout", 30.0), float)
        self._connect_timeout = connect_timeout
        scheme = "postgresql" if parts.scheme.lower() in ("postgres", "postgresql") else ""
        self._conninfo = urlunsplit(
            (scheme, parts.netloc, parts.path, urlencode(libpq), parts.fragment)
        )
        self.channel = f"plait_mesh_{self.schema}"
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening: asyncio.Task[None] | None = None
        self._closed = False
        self._subs: set[PgSubscription] = set()
        self._group_tasks: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._listening = False
        self._listened = asyncio.Event()
        """Set while the listener's LISTEN is in force (its connection up)."""
        self._live = PgLive(self)
        self._from_version = SCHEMA_VERSION

    @property
    def location(self) -> str:
        """The PostgreSQL server, database and schema (credentials masked)."""
        return f"the PostgreSQL database {self.url} in schema {self.schema!r}"

    # connections --------------------------------------------------------------------

    def _error(self, exc: BaseException) -> MeshError:
        """The plait error a psycopg error means, its message free of the password."""
        text = str(exc).strip() or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        if isinstance(exc, psycopg.OperationalError | PoolTimeout | OSError | TimeoutError):
            return MeshUnavailable(f"cannot reach the PostgreSQL mesh at {self.url}: {text}")
        return MeshError(f"the PostgreSQL mesh at {self.url} failed: {text}")

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except (psycopg.Error, PoolTimeout, OSError) as exc:
            raise self._error(exc) from exc

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.set_autocommit(True)
        await conn.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)), prepare=False
        )

    async def _ensure_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise MeshUnavailable(f"the PostgreSQL mesh {self.url} is closed")
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open_pool())
        try:
            await asyncio.shield(self._opening)
        except BaseException:
            if self._opening.done():
                self._opening = None  # a later call tries again
            raise
        assert self._pool is not None
        return self._pool

    async def _open_pool(self) -> None:
        try:
            async with asyncio.timeout(self._connect_timeout):
                with self._translate():
                    conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                    try:
                        await self._migrate(conn)
                    finally:
                        await conn.close()
        except TimeoutError:
            raise MeshUnavailable(
                f"cannot reach the PostgreSQL mesh at {self.url}: no answer within "
                f"{self._connect_timeout:g}s"
            ) from None
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            configure=self._configure,
            timeout=self.timeout,
            open=False,
            name=f"plait-mesh-{self.schema}",
        )
        with self._translate():
            await pool.open(wait=True, timeout=self._connect_timeout)
        self._pool = pool

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Create the schema or bring it to :data:`SCHEMA_VERSION`; idempotent."""
        schema = sql.Identifier(self.schema)
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id(self.schema),))
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            await conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version int NOT NULL)")
            cur = await conn.execute("SELECT max(version) FROM schema_version")
            row = await cur.fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            self._from_version = current
            if current > SCHEMA_VERSION:
                raise ConfigError(
                    f"the PostgreSQL mesh {self.url} (schema {self.schema!r}) has version "
                    f"{current}, newer than this plait understands ({SCHEMA_VERSION}); "
                    "upgrade plait"
                )
            for version, ddl in migrations(current):
                await conn.execute(ddl)
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version VALUES (%s)", (version,))

    async def migrate(self) -> str:
        """Create or migrate the schema (as opening does) and say what was done."""
        await self._ensure_pool()
        if self._from_version == SCHEMA_VERSION:
            return f"{self.location}: at version {SCHEMA_VERSION}, nothing to migrate"
        return f"{self.location}: migrated from version {self._from_version} to {SCHEMA_VERSION}"

    async def _read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``fn(conn, *args)`` on a pooled connection, outside a transaction; retried on
        a lost connection (a read changes nothing)."""
        pool = await self._ensure_pool()
        for attempt in range(_RETRIES):
            try:
                async with asyncio.timeout(self.timeout):
                    with self._translate():
                        async with pool.connection() as conn:
                            try:
                                return await fn(conn, *args)
                            except psycopg.OperationalError:
                                if not conn.broken or attempt == _RETRIES - 1:
                                    raise
            except TimeoutError:
                raise self._no_answer() from None
            await self._lost(pool)
        raise AssertionError("unreachable")

    async def _write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``fn(conn, *args)`` in one transaction, committed; retried while it provably
        did not apply (see the module docstring)."""
        return await self._run_write(_BEGIN, fn, args)

    async def _move(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """:meth:`_write` for what only moves deliveries (a claim, an ack, an extend, a
        trim): committed without waiting for the WAL flush (``synchronous_commit =
        off``). A server crash may forget the last such commits, which the contract
        allows: a forgotten claim or ack is a redelivery, a forgotten trim leaves
        events a later trim takes. WAL order keeps them ahead of any later commit
        that waits, so no durable write ever depends on one that was lost."""
        return await self._run_write(_BEGIN_MOVE, fn, args)

    async def _run_write(
        self, begin: str, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]
    ) -> T:
        return await self._retried(lambda conn: self._transaction(conn, begin, fn, args))

    async def _retried(self, write: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``write(conn)`` on a pooled connection, run again on another while it
        raises :class:`_Uncommitted` (it provably did not apply)."""
        pool = await self._ensure_pool()
        for attempt in range(_RETRIES):
            try:
                async with asyncio.timeout(self.timeout):
                    with self._translate():
                        async with pool.connection() as conn:
                            return await write(conn)
            except TimeoutError:
                raise self._no_answer() from None
            except _Uncommitted as exc:
                if attempt == _RETRIES - 1:
                    raise self._error(exc.__cause__ or exc) from exc.__cause__
                if exc.args and exc.args[0] == "lost":
                    await self._lost(pool)
                else:  # a deadlock or serialization failure: let the other one finish
                    await asyncio.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")

    async def _transaction(
        self,
        conn: psycopg.AsyncConnection[Any],
        begin: str,
        fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
    ) -> T:
        try:
            await conn.execute(begin)
            result = await fn(conn, *args)
        except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected) as exc:
            await conn.execute("ROLLBACK")
            raise _Uncommitted("retry") from exc
        except psycopg.OperationalError as exc:
            if conn.broken:
                raise _Uncommitted("lost") from exc
            raise
        except BaseException:
            await _roll_back(conn)
            raise
        await _commit(conn)
        return result

    async def _lost(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]]) -> None:
        """A pooled connection was found dead (a restart?): drop the other dead ones."""
        with suppress(psycopg.Error, PoolTimeout):
            await pool.check()

    def _no_answer(self) -> MeshUnavailable:
        return MeshUnavailable(
            f"cannot reach the PostgreSQL mesh at {self.url}: no answer within "
            f"{self.timeout:g}s (is the server up, and the pool of {self._pool_size} "
            "connections not held by stuck calls?)"
        )

    async def open(self) -> None:
        """Connect, create or migrate the schema, and open the pool.

        Raises:
            MeshUnavailable: the server cannot be reached within the connect timeout.
            ConfigError: the schema is newer than this plait.
        """
        await self._ensure_pool()

    async def close(self) -> None:
        """End every subscription and the listener, and close the pool; idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in [*self._group_tasks]:
            task.cancel()
        for sub in list(self._subs):
            await sub.close()
        if self._listener is not None:
            self._listener.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._listener
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        if self._pool is not None:
            with suppress(psycopg.Error, PoolTimeout):
                await self._pool.close()
            self._pool = None

    # clock --------------------------------------------------------------------------

    async def now_ms(self) -> int:
        """The PostgreSQL server's clock: every worker of the mesh reads the same."""
        return await self._read(_server_now)

    # keys ---------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        row = await self._read(ops.get, key)
        return None if row is None else Entry(key, decode(row[0], key), row[1], row[2])

    async def get_many(self, keys: Sequence[str]) -> list[Entry | None]:
        names = list(keys)
        for key in names:
            check_key(key)
        if not names:
            return []
        rows = await self._read(ops.get_many, names)
        return [
            None if (row := rows.get(key)) is None else Entry(key, decode(row[0], key), *row[1:])
            for key in names
        ]

    async def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> Entry:
        check_key(key)
        _check_version(if_version)
        data = encode(key, value, self.max_value_bytes)
        version = await self._write(ops.put, key, data, if_version, tainted)
        return Entry(key, value, version, tainted)

    async def delete(self, key: str, if_version: int | None = None) -> bool:
        check_key(key)
        _check_version(if_version)
        existed: bool = await self._write(ops.delete, key, if_version)
        return existed

    async def delete_prefix(self, prefix: str) -> int:
        check_prefix(prefix)
        removed: int = await self._write(ops.delete_prefix, prefix, prefix_end(prefix))
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
                    yield Entry(key, value[0], version, tainted)
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
        if not batch:
            return TransactionResult({}, [])
        if self._group_tasks:
            # a group being created by subscribe() must exist before this publish lands
            await asyncio.wait(set(self._group_tasks))
        took: list[ops.Taken] = []
        if batch_ops.sendable(batch):
            versions, inserted = await self._send(batch)
        else:
            versions, inserted, took = await self._write(ops.commit, batch, self.channel)
        entries: dict[str, Entry] = {}
        event_ids: list[str] = []
        put_versions, inserts = iter(versions), iter(inserted)
        for op in batch:
            if isinstance(op, PutOp):
                entries[op.key] = Entry(op.key, op.value, next(put_versions), op.tainted)
            elif isinstance(op, InsertOp):
                if next(inserts):
                    entries[op.key] = Entry(op.key, op.value, 1, op.tainted)
            elif isinstance(op, PublishOp):
                event_ids.append(op.event_id)
        taken = [
            Delivery(
                Event(event_id, op.topic, kind, decode(data), at_ms, tainted),
                op.group, op.consumer, 1, seq, self._ack,
            )
            for op, seq, event_id, kind, data, at_ms, tainted in took
        ]  # fmt: skip
        return TransactionResult(entries, event_ids, taken)

    async def _send(self, batch: list[Op]) -> tuple[list[int], list[bool]]:
        """Commit ``batch`` in two round trips, its statements then its COMMIT (see
        :mod:`plait.mesh._pg_batch`); retried, as :meth:`_write` does, while it provably
        did not apply."""
        return await self._retried(lambda conn: self._sent(conn, batch))

    async def _sent(
        self, conn: psycopg.AsyncConnection[Any], batch: list[Op]
    ) -> tuple[list[int], list[bool]]:
        try:
            async with conn.pipeline():
                await conn.execute(_BEGIN, prepare=False)
                answers = await batch_ops.send(conn, batch, self.channel)
        except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected) as exc:
            await _roll_back(conn)
            raise _Uncommitted("retry") from exc  # the server refused it: rolled back
        except psycopg.OperationalError as exc:
            if conn.broken:
                raise _Uncommitted("lost") from exc  # no COMMIT was sent: nothing applied
            await _roll_back(conn)
            raise
        except pg_errors.RaiseException as exc:
            what, key, number = batch_ops.refused(
                exc.diag.message_primary, exc.diag.message_detail, exc.diag.message_hint
            )
            await _roll_back(conn)
            if not what:
                raise
            raise await batch_ops.conflict(conn, batch, what, key, number) from None
        except BaseException:
            await _roll_back(conn)
            raise
        # COMMIT apart: a connection lost before it is a transaction that did not apply
        # (retried), one lost while it is in flight an outcome unknown (MeshUnavailable).
        await _commit(conn)
        return await batch_ops.results(batch, answers)

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
        creating: asyncio.Task[None] | None = None
        with suppress(RuntimeError):  # no running loop: the first read creates the groups
            loop = asyncio.get_running_loop()
            # Started now, and awaited by any commit that follows: a "new" group starts here.
            creating = loop.create_task(self._write(ops.create_groups, names, group, start))
            self._group_tasks.add(creating)
            creating.add_done_callback(self._group_created)
            self._start_listener(loop)
        link = PgLink(
            self._write,
            self._move,
            self._read,
            self._ack,
            self._is_listening,
            self._subs.discard,
            self.channel,
        )
        sub = PgSubscription(link, names, group, consumer, start, visibility_timeout_ms, creating)
        self._subs.add(sub)
        return sub

    def _group_created(self, task: asyncio.Task[None]) -> None:
        self._group_tasks.discard(task)
        if not task.cancelled():
            task.exception()  # the subscription reports it; do not log it as lost

    def _is_listening(self) -> bool:
        if self._listener is None:
            with suppress(RuntimeError):
                self._start_listener(asyncio.get_running_loop())
        return self._listening

    @property
    def live(self) -> PgLive:
        """The mesh's live channels (see :mod:`plait.mesh._pg_live`)."""
        return self._live

    async def _await_listener(self) -> None:
        """Start the listener if it is not running, and wait until it listens."""
        if self._closed:
            raise MeshUnavailable(f"the PostgreSQL mesh {self.url} is closed")
        self._start_listener(asyncio.get_running_loop())
        try:
            async with asyncio.timeout(self.timeout):
                await self._listened.wait()
        except TimeoutError:
            raise self._no_answer() from None

    def _start_listener(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._listener is None and not self._closed:
            self._listener = loop.create_task(self._listen())

    async def _listen(self) -> None:
        """Wake the subscriptions whose topics a commit notified; reconnect when lost."""
        backoff = Backoff(_log)
        channel = sql.Identifier(self.channel)
        live = self._live
        counts = sql.SQL("SELECT channel, n FROM {}.live_watchers WHERE n > 0").format(
            sql.Identifier(self.schema)
        )
        while not self._closed:
            try:
                await self._ensure_pool()  # the schema exists before its tables are read
                async with asyncio.timeout(self._connect_timeout):
                    with self._translate():
                        conn = await psycopg.AsyncConnection.connect(
                            self._conninfo, autocommit=True
                        )
                with self._translate():
                    try:
                        await conn.execute(sql.SQL("LISTEN {}").format(channel))
                        for name in (live.notify_channel, live.control_channel):
                            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                        cur = await conn.execute(counts)
                        live.connected(await cur.fetchall())
                        self._listening = True
                        self._listened.set()
                        self._wake_all()  # what was notified while we were away
                        async for note in conn.notifies():
                            if not live.notified(note.channel, note.payload):
                                self._wake(note.payload)
                    finally:
                        self._listening = False
                        self._listened.clear()
                        live.wake_all()
                        with suppress(psycopg.Error, OSError):
                            await conn.close()
            except TimeoutError:
                await backoff.wait(self._no_answer())
            except MeshUnavailable as exc:
                if self._closed:
                    return
                await backoff.wait(exc)
            except MeshError as exc:
                if self._closed:
                    return
                await backoff.wait(MeshUnavailable(str(exc)))

    def _wake(self, topic: str) -> None:
        for sub in self._subs:
            if topic in sub.topics:
                sub.wake()

    def _wake_all(self) -> None:
        for sub in self._subs:
            sub.wake()

    async def _ack(self, delivery: Delivery) -> None:
        await self._move(
            ops.ack, delivery.topic, delivery.group, delivery.position, delivery.consumer
        )

    async def extend(self, delivery: Delivery) -> None:
        await self._move(
            ops.extend, delivery.topic, delivery.group, delivery.position, delivery.consumer
        )

    async def trim(self, topic: str) -> int:
        check_key(topic, "topic")
        removed: int = await self._move(ops.trim, topic)
        return removed

    async def topics(self, prefix: str = "") -> list[str]:
        found: list[str] = await self._read(ops.topics, prefix, prefix_end(prefix))
        return found

    async def delete_topic(self, topic: str) -> None:
        check_key(topic, "topic")
        await self._write(ops.delete_topic, topic)

    async def backlog(self, topic: str, group: str) -> int:
        check_key(topic, "topic")
        found: int = await self._read(ops.backlog, topic, group)
        return found

    async def drop_group(self, topics: str | Sequence[str], group: str) -> None:
        await self._write(ops.drop_group, topic_names(topics), group)


async def _commit(conn: psycopg.AsyncConnection[Any]) -> None:
    """COMMIT the open transaction on ``conn``; one the server refuses is retried."""
    try:
        await conn.execute("COMMIT")
    except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected) as exc:
        raise _Uncommitted("retry") from exc  # the server refused it: rolled back


async def _roll_back(conn: psycopg.AsyncConnection[Any]) -> None:
    """End a failed transaction on ``conn``, if it is still open."""
    if not conn.broken and conn.info.transaction_status != 0:  # not IDLE
        with suppress(psycopg.Error):
            await conn.execute("ROLLBACK")


async def _server_now(conn: ops.Conn) -> int:
    cur = await conn.execute(f"SELECT {ops.NOW}")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


def _number(url: str, name: str, raw: Any, kind: type[T]) -> T:
    try:
        value = kind(raw)  # type: ignore[call-arg]
    except (TypeError, ValueError):
        value = None
    if value is None or value <= 0:  # type: ignore[operator]
        raise ConfigError(
            f"the PostgreSQL mesh URL {url!r} option {name} must be a positive number, got {raw!r}"
        )
    return value


__all__ = ["DEFAULT_POOL_SIZE", "MAX_VALUE_CEILING", "PostgresMesh"]
