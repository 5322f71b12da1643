"""The in-session runner: a graph run as one asyncio program, state in memory.

``await run_graph(spec, input, model=...)`` loops the pure engine and the executors
until the run is done, failed, or waiting on a person; ready nodes (fan-out instances,
parallel branches) run concurrently. A waiting run resumes with
``await resume_graph(run, answer)``. Nothing is persisted unless the run is given a
``run_key``: then each commit is kept under the key (:mod:`plait.graphs.keyed`) and a
rerun with the same key does not run again the nodes that passed. For runs that go on
by themselves after a crash, use durable runs (:mod:`plait.runs`), which walk the same
trajectory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

import plait.graphs.engine as engine
from plait.errors import ConfigError, GraphError, GraphNotFound
from plait.graphs.compiled import CompiledGraph, compile_graph
from plait.graphs.events import NodeCommitted
from plait.graphs.executors import execute
from plait.graphs.keyed import RunKeeper, opened, passed, store_url
from plait.graphs.live import OnEvent, SessionEvent, SessionLive
from plait.graphs.loader import load_graph
from plait.graphs.ports import AnswersUpFront, ExecEnv, MemoryHistories
from plait.graphs.spec import GraphSpec
from plait.graphs.state import RunState, RunStatus, RunUsage, Waiting
from plait.graphs.trajectory import StepUsage, TrajectoryStep
from plait.ids import SESSION_RUN_ID_PREFIX, new_id, new_run_id
from plait.mesh import Mesh
from plait.models import Message, Model, load_model
from plait.profiles import AgentProfile
from plait.tools import ToolRegistry, default_registry


class GraphRun(BaseModel):
    """The outcome of an in-session run (so far, if it waits).

    A waiting run remembers how it was started (graph, model, tools, answers, agent
    conversations), so :func:`resume_graph` carries on with the same.
    """

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
    run_key: str | None = None
    """The run key the run is kept under, if any."""
    reused: list[str] = Field(default_factory=list)
    """The visits (``<node>#<visit>``) that passed in an earlier run under the run key
    and took their kept result here instead of running again."""

    _setup: _Setup | None = PrivateAttr(default=None)
    _histories: dict[str, list[Message]] = PrivateAttr(default_factory=dict)
    _key_version: int = PrivateAttr(default=0)


@dataclass(frozen=True)
class _Setup:
    """How a run was started: what :func:`resume_graph` reuses unless told otherwise."""

    spec: GraphSpec
    model: Model | None
    answers: Mapping[str, str]
    approve_tools: bool
    profiles: Mapping[str, AgentProfile]
    tools: ToolRegistry
    graphs: Mapping[str, GraphSpec]
    max_concurrency: int
    cwd: Path
    on_step: Callable[[TrajectoryStep], None] | None
    on_event: OnEvent | None = None
    once: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """Answers to one visit each, given when a parked run resumed."""
    mesh: Mesh | None = None
    """What program nodes act on and read saved programs from."""
    run_key: str | None = None
    store: Mesh | str | None = None
    """Where the run key's record is kept: a mesh, or the URL of one."""


@dataclass
class _Session:
    setup: _Setup
    graph: CompiledGraph
    env: ExecEnv
    histories: MemoryHistories
    trajectory: list[TrajectoryStep] = field(default_factory=list)
    keeper: RunKeeper | None = None


_OPTIONS = frozenset(
    {"graph", "model", "answers", "approve_tools", "profiles", "tools", "graphs",
     "max_concurrency", "cwd", "on_step", "on_event", "raise_budget"}
)  # fmt: skip


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
    on_event: OnEvent | None = None,
    run_id: str | None = None,
    input_untrusted: bool = False,
    mesh: Mesh | None = None,
    run_key: str | None = None,
    fresh: bool = False,
    store: Mesh | str | None = None,
) -> GraphRun:
    """Run a graph in this process until it is done, failed or waiting on a person.

    With a ``run_key``, each visit that passes is kept under the key as it commits,
    and a rerun with the same key, graph version and input does not run those nodes
    again: it walks the same path taking their kept results (their steps appear in the
    trajectory as before, and in :attr:`GraphRun.reused`), and runs the node that
    failed, or waited on a person (answered by ``answers`` or asking again), and what
    follows. A rerun of a run that ended done returns its output without running a
    node. Reruns keep the first run's id; the graph's budget holds each rerun as it
    holds a run (the reused visits count what they spent the first time). The graph
    version is the spec's sha256: a function node's body is not part of it, so after
    changing one, bump the graph's ``version`` or pass ``fresh=True``.

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
        on_event: called with each :class:`~plait.graphs.live.SessionEvent` as it
            happens: the pieces of each model reply as they stream (agent nodes then
            stream), each committed visit, and last the run's end.
        run_id: the run's id (default: a fresh one).
        input_untrusted: the input came from outside (an uploaded document): what
            reads it is tainted and loses its pre-approved tools.
        mesh: the mesh program nodes get as capabilities and read saved programs from.
        run_key: keep the run under this key (see above).
        fresh: start over under ``run_key``, replacing what it holds.
        store: where the run key's record is kept: a mesh (left open) or a mesh URL.
            Default: ``mesh`` if given, else the default mesh (``PLAIT_MESH``, else
            ``mesh.db`` in ``PLAIT_HOME`` or the nearest ``.plait/`` directory, else a
            new ``.plait/mesh.db`` here), at ``sessions/<agent>/<graph>/<run_key>``.

    Raises:
        RunKeyConflict: ``run_key`` holds a run of another graph version or input (and
            ``fresh`` is not set), or another run wrote it meanwhile.
        GraphError: with a ``run_key``, the input or an output is not JSON data.
    """
    setup = _Setup(
        spec=graph if isinstance(graph, GraphSpec) else load_graph(graph),
        model=_model(model),
        answers=dict(answers or {}),
        approve_tools=approve_tools,
        profiles=dict(profiles or {}),
        tools=tools if tools is not None else default_registry(),
        graphs=dict(graphs or {}),
        max_concurrency=max_concurrency,
        cwd=cwd or Path.cwd(),
        on_step=on_step,
        on_event=on_event,
        mesh=mesh,
        run_key=run_key,
        store=store_url(store, mesh) if run_key is not None else None,
    )
    if run_key is None or setup.store is None:
        run_id = run_id or new_run_id(SESSION_RUN_ID_PREFIX)
        session = _session(setup, run_id, {}, [])
        return await _loop(session, _start(session, run_id, input, input_untrusted))
    async with opened(setup.store) as kept:
        compiled = compile_graph(setup.spec)
        keeper = await RunKeeper.open(kept, run_key, compiled, input, fresh=fresh)
        run_id = keeper.run_id or run_id or new_run_id(SESSION_RUN_ID_PREFIX)
        session = _session(setup, run_id, {}, [])
        session.keeper = keeper
        state = _start(session, run_id, input, input_untrusted)
        await keeper.save(state, None)  # counts the run, and claims the key first
        return await _loop(session, state)


