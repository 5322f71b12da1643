"""Retry and fork: a failed run going on from the node that failed, and a new run
starting from the state after one of another run's committed visits.

Both need a run's state at some point of its history, which :func:`~plait.runs.replay.replay`
rebuilds from the audit chain.

- :func:`retry_run` keeps every committed visit: the failed run's own record goes on
  with the nodes that were ready or in flight when it failed, the failed node first
  (as its next visit), pinned to the same graph version; a ``run.retried`` event in its
  chain says who retried it and what had failed.
- :func:`fork_run` starts a new run, same pinned version, whose state is its parent's
  after the visit named; only what comes after runs. Its first audit event
  (``run.forked``) names the parent's event it starts after (run id, seq and hash),
  pins copies of the outputs it starts with and the state it starts from, and carries
  what the parent had spent up to there. A fork is tainted wherever its parent may
  have been: the chain does not say which visits read outside content, so if any of
  the parent's did, every output the fork starts with counts as tainted.

A fork re-uses what people decided before the visit it starts after: their answers
(a human node's, a tool's approval) and the budget they raised. Only a person may do
that (DESIGN.md, "Principals"): a fork whose prefix holds such an act (see
:mod:`plait.runs.persons`) by anyone else is refused, and nothing is written. A fork
from before every person's act asks its own questions again, so anyone may start it.
"""

from __future__ import annotations

import enum
import time
from typing import Any

from pydantic import BaseModel

from plait.actors import ActorRecord, load_partitions
from plait.decisions import Human, Principal, require_human
from plait.errors import RunNotFound, RunNotRetryable, VersionConflict, VisitNotFound
from plait.graphs import engine
from plait.graphs.compiled import CompiledGraph
from plait.ids import RunId, new_run_id
from plait.mesh import Mesh
from plait.runs.audit import FORKED, RETRIED, AuditEvent, output_digest, read_events
from plait.runs.commit import RunCommit
from plait.runs.log import parse_entry, read_log, read_payload
from plait.runs.mesh_ports import history_part_key
from plait.runs.persons import persons_acts
from plait.runs.record import (
    OWNER_KIND,
    RunRecord,
    audit_key,
    history_key,
    output_key,
    owner_id,
)
from plait.runs.replay import FORK_STATE, ReplayedVisit, reopened, replay, spent
from plait.runs.start import OWNER_CONCURRENCY
from plait.runs.store import RunStore, read_record


class Keep(enum.Enum):
    """The sentinel of :func:`fork_run`'s ``input``: keep the parent's input."""

    INPUT = "parent's input"


KEEP_INPUT = Keep.INPUT
"""Fork with the parent run's input (the default)."""


# -- retry ------------------------------------------------------------------------------


async def retry_run(mesh: Mesh, run_id: RunId, *, by: str) -> RunRecord:
    """Continue a failed run from the node that failed; see the module docstring.

    Raises:
        RunNotFound: there is no such run.
        RunNotRetryable: the run did not fail, failed on its budget, or left nothing
            to run again.
        GraphError: the graph version it is pinned to changed in the store.
    """
    await load_partitions(mesh)  # the retry's wakes go to the owner's partition
    while True:
        rec, version = await read_record(mesh, run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r} in {mesh.url}")
        if rec.status != "failed":
            raise RunNotRetryable(run_id, rec.status, "only a failed run can be retried")
        if rec.ended_detail == "budget_exhausted":
            raise RunNotRetryable(
                run_id,
                rec.status,
                f"it failed on its budget ({rec.error}), not on a node: a retry would "
                "fail again (fork it from an earlier visit instead)",
            )
        spec = await RunStore(mesh).graph(rec)
        ready = await _to_run_again(mesh, spec, rec)
        if not ready:
            raise RunNotRetryable(run_id, rec.status, "nothing of it is left to run again")
        now = time.time()
        retried = reopened(rec, ready).model_copy(update={"updated_at": now})
        event = AuditEvent(
            seq=0,
            type=RETRIED,
            actor=by,
            at=now,
            detail={
                "nodes": ready,
                "failed": {
                    "node": rec.error_node,
                    "visit": rec.error_visit,
                    "ended_detail": rec.ended_detail,
                    "error": rec.error,
                },
            },
        )
        try:
            return await RunCommit(mesh).reopen(spec, retried, version, event)
        except VersionConflict:
            continue


