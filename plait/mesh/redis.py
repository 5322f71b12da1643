"""The Redis mesh: many hosts share one Redis (URL ``redis://`` or ``rediss://``).

Every write is one Lua script called by EVALSHA (one round trip), so a CAS, a delete and
a whole transaction are atomic on the server; a read is one HMGET. Topics are Redis
Streams read through consumer groups; scheduled events wait in a sorted set and are
moved into their stream by the subscribers' poll script once the server clock says they
are due. The key layout is described in :mod:`plait.mesh._redis_scripts`; what a commit sends in
:mod:`plait.mesh._redis_ops`, how requests go out in :mod:`plait.mesh._redis_io`, the
commits' and reads' own connections in :mod:`plait.mesh._redis_wire`, and a
subscription's reads in :mod:`plait.mesh._redis_delivery`.

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
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

import plait.mesh._redis_scripts as scripts
from plait.errors import (
    ConfigError,
    DeliveryLost,
    MeshError,
    MeshUnavailable,
    VersionConflict,
)
from plait.mesh._base import (
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    AckOp,
    Delivery,
    Entry,
    Event,
    HoldOp,
    InsertOp,
    Mesh,
    Op,
    PutOp,
    StartFrom,
    Subscription,
    TakeOp,
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
from plait.mesh._redis_delivery import RedisSubscription, fields
from plait.mesh._redis_io import Batcher, Bounded
from plait.mesh._redis_live import RedisLive
from plait.mesh._redis_ops import (
    commit_request,
    glob_escape,
    own_options,
    pack,
    reply_text,
    timeout_option,
)
from plait.mesh._redis_wire import Wire, evalsha, hmget_value
from plait.mesh._urls import redact_url, url_secrets

MAX_CONNECTIONS = 1024
"""Connections one mesh object opens to Redis at most (one per command in flight)."""

MAX_VALUE_CEILING = 512 * 1024 * 1024
"""Redis's own limit on one string (``proto-max-bulk-len``): 512 MiB."""

_SCAN_PAGE = 256

SEPARATORS = ":/.-_|#"
"""The characters a key prefix may already end with; any other prefix gets ``:``."""


def with_separator(prefix: str) -> str:
    """``prefix`` ending in a separator: ``nc3`` becomes ``nc3:``; ``nc3:``, ``app/``
    and the empty prefix stay as they are."""
    return prefix if not prefix or prefix[-1] in SEPARATORS else prefix + ":"


