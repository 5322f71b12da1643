"""``@plait.workflow`` and ``@plait.step``: an async function run as a durable run.

A workflow is stored as a graph of one ``workflow`` node (:mod:`plait.graphs.nodes.
workflow`) that visits itself once per batch of steps, so a workflow run is a durable
run like any other: the same record, commit, audit chain, owner actor and wakes, and
the same ``plait graph`` commands inspect, resume and cancel it. Each visit runs the
function from the top over the journal (see :mod:`plait.workflows.replay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import os
import textwrap
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from plait.decisions import DecisionAsker
from plait.errors import CapabilityMissing, ConfigError, GraphError, NonDeterminism
from plait.graphs.nodes.base import Visit
from plait.graphs.nodes.workflow import STEP
from plait.graphs.ports import Answer, ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.spec import Budget, GraphSpec
from plait.graphs.state import RunState, Waiting
from plait.graphs.store import StoredGraph
from plait.mesh import Mesh
from plait.models import Model
from plait.profiles import AgentProfile
from plait.programs import Grants, SharedBudget, grant_all
from plait.tools import ToolRegistry, default_registry
from plait.workflows.context import Child, Context
from plait.workflows.imported import import_workflow
from plait.workflows.journal import Entry, JournalCache, batch
from plait.workflows.replay import INSIDE_STEP, Parked, Replay, StepPolicy

NODE = "workflow"
"""The id of a workflow graph's one node."""

P = ParamSpec("P")
R = TypeVar("R")


