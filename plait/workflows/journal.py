"""A workflow run's journal: one entry per step, kept in the run's log.

Each visit of a workflow node commits the entries of the steps it ran as its output
(``{"plait.workflow": 1, "steps": [...]}``), in the same transaction as every visit of a
durable run (:class:`plait.runs.commit.RunCommit`). The journal of a run is those
entries, in visit order, by position. A serving process keeps the journal of the runs
it serves (:class:`JournalCache`), so a visit reads one output, not the whole log.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pydantic import BaseModel

from plait.errors import WorkflowError
from plait.mesh import Mesh
from plait.runs.log import read_log, read_payload
from plait.runs.store import Lru

MARK = "plait.workflow"
"""The key that marks a visit's output as a batch of journal entries."""


class Entry(BaseModel):
    """One journaled step.

    Attributes:
        pos: its position in the run (0 first), given when the call is made.
        name: what it is (``tools.bash``, ``agents.run``, a ``@plait.step``'s name).
        args: the digest of its arguments (16 hex digits).
        value: what it returned (None if it raised).
        error: ``Type: message`` of what it raised, or None.
        tainted: it took in outside content.
    """

    pos: int
    name: str
    args: str
    value: Any = None
    error: str | None = None
    tainted: bool = False

    def label(self) -> str:
        """``name(args digest)``: how errors name the step."""
        return f"{self.name}({self.args})"


def digest(args: Any) -> str:
    """The digest of a step's arguments: 16 hex digits of their canonical JSON."""
    data = orjson.dumps(args, option=orjson.OPT_SORT_KEYS, default=repr)
    return hashlib.sha256(data).hexdigest()[:16]


def batch(entries: list[Entry]) -> dict[str, Any]:
    """The output of a visit that journaled ``entries``."""
    return {MARK: 1, "steps": [e.model_dump(exclude_defaults=True) for e in entries]}


def entries_of(value: Any) -> list[Entry] | None:
    """The entries a visit's output holds; None for an output that is no batch."""
    if not isinstance(value, dict) or MARK not in value:
        return None
    return [Entry.model_validate(e) for e in value.get("steps") or ()]


async def read_journal(mesh: Mesh, run_id: str, node: str = "workflow") -> dict[int, Entry]:
    """A run's journal read from its log, by position."""
    journal: dict[int, Entry] = {}
    async for entry in read_log(mesh, run_id):
        payload = entry.outputs.get(node)
        value = payload.get("value") if isinstance(payload, dict) else None
        for step in entries_of(value) or ():
            journal[step.pos] = step
    return journal


class _Kept:
    __slots__ = ("journal", "pending", "ref")

    def __init__(self, journal: dict[int, Entry], ref: str | None) -> None:
        self.journal = journal
        self.ref = ref
        self.pending: list[Entry] = []


class JournalCache:
    """The journals of the runs a process serves, each checked against the run's
    record before use: the output ref of the node's last visit names the last batch."""

    def __init__(self, size: int = 1_000) -> None:
        self._kept: Lru = Lru(size)

    async def journal(
        self, mesh: Mesh | None, run_id: str, node: str, ref: str | None, last: Any = None
    ) -> dict[int, Entry]:
        """The journal of ``run_id`` whose last committed batch is at ``ref`` (its
        value ``last``, if the caller has it); in session (no ``mesh``) what this
        process journaled itself."""
        kept: _Kept | None = self._kept.get(run_id)
        if mesh is None:
            if kept is None:
                kept = self._kept[run_id] = _Kept({}, None)
            return kept.journal
        if kept is not None and kept.ref == ref:
            return kept.journal
        if kept is not None and kept.pending and ref is not None:
            # This process wrote the batch the record now names: check it is the one.
            if last is None:
                payload = await read_payload(mesh, ref)
                last = payload.get("value") if isinstance(payload, dict) else None
            found = entries_of(last)
            if found is not None and [e.pos for e in found] == [e.pos for e in kept.pending]:
                for e in found:
                    kept.journal[e.pos] = e
                kept.ref, kept.pending = ref, []
                return kept.journal
        journal = await read_journal(mesh, run_id, node) if ref is not None else {}
        if ref is not None and not journal:
            # The record names a batch its log does not hold (a fork, or a log cut
            # short): running the steps again from nothing could repeat their effects.
            raise WorkflowError(
                f"workflow run {run_id}: its record names journaled steps ({ref}) that "
                "its log does not hold (a fork of a workflow run is not supported)"
            )
        self._kept[run_id] = _Kept(journal, ref)
        return journal

    def wrote(self, run_id: str, entries: list[Entry]) -> None:
        """Remember the batch a visit of ``run_id`` is about to commit."""
        kept: _Kept | None = self._kept.get(run_id)
        if kept is not None:
            kept.pending = list(entries)

    def forget(self, run_id: str) -> None:
        """Drop a run's journal (it ended)."""
        self._kept.pop(run_id, None)


__all__ = ["MARK", "Entry", "JournalCache", "batch", "digest", "entries_of", "read_journal"]
