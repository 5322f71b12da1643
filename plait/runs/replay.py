"""Replaying a run's history: its state at any point of its audit chain.

The record is a run's state now; the audit chain says how it got there. Walking the
pure engine again over the visits the chain commits, each with the output stored for
it, passes through the same states (:func:`replay`). Budgets are lifted during a
replay (the run got through those visits once); what was spent is summed from the
chain (:func:`spent`), as :func:`~plait.runs.audit.verify` sums it. Retry and fork
(:mod:`plait.runs.rerun`) read past states this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from plait.errors import TemplateError
from plait.graphs import engine
from plait.graphs.compiled import CompiledGraph
from plait.graphs.engine import NodeResult
from plait.graphs.nodes import kind_of
from plait.graphs.nodes.base import NodeBase
from plait.graphs.state import RunState, RunUsage
from plait.mesh import Mesh
from plait.runs.audit import FORKED, RETRIED, AuditEvent, ChainSpend
from plait.runs.log import read_payload
from plait.runs.record import RunRecord

_UNLIMITED = {name: 1e18 for name in ("steps", "tokens", "dollars", "wall_seconds", "retries")}

FORK_STATE = frozenset({"ready", "visits", "outputs", "fanouts", "output_node", "seq"})
"""What a fork's first event pins of the state it starts from (what routing reads)."""


@dataclass(frozen=True, slots=True)
class ReplayedVisit:
    """One committed visit of a replay and the run's state right after it.

    Attributes:
        event: the visit's ``node.committed`` audit event.
        state: the state after it (budgets lifted, output values inline).
    """

    event: AuditEvent
    state: RunState

    @property
    def name(self) -> str:
        """The visit as ``node:visit``."""
        return f"{self.event.node}:{self.event.visit}"


@dataclass(frozen=True, slots=True)
class Replay:
    """What a replay walked through.

    Attributes:
        visits: each committed visit with the state right after it, in commit order.
        state: the state after the last event replayed (a fork's starting state when
            its chain has committed nothing yet).
    """

    visits: list[ReplayedVisit]
    state: RunState


async def replay(
    mesh: Mesh, spec: CompiledGraph, rec: RunRecord, events: list[AuditEvent]
) -> Replay:
    """Walk the engine again over the visits ``events`` commit, in their order.

    Each visit is claimed and completed with what its event and its stored output
    say (value, verdict, error, usage, times), so routing, fan-outs and joins come out
    as they did; a ``run.retried`` event reopens the run, and a fork's ``run.forked``
    event sets the state it started from.
    """
    state = engine.start(spec, rec.run_id, rec.input, now=rec.created_at, parent=rec.parent)
    state.budget_extra = dict(_UNLIMITED)
    visits = []
    for event in events:
        if event.type == RETRIED:  # the failed run went on with these nodes
            state = reopened(state, list(event.detail.get("nodes") or []))
            continue
        if event.type == FORKED:  # a fork's chain starts from the state it pins
            state = await _forked_from(mesh, state, event)
            continue
        if event.type != "node.committed" or event.node is None:
            continue
        key = event.node
        stored = await read_payload(mesh, event.output_ref) if event.output_ref else None
        payload = stored if isinstance(stored, dict) else {}
        node = engine.node_of(spec, state, key)
        state, _ = engine.claim(spec, state, key, nonce="replay", now=event.at)
        result = NodeResult(
            value=payload.get("value"),
            error=event.error,
            verdict=event.verdict,
            input_tokens=int(event.usage.get("input_tokens", 0)),
            output_tokens=int(event.usage.get("output_tokens", 0)),
            dollars=float(event.usage.get("dollars", 0.0)),
            items=_map_items(node, state, key),
            started_at=float(event.detail.get("started_at") or event.at),
            ended_at=float(event.detail.get("ended_at") or event.at),
        )
        state, _ = engine.complete(spec, state, key, result, now=event.at)
        visits.append(ReplayedVisit(event, state))
    return Replay(visits, state)


S = TypeVar("S", bound=RunState)


def reopened(state: S, ready: list[str]) -> S:
    """``state`` gone on again with ``ready``, as a retry does (a replay, or the retry
    itself)."""
    return state.model_copy(
        update={
            "status": "ready",
            "ready": ready,
            "attempts": {},
            "waiting": None,
            "retrying": {},
            "ended_detail": None,
            "error": None,
            "error_node": None,
            "error_visit": None,
        }
    )


async def _forked_from(mesh: Mesh, state: RunState, event: AuditEvent) -> RunState:
    """The state a fork started from, as its ``run.forked`` event pins it, with the
    output values read back from the refs it pins."""
    pinned = RunState.model_validate(
        {**state.model_dump(include={"run_id", "graph"}), **(event.detail.get("state") or {})}
    )
    outputs = {}
    for name, out in pinned.outputs.items():
        stored = await read_payload(mesh, out.ref) if out.ref else None
        value = stored.get("value") if isinstance(stored, dict) else out.value
        outputs[name] = out.model_copy(update={"value": value, "ref": None})
    return state.model_copy(
        update={
            **{name: getattr(pinned, name) for name in FORK_STATE},
            "outputs": outputs,
            "input": event.detail.get("input"),
        }
    )


def _map_items(node: NodeBase, state: RunState, key: str) -> dict[str, list[Any]]:
    """What a dispatcher's targets run over, read from the replayed outputs as its
    executor read them (nothing if they cannot be read: that visit failed)."""
    outputs = {name: out.value for name, out in state.outputs.items()}
    try:
        return kind_of(node).items(node, outputs, key)
    except TemplateError:
        return {}


def spent(events: list[AuditEvent]) -> RunUsage:
    """What the run had spent after ``events``, as the chain sums it."""
    spend = ChainSpend()
    for event in events:
        spend.add(event)
    return spend.as_usage()


__all__ = ["FORK_STATE", "Replay", "ReplayedVisit", "reopened", "replay", "spent"]
