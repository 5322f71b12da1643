"""The pure step engine: (compiled graph, run state, node result) -> (state, events).

Nothing here does I/O or reads a clock: the caller passes ``now``, executors do the
model calls, tools and decisions. The in-session runner loops these functions in
memory; the durable owner actor applies one per mailbox message and commits the
returned state with compare-and-swap. Both therefore walk the same trajectory.

A node runs in three steps: :func:`claim` (fence it with a fresh nonce; budgets are
checked before a visit starts), the executor, then :func:`complete` (record the output,
route to what comes next, check budgets again, and finish the run when nothing is
left). Every function returns a new state and never mutates its argument.

Each function takes the graph compiled (:class:`~plait.graphs.compiled.CompiledGraph`),
never a spec: whoever holds a run compiles its graph once (the in-session runner at
its start, a serving process through :meth:`plait.runs.store.RunStore.graph`); what
is particular to a node kind (a fan-out's instances, a verifier's verdict route, a
fan-in's join) is asked of the kind (:mod:`plait.graphs.nodes`).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel

from plait.graphs.compiled import CompiledGraph
from plait.graphs.events import (
    Event,
    NodeBudgetExhausted,
    NodeCommitted,
    NodeRetrying,
    NodeWaiting,
    RunEventType,
    RunStatusChanged,
    VisitUsage,
)
from plait.graphs.nodes.base import DEFAULT_RETRY, Spawn
from plait.graphs.result import NodeResult
from plait.graphs.spec import Node
from plait.graphs.state import (
    Attempt,
    FanOutState,
    GraphRef,
    InstancePlan,
    NodeOutput,
    RunState,
    RunStatus,
    Waiting,
    copied,
)


def start(
    g: CompiledGraph, run_id: str, input: Any, *, now: float, parent: str | None = None
) -> RunState:
    """The initial state of a run of ``g``: its entry node ready."""
    return RunState(
        run_id=run_id,
        graph=GraphRef(agent=g.agent, name=g.spec.name, version=g.spec.version, sha256=g.sha256),
        input=input,
        ready=[g.entry_id],
        created_at=now,
        updated_at=now,
        parent=parent,
    )


def node_of(graph: CompiledGraph, state: RunState, key: str) -> Node:
    """The spec node a ready key runs: itself, or the target of a fan-out instance."""
    plan = state.instance_of(key)
    return graph.node(plan.target if plan else key)


_WAITING_STATUS: dict[str, RunStatus] = {
    "approval": "waiting_approval",
    "subgraph": "waiting_child",
}


def claimable(state: RunState) -> list[str]:
    """Ready keys no one has claimed, in order; empty once the run is parked or over."""
    if state.terminal or state.waiting is not None:
        return []
    return [key for key in state.ready if key not in state.attempts]


def claim(
    g: CompiledGraph,
    state: RunState,
    key: str,
    *,
    nonce: str,
    now: float,
    host: str = "",
    wake: str | None = None,
    begun: bool | None = None,
) -> tuple[RunState, Attempt | None]:
    """Fence ``key`` for one visit, or end/park the run if its budget is spent.

    A key already claimed is an interrupted attempt being taken over: the new attempt
    keeps its visit number and counts as a retry. ``begun`` is recorded as
    :class:`~plait.graphs.state.Attempt` says.

    Returns:
        The new state and the attempt; the attempt is None when the budget stopped the
        run instead (the state then says how), or the run had already ended.
    """
    if state.terminal:
        return _fork(state), None
    prior = state.attempts.get(key)
    usage = state.usage
    if prior is not None:
        usage = usage.model_copy(update={"retries": usage.retries + 1})
    attempts = state.attempts.copy()
    s = _fork(state, attempts=attempts, usage=usage, status="running", updated_at=now)
    reason = exhausted(g, s, starting=prior is None)
    if reason is not None:
        return _exhaust(g, s, reason, now), None
    visit = prior.visit if prior else s.visits.get(key, 0) + 1
    attempt = _built(
        _NO_ATTEMPT,
        node=key,
        visit=visit,
        nonce=nonce,
        host=host,
        wake=wake,
        started_at=now,
        begun=begun,
    )
    s.attempts[key] = attempt
    return s, attempt


def complete(
    spec: CompiledGraph, state: RunState, key: str, result: NodeResult, *, now: float
) -> tuple[RunState, list[Event]]:
    """Apply the result of running ``key``: record, route, check budgets, maybe finish.

    A result arriving after the run ended (a straggler of a cancelled or failed run)
    changes nothing.
    """
    if state.terminal:
        return _fork(state), []
    waiting = result.waiting
    u = state.usage
    usage = _built(
        u,
        steps=u.steps if waiting or result.detail == "budget_exhausted" else u.steps + 1,
        input_tokens=u.input_tokens + result.input_tokens,
        output_tokens=u.output_tokens + result.output_tokens,
        dollars=u.dollars + result.dollars,
        wall_seconds=u.wall_seconds + max(0.0, result.ended_at - result.started_at),
        retries=u.retries,
    )
    if waiting is not None:
        status: RunStatus = _WAITING_STATUS.get(waiting.kind, "waiting_human")
        s = _step_fork(state, usage=usage, updated_at=now, waiting=waiting, status=status)
    elif result.detail == "budget_exhausted":
        s = _step_fork(state, usage=usage, updated_at=now)
    else:
        s = _step_fork(state, usage=usage, updated_at=now, seq=state.seq + 1)
    attempt = s.attempts.pop(key, None)
    visit = attempt.visit if attempt else s.visits.get(key, 0) + 1
    events: list[Event] = []

    if waiting is not None:
        if waiting.decision_id:
            s.decisions[key] = waiting.decision_id
        events.append(NodeWaiting(key, visit, waiting.ask, waiting.decision_id, _usage_of(result)))
        return s, events
    if result.detail == "budget_exhausted":
        # A call inside the visit was refused: nothing is committed, the node stays
        # ready for after a raise, and the run parks or fails as between visits.
        s = _exhaust(spec, s, result.error or "the budget is spent", now)
        events.append(NodeBudgetExhausted(key, visit, result.error, _usage_of(result)))
        events.extend(status_events(state, s))
        return s, events
    if result.history is not None and result.tainted and key not in s.tainted_history:
        s.tainted_history = [*s.tainted_history, key]  # its conversation took in outside content

    if result.error is not None and result.retryable and _retry(spec, s, key):
        events.append(
            NodeRetrying(key, visit, result.error, s.retrying[key], retry_delay_s(spec, s, key))
        )
        reason = exhausted(spec, s, starting=False)
        if reason is not None:
            s = _exhaust(spec, s, reason, now)
        _settle(s)
        events.extend(status_events(state, s))
        return s, events
    failures = s.retrying.pop(key, 0)
    if result.error is not None and failures:
        result = replace(result, error=f"{result.error} (after {failures + 1} tries)")
    _remove_ready(s, key)
    s.visits[key] = visit
    s.outputs[key] = _built(
        _NO_OUTPUT,
        value=result.value,
        error=result.error,
        visit=visit,
        seq=s.seq,
        verdict=result.verdict,
        tainted=result.tainted,
        at=now,
    )
    events.append(_committed_event(key, visit, s.seq, result))

    plan = s.instance_of(key)
    if result.error is not None:
        _on_error(spec, s, key, plan, result)
    elif plan is not None:
        _instance_done(spec, s, key, plan, now)
    else:
        _route(spec, s, key, spec.node(key), result)

    if not s.terminal:
        reason = exhausted(spec, s, starting=False)
        if reason is not None:
            s = _exhaust(spec, s, reason, now)
    _settle(s)
    events.extend(status_events(state, s))
    return s, events


def retry_delay_s(graph: CompiledGraph, state: RunState, key: str) -> float:
    """Seconds to wait before the next try of ``key``, which is being retried (0 if not).

    Exponential from the node's ``initial_s`` up to ``max_s``, times a jitter in
    [0.5, 1) drawn from the run, the node and the try, so that runs failing together
    spread their retries yet a replay waits the same.
    """
    failures = state.retrying.get(key, 0)
    if not failures:
        return 0.0
    policy = graph.node(_target(state, key)).retry or DEFAULT_RETRY
    base = min(policy.max_s, policy.initial_s * 2.0 ** (failures - 1))
    digest = hashlib.sha256(f"{state.run_id}/{key}/{failures}".encode()).digest()
    return base * (0.5 + int.from_bytes(digest[:4], "big") / 2**33)


def resume(state: RunState, *, now: float) -> RunState:
    """Unpark a run whose decision was answered, so its waiting node runs again."""
    s = _fork(state)
    if s.terminal:
        return s
    s.waiting = None
    s.status = "running" if s.attempts else "ready"
    s.updated_at = now
    return s


def raise_budget(state: RunState, extra: dict[str, float], *, now: float) -> RunState:
    """Add a person's budget raise (``steps``, ``tokens``, ...) and unpark the run."""
    s = _fork(state, budget_extra=state.budget_extra.copy())
    for name, amount in extra.items():
        s.budget_extra[name] = s.budget_extra.get(name, 0.0) + float(amount)
    return resume(s, now=now)