def _start(session: _Session, run_id: str, input: Any, untrusted: bool) -> RunState:
    state = engine.start(session.graph, run_id, input, now=time.time())
    state.input_tainted = untrusted
    return state


async def resume_graph(run: GraphRun, answer: str, **options: Any) -> GraphRun:
    """Continue a run that waits on a person, with their ``answer``.

    The run carries on as it was started (same graph, model, tools, answers, and each
    agent node's conversation so far); ``options`` are those of :func:`run_graph` and
    replace what they name (``answers`` are added to the earlier ones). A run rebuilt
    from its state alone needs ``graph=``.

    A run parked on its budget (``waiting.kind == "budget"``) goes on only with
    ``raise_budget={"steps": 10}`` (or ``tokens``, ``dollars``...), which a person
    grants on top of the graph's budget; the raise may come with any other answer too.

    Raises:
        GraphError: the run waits on nothing, its graph is unknown, or it waits on its
            budget and no raise is given.
        ConfigError: an option is not one of :func:`run_graph`'s.
    """
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ConfigError(f"unknown resume_graph option(s) {unknown}; known: {sorted(_OPTIONS)}")
    waiting = run.waiting
    if waiting is None:
        raise GraphError(f"run {run.run_id} waits on no one (status {run.status})")
    setup = run._setup
    graph = options.pop("graph", None)
    if graph is not None:
        spec = graph if isinstance(graph, GraphSpec) else load_graph(graph)
    elif setup is not None:
        spec = setup.spec
    else:
        raise GraphError("resume_graph needs graph=<the spec the run was started with>")
    if "model" in options:
        options["model"] = _model(options["model"])
    answers = dict(setup.answers if setup is not None else {})
    answers.update(options.pop("answers", None) or {})
    once = dict(setup.once if setup is not None else {})
    if waiting.kind != "budget":
        name = waiting.node
        if waiting.kind == "approval":
            name = f"approve:{waiting.node}:{waiting.tool}"
        if waiting.visit is not None:
            once[(name, waiting.visit)] = answer  # this visit's answer, not every visit's
        else:
            answers[name] = answer
    extra = options.pop("raise_budget", None)
    if waiting.kind == "budget" and not extra:
        raise GraphError(
            f"run {run.run_id} waits on its budget ({waiting.ask}); a person raises it "
            'with raise_budget={"steps": 10} (or tokens, dollars, wall_seconds, retries)'
        )
    if setup is None:
        setup = _Setup(
            spec=spec,
            model=_model(None),
            answers={},
            approve_tools=False,
            profiles={},
            tools=default_registry(),
            graphs={},
            max_concurrency=16,
            cwd=Path.cwd(),
            on_step=None,
        )
    defaults: dict[str, Callable[[Any], Any]] = {
        "profiles": lambda v: dict(v or {}),
        "graphs": lambda v: dict(v or {}),
        "tools": lambda v: v if v is not None else default_registry(),
        "cwd": lambda v: v or Path.cwd(),
    }
    for name, fill in defaults.items():
        if name in options:
            options[name] = fill(options[name])
    setup = replace(setup, spec=spec, answers=answers, once=once, **options)
    session = _session(setup, run.run_id, run._histories, run.trajectory)
    now = time.time()
    state = engine.raise_budget(run.state, extra, now=now) if extra else run.state
    state = engine.resume(state, now=now)
    if setup.run_key is None or setup.store is None:
        return await _loop(session, state)
    async with opened(setup.store) as kept:
        session.keeper = await RunKeeper.attach(
            kept, setup.run_key, session.graph, run._key_version
        )
        session.keeper.reused = list(run.reused)
        return await _loop(session, state)


