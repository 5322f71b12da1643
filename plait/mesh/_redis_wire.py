"""The Redis mesh's hot requests, packed by hand and sent on a connection of their own.

Every transition is a commit script (EVALSHA) and most reads an HMGET: on a busy host
redis-py's general path cost more than the rest of the request (measured: its command
packing, one encoder call per argument, was a third of the client's time per commit;
its pipeline object and per-command bookkeeping another part). A :class:`Wire` writes
such requests in the Redis protocol (RESP) in one pass and reads the replies with the
connection's own parser (hiredis where installed), on one connection that only its
:class:`~plait.mesh._redis_io.Batcher` uses: the batcher has one request on the wire at
a time, so the connection needs no pool, no lock and no check on each use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import Any

from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import RedisError, ResponseError

_HMGET_VALUE = b"*5\r\n$5\r\nHMGET\r\n"
_VALUE_FIELDS = b"$1\r\nv\r\n$1\r\nn\r\n$1\r\nt\r\n"


def bulk(part: bytes) -> bytes:
    """One bulk string of a command."""
    return b"$%d\r\n%b\r\n" % (len(part), part)


def evalsha(sha: str, keys: Sequence[str], args: Iterable[bytes]) -> bytes:
    """``EVALSHA sha len(keys) *keys *args`` in the Redis protocol."""
    parts = [bulk(key.encode()) for key in keys]
    parts += [bulk(arg) for arg in args]
    count = b"%d" % len(keys)
    head = b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(parts) + 3,
        sha.encode(),
        len(count),
        count,
    )
    return head + b"".join(parts)


def hmget_value(name: str) -> bytes:
    """``HMGET name v n t``: a key's value, version and taint (see the mesh's layout)."""
    return _HMGET_VALUE + bulk(name.encode()) + _VALUE_FIELDS


class Wire:
    """One connection of ``pool``'s kind for requests sent one batch at a time.

    A batch cancelled or failed mid-way leaves the connection closed (redis-py closes
    it on any error while sending or reading), so no late reply is read as the answer
    to the next batch; the next batch connects again.
    """

    def __init__(self, pool: ConnectionPool) -> None:
        self._connection: AbstractConnection = pool.make_connection()  # type: ignore[no-untyped-call]

    async def connect(self) -> None:
        """Open the connection now (its handshake costs a few round trips), not on the
        first request."""
        await self._connection.connect()  # type: ignore[no-untyped-call]

    async def send(self, commands: list[bytes]) -> list[Any]:
        """Send ``commands`` in one write and read their replies: one round trip.

        Each reply is the command's result, or the ``ResponseError`` Redis answered it
        with (the rest are still read); a connection error raises.
        """
        connection = self._connection
        await connection.send_packed_command(commands, check_health=False)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies

    async def close(self) -> None:
        """Close the connection (a later batch would open it again)."""
        with suppress(RedisError, OSError):
            await self._connection.disconnect()


__all__ = ["Wire", "bulk", "evalsha", "hmget_value"]
