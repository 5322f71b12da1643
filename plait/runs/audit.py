"""The audit chain: one event per committed transition, each hash covering the last.

An event's hash is the sha256 of its canonical JSON (keys sorted, no spaces, UTF-8),
which holds the previous event's hash, so editing, dropping or reordering any event
breaks every hash after it, and the record's ``last_hash`` pins the newest one (a
dropped tail is caught too). :func:`verify` also checks that the record agrees with
the chain: every output it points at, its status and its usage.

With ``PLAIT_AUDIT_KEY`` set, each event's hash is an HMAC-SHA256 under that key (the
event says so in ``mac``): whoever can write the mesh but lacks the key cannot build a
chain that verifies. A chain written with a key verifies only with it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, Field, ValidationError

from plait.errors import AuditChainBroken, CorruptValue
from plait.graphs.events import Event
from plait.graphs.state import RunUsage
from plait.mesh import Mesh, Transaction
from plait.runs.log import LogEntry, entry_value, read_log, read_payload, split_ref
from plait.runs.record import RunRecord, audit_key, audit_prefix

AUDIT_KEY_ENV = "PLAIT_AUDIT_KEY"
"""The environment variable holding the key of HMAC-chained audit events."""

HMAC_SHA256 = "hmac-sha256"

RETRIED = "run.retried"
"""The event of a failed run retried: the run goes on after its ``run.failed``."""

FORKED = "run.forked"
"""The first event of a run forked from another run's state: it names the parent's
event it starts after (run id, seq and hash) and carries what the parent had spent up
to there (``usage``, and ``steps`` in its detail)."""


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
        mac: ``hmac-sha256`` when ``hash`` is an HMAC under ``PLAIT_AUDIT_KEY``;
            None for a plain sha256.
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
    mac: str | None = None
    hash: str = ""


def audit_key_bytes() -> bytes | None:
    """The HMAC key from ``PLAIT_AUDIT_KEY``, or None when it is unset or empty."""
    value = os.environ.get(AUDIT_KEY_ENV)
    return value.encode() if value else None


def event_hash(event: AuditEvent, key: bytes | None = None) -> str:
    """The hash an event must carry: over its previous hash and its content (an HMAC
    under ``key`` when the event says it is one)."""
    body = body_of(**event.model_dump(exclude={"hash"}))
    return _mac(body, key) if event.mac is not None and key is not None else _digest(body)


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
    mac: str | None = None,
) -> dict[str, Any]:
    """An audit event as stored (see :class:`AuditEvent`), without its hash.

    Built field by field rather than through the model: once per transition, and the
    writer and the checker both go through here, so the two cannot drift apart.
    """
    body = {
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
    if mac is not None:  # absent from plain events, so chains written before keep verifying
        body["mac"] = mac
    return body


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


def _mac(value: Any, key: bytes) -> str:
    return hmac.new(key, _canonical(value), hashlib.sha256).hexdigest()


def append(tx: Transaction, record: RunRecord, event: AuditEvent) -> AuditEvent:
    """Chain ``event`` after the record's newest one and add its log entry to ``tx``.

    Updates ``record.audit_seq`` and ``record.last_hash`` in place; the caller writes
    the record in the same transaction.
    """
    stored = append_fields(tx, record, **event.model_dump(exclude={"seq", "prev", "mac", "hash"}))
    event.seq, event.prev, event.hash = stored["seq"], stored["prev"], stored["hash"]
    event.mac = stored.get("mac")
    return event


def append_fields(tx: Transaction, record: RunRecord, **fields: Any) -> dict[str, Any]:
    """:func:`append` of an event given as :class:`AuditEvent` fields (no ``seq``,
    ``prev`` or ``hash``), as a log entry of its own; returns the event as stored."""
    body = chained(record, **fields)
    tx.put(audit_key(record.run_id, body["seq"]), entry_value([body], {}, {}, None), if_version=0)
    return body


def chained(record: RunRecord, **fields: Any) -> dict[str, Any]:
    """The next event of the record's chain, as stored (given as :class:`AuditEvent`
    fields without ``seq``, ``prev`` or ``hash``), hashed after the newest one.

    Moves ``record.audit_seq`` and ``record.last_hash`` on to it; the caller writes the
    event in a log entry (:mod:`plait.runs.log`) beside the record, in one transaction.
    """
    key = audit_key_bytes()
    body = body_of(
        seq=record.audit_seq + 1,
        prev=record.last_hash,
        mac=HMAC_SHA256 if key is not None else None,
        **fields,
    )
    return _sealed(record, body, key)


def chained_event(
    record: RunRecord,
    event: Event,
    *,
    actor: str,
    at: float,
    refs: Mapping[str, str] | None = None,
    pins: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The next event of the record's chain, as stored, made from an engine event.

    The engine event's own parts (:meth:`~plait.graphs.events.AuditParts`) go straight
    into the stored body, with no form in between: ``refs`` holds the output ref this
    transition stored per node (the event's node's is its ``output_ref``) and ``pins``
    what the event pins besides (``output_sha256``, ``outputs``), added to its detail.
    Moves the record's chain head on as :func:`chained` does.
    """
    node, visit, verdict, error, usage, detail = event.audit()
    if pins:
        detail = {**detail, **pins}
    key = audit_key_bytes()
    body = body_of(
        seq=record.audit_seq + 1,
        type=event.type,
        node=node,
        visit=visit,
        verdict=verdict,
        error=error,
        usage=usage.as_data() if usage is not None else None,
        output_ref=refs.get(node) if refs is not None and node is not None else None,
        detail=detail,
        actor=actor,
        at=at,
        prev=record.last_hash,
        mac=HMAC_SHA256 if key is not None else None,
    )
    return _sealed(record, body, key)