def _model(model: Model | str | None) -> Model | None:
    if isinstance(model, str):
        return load_model(model)
    if model is None and os.environ.get("PLAIT_MODEL"):
        return load_model(os.environ["PLAIT_MODEL"])
    return model


def _session(
    setup: _Setup,
    run_id: str,
    histories: Mapping[str, list[Message]],
    trajectory: list[TrajectoryStep],
) -> _Session:
    answered = AnswersUpFront(setup.answers, approve_all=setup.approve_tools, once=setup.once)
    memory = MemoryHistories()
    memory.saved.update(histories)
    env = ExecEnv(
        agent=setup.spec.agent,
        run_id=run_id,
        model=setup.model,
        profiles=dict(setup.profiles),
        tools=setup.tools,
        human=answered,
        approvals=answered,
        histories=memory,
        cwd=setup.cwd,
        mesh=setup.mesh,
        live=SessionLive(setup.on_event) if setup.on_event is not None else None,
    )
    session = _Session(setup, compile_graph(setup.spec), env, memory, list(trajectory))
    env.subgraphs = _subgraph_runner(session)
    return session


async def _loop(session: _Session, state: RunState) -> GraphRun:
    try:
        state = await _drive(session, state)
    except BaseExceptionGroup as group:
        # A task group wraps what escapes it (an on_step callback's error, a bug): pass
        # a lone exception on as itself.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    keeper = session.keeper
    if keeper is not None:
        await keeper.save(state, None)
    output = None
    if state.status == "done" and state.output_node is not None:
        output = state.outputs[state.output_node].value
    run = GraphRun(
        run_id=state.run_id,
        status=state.status,
        output=output,
        ended_detail=state.ended_detail,
        error=state.error,
        waiting=state.waiting,
        trajectory=session.trajectory,
        usage=state.usage,
        state=state,
        run_key=session.setup.run_key,
        reused=list(keeper.reused) if keeper is not None else [],
    )
    run._setup = session.setup
    run._histories = dict(session.histories.saved)
    run._key_version = keeper.version if keeper is not None else 0
    if session.setup.on_event is not None:
        session.setup.on_event(SessionEvent("end", run=run))
    return run


