"""Node executors: the I/O of one node visit, turned into a :class:`NodeResult`.

:func:`execute` renders the node's templates against the outputs it reads, does the
node's work (model turn, verdict, human answer, tool call, workers, fan-out plan, child
graph) and reports the outcome. It never raises for a failing node: the failure comes
back as ``NodeResult.error`` so the engine applies the graph's failure policy.
Cancellation always propagates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from plait.errors import (
    BudgetExhausted,
    ConfigError,
    DecisionClosed,
    GraphError,
    PlaitError,
    TemplateError,
    ToolArgumentsInvalid,
    ToolError,
    ToolNotFound,
)
from plait.graphs.agent_loop import (
    ToolRejected,
    Turn,
    as_text,
    find_verdict,
    parse_structured,
    run_turn,
)
from plait.graphs.budget import VisitBudget
from plait.graphs.engine import NodeResult, limits, node_of
from plait.graphs.ports import Answer, ExecEnv, read_only_tools
from plait.graphs.reads import incoming, node_reads, reads_input
from plait.graphs.spec import (
    AgentNode,
    FanInNode,
    FanOutNode,
    HistorySetting,
    HumanNode,
    LastTurns,
    Node,
    ParallelNode,
    SubgraphNode,
    ToolNode,
    VerifierNode,
)
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import (
    MISSING,
    TemplateContext,
    parse_path,
    render,
    render_value,
    resolve_path,
)
from plait.models import CallContext, Message
from plait.tools import check_allowed, gate, runs_trusted


@dataclass(frozen=True, slots=True)
class Visit:
    """One node visit to execute: which key, as which visit, over which outputs.

    Attributes:
        key: the node id, or the fan-out instance id.
        node: the spec node it runs.
        visit: the visit number (a retry keeps its visit).
        values: the output values the node's templates may read, by node or instance
            id (the runner loads at least those :func:`plait.graphs.reads.node_reads`
            names).
        trusted: the node reads no tainted output, and carries no tainted conversation
            (see :mod:`plait.tools.trust`).
        budget: what the visit may still spend, checked before every model and tool call.
    """

    key: str
    node: Node
    visit: int
    values: Mapping[str, Any]
    trusted: bool = True
    budget: VisitBudget = field(default_factory=VisitBudget)


async def execute(
    env: ExecEnv, state: RunState, key: str, visit: int, values: Mapping[str, Any]
) -> NodeResult:
    """Run one visit of ``key`` and report it; failures come back as ``error``.

    A call the budget refuses ends the visit with ``detail="budget_exhausted"`` and
    what it spent until then; the engine parks or fails the run on its budget.
    """
    node = node_of(env.spec, state, key)
    trusted = _runs_trusted(env, state, node, key)
    budget = VisitBudget.of(limits(env.spec, state), state.usage, key)
    v = Visit(key, node, visit, values, trusted, budget)
    started = time.time()
    try:
        result = await _dispatch(env, state, v)
    except ToolRejected as exc:
        result = _spent(budget, NodeResult(error=str(exc), detail="tool_execution_failed"))
    except PlaitError as exc:
        failed = NodeResult(error=str(exc), detail=_detail_of(exc), retryable=exc.retryable)
        result = _spent(budget, failed)
    result.started_at, result.ended_at = started, time.time()
    result.tainted = result.tainted or not trusted  # what reads outside content carries it
    return result


def _runs_trusted(env: ExecEnv, state: RunState, node: Node, key: str) -> bool:
    """Whether a visit runs trusted: it reads no tainted output or input, and carries
    no conversation that took in outside content on an earlier visit."""
    if isinstance(node, AgentNode | VerifierNode) and key in state.tainted_history:
        if not isinstance(node, AgentNode) or node.history != "none":
            return False
    tainted = [k for k, out in state.outputs.items() if out.tainted]
    reads: frozenset[str] | set[str] = node_reads(env.spec, node)
    if state.input_tainted and reads_input(node):
        tainted.append("input")
        reads = {*reads, "input"}
    return not tainted or runs_trusted(reads, tainted)


def _spent(budget: VisitBudget, result: NodeResult) -> NodeResult:
    """A failed visit's result with what its model calls spent before it failed."""
    result.input_tokens, result.output_tokens = budget.input_tokens, budget.output_tokens
    result.dollars = budget.spent_dollars
    return result


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