def fail(state: RunState, detail: str, error: str | None, *, now: float) -> RunState:
    """End the run as failed with ``detail`` (and an error message)."""
    s = _fork(state)
    s.status, s.ended_detail, s.error = "failed", detail, error
    s.ready, s.attempts, s.waiting, s.retrying = [], {}, None, {}
    s.updated_at = now
    return s


def cancel(state: RunState, *, now: float) -> RunState:
    """Stop the run at once; nothing runs again."""
    s = fail(state, "cancelled", None, now=now)
    s.status = "cancelled"
    return s


def exhausted(g: CompiledGraph, state: RunState, *, starting: bool) -> str | None:
    """Which budget is spent, if any; ``starting`` also refuses a visit past the steps."""
    b, u, extra = g.spec.budget, state.usage, state.budget_extra
    if starting:
        limit = b.steps + extra.get("steps", 0.0)
        # Visits in flight will commit steps too: count them, or N concurrent claims
        # could all start on the last step left.
        if u.steps + len(state.attempts) >= limit:
            return f"steps: {u.steps} of {limit:g} used" + (
                f", {len(state.attempts)} in flight" if state.attempts else ""
            )
    for name, base, spent in (
        ("tokens", b.tokens, u.tokens),
        ("dollars", b.dollars, u.dollars),
        ("wall_seconds", b.wall_seconds, u.wall_seconds),
        ("retries", b.retries, u.retries),
    ):
        if base is not None and spent > base + extra.get(name, 0.0):
            return f"{name}: {spent:g} spent, limit {base + extra.get(name, 0.0):g}"
    return None


