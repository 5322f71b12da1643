"""The Redis mesh: many hosts share one Redis (URL ``redis://`` or ``rediss://``).

Every write is one Lua script called by EVALSHA (one round trip), so a CAS, a delete and
a whole transaction are atomic on the server; a read is one HMGET. Topics are Redis
Streams read through consumer groups; scheduled events wait in a sorted set and are
moved into their stream by the subscribers' poll script once the server clock says they
are due. The key layout is described in :mod:`plait.mesh._redis_scripts`.

Redis calls are never retried here: a retried write could apply twice, so a lost
connection surfaces as :class:`MeshUnavailable` (retryable) and the caller decides.
One ``asyncio.timeout`` bounds each mesh operation as a whole (a commit, a read, a
poll), not a socket timeout per command: redis-py applies that one with
``asyncio.wait_for``, a task per send.
A single Redis server (with or without replicas) is supported; Redis Cluster is not, as
the scripts touch keys that a cluster would spread over several slots.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, Generic, NoReturn, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

import plait.mesh._redis_scripts as scripts
from plait.errors import ConfigError, MeshError, MeshUnavailable, PlaitError, VersionConflict
from plait.mesh._base import (
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    TRIM_INTERVAL_S,
    AckOp,
    CancelOp,
    CheckOp,
    DeleteOp,
    Delivery,
    Entry,
    Event,
    Mesh,
    Op,
    PublishOp,
    PutOp,
    StartFrom,
    Subscription,
    TakeOp,
    TransactionResult,
    _check_version,
)
from plait.mesh._codec import (
    DEFAULT_MAX_VALUE_BYTES,
    OnCorrupt,
    PackerPerThread,
    check_key,
    decode,
    decode_scanned,
    encode,
    topic_names,
)
from plait.mesh._urls import redact_url, url_secrets

_arg_packers = PackerPerThread(use_bin_type=False)
"""Packs commit script arguments (see :func:`_pack`)."""


def _pack(args: list[Any]) -> bytes:
    """The commit script's arguments as one msgpack array.

    Redis's Lua msgpack predates the bin type, so bytes travel as raw strings (Lua
    strings are bytes either way).
    """
    return _arg_packers.pack(args)


_BATCH = 16
"""Entries one poll takes at most; they wait in the subscription, their visibility
timeout running, so the batch stays small."""

MAX_CONNECTIONS = 1024
"""Connections one mesh object opens to Redis at most (one per command in flight)."""

# Restart an event's idle time, but only while this consumer still owns it: once another
# consumer has reclaimed it, extending must not steal it back. JUSTID keeps the
# delivery counter as it is.
_EXTEND = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if p[1] and p[1][2] == ARGV[2] then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
  return 1
end
return 0
"""

_KV_FIELDS = ("v", "n", "t")
"""The fields of a key's hash a read fetches: value, version, taint (absent: none)."""

_SCAN_PAGE = 256
_BLOCK_MS = 100  # longest blocking read: bounds how late a scheduled event can be


_OWN_OPTIONS = ("prefix", "timeout", "connect_timeout")
"""URL query options the mesh reads itself; every other one goes to redis-py."""