async def _to_run_again(mesh: Mesh, spec: CompiledGraph, rec: RunRecord) -> list[str]:
    """The nodes a retry runs: those ready or in flight when the run failed (a failed
    node first), or a failed fan-out's failed instances."""
    if rec.ended_detail == "fanin_upstream_failed":
        return [
            key
            for fanout in rec.fanouts.values()
            for key, plan in fanout.instances.items()
            if fanout.policies.get(plan.target) == "drain_then_fail"
            and (out := rec.outputs.get(key)) is not None
            and out.error is not None
        ]
    events = await read_events(mesh, rec.run_id)
    cut = len(events)
    if rec.error_node is not None:
        # The failing visit is the last one committed: the state just before it says
        # what else was ready or in flight then (the failure dropped those).
        cut = next(
            (
                index
                for index in range(len(events) - 1, -1, -1)
                if events[index].type == "node.committed"
                and events[index].node == rec.error_node
                and events[index].error is not None
            ),
            cut,
        )
    pending = engine.claimable((await replay(mesh, spec, rec, events[:cut])).state)
    if rec.error_node is None:
        return pending
    return [rec.error_node, *(key for key in pending if key != rec.error_node)]


# -- fork -------------------------------------------------------------------------------


async def fork_run(
    mesh: Mesh,
    run_id: RunId,
    at: str,
    *,
    input: Any = KEEP_INPUT,
    input_untrusted: bool = False,
    by: Principal,
) -> RunRecord:
    """Start a new run from the state after visit ``at`` of run ``run_id``.

    Args:
        mesh: the mesh holding both runs.
        run_id: the parent run.
        at: ``node`` (its last committed visit) or ``node:visit``, as ``graph
            inspect`` shows them.
        input: the fork's input (default: the parent's).
        input_untrusted: a new ``input`` is outside content.
        by: who forks it (in its first audit event).

    Raises:
        NotPermitted: ``by`` is no person and the fork would re-use a person's answer
            or budget raise (see the module docstring); nothing is written.
        RunNotFound: there is no such run.
        VisitNotFound: ``at`` is no committed visit of it, or one after which nothing
            is left to run; the error lists those a fork may start after.
        GraphError: the graph version it is pinned to changed in the store.
    """
    await load_partitions(mesh)
    rec, _ = await read_record(mesh, run_id)
    if rec is None:
        raise RunNotFound(f"no run {run_id!r} in {mesh.url}")
    spec = await RunStore(mesh).graph(rec)
    events = await read_events(mesh, run_id)
    visits = (await replay(mesh, spec, rec, events)).visits
    forkable = [v for v in visits if engine.claimable(v.state)]
    valid = [v.name for v in forkable]
    target = _find(run_id, at, visits, valid)
    if not engine.claimable(target.state):
        raise VisitNotFound(run_id, at, valid, "leaves nothing to run after it")
    fork_id = new_run_id()
    now = time.time()
    chain = events[: target.event.seq]
    acts = await persons_acts(mesh, run_id, chain)
    if acts and not isinstance(by, Human):
        more = f" and {len(acts) - 1} more" if len(acts) > 1 else ""
        require_human(
            by,
            f"fork a run past a person's decision ({acts[0]}{more}): fork it from a visit "
            "before that, which asks again, or fork it as a person",
        )
    tainted = (
        rec.input_tainted
        or bool(rec.tainted_history)
        or any(out.tainted for out in rec.outputs.values())
    )
    puts, pins, outputs = {}, {}, {}
    for name, out in target.state.outputs.items():
        stored = await read_payload(mesh, out.ref or output_key(run_id, name, out.visit))
        copy = out.model_copy(update={"value": None, "tainted": out.tainted or tainted})
        if stored is not None or out.value is not None:
            payload = stored if stored is not None else {"value": out.value}
            ref = output_key(fork_id, name, out.visit)
            puts[ref] = payload
            pins[name] = {"ref": ref, "sha256": output_digest(payload)}
            copy.ref = ref
        outputs[name] = copy
    # The fork's conversations start as copies under keys of their own (a layout
    # MeshHistories reads beside log entries): the parent's entries hold its visits.
    for key, done in target.state.visits.items():
        async for entry in mesh.scan(f"{history_key(run_id, key)}/"):
            tail = entry.key.rpartition("/")[2]
            if tail.isdigit() and int(tail) <= done:
                puts[history_part_key(fork_id, key, int(tail))] = entry.value
    async for logged in read_log(mesh, run_id):
        for key, part in logged.history.items():
            done = target.state.visits.get(key, 0)
            if isinstance(part, dict) and int(part.get("visit", 0)) <= done:
                visit = int(part["visit"])
                puts[history_part_key(fork_id, key, visit)] = list(part.get("messages") or [])
    extra: dict[str, float] = {}
    for event in chain:
        if event.type == "budget.raised":
            for name, amount in dict(event.detail.get("extra") or {}).items():
                extra[name] = extra.get(name, 0.0) + float(amount)
    usage = spent(chain).model_copy(update={"wall_seconds": target.state.usage.wall_seconds})
    new_input = rec.input if input is KEEP_INPUT else input
    state = target.state.model_copy(
        update={
            "run_id": fork_id,
            "input": new_input,
            "input_tainted": rec.input_tainted if input is KEEP_INPUT else input_untrusted,
            "status": "ready",
            "outputs": outputs,
            "tainted_history": list(rec.tainted_history),
            "decisions": {},
            "usage": usage,
            "budget_extra": extra,
            "created_at": now,
            "updated_at": now,
            "parent": None,
        }
    )
    fork = RunRecord(**state.model_dump(), model=rec.model, workspace=rec.workspace)
    detail: dict[str, Any] = {
        "parent": {
            "run_id": run_id,
            "seq": target.event.seq,
            "hash": target.event.hash,
            "node": target.event.node,
            "visit": target.event.visit,
        },
        "input": new_input,
        "graph": rec.graph.model_dump(),
        "model": rec.model,
        "steps": usage.steps,
        "outputs": pins,
        "state": fork.model_dump(mode="json", include=set(FORK_STATE)),
    }
    if fork.input_tainted:
        detail["input_untrusted"] = True
    if acts:  # so a fork of this fork knows, even once the parent is pruned
        detail["persons"] = [str(act) for act in acts]
    event = AuditEvent(
        seq=0,
        type=FORKED,
        actor=by.name,
        at=now,
        usage={
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "dollars": usage.dollars,
        },
        detail=detail,
    )
    owner = ActorRecord(
        id=owner_id(fork_id),
        kind=OWNER_KIND,
        config={"max_concurrency": OWNER_CONCURRENCY},
        created_at=now,
    )
    return await RunCommit(mesh).reopen(spec, fork, 0, event, owner=owner, puts=puts)