# -- internals ----------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)


def _built(template: _M, **fields: Any) -> _M:
    """``template`` with ``fields``, not validated: for the records a step builds from
    values typed already (an attempt, an output, the usage), where validating them
    again cost more than the rest of building them."""
    return copied(template, fields)


_NO_ATTEMPT = Attempt(node="", visit=0, nonce="")
_NO_OUTPUT = NodeOutput()


def _fork(state: RunState, **changes: Any) -> RunState:
    """A copy of ``state`` with ``changes``.

    The engine replaces records (outputs, attempts, fan-out plans, the waiting, the
    usage) and never changes one in place, so the copy shares them; a container the
    caller changes in place is passed in ``changes`` as its own copy (see
    :func:`_step_fork`): a deep copy per step cost more than the rest of the step.
    """
    return copied(state, changes)


def _step_fork(state: RunState, **changes: Any) -> RunState:
    """:func:`_fork` owning every container :func:`complete` changes in place."""
    return copied(
        state,
        {
            "ready": state.ready.copy(),
            "attempts": state.attempts.copy(),
            "outputs": state.outputs.copy(),
            "visits": state.visits.copy(),
            "decisions": state.decisions.copy(),
            "fanouts": state.fanouts.copy(),
            "retrying": state.retrying.copy(),
            **changes,
        },
    )