class RedisMesh(Mesh):
    """A mesh in a Redis 7 server, every key under ``prefix``.

    Attributes:
        prefix: prepended to every Redis key this mesh touches: the prefix given, with
            ``:`` after it unless it ends in a separator (``prefix=nc3``: ``nc3:keys``),
            or as given for a mesh that holds data stored before that (``nc3keys``).
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
    shares_across_processes = True
    shares_across_machines = True  # any machine that reaches the server
    reach = "any machine that reaches its server"

    @property
    def location(self) -> str:
        """The Redis server and key prefix (credentials masked)."""
        return f"the Redis server {self.url}" + (
            f" under prefix {self.prefix!r}" if self.prefix else ""
        )

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
            self._redis_url, own = own_options(url)
            db = urlsplit(url).path.strip("/")
        except ValueError as exc:  # an unclosed "[" of an IPv6 host, say
            raise ConfigError(f"malformed Redis mesh URL {self.url!r}: {exc}") from None
        connect_timeout = timeout_option(
            "connect_timeout", own.get("connect_timeout", connect_timeout)
        )
        timeout = timeout_option("timeout", own.get("timeout", timeout))
        if max_value_bytes > MAX_VALUE_CEILING:
            raise ConfigError(
                f"max_value_bytes {max_value_bytes} is over Redis's limit of 512 MiB "
                f"({MAX_VALUE_CEILING} bytes) on one value"
            )
        self.max_value_bytes = max_value_bytes
        self.prefix = with_separator(prefix)
        self._given_prefix = prefix
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
        self._delete_range_script: AsyncScript | None = None
        self._trim_script: AsyncScript | None = None
        # Commits and single-key reads, the hot requests, each go out through a batcher
        # on a connection of its own (see plait.mesh._redis_wire).
        self._commit_wire = Wire(self._client.connection_pool)
        self._read_wire = Wire(self._client.connection_pool)
        self._commits: Batcher[tuple[list[str], list[bytes]]] = Batcher(
            self, self._commit_one, self._commit_many
        )
        self._reads: Batcher[list[str]] = Batcher(self, self._read_one, self._read_many)
        self._scripts = (
            self._commit_script,
            self._poll_script,
            self._groups_script,
            self._scan_script,
        )
        self._group_tasks: set[asyncio.Task[None]] = set()
        self._subs: set[RedisSubscription] = set()
        self._lay_out(self.prefix)

    def _lay_out(self, prefix: str) -> None:
        """Name every Redis key of this mesh under ``prefix``."""
        self.prefix = prefix
        self._kv = f"{prefix}kv:"
        self._index = f"{prefix}keys"
        self._sched = f"{prefix}sched"
        self._schedp = f"{prefix}schedp"
        self._live = RedisLive(self)

    @property
    def live(self) -> RedisLive:
        """The mesh's live channels (see :mod:`plait.mesh._redis_live`)."""
        return self._live

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
        if isinstance(exc, OutOfMemoryError) or "OOM command not allowed" in text:
            # Full (maxmemory, noeviction): it passes once memory is freed or the limit
            # raised, so it is retryable like an outage, not a failure of the call.
            return MeshUnavailable(
                f"the Redis mesh at {self.url} is out of memory (its maxmemory is reached; "
                f"free memory or raise maxmemory): {text}"
            )
        return MeshError(f"the Redis mesh at {self.url} failed: {text}")

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except (RedisError, OSError) as exc:
            raise self._error(exc) from exc

    def _bounded(self, seconds: float | None = None) -> Bounded:
        """One operation against Redis: within ``seconds`` (the timeout), errors translated.

        A cancelled command disconnects its connection in redis-py, so no late reply
        is ever read as the answer to the next command on it.
        """
        return Bounded(self, self.timeout if seconds is None else seconds)

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

    async def _commit_one(self, call: tuple[list[str], list[bytes]]) -> Any:
        """One commit script call (bounded by the caller); a Redis error raises."""
        reply = (await self._scripts_on_wire([call]))[0]
        if isinstance(reply, RedisError):
            raise reply
        return reply

    async def _commit_many(self, calls: list[tuple[list[str], list[bytes]]]) -> list[Any]:
        """Commit script calls in one round trip, bounded; a reply or plait error each."""
        async with self._bounded():
            replies = await self._scripts_on_wire(calls)
        return [self._error(r) if isinstance(r, RedisError) else r for r in replies]

    async def _scripts_on_wire(self, calls: list[tuple[list[str], list[bytes]]]) -> list[Any]:
        """The commit script once per ``(keys, args)`` on the commit wire (unbounded);
        loads the script once if the server lost it (a restart, SCRIPT FLUSH)."""
        script = self._commit_script
        replies = await self._commit_wire.send([evalsha(script.sha, *call) for call in calls])
        lost = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if lost:
            script.sha = await self._client.script_load(script.script)
            again = await self._commit_wire.send([evalsha(script.sha, *calls[i]) for i in lost])
            for i, reply in zip(lost, again, strict=True):
                replies[i] = reply
        return replies

    async def open(self) -> None:
        # one round trip: check the server and load every script, so no later call
        # pays for a NOSCRIPT miss, while the commit and read wires connect beside it;
        # bounded by the connect timeout, so that a server that takes connections but
        # does not answer (paused, say) fails in seconds
        legacy = self._given_prefix != self.prefix

        async def check() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.ping()
                for script in self._scripts:
                    pipe.script_load(script.script)
                if legacy:
                    pipe.exists(f"{self._given_prefix}keys")  # the old layout's
                    pipe.exists(f"{self.prefix}keys")
                replies: list[Any] = await pipe.execute()
            return replies

        try:
            async with asyncio.timeout(self._connect_timeout):
                with self._translate():
                    replies, _, _ = await asyncio.gather(
                        check(), self._commit_wire.connect(), self._read_wire.connect()
                    )
        except TimeoutError:
            raise self._no_answer(self._connect_timeout) from None
        if legacy and replies[-2] and not replies[-1]:
            # Stored before prefixes got their separator (under "nc3keys", not
            # "nc3:keys"): go on reading and writing the keys where they are.
            self._lay_out(self._given_prefix)

    async def close(self) -> None:
        for task in [*self._group_tasks, *self._commits.drains, *self._reads.drains]:
            task.cancel()
        await asyncio.gather(*(sub.close() for sub in list(self._subs)))
        await self._live.close()
        await self._commit_wire.close()
        await self._read_wire.close()
        with suppress(RedisError, OSError):
            await self._client.aclose()

    # clock --------------------------------------------------------------------------

    async def now_ms(self) -> int:
        """The Redis server's clock (``TIME``): every worker of the mesh reads the same."""
        async with self._bounded():
            seconds, micros = await self._client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # keys ---------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        [(value, version, tainted)] = await self._reads.call([self._kv + key])
        if value is None:
            return None
        return Entry(key, decode(value, key), int(version), tainted is not None)

    async def _read_one(self, names: list[str]) -> list[Any]:
        """The HMGET of each of ``names`` (bounded by the caller); a Redis error raises."""
        replies = await self._read_wire.send([hmget_value(name) for name in names])
        for reply in replies:
            if isinstance(reply, RedisError):
                raise reply
        return replies

    async def _read_many(self, requests: list[list[str]]) -> list[Any]:
        """Several callers' reads in one round trip, bounded: each caller's replies, or
        the plait error of the first that failed."""
        async with self._bounded():
            replies = await self._read_wire.send(
                [hmget_value(name) for names in requests for name in names]
            )
        out: list[Any] = []
        at = 0
        for names in requests:
            mine, at = replies[at : at + len(names)], at + len(names)
            error = next((r for r in mine if isinstance(r, RedisError)), None)
            out.append(mine if error is None else self._error(error))
        return out

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
                [pack([1, code, key, data, "" if if_version is None else if_version])],
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

    async def get_many(self, keys: Sequence[str]) -> list[Entry | None]:
        names = list(keys)
        for key in names:
            check_key(key)
        if not names:
            return []
        replies = await self._reads.call([self._kv + key for key in names])
        out: list[Entry | None] = []
        for key, (value, version, tainted) in zip(names, replies, strict=True):
            out.append(
                None
                if value is None
                else Entry(key, decode(value, key), int(version), tainted is not None)
            )
        return out

    async def delete_prefix(self, prefix: str) -> int:
        check_prefix(prefix)
        if self._delete_range_script is None:
            self._delete_range_script = self._client.register_script(scripts.DELETE_RANGE)
        low, high = _lex_bounds(prefix, prefix_end(prefix), True, False)
        removed = await self._run(self._delete_range_script, [self._index], [low, high, self._kv])
        return int(removed)

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
            lex_low, lex_high = _lex_bounds(low, high, low_in, high_in)
            reply = await self._run(
                self._scan_script,
                [self._index],
                [lex_low, lex_high, page, self._kv, "r" if reverse else "f"],
            )
            count, last, rows = int(reply[0]), reply[1], reply[2:]
            for i in range(0, len(rows), 4):
                key = rows[i].decode()
                value = decode_scanned(rows[i + 1], key, on_corrupt)
                if value is not None:
                    yield Entry(key, value[0], int(rows[i + 2]), rows[i + 3] == 1)
            if left is not None:
                left -= count
            if count < page:
                return
            if reverse:
                high, high_in = last.decode(), False
            else:
                low, low_in = last.decode(), False

    # transactions -------------------------------------------------------------------

    async def _commit(self, ops: Sequence[Op]) -> TransactionResult:
        result, _ = await self._apply(ops)
        return result

    async def _apply(self, ops: Sequence[Op]) -> tuple[TransactionResult, list[int]]:
        if not ops:
            return TransactionResult({}, []), []
        keys, args, event_ids = commit_request(
            ops, self._kv, [self._index, self._sched, self._schedp], self._stream
        )
        if self._group_tasks:
            # a group being created by subscribe() must exist before this publish lands
            await asyncio.wait(set(self._group_tasks))
        reply = await self._commits.call((keys, [args]))
        if reply[0] == b"conflict":
            raise VersionConflict(reply[1].decode(), int(reply[2]), int(reply[3]))
        if reply[0] == b"lost":
            lost = ops[int(reply[1]) - 1]
            assert isinstance(lost, HoldOp)
            d = lost.delivery
            raise DeliveryLost(d.topic, d.id, d.consumer)
        results: list[int] = []
        taken: list[Delivery] = []
        for op, raw in zip(ops, reply[1], strict=True):
            if isinstance(op, TakeOp):
                results.append(0)
                if isinstance(raw, list):
                    taken.append(
                        self._delivery(op.topic, raw[0], 1, fields(raw[1]), op.group, op.consumer)
                    )
            else:
                results.append(int(raw))
        entries = {
            op.key: Entry(
                op.key, op.value, 1 if isinstance(op, InsertOp) else results[i], op.tainted
            )
            for i, op in enumerate(ops)
            if isinstance(op, PutOp) or (isinstance(op, InsertOp) and results[i] == 1)
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
        # The commit script acks only while this consumer holds the entry (XACK alone
        # would take it from a consumer it went to after its visibility timeout).
        await self._apply([AckOp(delivery)])

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
        pattern = glob_escape(head + prefix) + "*"
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
            mine = next((g for g in groups if reply_text(g.get("name")) == group), None)
            if mine is None:
                return int(await self._client.xlen(stream))
            lag = mine.get("lag")
            if lag is None:  # Redis cannot tell (entries deleted mid-stream): count them
                after = "(" + reply_text(mine.get("last-delivered-id"))
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
            self._extend_script = self._client.register_script(scripts.EXTEND)
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
        sub = RedisSubscription(self, names, group, consumer, start, visibility_timeout_ms)
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


def _forget_task(tasks: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # the subscription reports it; do not log it as lost

    return done


def _lex_bounds(
    low: str | None, high: str | None, low_in: bool, high_in: bool
) -> tuple[bytes, bytes]:
    """A scan's key range as the bounds of ZRANGEBYLEX (``[`` inclusive, ``(`` not)."""
    return (
        b"-" if low is None else (b"[" if low_in else b"(") + low.encode(),
        b"+" if high is None else (b"[" if high_in else b"(") + high.encode(),
    )


__all__ = ["MAX_VALUE_CEILING", "RedisMesh"]
