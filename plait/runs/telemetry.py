"""What a run's spans and metrics say: a visit's outcome, a commit's audit hash, the
run's own span at its end (see :mod:`plait.telemetry`).

Called only while tracing (or counting) is on: the callers test ``STATE`` first.
"""

from __future__ import annotations

from typing import Any

from plait.graphs.compiled import CompiledGraph
from plait.graphs.result import NodeResult
from plait.runs.record import RunRecord
from plait.telemetry import STATE, fail, metrics, run_span
from plait.telemetry.spans import recording_span, set_on


def annotate_visit(result: NodeResult, rec: RunRecord) -> None:
    """Set a visit's outcome on its span: verdict, status, tokens, dollars, taint."""
    span = recording_span()
    if span is None:
        return  # not sampled: nothing to build
    status = "waiting" if result.waiting is not None else "failed" if result.error else "done"
    attributes: dict[str, Any] = {
        "plait.node.status": status,
        "plait.node.verdict": result.verdict,
        "plait.node.detail": result.detail,
        "plait.taint": result.tainted,
        "gen_ai.usage.input_tokens": result.input_tokens or None,
        "gen_ai.usage.output_tokens": result.output_tokens or None,
        "plait.dollars": result.dollars,
    }
    if result.waiting is not None:
        attributes["plait.waiting.kind"] = result.waiting.kind
        attributes["plait.decision.id"] = result.waiting.decision_id
        attributes["plait.child.run"] = result.waiting.child
    set_on(span, attributes)
    if result.error:
        fail(span, result.error)


def committed(
    spec: CompiledGraph | None,
    before: RunRecord,
    new: RunRecord,
    bodies: list[dict[str, Any]],
) -> None:
    """After a transition from ``before`` to ``new`` committed, with audit events
    ``bodies``: count it, set the audit hash, the budget left and what the run waits on
    on the current span, and at the run's end emit the run's span."""
    metrics.transition(new.status, before.status, new.waiting.kind if new.waiting else None)
    if not STATE.tracing:
        return
    span = recording_span()
    if span is not None:  # sampled: built only for a span that keeps it
        attributes: dict[str, Any] = {
            "plait.run.status": new.status,
            "plait.audit.hash": bodies[-1].get("hash") if bodies else None,
            "plait.audit.seq": new.audit_seq,
        }
        if new.waiting is not None:
            attributes["plait.decision.id"] = new.waiting.decision_id
        if spec is not None:
            attributes.update(budget_left(spec, new))
        set_on(span, attributes)
    if new.terminal and not before.terminal:
        end_run(new, spec)


def budget_left(spec: CompiledGraph, rec: RunRecord) -> dict[str, Any]:
    """``plait.budget.*_left``: what the run may still spend, for each limit it has."""
    budget, used, extra = spec.budget, rec.usage, rec.budget_extra
    left: dict[str, Any] = {
        "plait.budget.steps_left": budget.steps + extra.get("steps", 0) - used.steps
    }
    if budget.dollars is not None:
        left["plait.budget.dollars_left"] = budget.dollars + extra.get("dollars", 0) - used.dollars
    if budget.tokens is not None:
        spent = used.input_tokens + used.output_tokens
        left["plait.budget.tokens_left"] = budget.tokens + extra.get("tokens", 0) - spent
    return left


def end_run(rec: RunRecord, spec: CompiledGraph | None = None) -> None:
    """Emit run ``rec``'s span, now that it ended."""
    attributes: dict[str, Any] = {
        "plait.graph": f"{rec.graph.agent}/{rec.graph.name}",
        "plait.graph.version": rec.graph.version,
        "plait.run.parent": rec.parent,
        "plait.run.detail": rec.ended_detail,
        "gen_ai.usage.input_tokens": rec.usage.input_tokens,
        "gen_ai.usage.output_tokens": rec.usage.output_tokens,
        "plait.dollars": rec.usage.dollars,
        "plait.steps": rec.usage.steps,
        "plait.audit.hash": rec.last_hash or None,
    }
    if spec is not None:
        attributes.update(budget_left(spec, rec))
    run_span(
        rec.run_id,
        rec.trace,
        name=f"{rec.graph.agent}/{rec.graph.name}",
        started_at=rec.created_at,
        status=rec.status,
        attributes=attributes,
    )


__all__ = ["annotate_visit", "budget_left", "committed", "end_run"]