def _exhaust(spec: CompiledGraph, s: RunState, reason: str, now: float) -> RunState:
    if spec.budget.on_exhausted == "escalate":
        s.waiting = Waiting(
            node="budget",
            kind="budget",
            ask=f"The run's budget is exhausted ({reason}). Raise it to go on?",
        )
        s.status = "waiting_human"
        s.updated_at = now
        return s
    return fail(s, "budget_exhausted", reason, now=now)


def _target(state: RunState, key: str) -> str:
    plan = state.instance_of(key)
    return plan.target if plan else key


def _retry(spec: CompiledGraph, s: RunState, key: str) -> bool:
    """Count a transient failure of ``key``; True if its policy tries it again.

    A try that failed commits no step, only a retry (its tokens and time still count).
    """
    policy = spec.node(_target(s, key)).retry or DEFAULT_RETRY
    failures = s.retrying.get(key, 0) + 1
    if failures >= policy.attempts:
        return False
    s.retrying[key] = failures
    u = s.usage
    s.usage = u.model_copy(update={"steps": u.steps - 1, "retries": u.retries + 1})
    return True


def _remove_ready(s: RunState, key: str) -> None:
    if key in s.ready:
        s.ready.remove(key)


def _add_ready(s: RunState, key: str) -> None:
    if key not in s.ready:
        s.ready.append(key)


def _committed_event(key: str, visit: int, seq: int, r: NodeResult) -> NodeCommitted:
    return NodeCommitted(
        key, visit, seq, r.verdict, r.error, _usage_of(r), r.started_at, r.ended_at
    )


def _usage_of(r: NodeResult) -> VisitUsage:
    return VisitUsage(r.input_tokens, r.output_tokens, r.dollars)


def _route(spec: CompiledGraph, s: RunState, key: str, node: Node, result: NodeResult) -> None:
    kind = spec.kinds[node.id]
    if kind.spawn is not None:
        _spawn(spec, s, key, kind.spawn(node, result))
        return
    targets = kind.next_nodes(node, result, spec.succ[key])
    if kind.sink or not targets:
        s.output_node = key
    for target in targets:
        if _inputs_complete(spec, s, target):
            _add_ready(s, target)


def _inputs_complete(spec: CompiledGraph, s: RunState, target: str) -> bool:
    """A joining node fires once every predecessor has an output newer than its last firing."""
    if not spec.kind(target).joins:
        return True
    last = s.outputs[target].seq if target in s.outputs else 0
    return all(
        pred in s.outputs and s.outputs[pred].seq > last and s.outputs[pred].error is None
        for pred in spec.pred[target]
    )


def _spawn(spec: CompiledGraph, s: RunState, key: str, spawns: list[Spawn]) -> None:
    fanout = FanOutState(node=key)
    for spawn in spawns:
        target = spawn.target
        fanout.policies[target] = spawn.on_failure
        if spawn.items is not None:
            fanout.items[target] = spawn.items
        for index in range(spawn.count):
            instance = f"{target}[{index}]"
            fanout.instances[instance] = InstancePlan(
                target=target,
                index=index,
                item_index=index if spawn.items is not None else None,
            )
            s.outputs.pop(instance, None)
    s.fanouts[key] = fanout
    for instance in fanout.instances:
        _add_ready(s, instance)
    for target in fanout.policies:
        if not any(p.target == target for p in fanout.instances.values()):
            # An empty map: nothing to wait for, so the target is done with no outputs.
            _aggregate(s, fanout, target, s.updated_at)
            _route(spec, s, target, spec.node(target), NodeResult())


def _fanout_of(s: RunState, key: str) -> FanOutState:
    return next(f for f in s.fanouts.values() if key in f.instances)


def _siblings_done(s: RunState, fanout: FanOutState, target: str) -> bool:
    return all(
        k in s.outputs and k not in s.ready and k not in s.attempts
        for k, p in fanout.instances.items()
        if p.target == target
    )