def _sealed(record: RunRecord, body: dict[str, Any], key: bytes | None) -> dict[str, Any]:
    """``body`` with its hash, the record's chain head moved on to it."""
    body["hash"] = _mac(body, key) if key is not None else _digest(body)
    record.audit_seq, record.last_hash = body["seq"], body["hash"]
    return body


def output_digest(payload: Any) -> str:
    """The sha256 of a visit's stored output payload, as an audit event pins it."""
    return _digest(payload)


def _parse(run_id: str, key: str, value: Any, offset: int = 0) -> AuditEvent:
    try:
        return AuditEvent.model_validate(value)
    except ValidationError as exc:
        raise AuditChainBroken(
            run_id,
            (_position(run_id, key) or 0) + offset,
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
    return [
        _parse(run_id, entry.key, value, offset)
        async for entry in read_log(mesh, run_id, on_corrupt=_unreadable(run_id))
        for offset, value in enumerate(entry.events)
    ]


async def verify(mesh: Mesh, record: RunRecord) -> int:
    """Check a run's whole chain, the outputs it pins, and that the record agrees with it.

    Returns how many events the chain holds. With ``PLAIT_AUDIT_KEY`` set, every event
    must be an HMAC under that key.

    Raises:
        AuditChainBroken: naming the first position whose event is edited, missing, out
            of place or unreadable, whose pinned output was changed, or the record's pin
            that does not match the newest event; or the first part of the record (an
            output it points at, its status, its usage) the chain disagrees with; or a
            keyed chain checked without its key.
    """
    run_id = record.run_id
    key = audit_key_bytes()
    prev, expected = "", 1
    replay = _Replay()
    async for entry in read_log(mesh, run_id, on_corrupt=_unreadable(run_id)):
        at = _position(run_id, entry.key)
        if at != expected:
            found = entry.key if at is None else f"event {at}"
            raise AuditChainBroken(run_id, expected, f"missing: the next one stored is {found}")
        if not entry.events:
            raise AuditChainBroken(run_id, expected, "a log entry that holds no event")
        for offset, value in enumerate(entry.events):
            event = _parse(run_id, entry.key, value, offset)
            _check_event(run_id, event, expected, prev, key)
            for ref, pinned in _pins(event):
                stored = await _pinned_payload(mesh, entry, ref)
                if stored is None or output_digest(stored) != pinned:
                    raise AuditChainBroken(
                        run_id,
                        expected,
                        f"the output it pins at {ref} is {'gone' if stored is None else 'changed'}",
                    )
            replay.add(event)
            prev, expected = event.hash, expected + 1
    if expected - 1 != record.audit_seq or prev != record.last_hash:
        raise AuditChainBroken(
            run_id,
            expected,
            f"the record pins {record.audit_seq} events ending in "
            f"{record.last_hash[:12] or '-'}, the chain has {expected - 1}",
        )
    disagreement = replay.disagreement(record)
    if disagreement is not None:
        raise AuditChainBroken(run_id, disagreement[0], disagreement[1])
    return expected - 1


def _check_event(
    run_id: str, event: AuditEvent, expected: int, prev: str, key: bytes | None
) -> None:
    """Raise AuditChainBroken unless ``event`` is the chain's ``expected`` one after ``prev``."""
    if event.seq != expected:
        raise AuditChainBroken(
            run_id, expected, f"its place holds event {event.seq} (moved or swapped)"
        )
    if event.prev != prev:
        raise AuditChainBroken(
            run_id,
            expected,
            "does not follow the event before it (reordered, or an event before it was replaced)",
        )
    _check_mac(run_id, event, key)
    if event_hash(event, key) != event.hash:
        raise AuditChainBroken(
            run_id,
            expected,
            "its content does not match its HMAC (edited, or another PLAIT_AUDIT_KEY)"
            if event.mac is not None
            else "its content does not match its hash (edited)",
        )


async def _pinned_payload(mesh: Mesh, entry: LogEntry, ref: str) -> Any:
    """The payload an event of ``entry`` pins at ``ref`` (its own entry's, read in place)."""
    key, node = split_ref(ref)
    if node is not None and key == entry.key:
        return entry.outputs.get(node)
    return await read_payload(mesh, ref)


def _check_mac(run_id: str, event: AuditEvent, key: bytes | None) -> None:
    if event.mac is not None and event.mac != HMAC_SHA256:
        raise AuditChainBroken(run_id, event.seq, f"unknown mac {event.mac!r}")
    if event.mac is not None and key is None:
        raise AuditChainBroken(
            run_id,
            event.seq,
            f"the chain is an HMAC ({HMAC_SHA256}) under a key: set {AUDIT_KEY_ENV} "
            "to the key it was written with to verify it",
        )
    if event.mac is None and key is not None:
        raise AuditChainBroken(
            run_id,
            event.seq,
            f"a plain sha256 event where {AUDIT_KEY_ENV} asks for an HMAC (written "
            "without the key, or rebuilt by someone who lacks it)",
        )


def _pins(event: AuditEvent) -> list[tuple[str, str]]:
    """The (output key, payload sha256) pairs an event pins."""
    pins = []
    pinned = event.detail.get("output_sha256")
    if pinned is not None and event.output_ref is not None:
        pins.append((event.output_ref, str(pinned)))
    also = event.detail.get("outputs")
    if isinstance(also, dict):
        pins.extend(
            (str(o["ref"]), str(o["sha256"]))
            for o in also.values()
            if isinstance(o, dict) and "ref" in o and "sha256" in o
        )
    return pins


_TERMINAL_EVENTS = {"run.done": "done", "run.failed": "failed", "run.cancelled": "cancelled"}


class ChainSpend:
    """What a run has spent as its chain sums it, event by event: the tokens and dollars
    of every event, a step per commit (plus the steps a fork carried over from its
    parent) and a retry per ``node.retrying``."""

    def __init__(self) -> None:
        self.usage = {"input_tokens": 0.0, "output_tokens": 0.0, "dollars": 0.0}
        self.steps = 0
        self.retries = 0

    def add(self, event: AuditEvent) -> None:
        """Count ``event``."""
        for name in self.usage:
            self.usage[name] += float(event.usage.get(name, 0.0))
        self.steps += event.type == "node.committed"
        self.retries += event.type == "node.retrying"
        if event.type == FORKED:
            self.steps += int(event.detail.get("steps", 0))  # what its parent had spent

    def as_usage(self) -> RunUsage:
        """The sums as a run's usage (no wall time: the chain does not hold it)."""
        return RunUsage(
            steps=self.steps,
            input_tokens=int(self.usage["input_tokens"]),
            output_tokens=int(self.usage["output_tokens"]),
            dollars=self.usage["dollars"],
            retries=self.retries,
        )


class _Replay:
    """What the chain says the record must hold: output refs, the end, the usage."""

    def __init__(self) -> None:
        self.refs: dict[str, tuple[str, int]] = {}
        self.ended: tuple[str, int] | None = None
        self.spend = ChainSpend()

    def add(self, event: AuditEvent) -> None:
        self.spend.add(event)
        if event.type == "node.committed":
            if event.node is not None and event.output_ref is not None:
                self.refs[event.node] = (event.output_ref, event.seq)
        also = event.detail.get("outputs")
        if isinstance(also, dict):
            for name, o in also.items():
                if isinstance(o, dict) and "ref" in o:
                    self.refs[str(name)] = (str(o["ref"]), event.seq)
        if event.type in _TERMINAL_EVENTS:
            self.ended = (_TERMINAL_EVENTS[event.type], event.seq)
        elif event.type == RETRIED:
            self.ended = None  # a failed run retried goes on

    def disagreement(self, record: RunRecord) -> tuple[int, str] | None:
        """The first part of ``record`` the chain disagrees with: (seq, what)."""
        head = record.audit_seq
        for name, out in record.outputs.items():
            if out.value is not None:
                return head, f"the record holds output {name!r} inline, which no commit writes"
            pinned = self.refs.get(name)
            if out.ref != (pinned[0] if pinned else None):
                where = f"event {pinned[1]} pins {pinned[0]}" if pinned else "no event pins one"
                return head, f"the record's output {name!r} points at {out.ref}; {where}"
        ended = self.ended[0] if self.ended else None
        if record.terminal != (ended is not None) or (ended and ended != record.status):
            said = f"ended {ended} (event {self.ended[1]})" if self.ended else "has not ended"
            return head, f"the record's status is {record.status}, the chain says the run {said}"
        u = record.usage
        for name, spent in (
            ("input_tokens", u.input_tokens),
            ("output_tokens", u.output_tokens),
            ("dollars", u.dollars),
        ):
            chained = self.spend.usage[name]
            if abs(spent - chained) > 1e-9 * max(1.0, abs(chained)):
                return (
                    head,
                    f"the record's usage {name} is {spent:g}, the chain's sum is {chained:g}",
                )
        if u.steps != self.spend.steps:
            steps = self.spend.steps
            return head, f"the record counts {u.steps} steps, the chain commits {steps}"
        return None


__all__ = [
    "AUDIT_KEY_ENV",
    "FORKED",
    "HMAC_SHA256",
    "RETRIED",
    "AuditEvent",
    "ChainSpend",
    "append",
    "append_fields",
    "audit_key_bytes",
    "body_of",
    "chained",
    "chained_event",
    "event_hash",
    "output_digest",
    "read_events",
    "verify",
]
