"""The audit chain: one event per committed transition, each hash covering the last.

An event's hash is the sha256 of its canonical JSON (keys sorted, no spaces, UTF-8),
which holds the previous event's hash, so editing, dropping or reordering any event
breaks every hash after it, and the record's ``last_hash`` pins the newest one (a
dropped tail is caught too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel, Field, ValidationError

from plait.errors import AuditChainBroken, CorruptValue
from plait.mesh import Entry, Mesh, Transaction
from plait.runs.record import RunRecord, audit_key, audit_prefix


class AuditEvent(BaseModel):
    """One audit event.

    Attributes:
        seq: 1-based position in the run's chain.
        type: ``run.started``, ``node.committed``, ``node.waiting``, ``run.done``...
        node, visit: the node visit it records, if any.
        verdict, error: a verifier's verdict; a failure's message.
        usage: tokens and dollars the visit spent.
        output_ref: the mesh key holding the visit's output and rendered prompt.
        detail: anything else (ended_detail, what a waiting node asks).
        actor: the host that committed it.
        at: epoch seconds.
        prev: the previous event's hash ("" for the first).
        hash: this event's hash.
    """

    seq: int
    type: str
    node: str | None = None
    visit: int | None = None
    verdict: str | None = None
    error: str | None = None
    usage: dict[str, float] = Field(default_factory=dict)
    output_ref: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    actor: str = ""
    at: float = 0.0
    prev: str = ""
    hash: str = ""


def event_hash(event: AuditEvent) -> str:
    """The hash an event must carry: over its previous hash and its content."""
    return _digest(body_of(**event.model_dump(exclude={"hash"})))


def body_of(
    *,
    seq: int,
    type: str,
    node: str | None = None,
    visit: int | None = None,
    verdict: str | None = None,
    error: str | None = None,
    usage: dict[str, float] | None = None,
    output_ref: str | None = None,
    detail: dict[str, Any] | None = None,
    actor: str = "",
    at: float = 0.0,
    prev: str = "",
) -> dict[str, Any]:
    """An audit event as stored (see :class:`AuditEvent`), without its hash.

    Built field by field rather than through the model: once per transition, and the
    writer and the checker both go through here, so the two cannot drift apart.
    """
    return {
        "seq": seq,
        "type": type,
        "node": node,
        "visit": visit,
        "verdict": verdict,
        "error": error,
        "usage": {name: float(value) for name, value in (usage or {}).items()},
        "output_ref": output_ref,
        "detail": detail or {},
        "actor": actor,
        "at": float(at),
        "prev": prev,
    }


def _canonical(value: Any) -> bytes:
    # Sorted keys, no whitespace, UTF-8; a value JSON has no type for is hashed as its repr.
    try:
        return orjson.dumps(
            value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr
        )
    except orjson.JSONEncodeError:  # an int beyond 64 bits: the same form, the slow way
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
        )
        return text.encode()


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def append(tx: Transaction, record: RunRecord, event: AuditEvent) -> AuditEvent:
    """Chain ``event`` after the record's newest one and add its write to ``tx``.

    Updates ``record.audit_seq`` and ``record.last_hash`` in place; the caller writes
    the record in the same transaction.
    """
    stored = append_fields(tx, record, **event.model_dump(exclude={"seq", "prev", "hash"}))
    event.seq, event.prev, event.hash = stored["seq"], stored["prev"], stored["hash"]
    return event


def append_fields(tx: Transaction, record: RunRecord, **fields: Any) -> dict[str, Any]:
    """:func:`append` of an event given as :class:`AuditEvent` fields (no ``seq``,
    ``prev`` or ``hash``); returns the event as stored."""
    body = body_of(seq=record.audit_seq + 1, prev=record.last_hash, **fields)
    body["hash"] = _digest(body)
    tx.put(audit_key(record.run_id, body["seq"]), body, if_version=0)
    record.audit_seq, record.last_hash = body["seq"], body["hash"]
    return body


def output_digest(payload: Any) -> str:
    """The sha256 of a visit's stored output payload, as an audit event pins it."""
    return _digest(payload)


def _parse(run_id: str, entry: Entry) -> AuditEvent:
    try:
        return AuditEvent.model_validate(entry.value)
    except ValidationError as exc:
        raise AuditChainBroken(
            run_id,
            _position(run_id, entry.key) or 0,
            f"not an audit event ({exc.error_count()} problems)",
        ) from None


def _position(run_id: str, key: str) -> int | None:
    """The seq an audit key stands for, or None for a key that is no audit event's."""
    tail = key.removeprefix(audit_prefix(run_id))
    return int(tail) if tail.isdigit() else None


def _unreadable(run_id: str) -> Callable[[CorruptValue], None]:
    """An ``on_corrupt`` that names the audit event whose stored value does not decode."""

    def broken(exc: CorruptValue) -> None:
        at = _position(run_id, exc.key) or 0
        raise AuditChainBroken(run_id, at, f"its stored value is unreadable ({exc.reason})")

    return broken


async def read_events(mesh: Mesh, run_id: str) -> list[AuditEvent]:
    """Every audit event of a run, in chain order.

    Raises:
        AuditChainBroken: a stored event does not parse as one.
    """
    scan = mesh.scan(audit_prefix(run_id), on_corrupt=_unreadable(run_id))
    return [_parse(run_id, entry) async for entry in scan]


async def verify(mesh: Mesh, record: RunRecord) -> int:
    """Check a run's whole chain and the outputs it pins; return how many events it holds.

    Raises:
        AuditChainBroken: naming the first position whose event is edited, missing, out
            of place or unreadable, whose pinned output was changed, or the record's pin
            that does not match the newest event.
    """
    run_id = record.run_id
    prev, expected = "", 1
    async for entry in mesh.scan(audit_prefix(run_id), on_corrupt=_unreadable(run_id)):
        at = _position(run_id, entry.key)
        if at != expected:
            found = entry.key if at is None else f"event {at}"
            raise AuditChainBroken(run_id, expected, f"missing: the next one stored is {found}")
        event = _parse(run_id, entry)
        if event.seq != expected:
            raise AuditChainBroken(
                run_id, expected, f"its place holds event {event.seq} (moved or swapped)"
            )
        if event.prev != prev:
            raise AuditChainBroken(
                run_id,
                expected,
                "does not follow the event before it "
                "(reordered, or an event before it was replaced)",
            )
        if event_hash(event) != event.hash:
            raise AuditChainBroken(run_id, expected, "its content does not match its hash (edited)")
        pinned = event.detail.get("output_sha256")
        if pinned is not None and event.output_ref is not None:
            stored = await mesh.get(event.output_ref)
            if stored is None or output_digest(stored.value) != pinned:
                raise AuditChainBroken(
                    run_id,
                    expected,
                    f"the output it pins at "
                    f"{event.output_ref} is {'gone' if stored is None else 'changed'}",
                )
        prev, expected = event.hash, expected + 1
    if expected - 1 != record.audit_seq or prev != record.last_hash:
        raise AuditChainBroken(
            run_id,
            expected,
            f"the record pins {record.audit_seq} events ending in "
            f"{record.last_hash[:12] or '-'}, the chain has {expected - 1}",
        )
    return expected - 1


__all__ = [
    "AuditEvent",
    "append",
    "append_fields",
    "body_of",
    "event_hash",
    "output_digest",
    "read_events",
    "verify",
]
