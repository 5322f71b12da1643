"""The run log: one entry per committed transition, under ``runs/<run_id>/audit/``.

An entry holds everything a transition adds besides the record: its audit event(s),
the output payload(s) it stores, what its visit added to an agent's conversation, and
the progress a watcher shows. So a transition is two writes — this entry and the
record CAS — and the log is at once the audit chain, the outputs' home and what
``graph run``, ``inspect`` and the event stream follow::

    runs/<run_id>/audit/<seq>   {"events": [event, ...],            (seq: the first one's)
                                 "outputs": {node: payload},
                                 "history": {node: {"visit": N, "messages": [...]}},
                                 "progress": {...}}

An entry's key is the seq of its first event, so the next entry's key follows from the
number of events in this one (a watcher walks the log by ``get``, never by a scan).
An output's ref is ``<entry key>#<node>``. Entries written before this layout — one
bare event per key, outputs under ``runs/<id>/out/``, conversations under
``runs/<id>/hist/`` — are read as well.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from plait.errors import CorruptValue
from plait.mesh import Mesh
from plait.runs.progress import Progress
from plait.runs.record import audit_key, audit_prefix

_REF_MARK = "#"


def output_ref(entry_key: str, node: str) -> str:
    """The ref of ``node``'s output stored in the log entry at ``entry_key``."""
    return f"{entry_key}{_REF_MARK}{node}"


def split_ref(ref: str) -> tuple[str, str | None]:
    """A ref's mesh key and, for an output inside a log entry, its node (else None)."""
    key, mark, node = ref.partition(_REF_MARK)
    return key, (node if mark else None)


@dataclass
class LogEntry:
    """One log entry as read (see the module docstring).

    Attributes:
        key: its mesh key.
        events: its audit events as stored, in chain order.
        outputs: the output payloads it stores, by node.
        history: what each agent visit added to its node's conversation, by node.
        progress: what a watcher shows of the transition (None if nothing).
        legacy: a bare event of the layout before log entries.
    """

    key: str
    events: list[dict[str, Any]]
    outputs: dict[str, Any] = field(default_factory=dict)
    history: dict[str, Any] = field(default_factory=dict)
    progress: Progress | None = None
    legacy: bool = False

    @property
    def size(self) -> int:
        """How many events (seqs) the entry spans."""
        return len(self.events)


def entry_value(
    events: list[dict[str, Any]],
    outputs: dict[str, Any],
    history: dict[str, Any],
    progress: Progress | None,
) -> dict[str, Any]:
    """A log entry as stored (empty parts left out)."""
    value: dict[str, Any] = {"events": events}
    if outputs:
        value["outputs"] = outputs
    if history:
        value["history"] = history
    if progress is not None:
        value["progress"] = progress.stored()
    return value


def parse_entry(key: str, value: Any) -> LogEntry:
    """A stored log entry (or a bare event of the older layout)."""
    if isinstance(value, dict) and isinstance(value.get("events"), list):
        return LogEntry(
            key=key,
            events=list(value["events"]),
            outputs=dict(value.get("outputs") or {}),
            history=dict(value.get("history") or {}),
            progress=Progress.parse(value.get("progress")),
        )
    return LogEntry(key=key, events=[value], legacy=True)


async def read_log(
    mesh: Mesh, run_id: str, on_corrupt: Callable[[CorruptValue], None] | None = None
) -> AsyncIterator[LogEntry]:
    """A run's log entries in chain order."""
    async for entry in mesh.scan(audit_prefix(run_id), on_corrupt=on_corrupt):
        yield parse_entry(entry.key, entry.value)


async def read_payload(mesh: Mesh, ref: str) -> Any:
    """The stored payload (``value``, ``prompt``, ``error``) at an output ref, or None."""
    key, node = split_ref(ref)
    entry = await mesh.get(key)
    if entry is None:
        return None
    if node is None:
        return entry.value
    outputs = entry.value.get("outputs") if isinstance(entry.value, dict) else None
    return outputs.get(node) if isinstance(outputs, dict) else None


class LogFollower:
    """Reads a run's log entries as they are appended, after a known seq.

    Each :meth:`poll` reads the entries written since the last one by key (the next
    entry's key follows from the last one's size), so following a long run costs one
    read per entry, never a scan.
    """

    def __init__(self, mesh: Mesh, run_id: str, after_seq: int = 0) -> None:
        self.mesh = mesh
        self.run_id = run_id
        self.next_seq = after_seq + 1

    async def poll(self) -> list[LogEntry]:
        """The entries appended since the last poll."""
        found: list[LogEntry] = []
        while True:
            key = audit_key(self.run_id, self.next_seq)
            stored = await self.mesh.get(key)
            if stored is None:
                return found
            entry = parse_entry(key, stored.value)
            found.append(entry)
            self.next_seq += max(1, entry.size)


__all__ = [
    "LogEntry",
    "LogFollower",
    "entry_value",
    "output_ref",
    "parse_entry",
    "read_log",
    "read_payload",
    "split_ref",
]