def _context(state: RunState, v: Visit, env: ExecEnv) -> TemplateContext:
    plan = state.instance_of(v.key)
    item: Any = MISSING
    if plan is not None and plan.item_index is not None:
        fanout = next(f for f in state.fanouts.values() if v.key in f.instances)
        item = fanout.items[plan.target][plan.item_index]
    return TemplateContext(input=state.input, outputs=v.values, item=item)


async def _dispatch(env: ExecEnv, state: RunState, v: Visit) -> NodeResult:
    node = v.node
    ctx = _context(state, v, env)
    if isinstance(node, AgentNode | VerifierNode):
        return await _model_node(env, state, v, ctx)
    if isinstance(node, HumanNode):
        return await _human(env, v, ctx)
    if isinstance(node, ToolNode):
        return await _tool(env, state, v, ctx)
    if isinstance(node, ParallelNode):
        return await _parallel(env, state, v, ctx)
    if isinstance(node, FanOutNode):
        return _fan_out(v, ctx)
    if isinstance(node, FanInNode):
        return _fan_in(env, state, v, ctx)
    if isinstance(node, SubgraphNode):
        return await _subgraph(env, v, ctx)
    if node.type == "begin":
        return NodeResult(value=state.input)
    return _end(env, state, v)


async def _model_node(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, AgentNode | VerifierNode)
    prompt = render(node.prompt, ctx, node=v.key)
    profile = env.profile(node.agent)
    plan = state.instance_of(v.key)
    call = CallContext(
        node=plan.target if plan else v.key,
        visit=v.visit,
        instance=v.key if plan else None,
        run_id=env.run_id,
        prompt=prompt,
    )
    history = await env.histories.load(v.key)
    carried = _carried(history, node.history if isinstance(node, AgentNode) else "all")
    messages = (
        [Message(role="system", content=profile.system_prompt)]
        if profile.system_prompt and not carried
        else []
    )
    messages += [*carried, Message(role="user", content=prompt)]
    agent = node if isinstance(node, AgentNode) else None
    tools = list(agent.tools if agent and agent.tools is not None else profile.tools)
    turn = Turn(
        env=env,
        profile=profile,
        model=env.model_for(profile),
        context=call,
        tools=tools if agent else [],
        trusted=v.trusted,
        max_rounds=agent.max_rounds if agent else 1,
        response_format=agent.response_format if agent else None,
        budget=v.budget,
        timeout_s=node.timeout_s,
    )
    result = await run_turn(turn, messages)
    usage, dollars = result.usage, result.dollars
    out = NodeResult(prompt=prompt, tainted=result.used_external)
    if result.waiting is not None:
        # The visit runs again from its start once the person answered; a conversation
        # cut off at an unanswered tool call is no history to carry on from.
        out.waiting, out.history = result.waiting, None
    elif isinstance(node, AgentNode):
        out.value = (
            parse_structured(result.text, node.response_format)
            if node.response_format
            else result.text
        )
    else:
        verdict, tries = find_verdict(result.text, node.verdicts), 1
        while verdict is None and tries < node.max_attempts:
            tries += 1
            words = ", ".join(node.verdicts)
            retry = [
                *result.messages,
                Message(
                    role="user",
                    content=f"End your reply with a last line holding exactly one of: {words}.",
                ),
            ]
            result = await run_turn(turn, retry)
            usage, dollars = usage + result.usage, dollars + result.dollars
            verdict = find_verdict(result.text, node.verdicts)
        if verdict is None:
            last = next((ln for ln in reversed(result.text.splitlines()) if ln.strip()), "")
            out.error = (
                f"no valid verdict after {tries} tries: the last line {last!r} holds "
                f"none or several of {sorted(node.verdicts)}"
            )
            out.detail = "no_valid_verdict"
        out.value, out.verdict = result.text, verdict
    if out.waiting is None:
        # The whole conversation is kept (the runner stores only what this visit
        # added); the history setting trims what the next visit carries, not what is kept.
        added = result.messages[len(messages) - 1 :]  # from this visit's prompt on
        out.history = [*history, *added] if history else result.messages
    out.input_tokens, out.output_tokens, out.dollars = (
        usage.input_tokens,
        usage.output_tokens,
        dollars,
    )
    return out