async def _drive(session: _Session, state: RunState) -> RunState:
    """Claim, execute and commit nodes until the run ends or parks."""
    graph, env = session.graph, session.env
    values: dict[str, Any] = {k: out.value for k, out in state.outputs.items()}
    send, receive = anyio.create_memory_object_stream[tuple[str, engine.NodeResult]](
        max_buffer_size=1_000_000
    )
    in_flight = 0

    async def run_one(key: str, visit: int, snapshot: RunState) -> None:
        result = await _execute(key, visit, snapshot)
        await send.send((key, result))

    async def _execute(key: str, visit: int, snapshot: RunState) -> engine.NodeResult:
        kept = session.keeper.kept(key, visit) if session.keeper is not None else None
        if kept is not None:
            return kept  # it passed in an earlier run under the run key
        # A retry after a transient error waits its backoff first, as a durable run's
        # delayed wake does.
        delay = engine.retry_delay_s(graph, snapshot, key)
        if delay:
            await anyio.sleep(delay)
        return await execute(env, graph, snapshot, key, visit, values)

    async with anyio.create_task_group() as tg, send, receive:
        while True:
            claimed: list[tuple[str, int]] = []
            for key in engine.claimable(state):
                if in_flight + len(claimed) >= session.setup.max_concurrency:
                    break
                state, attempt = engine.claim(graph, state, key, nonce=new_id(), now=time.time())
                if attempt is None:
                    break
                claimed.append((key, attempt.visit))
            if state.terminal or (in_flight == 0 and not claimed):
                tg.cancel_scope.cancel()  # a spent budget ends the run; stop what still runs
                break
            if in_flight == 0 and len(claimed) == 1:
                # The only node to run: await it here, sparing a task and a channel hop.
                key, visit = claimed[0]
                result = await _execute(key, visit, state)
            else:
                for key, visit in claimed:
                    tg.start_soon(run_one, key, visit, state)
                in_flight += len(claimed)
                key, result = await receive.receive()
                in_flight -= 1
            attempt = state.attempts.get(key)
            state = _commit(session, state, key, result, values)
            if session.keeper is not None:
                kept = (key, attempt.visit, result) if attempt and passed(result) else None
                await session.keeper.save(state, kept)
            if state.terminal:
                tg.cancel_scope.cancel()
                break
    return state


def _commit(
    session: _Session,
    state: RunState,
    key: str,
    result: engine.NodeResult,
    values: dict[str, Any],
) -> RunState:
    """Apply one node's result to the run and to what the session keeps beside it."""
    state, events = engine.complete(session.graph, state, key, result, now=time.time())
    if result.history is not None:
        session.histories.saved[key] = result.history
    for name, out in state.outputs.items():
        if out.seq == state.seq:
            values[name] = out.value
    for event in events:
        if isinstance(event, NodeCommitted):
            _record(session, event, result, state)
    return state


def _record(
    session: _Session, event: NodeCommitted, result: engine.NodeResult, state: RunState
) -> None:
    step = TrajectoryStep(
        node=event.node,
        visit=event.visit,
        prompt=result.prompt,
        output=state.outputs[event.node].value,
        status="failed" if result.error else "done",
        verdict=result.verdict,
        usage=event.usage.as_data(),  # validated into a StepUsage in the same call
        started_at=result.started_at,
        ended_at=result.ended_at,
        error=result.error,
    )
    _append(session, step)


def _append(session: _Session, step: TrajectoryStep) -> None:
    session.trajectory.append(step)
    if session.setup.on_step is not None:
        session.setup.on_step(step)
    if session.setup.on_event is not None:
        session.setup.on_event(SessionEvent("step", node=step.node, visit=step.visit, step=step))


def _subgraph_runner(session: _Session) -> Any:
    async def run_child(
        agent: str,
        name: str,
        version: int | None,
        child_input: Any,
        parent: str,
        visit: int,
        untrusted: bool,
    ) -> Any:
        setup = session.setup
        child_spec = setup.graphs.get(name)
        if child_spec is None:
            raise GraphNotFound(
                f"subgraph {name!r} is not among the graphs given "
                f"({', '.join(sorted(setup.graphs)) or 'none'})"
            )
        child = await run_graph(
            child_spec,
            child_input,
            model=setup.model,
            answers=setup.answers,
            approve_tools=setup.approve_tools,
            profiles=setup.profiles,
            tools=setup.tools,
            graphs=setup.graphs,
            max_concurrency=setup.max_concurrency,
            cwd=setup.cwd,
            input_untrusted=untrusted,
        )
        for step in child.trajectory:
            _append(session, step.model_copy(update={"parent": step.parent or parent}))
        if child.status != "done":
            raise GraphError(
                f"subgraph {name!r} ended {child.status}: "
                f"{child.ended_detail or ''} {child.error or ''}".strip()
            )
        last = child.state.outputs.get(child.state.output_node or "")
        return engine.NodeResult(
            value=child.output,
            tainted=last is not None and last.tainted,
            input_tokens=child.usage.input_tokens,
            output_tokens=child.usage.output_tokens,
            dollars=child.usage.dollars,
        )

    return run_child


__all__ = ["GraphRun", "StepUsage", "TrajectoryStep", "resume_graph", "run_graph"]
