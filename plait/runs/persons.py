"""What of a run's history a person decided, for the acts that would re-use it.

A fork re-runs what comes after one of its parent's visits with the parent's state up to
there: the answers people gave (to a human node or a tool approval) and the budget they
raised. Replaying those is a person's act (DESIGN.md, "Principals"), so before a fork
:func:`persons_acts` lists what of the prefix a person did, following the prefix into
the runs it stands on: the parent a fork started from (up to the event it names) and
the child run a subgraph node waited on.
"""

from __future__ import annotations

from plait.mesh import Mesh
from plait.runs.audit import FORKED, AuditEvent, read_events

BUDGET_RAISED = "budget.raised"
"""The audit event of a person raising a run's budget."""

RESUMED = "run.resumed"
"""The audit event of a parked run going on: a decision closed, or a child run ended."""


async def persons_acts(mesh: Mesh, run_id: str, chain: list[AuditEvent]) -> list[str]:
    """What a person did in ``chain`` (a prefix of run ``run_id``'s audit chain), and in
    the chains it stands on: a fork's parent up to where it forked (and what its
    ``run.forked`` event recorded, should the parent be pruned), a subgraph's child.
    Each act is a short sentence (``"ana answered approve in run grun_1"``).
    """
    found: list[str] = []
    seen: set[tuple[str, int | None]] = set()
    todo: list[tuple[str, list[AuditEvent]]] = [(run_id, chain)]
    while todo:
        current, events = todo.pop()
        for event in events:
            detail = event.detail
            if event.type == BUDGET_RAISED:
                found.append(f"{event.actor} raised the budget of run {current}")
            elif event.type == RESUMED and detail.get("child"):
                await _follow(mesh, str(detail["child"]), None, seen, todo)
            elif event.type == RESUMED and detail.get("status") == "answered":
                by = str(detail.get("by") or event.actor)
                found.append(f"{by} answered {event.node} in run {current}")
            elif event.type == FORKED and isinstance(parent := detail.get("parent"), dict):
                found.extend(str(act) for act in detail.get("persons") or [])
                seq = parent.get("seq")
                await _follow(
                    mesh, str(parent.get("run_id")), seq if isinstance(seq, int) else 0, seen, todo
                )
    return list(dict.fromkeys(found))  # a recorded act and its parent's event say one thing


async def _follow(
    mesh: Mesh,
    run_id: str,
    upto: int | None,
    seen: set[tuple[str, int | None]],
    todo: list[tuple[str, list[AuditEvent]]],
) -> None:
    """Queue run ``run_id``'s chain (up to event ``upto``, all of it for None) once."""
    if (run_id, upto) in seen:
        return
    seen.add((run_id, upto))
    events = await read_events(mesh, run_id)
    todo.append((run_id, events if upto is None else events[:upto]))


__all__ = ["BUDGET_RAISED", "RESUMED", "persons_acts"]