def _carried(history: list[Message], setting: HistorySetting) -> list[Message]:
    """What of a node's conversation so far its next visit carries (see ``history``)."""
    if setting == "all" or not history:
        return history
    head = history[:1] if history[0].role == "system" else []
    if setting == "none":
        return head
    assert isinstance(setting, LastTurns)
    starts = [i for i, m in enumerate(history) if m.role == "user"]
    if len(starts) <= setting.last:
        return history
    return [*head, *history[starts[-setting.last] :]]


async def _human(env: ExecEnv, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, HumanNode)
    ask = render(node.ask, ctx, node=v.key)
    answer = await env.human.ask(
        key=v.key,
        visit=v.visit,
        ask=ask,
        options=node.options,
        expires_after_s=node.expires_after_s,
        default=node.default,
        on_expire=node.on_expire,
    )
    if isinstance(answer, Waiting):
        return NodeResult(waiting=answer, prompt=ask)
    assert isinstance(answer, Answer)
    return NodeResult(value=answer.text, prompt=ask)


async def _tool(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, ToolNode)
    profile = env.profile(None)
    tool = check_allowed(node.tool, profile, registry=env.tools)
    args = env.tools.validate_args(node.tool, render_value(node.args, ctx, node=v.key))
    trusted = v.trusted
    v.budget.check_tool(node.tool)
    if gate(tool, trusted=trusted, pre_approved=profile.pre_approved) == "needs_approval":
        verdict = await env.approvals.approve(key=v.key, visit=v.visit, tool=node.tool, args=args)
        if isinstance(verdict, Waiting):
            return NodeResult(waiting=verdict)
        if not verdict:
            raise ToolRejected(node.tool)
    value = await env.tools.call(node.tool, args, env.tool_context(v.key, profile))
    return NodeResult(value=value, prompt=as_text(args), tainted=tool.external)


async def _parallel(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, ParallelNode)
    if isinstance(node.tasks, str):
        head, *path = parse_path(node.tasks)
        if head == "input":
            source = ctx.input
        elif head in ctx.outputs:
            source = ctx.outputs[str(head)]
        else:
            raise TemplateError(v.key, node.tasks, f"node {head!r} has no output yet")
        tasks = resolve_path(source, path, node=v.key, key=node.tasks)
        if not isinstance(tasks, list):
            raise TemplateError(v.key, node.tasks, "is not a list of tasks")
    else:
        tasks = [render(t, ctx, node=v.key) for t in node.tasks]
    profile = env.profile(node.agent)
    model = env.model_for(profile)
    tools = read_only_tools(env.tools, profile.tools)
    trusted = v.trusted
    answers: list[str] = [""] * len(tasks)
    spent = NodeResult()
    limiter = anyio.CapacityLimiter(max(1, node.max_concurrency))
    # The first worker that fails or must wait for an approval stops its siblings: the
    # node fails (or parks and runs again) as a whole.
    stopped: list[PlaitError | ToolRejected] = []

    async def work(index: int, task: Any, scope: anyio.CancelScope) -> None:
        try:
            await one(index, task)
        except (PlaitError, ToolRejected) as exc:
            stopped.append(exc)
            scope.cancel()

    async def one(index: int, task: Any) -> None:
        async with limiter:
            prompt = render(node.prompt, TemplateContext(ctx.input, ctx.outputs, task), node=v.key)
            call = CallContext(
                node=v.key,
                visit=v.visit,
                instance=f"{v.key}[{index}]",
                run_id=env.run_id,
                prompt=prompt,
            )
            turn = Turn(
                env=env,
                profile=profile,
                model=model,
                context=call,
                tools=tools,
                trusted=trusted,
                read_only_only=True,
                budget=v.budget,
                timeout_s=node.timeout_s,
            )
            result = await run_turn(turn, [Message(role="user", content=prompt)])
            answers[index] = result.text
            spent.input_tokens += result.usage.input_tokens
            spent.output_tokens += result.usage.output_tokens
            spent.dollars += result.dollars
            spent.tainted = spent.tainted or result.used_external
            if result.waiting is not None:
                raise _WorkerWaits(result.waiting)

    async with anyio.create_task_group() as tg:
        for index, task in enumerate(tasks):
            tg.start_soon(work, index, task, tg.cancel_scope)
    if stopped:
        first = stopped[0]
        if isinstance(first, _WorkerWaits):
            spent.waiting = first.waiting
            return spent
        raise first
    spent.value = "\n\n".join(
        f"## Task {i + 1}: {as_text(task)}\n{answer}"
        for i, (task, answer) in enumerate(zip(tasks, answers, strict=True))
    )
    return spent


