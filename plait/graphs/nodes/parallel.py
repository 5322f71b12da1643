"""The ``parallel`` kind: read-only workers, one per task, their answers combined."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from plait.errors import PlaitError, TemplateError
from plait.graphs.agent_loop import ToolRejected, Turn, as_text, run_turn
from plait.graphs.nodes.base import (
    MAX_CONCURRENCY,
    Checks,
    GraphView,
    NodeBase,
    NodeKind,
    TemplateField,
    Visit,
    named_agent,
    quoted,
)
from plait.graphs.ports import ExecEnv, read_only_tools
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import TemplateContext, parse_path, render, resolve_path
from plait.models import CallContext, Message


def _tasks(value: Any) -> str | list[str]:
    # One clear message instead of one error per member of ``str | list[str]``.
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise PydanticCustomError(
        "tasks_type", "expected a list of task templates, or a path like researcher.urls"
    )


_Tasks = Annotated[
    str | list[str],
    PlainValidator(_tasks),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]


class ParallelNode(NodeBase):
    """Read-only workers, one per task; the combined answers are the node's output.

    Attributes:
        tasks: task templates, or a path to a list in an upstream output
            (``"researcher.urls"``).
        prompt: the worker prompt per task; ``{{item}}`` is the task.
    """

    type: Literal["parallel"]
    tasks: _Tasks
    prompt: str = "{{item}}"
    agent: str | None = None
    max_concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)


class _WorkerWaits(PlaitError):
    """A parallel worker's tool call waits for a person's approval."""

    def __init__(self, waiting: Waiting) -> None:
        self.waiting = waiting
        super().__init__(waiting.ask)


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
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


def _templates(node: ParallelNode) -> Iterator[TemplateField]:
    if isinstance(node.tasks, list):
        for k, task in enumerate(node.tasks):
            yield f".tasks[{k}]", task, False
    yield ".prompt", node.prompt, True


def _validate(node: ParallelNode, path: str, checks: Checks) -> None:
    if not isinstance(node.tasks, str):
        return
    where = f"{path}.tasks"
    try:
        head = parse_path(node.tasks)[:1]
    except TemplateError:
        checks.problem(where, f"malformed path {quoted(node.tasks)} (like researcher.urls)")
        return
    if head and head[0] != "input" and not checks.known(str(head[0])):
        checks.problem(where, f"path {quoted(node.tasks)} names unknown node {quoted(head[0])}")


def _reads(node: ParallelNode, graph: GraphView) -> Iterator[str]:
    if isinstance(node.tasks, str):
        head = parse_path(node.tasks)[0]
        if head not in ("input", "item"):
            yield str(head)


def _reads_input(node: ParallelNode) -> bool:
    return isinstance(node.tasks, str) and parse_path(node.tasks)[0] == "input"


KIND = NodeKind(
    type="parallel",
    calls_model=True,
    spec=ParallelNode,
    execute=_execute,
    shape=("[/", "\\]"),
    templates=_templates,
    validate=_validate,
    reads=_reads,
    reads_input=_reads_input,
    agent=named_agent,
)
"""The parallel kind."""

__all__ = ["KIND", "ParallelNode"]
