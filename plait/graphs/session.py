"""The in-session runner: a graph run as one asyncio program, state in memory.

``await run_graph(spec, input, model=...)`` loops the pure engine and the executors
until the run is done, failed, or waiting on a person; ready nodes (fan-out instances,
parallel branches) run concurrently. A waiting run resumes with
``await resume_graph(run, answer)``. Nothing is persisted: for runs that must survive
a crash, use durable runs (:mod:`plait.runs`), which walk the same trajectory.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from plait.errors import GraphError, GraphNotFound
from plait.graphs import engine
from plait.graphs.executors import execute
from plait.graphs.loader import load_graph
from plait.graphs.ports import AnswersUpFront, ExecEnv, MemoryHistories
from plait.graphs.spec import GraphSpec
from plait.graphs.state import RunState, RunStatus, RunUsage, Waiting
from plait.models import Model, load_model
from plait.tools import AgentProfile, ToolRegistry, default_registry


class StepUsage(BaseModel):
    """What one visit spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0


class TrajectoryStep(BaseModel):
    """One committed node visit, in commit order."""

    node: str
    visit: int
    prompt: str | None = None
    output: Any = None
    verdict: str | None = None
    usage: StepUsage = Field(default_factory=StepUsage)
    started_at: float = 0.0
    ended_at: float = 0.0
    error: str | None = None
    parent: str | None = None
    """For a visit inside a subgraph: the parent's subgraph node."""