def _instance_done(
    spec: CompiledGraph, s: RunState, key: str, plan: InstancePlan, now: float
) -> None:
    fanout = _fanout_of(s, key)
    if not _siblings_done(s, fanout, plan.target):
        return
    failed = [
        k
        for k, p in fanout.instances.items()
        if p.target == plan.target and s.outputs[k].error is not None
    ]
    if failed and fanout.policies.get(plan.target) == "drain_then_fail":
        errors = "; ".join(f"{k}: {s.outputs[k].error}" for k in failed)
        _end_failed(s, "fanin_upstream_failed", errors, now)
        return
    _aggregate(s, fanout, plan.target, now)
    _route(spec, s, plan.target, spec.node(plan.target), NodeResult())


def _aggregate(s: RunState, fanout: FanOutState, target: str, now: float) -> None:
    values: list[Any] = []
    tainted = False
    for k, p in sorted(fanout.instances.items(), key=lambda kv: kv[1].index):
        if p.target != target:
            continue
        out = s.outputs[k]
        tainted = tainted or out.tainted
        values.append({"instance": k, "error": out.error} if out.error is not None else out.value)
    visit = s.visits.get(target, 0) + 1
    s.visits[target] = visit
    s.outputs[target] = NodeOutput(value=values, visit=visit, seq=s.seq, tainted=tainted, at=now)


def _on_error(
    spec: CompiledGraph, s: RunState, key: str, plan: InstancePlan | None, result: NodeResult
) -> None:
    policy = "fail_fast" if plan is None else _fanout_of(s, key).policies.get(plan.target)
    if plan is None or policy in ("fail_fast", None):
        _end_failed(s, result.detail or "node_failed", f"{key}: {result.error}", s.updated_at)
        s.error_node, s.error_visit = key, s.visits.get(key)
    else:  # drain_then_fail and collect both wait for the siblings
        _instance_done(spec, s, key, plan, s.updated_at)


def _end_failed(s: RunState, detail: str, error: str, now: float) -> None:
    s.status, s.ended_detail, s.error = "failed", detail, error
    s.ready, s.attempts, s.waiting, s.retrying = [], {}, None, {}
    s.updated_at = now


def _settle(s: RunState) -> None:
    if s.terminal or s.waiting is not None:
        return
    if not s.ready and not s.attempts:
        s.status = "done"
        s.ended_detail = "completed"
    else:
        s.status = "running" if s.attempts else "ready"


def status_events(before: RunState, after: RunState) -> list[Event]:
    """The ``run.*`` event of a status change from ``before`` to ``after``, if any."""
    if after.status == before.status or after.status in ("ready", "running"):
        return []
    kind: RunEventType = _RUN_EVENTS[after.status]
    waiting = after.waiting.model_dump() if after.waiting is not None else None
    return [RunStatusChanged(kind, after.status, after.ended_detail, after.error, waiting)]


_RUN_EVENTS: dict[str, RunEventType] = {
    "done": "run.done",
    "failed": "run.failed",
    "cancelled": "run.cancelled",
    "waiting_human": "run.waiting",
    "waiting_approval": "run.waiting",
    "waiting_child": "run.waiting",
}


__all__ = [
    "Event",
    "NodeResult",
    "cancel",
    "claim",
    "claimable",
    "complete",
    "complete_with",
    "exhausted",
    "fail",
    "node_of",
    "raise_budget",
    "resume",
    "retry_delay_s",
    "start",
    "status_events",
]


def complete_with(
    graph: CompiledGraph,
    state: RunState,
    key: str,
    result: NodeResult,
    values: dict[str, Any],
    *,
    now: float,
) -> tuple[RunState, list[Event]]:
    """:func:`complete`, where the values of earlier outputs the step reads (a fan-in's
    instances) are given by node in ``values`` beside ``state``, whose outputs hold only
    references to them. The state returned holds values only for the outputs this step
    wrote."""
    if not values:
        return complete(graph, state, key, result, now=now)
    outputs = dict(state.outputs)
    for name, value in values.items():
        outputs[name] = outputs[name].model_copy(update={"value": value})
    new, events = complete(graph, _fork(state, outputs=outputs), key, result, now=now)
    for name in values:
        out = new.outputs.get(name)
        if out is not None and out.ref is not None and out.value is not None:
            new.outputs[name] = out.model_copy(update={"value": None})
    return new, events