class _WorkerWaits(PlaitError):
    """A parallel worker's tool call waits for a person's approval."""

    def __init__(self, waiting: Waiting) -> None:
        self.waiting = waiting
        super().__init__(waiting.ask)


def _fan_out(v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, FanOutNode)
    items: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    for spec_ in node.specs:
        if spec_.kind == "map":
            source = spec_.source_node_id or ""
            if source not in ctx.outputs:
                raise TemplateError(v.key, source, "the map's source node has no output yet")
            found = resolve_path(
                ctx.outputs[source],
                spec_.source_path or "",
                node=v.key,
                key=f"{source}.{spec_.source_path}".rstrip("."),
            )
            if not isinstance(found, list):
                raise TemplateError(
                    v.key,
                    f"{source}.{spec_.source_path}",
                    f"is a {type(found).__name__}, not a list to map over",
                )
            target = spec_.target_node_id or ""
            items[target] = found
            counts[target] = len(found)
        elif spec_.kind == "broadcast":
            counts[spec_.target_node_id or ""] = spec_.count or 0
        else:
            counts.update({t: 1 for t in spec_.targets or []})
    return NodeResult(value={"instances": counts}, items=items)


def _fan_in(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, FanInNode)
    if node.aggregate_template:
        return NodeResult(value=render(node.aggregate_template, ctx, node=v.key))
    combined: list[Any] = []
    for pred in env.spec.predecessors(v.key):
        value = ctx.outputs.get(pred)
        is_fanned = any(pred in f.policies for f in state.fanouts.values())
        combined.extend(value if is_fanned and isinstance(value, list) else [value])
    return NodeResult(value=combined)


async def _subgraph(env: ExecEnv, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, SubgraphNode)
    if env.subgraphs is None:
        raise GraphError(
            f"node {v.key!r}: no graph store is available to run subgraph {node.graph!r}"
        )
    child_input = render_value(node.input, ctx, node=v.key)
    value = await env.subgraphs(
        node.agent or env.spec.agent,
        node.graph,
        node.version,
        child_input,
        v.key,
        v.visit,
        not v.trusted,
    )
    if isinstance(value, Waiting):  # the child runs on its own: park until it ends
        return NodeResult(waiting=value)
    if isinstance(value, NodeResult):  # a child run's output, with what it spent
        return value
    return NodeResult(value=value)


def _end(env: ExecEnv, state: RunState, v: Visit) -> NodeResult:
    preds = [p for p in incoming(env.spec, v.key) if p in state.outputs]
    if not preds:
        return NodeResult(value=None)
    latest = max(preds, key=lambda p: state.outputs[p].seq)
    return NodeResult(value=v.values.get(latest))


__all__ = ["Visit", "execute"]
