"""Node executors: the I/O of one node visit, turned into a :class:`NodeResult`.

:func:`execute` sets the visit up (its trust, its budget, the template context) and
hands it to its node kind's executor (:mod:`plait.graphs.nodes`), which renders the
node's templates against the outputs it reads, does the node's work (model turn,
verdict, human answer, tool call, workers, fan-out plan, child graph) and reports the
outcome. It never raises for a failing node: the failure comes
back as ``NodeResult.error`` so the engine applies the graph's failure policy.
Cancellation always propagates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from plait.errors import (
    BudgetExhausted,
    ConfigError,
    DecisionClosed,
    PlaitError,
    TemplateError,
    ToolArgumentsInvalid,
    ToolError,
    ToolInDoubt,
    ToolNotFound,
)
from plait.graphs.agent_loop import ToolRejected
from plait.graphs.budget import VisitBudget
from plait.graphs.compiled import CompiledGraph
from plait.graphs.nodes.base import Visit
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.spec import Node
from plait.graphs.state import InstancePlan, RunState
from plait.graphs.template import MISSING, TemplateContext
from plait.tools import runs_trusted


async def execute(
    env: ExecEnv,
    g: CompiledGraph,
    state: RunState,
    key: str,
    visit: int,
    values: Mapping[str, Any],
) -> NodeResult:
    """Run one visit of ``key`` of ``g`` and report it; failures come back as ``error``.

    A call the budget refuses ends the visit with ``detail="budget_exhausted"`` and
    what it spent until then; the engine parks or fails the run on its budget.
    """
    plan = state.instance_of(key)
    node = g.node(plan.target if plan else key)
    trusted = _runs_trusted(g, state, node, key)
    budget = VisitBudget.of(_limits(g, state), state.usage, key)
    v = Visit(key, node, visit, values, g, trusted, budget)
    started = time.time()
    try:
        result = await g.kinds[node.id].execute(env, state, v, _context(state, v, plan))
    except ToolRejected as exc:
        result = budget.charge(NodeResult(error=str(exc), detail="tool_execution_failed"))
    except ToolInDoubt:
        raise  # as a crash mid-node: the wake is delivered again, on_indeterminate decides
    except PlaitError as exc:
        failed = NodeResult(error=str(exc), detail=_detail_of(exc), retryable=exc.retryable)
        result = budget.charge(failed)
    result.started_at, result.ended_at = started, time.time()
    result.tainted = result.tainted or not trusted  # what reads outside content carries it
    return result


def _limits(graph: CompiledGraph, state: RunState) -> dict[str, float | None]:
    """The run's budget limits: the graph's budget plus any raise a person granted."""
    b, extra = graph.budget, state.budget_extra
    base: dict[str, float | None] = {
        "steps": b.steps,
        "tokens": b.tokens,
        "dollars": b.dollars,
        "wall_seconds": b.wall_seconds,
        "retries": b.retries,
    }
    for name, value in base.items():
        if value is not None:
            base[name] = value + extra.get(name, 0.0)
    return base


def _runs_trusted(graph: CompiledGraph, state: RunState, node: Node, key: str) -> bool:
    """Whether a visit runs trusted: it reads no tainted output or input, and carries
    no conversation that took in outside content on an earlier visit."""
    if key in state.tainted_history and graph.kinds[node.id].carries_history(node):
        return False
    tainted = [k for k, out in state.outputs.items() if out.tainted]
    reads: frozenset[str] | set[str] = graph.read[node.id]
    if state.input_tainted and node.id in graph.reads_run_input:
        tainted.append("input")
        reads = {*reads, "input"}
    return not tainted or runs_trusted(reads, tainted)


def _detail_of(exc: PlaitError) -> str:
    if isinstance(exc, BudgetExhausted):
        return "budget_exhausted"
    # Trying again cannot mend these: the node fails at once and says what to fix.
    if isinstance(exc, ConfigError | ToolNotFound | ToolArgumentsInvalid):
        return "configuration_error"
    if exc.retryable:
        return "transient_error"
    if isinstance(exc, TemplateError):
        return "template_error"
    if isinstance(exc, ToolError):
        return "tool_execution_failed"
    if isinstance(exc, DecisionClosed):
        return "decision_closed"  # expired (policy fail) or cancelled without an answer
    return "node_failed"


def _context(state: RunState, v: Visit, plan: InstancePlan | None) -> TemplateContext:
    item: Any = MISSING
    if plan is not None and plan.item_index is not None:
        fanout = next(f for f in state.fanouts.values() if v.key in f.instances)
        item = fanout.items[plan.target][plan.item_index]
    return TemplateContext(input=state.input, outputs=v.values, item=item)


__all__ = ["Visit", "execute"]
