"""Value encoding for the mesh: msgpack with exact round trips and a size limit.

Every backend stores values as the bytes this module makes, so a value reads back the
same on memory, SQLite and Redis: maps, lists, str, bytes, bool, None, floats and ints
of any size (those outside 64 bits travel as a msgpack extension). Tuples come back as
lists, which is msgpack's only lossy corner and the same on every backend.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from plait.errors import CorruptValue, InvalidKey, ValueNotEncodable, ValueTooLarge

DEFAULT_MAX_VALUE_BYTES = 8 * 1024 * 1024
"""Default limit on one encoded value: 8 MiB."""

_BIGINT_EXT = 1


class _Unencodable(Exception):
    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def _default(obj: object) -> Any:
    if isinstance(obj, int) and not isinstance(obj, bool):
        sign = b"-" if obj < 0 else b"+"
        magnitude = abs(obj)
        return msgpack.ExtType(
            _BIGINT_EXT, sign + magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
        )
    raise _Unencodable(type(obj).__name__)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _BIGINT_EXT:
        magnitude = int.from_bytes(data[1:], "big")
        return -magnitude if data[:1] == b"-" else magnitude
    return msgpack.ExtType(code, data)


class PackerPerThread(threading.local):
    """A msgpack packer per thread, made with ``options``: building one per value (as
    ``msgpack.packb`` does) costs more than packing a small value."""

    def __init__(self, **options: Any) -> None:
        self.packer = msgpack.Packer(**options)

    def pack(self, value: Any) -> bytes:
        """``value`` packed; a failed pack leaves no partial output in the buffer."""
        try:
            data: bytes = self.packer.pack(value)
        except BaseException:
            self.packer.reset()
            raise
        return data


_packers = PackerPerThread(default=_default, use_bin_type=True, strict_types=False)


def encode(key: str, value: Any, limit: int = DEFAULT_MAX_VALUE_BYTES) -> bytes:
    """Encode ``value`` for ``key``; raise a plait error naming the key if it cannot be.

    Raises:
        ValueNotEncodable: the value holds a type msgpack cannot carry.
        ValueTooLarge: the encoded value is over ``limit`` bytes.
    """
    try:
        data = _packers.pack(value)
    except _Unencodable as exc:
        raise ValueNotEncodable(key, exc.type_name) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueNotEncodable(key, type(value).__name__) from exc
    if len(data) > limit:
        raise ValueTooLarge(key, len(data), limit)
    return data


def decode(data: bytes, key: str = "") -> Any:
    """Decode bytes made by :func:`encode`.

    Raises:
        CorruptValue: the bytes do not decode (naming ``key``).
    """
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext_hook)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptValue(key, f"{type(exc).__name__}: {exc}") from None


OnCorrupt = Callable[[CorruptValue], None]
"""Called by a scan with each value it skips because it does not decode."""


def decode_scanned(data: bytes, key: str, on_corrupt: OnCorrupt | None) -> tuple[Any] | None:
    """``(value,)`` for a scanned entry, or None once ``on_corrupt`` took a corrupt one.

    Raises:
        CorruptValue: the value does not decode and no ``on_corrupt`` was given.
    """
    try:
        return (decode(data, key),)
    except CorruptValue as exc:
        if on_corrupt is None:
            raise
        on_corrupt(exc)
        return None


_log = logging.getLogger("plait.mesh")


def skip_unreadable(key: str, reason: str) -> None:
    """Report, as one warning line naming ``key``, a value a listing skips."""
    _log.warning("warning: skipping the unreadable value at %r: %s", key, reason)


def skip_corrupt(exc: CorruptValue) -> None:
    """An ``on_corrupt`` for listings: warn with the key (see :func:`skip_unreadable`)."""
    skip_unreadable(exc.key, exc.reason)


def check_key(key: str, what: str = "key") -> None:
    """Refuse an empty or non-string key (or topic, with ``what``)."""
    if not isinstance(key, str):
        raise InvalidKey(f"a mesh {what} must be a str, got {type(key).__name__}")
    if not key:
        raise InvalidKey(f"a mesh {what} must not be empty")
    if "\x00" in key:
        raise InvalidKey(f"a mesh {what} must not contain NUL characters: {key!r}")


def prefix_end(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` (None: no bound).

    A range on the primary key instead of ``LIKE``: exact whatever characters the prefix
    holds, and an index seek. Text compares as UTF-8 bytes (in SQLite, and in PostgreSQL's ``C``
    collation), which is code point order.
    """
    while prefix:
        last = ord(prefix[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:
            last = 0xE000  # surrogates cannot be stored, so skip over them
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def topic_names(topics: str | Sequence[str]) -> list[str]:
    """The topics a subscribe or drop_group call names, each checked."""
    names = [topics] if isinstance(topics, str) else list(topics)
    for name in names:
        check_key(name, "topic")
    return names


__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "OnCorrupt",
    "PackerPerThread",
    "check_key",
    "decode",
    "decode_scanned",
    "encode",
    "prefix_end",
    "skip_corrupt",
    "skip_unreadable",
    "topic_names",
]