class GraphRun(BaseModel):
    """The outcome of an in-session run (so far, if it waits)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    status: RunStatus
    output: Any = None
    ended_detail: str | None = None
    error: str | None = None
    waiting: Waiting | None = None
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    usage: RunUsage = Field(default_factory=RunUsage)
    state: RunState


@dataclass
class _Session:
    spec: GraphSpec
    env: ExecEnv
    answers: AnswersUpFront
    max_concurrency: int
    on_step: Callable[[TrajectoryStep], None] | None
    graphs: Mapping[str, GraphSpec]
    trajectory: list[TrajectoryStep] = field(default_factory=list)


async def run_graph(
    graph: GraphSpec | Mapping[str, Any] | str | Path,
    input: Any = None,
    *,
    model: Model | str | None = None,
    answers: Mapping[str, str] | None = None,
    approve_tools: bool = False,
    profiles: Mapping[str, AgentProfile] | None = None,
    tools: ToolRegistry | None = None,
    graphs: Mapping[str, GraphSpec] | None = None,
    max_concurrency: int = 16,
    cwd: Path | None = None,
    on_step: Callable[[TrajectoryStep], None] | None = None,
    run_id: str | None = None,
) -> GraphRun:
    """Run a graph in this process until it is done, failed or waiting on a person.

    Args:
        graph: a spec, a mapping in the graph file format, or the path of a graph file.
        input: the run's input (``{{input}}``).
        model: a model or model spec answering for every agent; default ``PLAIT_MODEL``,
            else each agent profile's own model.
        answers: human answers given up front, by human node id.
        approve_tools: approve every tool call that needs approval.
        profiles: agent profiles by name (the default ``assistant`` is always there).
        tools: the tool registry (default: the built-in tools).
        graphs: child graphs by name, for subgraph nodes.
        max_concurrency: how many ready nodes may run at once.
        cwd: working directory of file and shell tools.
        on_step: called with each committed visit, as it commits.
        run_id: the run's id (default: a fresh one).
    """
    spec = graph if isinstance(graph, GraphSpec) else load_graph(graph)
    if isinstance(model, str):
        model = load_model(model)
    elif model is None and os.environ.get("PLAIT_MODEL"):
        model = load_model(os.environ["PLAIT_MODEL"])
    run_id = run_id or f"run_{uuid.uuid4().hex[:12]}"
    answered = AnswersUpFront(answers, approve_all=approve_tools)
    env = ExecEnv(
        spec=spec,
        run_id=run_id,
        model=model,
        profiles=dict(profiles or {}),
        tools=tools or default_registry(),
        human=answered,
        approvals=answered,
        histories=MemoryHistories(),
        cwd=cwd or Path.cwd(),
    )
    session = _Session(spec, env, answered, max_concurrency, on_step, dict(graphs or {}))
    env.subgraphs = _subgraph_runner(session)
    state = engine.start(spec, run_id, input, now=time.time())
    return await _loop(session, state)


async def resume_graph(run: GraphRun, answer: str, **options: Any) -> GraphRun:
    """Continue a run that waits on a person, with their ``answer``.

    ``options`` are those of :func:`run_graph` (the same model, graphs...); the
    conversations of agent nodes start afresh in the resumed session.
    """
    if run.waiting is None:
        raise GraphError(f"run {run.run_id} waits on no one (status {run.status})")
    state = run.state
    spec = options.pop("graph", None)
    if spec is None:
        raise GraphError("resume_graph needs graph=<the spec the run was started with>")
    spec = spec if isinstance(spec, GraphSpec) else load_graph(spec)
    answers = dict(options.pop("answers", None) or {})
    key = run.waiting.node
    if run.waiting.kind == "approval":
        answers[f"approve:{key}:{run.waiting.tool}"] = answer
    else:
        answers[key] = answer
    model = options.pop("model", None)
    if isinstance(model, str):
        model = load_model(model)
    answered = AnswersUpFront(answers, approve_all=options.pop("approve_tools", False))
    env = ExecEnv(
        spec=spec,
        run_id=run.run_id,
        model=model,
        profiles=dict(options.pop("profiles", None) or {}),
        tools=options.pop("tools", None) or default_registry(),
        human=answered,
        approvals=answered,
        cwd=options.pop("cwd", None) or Path.cwd(),
    )
    session = _Session(
        spec,
        env,
        answered,
        options.pop("max_concurrency", 16),
        options.pop("on_step", None),
        dict(options.pop("graphs", None) or {}),
        trajectory=list(run.trajectory),
    )
    env.subgraphs = _subgraph_runner(session)
    return await _loop(session, engine.resume(state, now=time.time()))


async def _loop(session: _Session, state: RunState) -> GraphRun:
    spec, env = session.spec, session.env
    values: dict[str, Any] = {k: out.value for k, out in state.outputs.items()}
    send, receive = anyio.create_memory_object_stream[tuple[str, engine.NodeResult]](
        max_buffer_size=1_000_000
    )
    in_flight = 0

    async def run_one(key: str, visit: int, snapshot: RunState) -> None:
        result = await execute(env, snapshot, key, visit, values)
        await send.send((key, result))

    async with anyio.create_task_group() as tg, send, receive:
        while True:
            for key in engine.claimable(state):
                if in_flight >= session.max_concurrency:
                    break
                state, attempt = engine.claim(
                    spec, state, key, nonce=uuid.uuid4().hex, now=time.time()
                )
                if attempt is None:
                    break
                in_flight += 1
                tg.start_soon(run_one, key, attempt.visit, state)
            if in_flight == 0:
                break
            key, result = await receive.receive()
            in_flight -= 1
            state, events = engine.complete(spec, state, key, result, now=time.time())
            if result.history is not None:
                assert isinstance(env.histories, MemoryHistories)
                env.histories.saved[key] = result.history
            for name, out in state.outputs.items():
                if out.seq == state.seq:
                    values[name] = out.value
            for event in events:
                if event["type"] == "node.committed":
                    _record(session, event, result, state)
            if state.terminal:
                tg.cancel_scope.cancel()
                break
    output = None
    if state.status == "done" and state.output_node is not None:
        output = state.outputs[state.output_node].value
    return GraphRun(
        run_id=state.run_id,
        status=state.status,
        output=output,
        ended_detail=state.ended_detail,
        error=state.error,
        waiting=state.waiting,
        trajectory=session.trajectory,
        usage=state.usage,
        state=state,
    )


def _record(
    session: _Session, event: dict[str, Any], result: engine.NodeResult, state: RunState
) -> None:
    step = TrajectoryStep(
        node=event["node"],
        visit=event["visit"],
        prompt=result.prompt,
        output=state.outputs[event["node"]].value,
        verdict=result.verdict,
        usage=StepUsage(**event["usage"]),
        started_at=result.started_at,
        ended_at=result.ended_at,
        error=result.error,
    )
    session.trajectory.append(step)
    if session.on_step is not None:
        session.on_step(step)


def _subgraph_runner(session: _Session) -> Any:
    async def run_child(
        agent: str, name: str, version: int | None, child_input: Any, parent: str
    ) -> Any:
        child_spec = session.graphs.get(name)
        if child_spec is None:
            raise GraphNotFound(
                f"subgraph {name!r} is not among the graphs given "
                f"({', '.join(sorted(session.graphs)) or 'none'})"
            )
        child = await run_graph(
            child_spec,
            child_input,
            model=session.env.model,
            answers=session.answers.answers,
            approve_tools=session.answers.approve_all,
            profiles=session.env.profiles,
            tools=session.env.tools,
            graphs=session.graphs,
            cwd=session.env.cwd,
        )
        for step in child.trajectory:
            session.trajectory.append(step.model_copy(update={"parent": step.parent or parent}))
        if child.status != "done":
            raise GraphError(
                f"subgraph {name!r} ended {child.status}: "
                f"{child.ended_detail or ''} {child.error or ''}".strip()
            )
        return child.output

    return run_child


__all__ = ["GraphRun", "StepUsage", "TrajectoryStep", "resume_graph", "run_graph"]