def source_sha256(fn: Callable[..., Any]) -> str:
    """The sha256 of a function's source (dedented): the code version runs pin."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        text = fn.__qualname__
    return hashlib.sha256(text.encode()).hexdigest()


class Workflow(Generic[P, R]):
    """An async function ``fn(ctx, ...)`` run step by step (see the module docstring).

    Attributes:
        fn: the function.
        agent: the agent whose tools, approvals and model its calls use.
        name: its graph name (default: the function's name).
        ref: its import path, ``module:qualname``.
        source_sha256: the sha256 of its source.
        budget: the run's limits (``steps`` counts visits, each a batch of steps run
            at once; 100 by default, the cap of a stored graph: a person raises it).
    """

    def __init__(
        self,
        fn: Callable[Concatenate[Context, P], Awaitable[R]],
        *,
        agent: str = "assistant",
        name: str | None = None,
        budget: Budget | int | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(f"@plait.workflow needs an async function, not {fn!r}")
        self.fn = fn
        self.agent = agent
        self.name = name or fn.__name__.replace("_", "-")
        self.ref = f"{fn.__module__}:{fn.__qualname__}"
        self.source_sha256 = source_sha256(fn)
        self.budget = (
            budget
            if isinstance(budget, Budget)
            else Budget.model_validate({"steps": 100 if budget is None else budget})
        )
        self._params = [p for p in inspect.signature(fn).parameters.values()][1:]
        self._journals = JournalCache()
        self.imported: weakref.WeakKeyDictionary[Mesh, StoredGraph] = weakref.WeakKeyDictionary()
        """The version stored in each mesh this process imported it into."""
        functools.update_wrapper(self, fn)

    def spec(self, version: int = 1) -> GraphSpec:
        """The graph a durable run of this workflow runs."""
        return GraphSpec.model_validate(
            {
                "name": self.name,
                "agent": self.agent,
                "entry": NODE,
                "version": version,
                "description": (self.fn.__doc__ or "").strip().split("\n")[0],
                "budget": self.budget.model_dump(),
                "nodes": [
                    {
                        "id": NODE,
                        "type": "workflow",
                        "ref": self.ref,
                        "source_sha256": self.source_sha256,
                    }
                ],
            }
        )

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The run's input: the arguments by parameter name (``ctx`` left out)."""
        try:
            bound = inspect.Signature(self._params).bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"workflow {self.name}: {exc}") from None
        return dict(bound.arguments)

    # -- durable: one visit per batch of steps ---------------------------------------

    async def visit(self, env: ExecEnv, state: RunState, v: Visit, input: Any) -> NodeResult:
        """See :class:`plait.graphs.nodes.workflow.WorkflowDriver`."""
        out = state.outputs.get(v.key)
        journal = await self._journals.journal(
            env.mesh, state.run_id, v.key, out.ref if out is not None else None, v.values.get(v.key)
        )
        durable = env.mesh is not None
        replay = Replay(state.run_id, journal, env, key=v.key, mesh=env.mesh, durable=durable)
        grants = _Lazy(env, v, trusted=v.trusted and not any(e.tainted for e in journal.values()))
        ctx = Context(
            replay,
            grants.get,
            registry=env.tools,
            wait_decision=_waiter(env, v.key),
            child=_children(env, v.key),
            peek=lambda: grants.grants,
        )
        kwargs = input if isinstance(input, Mapping) else {}
        result = await self._settle(replay, ctx, dict(kwargs))
        if durable and replay.new:
            self._journals.wrote(state.run_id, replay.new)
        if result.verdict != STEP and result.waiting is None and not result.retryable:
            self._journals.forget(state.run_id)
        return v.budget.charge(result)

    async def _settle(self, replay: Replay, ctx: Context, kwargs: dict[str, Any]) -> NodeResult:
        fn: Any = self.fn
        task = asyncio.ensure_future(fn(ctx, **kwargs))
        try:
            await replay.until_settled(task)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        failed = task.exception() if task.done() and not task.cancelled() else None
        fatal = replay.fatal
        if fatal is not None:
            detail = "non_deterministic" if isinstance(fatal, NonDeterminism) else "transient_error"
            retryable = bool(getattr(fatal, "retryable", False))
            return NodeResult(error=str(fatal), detail=detail, retryable=retryable)
        if replay.new:
            return NodeResult(value=batch(replay.new), verdict=STEP, tainted=replay.tainted)
        if replay.waiting is not None:
            return NodeResult(waiting=replay.waiting, prompt=replay.waiting.ask)
        if task.cancelled():
            return NodeResult(error="the workflow was cancelled", detail="workflow_failed")
        if failed is not None:
            return NodeResult(error=f"{type(failed).__name__}: {failed}", detail="workflow_failed")
        return NodeResult(value=task.result(), tainted=replay.tainted)

    # -- in session: no mesh ---------------------------------------------------------

    async def run(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the workflow in this process to its end, no mesh: the built-in tools,
        ``PLAIT_MODEL`` for agent turns, no answers (see :meth:`session` for more)."""
        value, _ = await self.session(self.bind(*args, **kwargs))
        return value

    async def session(
        self,
        input: Mapping[str, Any] | None = None,
        *,
        model: Model | str | None = None,
        tools: ToolRegistry | None = None,
        answers: Mapping[str, str] | None = None,
        approve_tools: bool = False,
        profiles: Mapping[str, AgentProfile] | None = None,
        cwd: Path | None = None,
    ) -> tuple[R, list[Entry]]:
        """Run the workflow in this process, no mesh: its value and the steps it ran.

        Args:
            input: its arguments by parameter name.
            model: answers agent turns (default ``PLAIT_MODEL``).
            tools: the tools (default: the built-in ones).
            answers: answers to its questions, by question text (``*``: any); a
                question with none raises WorkflowParked.
            approve_tools: approve every tool call that needs a person's approval.
            profiles: agent profiles by name (the default ``assistant`` is there).
            cwd: where tools work (default: this directory).
        """
        from plait.agents import Agents
        from plait.mesh.memory import MemoryMesh
        from plait.models import load_model
        from plait.profiles.store import put_profile

        spec = model if model is not None else os.environ.get("PLAIT_MODEL")
        loaded = load_model(spec) if isinstance(spec, str) else spec
        registry = tools if tools is not None else default_registry()
        held = MemoryMesh()  # where agent turns read their profiles, and ctx.mesh writes
        for profile in (profiles or {}).values():
            await put_profile(held, profile)
        env = ExecEnv(
            agent=self.agent,
            model=loaded,
            tools=registry,
            profiles=dict(profiles or {}),
            human=SessionAnswers(answers),
            approvals=SessionAnswers(answers, approve_all=approve_tools),
            cwd=cwd or Path.cwd(),
            agents=Agents(held, model=loaded, tools=registry),
        )
        value, steps = await run_session(self, dict(input or {}), env, mesh=held)
        return value, steps

    def __call__(self, ctx: Context, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        """Call the function itself (as a plain call inside another workflow)."""
        return self.fn(ctx, *args, **kwargs)


class _Lazy:
    """The visit's capabilities, built on first use (most replays need none)."""

    def __init__(self, env: ExecEnv, v: Visit, *, trusted: bool, mesh: Mesh | None = None) -> None:
        self.env, self.v, self.trusted = env, v, trusted
        self.mesh = mesh if mesh is not None else env.mesh
        self.grants: Grants | None = None

    def get(self) -> Grants:
        if self.grants is None:
            env, v = self.env, self.v
            profile = env.profile(None)

            async def approve(tool: str, args: dict[str, Any]) -> bool:
                verdict = await env.approvals.approve(
                    key=v.key, visit=v.visit, tool=tool, args=args
                )
                if isinstance(verdict, Waiting):
                    raise Parked(verdict)
                return verdict

            self.grants = grant_all(
                self.mesh,
                tools=env.tools,
                profile=profile,
                context=env.tool_context(v.key, profile),
                approve=approve,
                trusted=self.trusted,
                me={"id": None, "run": env.run_id, "node": v.key},
                by=v.key,
                agents=env.agents,
                programs=env.programs,
                budget=SharedBudget(within=v.budget, node=v.key),
            )
        return self.grants


def _waiter(env: ExecEnv, key: str) -> Callable[[str], Awaitable[dict[str, Any]]] | None:
    mesh = env.mesh
    if mesh is None:
        return None
    board = DecisionAsker(mesh)

    async def wait(decision_id: str) -> dict[str, Any]:
        from plait.ids import DecisionId

        decision = await board.get(DecisionId(decision_id))
        if decision.status == "open":
            raise Parked(
                Waiting(node=key, kind="human", ask=decision.title, decision_id=decision.id)
            )
        by = decision.answer.by if decision.answer is not None else decision.closed_by
        return {"status": decision.status, "value": decision.value, "by": by}

    return wait


def _children(env: ExecEnv, key: str, mesh: Mesh | None = None) -> Child:
    """Child runs of a visit: durably through the run's subgraph runner (the child's
    id derives from the run, the node and the step's position, so a visit run again
    finds it), in session a workflow in this process."""

    async def run(pos: int, agent: str, name: str, version: int | None, input: Any, wf: Any) -> Any:
        runner = env.subgraphs
        if runner is None or env.mesh is None:
            if wf is None:
                raise CapabilityMissing("in session, a workflow starts no graph runs")
            value, _ = await run_session(wf, input, env, mesh=mesh)
            return value
        if wf is not None:
            version = (await import_workflow(env.mesh, wf)).version
        out = await runner(agent, name, version, input, key, pos + 1, False)
        if isinstance(out, Waiting):
            out.node = key
            raise Parked(out)
        if isinstance(out, NodeResult):
            if out.error is not None:
                raise GraphError(out.error)
            return out.value
        return out

    return run


def workflow(
    fn: Callable[Concatenate[Context, P], Awaitable[R]] | None = None,
    *,
    agent: str = "assistant",
    name: str | None = None,
    budget: Budget | int | None = None,
) -> Any:
    """Make ``async def fn(ctx: plait.Context, ...)`` a durable workflow.

    ``await fn.run(...)`` runs it in this process; ``plait workflow import
    pkg.module:fn`` stores it in a mesh and ``plait workflow start`` starts a durable run,
    which survives crashes, parks on people and timers holding no process, and runs on
    any worker that can import the module.
    """

    def make(f: Callable[Concatenate[Context, P], Awaitable[R]]) -> Workflow[P, R]:
        return Workflow(f, agent=agent, name=name, budget=budget)

    return make(fn) if fn is not None else make


class Step(Generic[P, R]):
    """A ``@plait.step`` function: one journaled step however many calls it makes.

    Attributes:
        fn: the function, ``async def fn(ctx, ...)``.
        name: the step's name in the journal (default: the function's qualified name).
        on_indeterminate: what a visit that finds it started but not journaled does.
        verify: for ``verify``: ``async def check(ctx, ...)`` with the step's arguments,
            answering its result if its effect is there, else None.
    """

    def __init__(
        self,
        fn: Callable[Concatenate[Context, P], Awaitable[R]],
        *,
        name: str | None = None,
        on_indeterminate: StepPolicy = "retry",
        verify: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(f"@plait.step needs an async function, not {fn!r}")
        if on_indeterminate not in ("retry", "verify", "escalate"):
            raise ConfigError(
                f"on_indeterminate is retry, verify or escalate, not {on_indeterminate!r}"
            )
        self.fn = fn
        self.name = name or fn.__qualname__
        self.on_indeterminate: StepPolicy = on_indeterminate
        self.verify = verify
        functools.update_wrapper(self, fn)

    def __call__(self, ctx: Context, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """The step as an awaitable, its position taken now."""
        if INSIDE_STEP.get():
            return _inner(self.fn(ctx, *args, **kwargs))
        record = {"args": list(args), "kwargs": kwargs}
        pos, known = ctx._take(self.name, record)
        if known is not None:
            return known  # type: ignore[return-value]  # a replay: nothing more to build

        async def run() -> Any:
            token = INSIDE_STEP.set(True)
            try:
                return await self.fn(ctx, *args, **kwargs)
            finally:
                INSIDE_STEP.reset(token)

        check = self.verify
        verify = (lambda: check(ctx, *args, **kwargs)) if check is not None else None
        return ctx._run_at(pos, self.name, record, run, policy=self.on_indeterminate, verify=verify)


async def _inner(call: Awaitable[R]) -> R:
    return await call


def step(
    fn: Callable[Concatenate[Context, P], Awaitable[R]] | None = None,
    *,
    name: str | None = None,
    on_indeterminate: StepPolicy = "retry",
    verify: Callable[..., Awaitable[Any]] | None = None,
) -> Any:
    """Make ``async def fn(ctx, ...)`` one journaled step of the workflows that call it:
    its result is committed before the workflow goes on and returned on replay without
    running it again. Calls it makes through ``ctx`` are part of it."""

    def make(f: Callable[Concatenate[Context, P], Awaitable[R]]) -> Step[P, R]:
        return Step(f, name=name, on_indeterminate=on_indeterminate, verify=verify)

    return make(fn) if fn is not None else make


class SessionAnswers:
    """In-session answers given up front: by question, or ``*`` for any question; tool
    approvals by ``approve:<tool>`` (or ``approve:*``), else ``approve_all``."""

    def __init__(self, answers: Mapping[str, str] | None, *, approve_all: bool = False) -> None:
        self.answers = dict(answers or {})
        self.approve_all = approve_all

    async def ask(
        self,
        *,
        key: str,
        visit: int,
        ask: str,
        options: list[str] | None,
        expires_after_s: float | None,
        default: str | None,
        on_expire: str,
    ) -> Answer | Waiting:
        """See :class:`plait.graphs.ports.HumanPort`."""
        found = self.answers.get(ask, self.answers.get("*"))
        if found is not None:
            return Answer(found)
        return Waiting(node=key, kind="human", ask=ask, options=options, visit=visit)

    async def approve(
        self, *, key: str, visit: int, tool: str, args: dict[str, Any]
    ) -> bool | Waiting:
        """See :class:`plait.graphs.ports.ApprovalPort`: approved when answered so."""
        found = self.answers.get(f"approve:{tool}", self.answers.get("approve:*"))
        if found is None:
            return self.approve_all
        return found.strip().lower() in ("yes", "approve")


async def run_session(
    wf: Workflow[Any, Any],
    input: Mapping[str, Any],
    env: ExecEnv | None = None,
    *,
    mesh: Mesh | None = None,
) -> tuple[Any, list[Entry]]:
    """Run ``wf`` in this process with ``env`` (default: the built-in tools, answers
    none; ``mesh``, if given, is what ``ctx.mesh`` reads and writes); its return value
    and the steps it ran, in position order.

    Raises:
        WorkflowParked: a question had no answer up front.
    """
    from plait.ids import new_run_id

    env = env or ExecEnv(agent=wf.agent)
    run_id = env.run_id or new_run_id()
    replay = Replay(run_id, {}, env, key=NODE, mesh=None, durable=False)
    grants = _Lazy(env, Visit(NODE, wf.spec().nodes[0], 1, {}, _NoGraph()), trusted=True, mesh=mesh)
    ctx = Context(
        replay,
        grants.get,
        registry=env.tools,
        child=_children(env, NODE, mesh),
        peek=lambda: grants.grants,
    )
    fn: Any = wf.fn
    value = await fn(ctx, **input)
    return value, sorted(replay.new, key=lambda e: e.pos)


class _NoGraph:
    agent = "assistant"

    def predecessors(self, node_id: str) -> list[str]:
        return []

    def incoming(self, node_id: str) -> list[str]:
        return []


__all__ = [
    "NODE",
    "SessionAnswers",
    "Step",
    "Workflow",
    "run_session",
    "source_sha256",
    "step",
    "workflow",
]
