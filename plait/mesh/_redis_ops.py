"""What the Redis mesh sends: a commit's keys and arguments, its URL options, and the
small conversions of requests and replies."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from plait.errors import ConfigError
from plait.mesh._base import (
    AckOp,
    CancelOp,
    CheckOp,
    DeleteOp,
    HoldOp,
    InsertOp,
    Op,
    PublishOp,
    PutOp,
    TakeOp,
)
from plait.mesh._codec import PackerPerThread

ARG_PACKERS = PackerPerThread(use_bin_type=False)
"""Packs commit script arguments (see :func:`pack`)."""


def pack(args: list[Any]) -> bytes:
    """The commit script's arguments as one msgpack array.

    Redis's Lua msgpack predates the bin type, so bytes travel as raw strings (Lua
    strings are bytes either way).
    """
    return ARG_PACKERS.pack(args)


def commit_request(
    ops: Sequence[Op], kv: str, heads: list[str], stream: Callable[[str], str]
) -> tuple[list[str], bytes, list[str]]:
    """The keys and the one packed argument of the commit script for ``ops``, and the
    ids of the events they publish.

    Args:
        ops: the transaction's operations (at least one).
        kv: the prefix of the keys' hashes.
        heads: the script's first keys: the scan index, the schedule and its payloads.
        stream: the stream key of a topic.
    """
    keys: list[str] = list(heads)
    args: list[Any] = [len(ops)]
    event_ids: list[str] = []
    for op in ops:
        if isinstance(op, PutOp):
            keys.append(kv + op.key)
            code = "Q" if op.tainted else "P"
            args += (code, op.key, op.data, "" if op.if_version is None else op.if_version)
        elif isinstance(op, DeleteOp):
            keys.append(kv + op.key)
            args += ("D", op.key, "" if op.if_version is None else op.if_version)
        elif isinstance(op, PublishOp):
            keys.append(stream(op.topic))
            code = "F" if op.tainted else "E"
            args += (code, op.event_id, op.kind, op.data, op.at_ms, op.after_ms, op.key or "")
            event_ids.append(op.event_id)
        elif isinstance(op, CancelOp):
            keys.append(heads[1])
            args += ("C", op.key)
        elif isinstance(op, AckOp):
            keys.append(stream(op.delivery.topic))
            d = op.delivery
            args += ("A", d.group, d.position, d.consumer)
        elif isinstance(op, HoldOp):
            keys.append(stream(op.delivery.topic))
            d = op.delivery
            args += ("H", d.group, d.position, d.consumer)
        elif isinstance(op, TakeOp):
            keys.append(stream(op.topic))
            args += ("T", op.group, op.consumer)
        elif isinstance(op, CheckOp):
            keys.append(kv + op.key)
            args += ("K", op.key, op.version)
        elif isinstance(op, InsertOp):
            keys.append(kv + op.key)
            args += ("I", op.key, op.data, 1 if op.tainted else 0)
    return keys, pack(args), event_ids


OWN_OPTIONS = ("prefix", "timeout", "connect_timeout")
"""URL query options the mesh reads itself; every other one goes to redis-py."""


def own_options(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without the mesh's own query options, and those options."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in OWN_OPTIONS]
    return urlunsplit(parts._replace(query=urlencode(rest))), own


def timeout_option(name: str, given: object) -> float:
    """A timeout option (a number, or the text of a URL option) as positive seconds."""
    try:
        seconds = float(given) if isinstance(given, int | float | str) else math.nan
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ConfigError(f"the Redis option {name} must be > 0 seconds, got {given!r}")
    return seconds


def glob_escape(text: str) -> str:
    """``text`` with Redis glob metacharacters escaped, for a SCAN MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def reply_text(value: Any) -> str:
    """A reply's string, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = [
    "ARG_PACKERS",
    "OWN_OPTIONS",
    "commit_request",
    "glob_escape",
    "own_options",
    "pack",
    "reply_text",
    "timeout_option",
]