def _own_options(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without the mesh's own query options, and those options."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in _OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in _OWN_OPTIONS]
    return urlunsplit(parts._replace(query=urlencode(rest))), own


def _seconds(name: str, given: object) -> float:
    """A timeout option (a number, or the text of a URL option) as positive seconds."""
    try:
        seconds = float(given) if isinstance(given, int | float | str) else math.nan
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ConfigError(f"the Redis option {name} must be > 0 seconds, got {given!r}")
    return seconds


class RedisMesh(Mesh):
    """A mesh in a Redis 7 server, every key under ``prefix``.

    Attributes:
        prefix: prepended to every Redis key this mesh touches.
        timeout: seconds one operation may wait for Redis before it raises
            :class:`MeshUnavailable`.

    Args:
        url: ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME]`` or ``rediss://``;
            its ``timeout`` and ``connect_timeout`` options override the arguments.
        prefix: prepended to every Redis key this mesh touches.
        max_value_bytes: the largest encoded value or event payload accepted.
        connect_timeout: seconds to wait for a connection.
        timeout: seconds one operation (a commit, a read, a poll) may wait for Redis
            before raising :class:`MeshUnavailable`.

    Raises:
        ConfigError: the URL is malformed.
    """

    commit_yields = True  # every commit is a round trip

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "",
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        connect_timeout: float = 5.0,
        timeout: float = 30.0,
    ) -> None:
        self.url = redact_url(url)
        try:
            self._redis_url, own = _own_options(url)
            db = urlsplit(url).path.strip("/")
        except ValueError as exc:  # an unclosed "[" of an IPv6 host, say
            raise ConfigError(f"malformed Redis mesh URL {self.url!r}: {exc}") from None
        connect_timeout = _seconds("connect_timeout", own.get("connect_timeout", connect_timeout))
        timeout = _seconds("timeout", own.get("timeout", timeout))
        self.max_value_bytes = max_value_bytes
        self.prefix = prefix
        self.timeout = timeout
        self._secrets = url_secrets(url)
        self._connect_timeout = connect_timeout
        self._client_options: dict[str, Any] = {
            "socket_connect_timeout": connect_timeout,
            # None, not redis-py's default of 5 s: every operation is bounded by
            # _bounded() instead, one timer rather than a task per command sent
            "socket_timeout": None,
            "retry": Retry(NoBackoff(), 0),
        }
        if db and not db.isdigit():
            raise ConfigError(f"the Redis mesh URL {self.url!r} names DB {db!r}, not a number")
        try:
            self._client = self._new_client()
            pool = self._client.connection_pool
            pool.connection_class(**pool.connection_kwargs)  # refuses unknown URL options now
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"malformed Redis mesh URL {self.url!r}: {exc}") from None
        self._commit_script = self._client.register_script(scripts.COMMIT)
        self._poll_script = self._client.register_script(scripts.POLL)
        self._groups_script = self._client.register_script(scripts.CREATE_GROUPS)
        self._scan_script = self._client.register_script(scripts.SCAN_PAGE)
        self._extend_script: AsyncScript | None = None
        self._trim_script: AsyncScript | None = None
        self._commits: _Batcher[tuple[list[str], list[Any]]] = _Batcher(
            self,
            lambda call: self._evalsha(self._commit_script, *call, self._client),
            lambda calls: self._run_many(self._commit_script, calls),
        )
        self._reads: _Batcher[str] = _Batcher(self, self._hmget, self._hmget_many)
        self._scripts = (
            self._commit_script,
            self._poll_script,
            self._groups_script,
            self._scan_script,
        )
        self._kv = f"{prefix}kv:"
        self._index = f"{prefix}keys"
        self._sched = f"{prefix}sched"
        self._schedp = f"{prefix}schedp"
        self._group_tasks: set[asyncio.Task[None]] = set()
        self._subs: set[_RedisSubscription] = set()

    def _new_client(self) -> aioredis.Redis:
        # A plain pool (a blocking one costs a lock and a timer per command) with room
        # for far more commands in flight than one process runs.
        pool = aioredis.ConnectionPool.from_url(
            self._redis_url, max_connections=MAX_CONNECTIONS, **self._client_options
        )
        return aioredis.Redis.from_pool(pool)  # the client owns and closes its pool

    def _stream(self, topic: str) -> str:
        return f"{self.prefix}t:{topic}"

    def _error(self, exc: RedisError | OSError) -> MeshError:
        """The plait error a redis-py error means, its message free of the password."""
        text = str(exc) or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
            return MeshUnavailable(f"cannot reach the Redis mesh at {self.url}: {text}")
        return MeshError(f"the Redis mesh at {self.url} failed: {text}")

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc

    def _bounded(self, seconds: float | None = None) -> _Bounded:
        """One operation against Redis: within ``seconds`` (the timeout), errors translated.

        A cancelled command disconnects its connection in redis-py, so no late reply
        is ever read as the answer to the next command on it.
        """
        return _Bounded(self, self.timeout if seconds is None else seconds)

    def _no_answer(self, seconds: float) -> MeshUnavailable:
        return MeshUnavailable(
            f"cannot reach the Redis mesh at {self.url}: Timeout, no answer within "
            f"{seconds:g}s (is the server up and not paused?)"
        )

    async def _run(
        self,
        script: AsyncScript,
        keys: list[str],
        args: list[Any],
        client: aioredis.Redis | None = None,
    ) -> Any:
        """Call ``script`` by EVALSHA as one bounded operation (see :meth:`_evalsha`)."""
        async with self._bounded():
            return await self._evalsha(script, keys, args, client or self._client)

    async def _evalsha(
        self, script: AsyncScript, keys: list[str], args: list[Any], client: aioredis.Redis
    ) -> Any:
        """Call ``script`` by EVALSHA, loading it once if the server lost it (unbounded)."""
        try:
            return await client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            script.sha = await client.script_load(script.script)
            return await client.evalsha(script.sha, len(keys), *keys, *args)

    async def _run_many(
        self, script: AsyncScript, calls: list[tuple[list[str], list[Any]]]
    ) -> list[Any]:
        """Call ``script`` once per ``(keys, args)`` in one pipeline: one round trip.

        Each reply is the script's result or the plait error of that one call.
        """
        async with self._bounded():
            async with self._client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
            out: list[Any] = []
            for (keys, args), reply in zip(calls, replies, strict=True):
                if isinstance(reply, NoScriptError):
                    # loads it once, then calls
                    reply = await self._evalsha(script, keys, args, self._client)
                elif isinstance(reply, RedisError | OSError):
                    reply = self._error(reply)
                out.append(reply)
        return out

    async def open(self) -> None:
        # one round trip: check the server and load every script, so no later call
        # pays for a NOSCRIPT miss; bounded by the connect timeout, so that a server
        # that takes connections but does not answer (paused, say) fails in seconds
        try:
            async with asyncio.timeout(self._connect_timeout):
                with self._translate():
                    async with self._client.pipeline(transaction=False) as pipe:
                        pipe.ping()
                        for script in self._scripts:
                            pipe.script_load(script.script)
                        await pipe.execute()
        except TimeoutError:
            raise self._no_answer(self._connect_timeout) from None

    async def close(self) -> None:
        for task in [*self._group_tasks, *self._commits.drains, *self._reads.drains]:
            task.cancel()
        await asyncio.gather(*(sub.close() for sub in list(self._subs)))
        with suppress(RedisError, OSError):
            await self._client.aclose()

    # keys ---------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        value, version, tainted = await self._reads.call(self._kv + key)
        if value is None:
            return None
        return Entry(key, decode(value, key), int(version), tainted is not None)

    async def _hmget(self, name: str) -> list[Any]:
        reply: list[Any] = await self._client.hmget(name, _KV_FIELDS)
        return reply

    async def _hmget_many(self, names: list[str]) -> list[Any]:
        """:meth:`_hmget` of each of ``names`` in one pipeline (a reply or error each)."""
        async with self._bounded():
            async with self._client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hmget(name, _KV_FIELDS)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
        return [self._error(r) if isinstance(r, RedisError | OSError) else r for r in replies]

    async def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> Entry:
        # the one-op case of _apply without its generality: this is the hot path
        check_key(key)
        _check_version(if_version)
        data = encode(key, value, self.max_value_bytes)
        code = "Q" if tainted else "P"
        reply = await self._commits.call(
            (
                [self._index, self._sched, self._schedp, self._kv + key],
                [_pack([1, code, key, data, "" if if_version is None else if_version])],
            )
        )
        if reply[0] == b"conflict":
            raise VersionConflict(key, int(reply[2]), int(reply[3]))
        return Entry(key, value, int(reply[1][0]), tainted)

    async def delete(self, key: str, if_version: int | None = None) -> bool:
        tx = self.transact()
        tx.delete(key, if_version)
        _, results = await self._apply(tx.ops)
        return results[0] == 1

    async def scan(
        self, prefix: str = "", *, on_corrupt: OnCorrupt | None = None
    ) -> AsyncIterator[Entry]:
        # UTF-8 never contains the byte 0xff, so it bounds every key starting with prefix.
        low = b"[" + prefix.encode() if prefix else b"-"
        high = b"(" + prefix.encode() + b"\xff" if prefix else b"+"
        while True:
            reply = await self._run(
                self._scan_script, [self._index], [low, high, _SCAN_PAGE, self._kv]
            )
            count, last, rows = int(reply[0]), reply[1], reply[2:]
            for i in range(0, len(rows), 4):
                key = rows[i].decode()
                value = decode_scanned(rows[i + 1], key, on_corrupt)
                if value is not None:
                    yield Entry(key, value[0], int(rows[i + 2]), rows[i + 3] == 1)
            if count < _SCAN_PAGE:
                return
            low = b"(" + last

    # transactions -------------------------------------------------------------------

    async def _commit(self, ops: Sequence[Op]) -> TransactionResult:
        result, _ = await self._apply(ops)
        return result

    async def _apply(self, ops: Sequence[Op]) -> tuple[TransactionResult, list[int]]:
        if not ops:
            return TransactionResult({}, []), []
        keys: list[str] = [self._index, self._sched, self._schedp]
        args: list[Any] = [len(ops)]
        event_ids: list[str] = []
        for op in ops:
            if isinstance(op, PutOp):
                keys.append(self._kv + op.key)
                code = "Q" if op.tainted else "P"
                args += (code, op.key, op.data, "" if op.if_version is None else op.if_version)
            elif isinstance(op, DeleteOp):
                keys.append(self._kv + op.key)
                args += ("D", op.key, "" if op.if_version is None else op.if_version)
            elif isinstance(op, PublishOp):
                keys.append(self._stream(op.topic))
                code = "F" if op.tainted else "E"
                args += (code, op.event_id, op.kind, op.data, op.at_ms, op.after_ms, op.key or "")
                event_ids.append(op.event_id)
            elif isinstance(op, CancelOp):
                keys.append(self._sched)
                args += ("C", op.key)
            elif isinstance(op, AckOp):
                keys.append(self._stream(op.delivery.topic))
                args += ("A", op.delivery.group, op.delivery.position)
            elif isinstance(op, TakeOp):
                keys.append(self._stream(op.topic))
                args += ("T", op.group, op.consumer)
            elif isinstance(op, CheckOp):
                keys.append(self._kv + op.key)
                args += ("K", op.key, op.version)
        if self._group_tasks:
            # a group being created by subscribe() must exist before this publish lands
            await asyncio.wait(set(self._group_tasks))
        reply = await self._commits.call((keys, [_pack(args)]))
        if reply[0] == b"conflict":
            raise VersionConflict(reply[1].decode(), int(reply[2]), int(reply[3]))
        results: list[int] = []
        taken: list[Delivery] = []
        for op, raw in zip(ops, reply[1], strict=True):
            if isinstance(op, TakeOp):
                results.append(0)
                if isinstance(raw, list):
                    taken.append(
                        self._delivery(op.topic, raw[0], 1, _fields(raw[1]), op.group, op.consumer)
                    )
            else:
                results.append(int(raw))
        entries = {
            op.key: Entry(op.key, op.value, results[i], op.tainted)
            for i, op in enumerate(ops)
            if isinstance(op, PutOp)
        }
        return TransactionResult(entries, event_ids, taken), results

    def _delivery(
        self,
        topic: str,
        entry_id: bytes,
        attempt: int,
        fields: dict[bytes, bytes],
        group: str,
        consumer: str,
    ) -> Delivery:
        """The delivery of stream entry ``entry_id`` of ``topic`` to a group's consumer."""
        try:
            event = Event(
                fields[b"id"].decode(),
                topic,
                fields[b"kind"].decode(),
                decode(fields[b"data"]),
                int(fields[b"at"]),
                b"t" in fields,
            )
        except (KeyError, ValueError) as exc:
            raise MeshError(
                f"malformed event {entry_id.decode()} in {self._stream(topic)!r}"
            ) from exc
        return Delivery(event, group, consumer, attempt, entry_id.decode(), self._ack)

    # topics -------------------------------------------------------------------------

    async def _ack(self, delivery: Delivery) -> None:
        async with self._bounded():
            await self._client.xack(self._stream(delivery.topic), delivery.group, delivery.position)

    async def trim(self, topic: str) -> int:
        check_key(topic, "topic")
        if self._trim_script is None:
            self._trim_script = self._client.register_script(scripts.TRIM)
        removed = await self._run(self._trim_script, [self._stream(topic)], [])
        return int(removed)

    async def topics(self, prefix: str = "") -> list[str]:
        # SCAN with a pattern walks the whole keyspace in pages: a listing for followers
        # that refresh now and then, never a hot path.
        head = self._stream("")
        pattern = _glob_escape(head + prefix) + "*"
        found: set[str] = set()
        async with self._bounded():
            async for raw in self._client.scan_iter(match=pattern, count=1000, _type="stream"):
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
                found.add(name[len(head) :])
        return sorted(found)

    async def backlog(self, topic: str, group: str) -> int:
        check_key(topic, "topic")
        stream = self._stream(topic)
        async with self._bounded():
            try:
                groups = await self._client.xinfo_groups(stream)
            except ResponseError:  # no such stream
                return 0
            mine = next((g for g in groups if _text(g.get("name")) == group), None)
            if mine is None:
                return int(await self._client.xlen(stream))
            lag = mine.get("lag")
            if lag is None:  # Redis cannot tell (entries deleted mid-stream): count them
                after = "(" + _text(mine.get("last-delivered-id"))
                lag = len(await self._client.xrange(stream, after, "+") or [])
            return int(lag) + int(mine.get("pending") or 0)

    async def delete_topic(self, topic: str) -> None:
        check_key(topic, "topic")
        async with self._bounded():
            await self._client.delete(self._stream(topic))  # its groups live in the stream

    async def drop_group(self, topics: str | Sequence[str], group: str) -> None:
        names = topic_names(topics)
        async with self._bounded():
            for name in names:
                with suppress(ResponseError):  # no such stream or group: nothing to drop
                    await self._client.xgroup_destroy(self._stream(name), group)

    async def extend(self, delivery: Delivery) -> None:
        if self._client is None:
            return
        if self._extend_script is None:
            self._extend_script = self._client.register_script(_EXTEND)
        stream = self._stream(delivery.topic)
        await self._run(
            self._extend_script, [stream], [delivery.group, delivery.consumer, delivery.position]
        )

    async def _create_groups(self, streams: list[str], group: str, start: StartFrom) -> None:
        await self._run(self._groups_script, streams, [group, "0" if start == "begin" else "$"])

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
        sub = _RedisSubscription(self, names, group, consumer, start, visibility_timeout_ms)
        self._subs.add(sub)
        return sub

    def _start_group_creation(
        self, streams: list[str], group: str, start: StartFrom
    ) -> asyncio.Task[None] | None:
        """Create the groups now, so that a group starting at "new" sees what follows."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None  # no loop yet: the first read creates them
        task = loop.create_task(self._create_groups(streams, group, start))
        self._group_tasks.add(task)
        task.add_done_callback(_forget_task(self._group_tasks))
        return task


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob metacharacters escaped, for a SCAN MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _forget_task(tasks: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # the subscription reports it; do not log it as lost

    return done


class _Bounded:
    """See :meth:`RedisMesh._bounded`: a class rather than an ``asynccontextmanager``,
    whose generator costs more than the rest of this wrapper, on every command."""

    __slots__ = ("_deadline", "_mesh", "_seconds")

    def __init__(self, mesh: RedisMesh, seconds: float) -> None:
        self._mesh = mesh
        self._seconds = seconds
        self._deadline = asyncio.timeout(seconds)

    async def __aenter__(self) -> None:
        await self._deadline.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            # Turns the cancellation of a deadline that expired into TimeoutError.
            await self._deadline.__aexit__(exc_type, exc, tb)
        except (RedisError, OSError) as raised:
            self._raise(raised)
        if isinstance(exc, RedisError | OSError):
            self._raise(exc)

    def _raise(self, exc: RedisError | OSError) -> NoReturn:
        if self._deadline.expired():
            raise self._mesh._no_answer(self._seconds) from None
        raise self._mesh._error(exc) from exc


_R = TypeVar("_R")


class _Batcher(Generic[_R]):
    """Sends the requests of concurrent callers together.

    While one request is on the wire, the requests that arrive meanwhile wait, and go
    out as one pipeline when it returns: one round trip and one connection for many
    requests, each still its own command (a commit its own atomic script). A lone
    caller goes out at once. Without it, every request in flight takes a connection
    of its own, and opening one costs 0.5 ms of this process's time (measured: 200
    reads at once took 108 ms on a new pool, 7.6 ms on a warm one, 1.9 ms as one
    pipeline).

    Args:
        mesh: the mesh whose timeout bounds each request.
        one: send one request (bounded by the caller).
        many: send many in one pipeline, bounded; one reply or plait error each.
    """

    def __init__(
        self,
        mesh: RedisMesh,
        one: Callable[[_R], Awaitable[Any]],
        many: Callable[[list[_R]], Awaitable[list[Any]]],
    ) -> None:
        self._mesh = mesh
        self._one = one
        self._many = many
        self._waiting: list[tuple[_R, asyncio.Future[Any]]] = []
        self._expiry: asyncio.TimerHandle | None = None
        """The deadline of the requests waiting now: one timer for all of them."""
        self._busy = False
        self.drains: set[asyncio.Task[None]] = set()
        """The tasks answering waiters (cancelled when the mesh closes)."""

    async def call(self, request: _R) -> Any:
        """The reply to ``request``, within the mesh's timeout.

        The timeout covers the wait behind the request on the wire too: a waiter that
        runs out of time leaves the batch, which may still apply it (as any commit
        that raised :class:`MeshUnavailable` may have been applied). The waiters that
        go out together share one timer, from the first of them: a timer per waiter
        cost more than the rest of its request (measured: 5% of a busy host's time).
        """
        mesh = self._mesh
        if self._busy:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Any] = loop.create_future()
            if not self._waiting:
                self._expiry = loop.call_later(mesh.timeout, _expire, mesh, self._waiting)
            self._waiting.append((request, future))
            return await future
        self._busy = True
        try:
            async with mesh._bounded():
                return await self._one(request)
        finally:
            if self._waiting:
                # A task of its own: the waiters must be answered even if this caller
                # is cancelled.
                drain = asyncio.ensure_future(self._drain())
                self.drains.add(drain)
                drain.add_done_callback(self.drains.discard)
            else:
                self._busy = False

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                expiry, self._expiry = self._expiry, None
                batch = [(request, future) for request, future in batch if not future.done()]
                if not batch:
                    continue  # every one ran out of time waiting: none is sent
                try:
                    replies = await self._many([request for request, _ in batch])
                except (PlaitError, asyncio.CancelledError) as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                finally:
                    if expiry is not None:
                        expiry.cancel()
                for (_, future), reply in zip(batch, replies, strict=True):
                    if future.done():
                        continue  # it ran out of time while on the wire
                    if isinstance(reply, BaseException):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
        finally:
            self._busy = False
            if self._expiry is not None:
                self._expiry.cancel()
                self._expiry = None
            for _, future in self._waiting:
                if not future.done():
                    future.cancel()
            self._waiting = []


def _expire(mesh: RedisMesh, waiting: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    """The deadline of a batch of waiters passed: those not answered get the timeout."""
    for _, future in waiting:
        if not future.done():
            future.set_exception(mesh._no_answer(mesh.timeout))


class _RedisSubscription(Subscription):
    """One consumer's reads: the poll script, and between polls a blocking XREADGROUP.

    A poll promotes due scheduled events, reclaims entries idle past the visibility
    timeout and reads new ones. Once a poll finds less than a batch, the subscription
    waits in XREADGROUP BLOCK until the next poll is due (within _BLOCK_MS, sooner if a
    scheduled event falls due). That read waits on the group, not on the stream: an
    entry a commit took for a consumer of the group (:meth:`Transaction.take`, a run
    owner's hand-off of its own next wake) is not new to the group any more, so it
    wakes no reader, and what does wake the read is delivered by the read itself.
    """

    def __init__(
        self,
        mesh: RedisMesh,
        names: list[str],
        group: str,
        consumer: str,
        start: StartFrom,
        visibility_ms: int,
    ) -> None:
        self._mesh = mesh
        self._names = names
        self._streams = [mesh._stream(name) for name in names]
        self._topics = {mesh._stream(name).encode(): name for name in names}
        self._group = group
        self._consumer = consumer
        self._start = start
        self._visibility_ms = visibility_ms
        self._cursors: list[bytes | str] = ["0-0"] * len(names)
        self._turn = 0
        self._buffer: deque[Delivery] = deque()
        self._poll_at = 0.0  # monotonic time the next poll is due
        self._reading: asyncio.Task[list[Delivery]] | None = None
        self._trimmed_at = time.monotonic()
        self._client: aioredis.Redis | None = None
        self._io = asyncio.Lock()
        self._closing = asyncio.Event()
        self._creating = mesh._start_group_creation(self._streams, group, start)
        self._ready = False

    async def __anext__(self) -> Delivery:
        while not self._closing.is_set():
            async with self._io:
                if self._closing.is_set():
                    break
                delivery = await self._step()
                if delivery is not None:
                    return delivery
        raise StopAsyncIteration

    async def _step(self) -> Delivery | None:
        mesh = self._mesh
        if not self._ready:
            creating, self._creating = self._creating, None
            if creating is not None:
                await asyncio.wait({creating})
            if creating is None or creating.cancelled() or creating.exception() is not None:
                await mesh._create_groups(self._streams, self._group, self._start)
            self._ready = True
        if self._client is None:
            self._client = mesh._new_client()  # its own connection: cancelling a read is safe
        if self._buffer:
            return self._buffer.popleft()
        if time.monotonic() - self._trimmed_at >= TRIM_INTERVAL_S:
            # Now and then, drop what every group of our streams is done with.
            self._trimmed_at = time.monotonic()
            for name in self._names:
                await mesh.trim(name)
        wait_ms = math.ceil((self._poll_at - time.monotonic()) * 1000)
        if self._reading is not None or wait_ms > 0:
            await self._block(wait_ms)
            return self._buffer.popleft() if self._buffer else None
        keys = [mesh._sched, mesh._schedp, *self._streams]
        args = [
            self._group,
            self._consumer,
            self._visibility_ms,
            self._turn,
            _BATCH,
            *self._cursors,
        ]
        try:
            reply = await mesh._run(mesh._poll_script, keys, args, self._client)
        except MeshError as exc:
            cause = exc.__cause__
            if isinstance(cause, ResponseError) and str(cause).startswith("NOGROUP"):
                self._ready = False  # the server lost the group (restart, flush): make it again
                return None
            raise
        wait_us, hits, cursors, drained = reply
        self._turn += 1
        self._cursors = list(cursors)
        if drained:
            # Nothing more for now: read new entries as they come until the next poll
            # is due, for the reclaims and the scheduled events only a poll makes.
            wait_ms = _BLOCK_MS if wait_us < 0 else min(_BLOCK_MS, math.ceil(wait_us / 1000))
            self._poll_at = time.monotonic() + wait_ms / 1000
        self._buffer.extend(
            mesh._delivery(
                self._names[int(i) - 1],
                entry_id,
                int(attempt),
                _fields(flat),
                self._group,
                self._consumer,
            )
            for i, entry_id, attempt, flat in hits
        )
        return self._buffer.popleft() if self._buffer else None

    async def _block(self, block_ms: int) -> None:
        """Wait up to ``block_ms`` for the group's new entries (or close()), buffering them."""
        read = self._reading
        if read is None:
            read = self._reading = asyncio.ensure_future(self._read(block_ms))
        # A caller cancelled here leaves the read running, and the next call takes its
        # entries: cancelled, it would have left them pending until their visibility
        # timeout ran out.
        await asyncio.wait({read})
        self._reading = None
        if not read.cancelled():  # cancelled by close()
            self._buffer.extend(read.result())

    async def _read(self, block_ms: int) -> list[Delivery]:
        mesh, client = self._mesh, self._client
        assert client is not None
        streams: dict[Any, Any] = dict.fromkeys(self._streams, ">")
        async with mesh._bounded(block_ms / 1000 + mesh.timeout):
            try:
                reply: Any = await client.xreadgroup(
                    self._group, self._consumer, streams, count=_BATCH, block=block_ms
                )
            except ResponseError as exc:
                if not str(exc).startswith(("NOGROUP", "UNBLOCKED")):
                    raise
                self._ready = False  # the stream or group went while we waited: make it again
                return []
        return [
            mesh._delivery(self._topics[stream], entry_id, 1, fields, self._group, self._consumer)
            for stream, entries in (reply.items() if isinstance(reply, dict) else reply or ())
            for entry_id, fields in entries
        ]

    async def close(self) -> None:
        self._closing.set()
        self._mesh._subs.discard(self)
        read = self._reading
        if read is not None:
            # What it read stays pending for the group, as the buffer's entries do.
            read.cancel()
            if read.done() and not read.cancelled():
                read.exception()  # retrieved: a read nobody waits for any more
        async with self._io:
            client, self._client = self._client, None
            if client is not None:
                with suppress(RedisError, OSError):
                    await client.aclose()


def _text(value: Any) -> str:
    """A reply's string, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _fields(flat: list[bytes]) -> dict[bytes, bytes]:
    """A stream entry's fields from the flat list a script returns."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


__all__ = ["RedisMesh"]