class ForkOrigin(BaseModel):
    """Where a fork started: its parent's event, as its first audit event names it.

    Attributes:
        run_id: the parent run.
        seq: the parent's audit event the fork starts after.
        hash: that event's hash.
        node: the node of the visit it committed.
        visit: that visit.
    """

    run_id: str
    seq: int
    hash: str
    node: str | None = None
    visit: int | None = None


async def fork_origin(mesh: Mesh, run_id: str) -> ForkOrigin | None:
    """Where run ``run_id`` was forked from (None for a run that is no fork)."""
    entry = await mesh.get(audit_key(run_id, 1))
    first = parse_entry(entry.key, entry.value).events[:1] if entry is not None else []
    value = first[0] if first and isinstance(first[0], dict) else {}
    parent = value.get("detail", {}).get("parent") if value.get("type") == FORKED else None
    return ForkOrigin.model_validate(parent) if isinstance(parent, dict) else None


def _find(run_id: str, at: str, visits: list[ReplayedVisit], valid: list[str]) -> ReplayedVisit:
    """The committed visit ``at`` names: ``node:visit``, or a node's last visit."""
    node, _, number = at.rpartition(":")
    if not node or not number.isdigit():
        node, number = at, ""
    found = [v for v in visits if v.event.node == node]
    if number:
        found = [v for v in found if v.event.visit == int(number)]
    if not found:
        raise VisitNotFound(run_id, at, valid, "is no committed visit of it")
    return found[-1]


__all__ = ["KEEP_INPUT", "ForkOrigin", "Keep", "fork_origin", "fork_run", "retry_run"]
