"""Retention: deleting finished runs and everything they stored.

A run's record, outputs, conversations and audit chain stay until a person prunes them
(``plait graph prune``). A run has no topic of its own: what a watcher reads is its log
(see :mod:`plait.runs.progress`).
"""

from __future__ import annotations

from plait.actors import actor_key
from plait.decisions.store import PREFIX as DECISIONS_PREFIX
from plait.graphs.state import TERMINAL
from plait.mesh import Mesh
from plait.runs.commit import RunCommit
from plait.runs.record import (
    RunSummary,
    load,
    owner_id,
    parent_run_id,
    record_key,
)

_BATCH = 256
"""Keys deleted per transaction."""

_LEGACY_TOPIC = "runs/{run_id}/events"
"""The topic owners of runs started before the log carried progress subscribed to;
nothing published on it. A prune deletes what such a run left of it."""


async def prune(
    mesh: Mesh, runs: list[RunSummary], *, ended_before: float, dry_run: bool = False
) -> list[RunSummary]:
    """Delete the runs that ended (done, failed, cancelled) before ``ended_before``.

    Everything of each goes: its record and listing, outputs, conversations, audit
    chain, owner actor, scheduled wake and decisions. A run not over is
    never touched, nor the child run of a subgraph node whose run is not over. The
    record and its listing go last, together, so a prune cut short is finished by the
    next one.

    Args:
        mesh: the mesh of the runs.
        runs: the runs listed on it (:meth:`plait.runs.Runs.list`), newest first.
        ended_before: epoch seconds; runs whose last change is older are deleted.
        dry_run: only say which runs would be deleted.

    Returns:
        The summaries of the runs deleted (or that would be), newest first.
    """
    doomed = [
        s
        for s in runs
        if s.status in TERMINAL
        and s.updated_at < ended_before
        and not await _parent_waits(mesh, s.run_id)
    ]
    if dry_run or not doomed:
        return doomed
    ids = {s.run_id for s in doomed}
    decisions: dict[str, list[str]] = {}
    async for entry in mesh.scan(DECISIONS_PREFIX):
        owner = entry.value.get("run_id") if isinstance(entry.value, dict) else None
        if owner in ids:
            decisions.setdefault(owner, []).append(entry.key)
    for summary in doomed:
        await _delete_run(mesh, summary.run_id, decisions.get(summary.run_id, []))
    return doomed


async def _parent_waits(mesh: Mesh, run_id: str) -> bool:
    """Whether ``run_id`` is a child run whose parent is not over: it keeps it, to take
    its output when its node runs again."""
    entry = await mesh.get(record_key(run_id))
    parent = parent_run_id(load(entry.value)) if entry is not None else None
    if parent is None:
        return False
    found = await mesh.get(record_key(parent))
    return found is not None and not load(found.value).terminal


async def _delete_run(mesh: Mesh, run_id: str, decision_keys: list[str]) -> None:
    # The run's own keys (log, audit, history) in one atomic delete: no values read.
    await mesh.delete_prefix(f"{record_key(run_id)}/")
    keys = [*decision_keys, actor_key(owner_id(run_id))]
    for start in range(0, len(keys), _BATCH):
        async with mesh.transact() as tx:
            for key in keys[start : start + _BATCH]:
                tx.delete(key)
    await mesh.delete_topic(_LEGACY_TOPIC.format(run_id=run_id))
    entry = await mesh.get(record_key(run_id))
    rec = load(entry.value) if entry is not None else None
    if entry is not None and rec is not None and rec.terminal:
        # With its listing: until both are gone, the next prune finds the run again.
        await RunCommit(mesh).delete(rec, entry.version)


__all__ = ["prune"]
