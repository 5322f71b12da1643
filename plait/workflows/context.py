"""What a workflow's code sees: :class:`Context`, every call through it a step.

Each call is given its position when it is made and returns an awaitable; awaiting
it replays the journaled result or runs the step (see :mod:`plait.workflows.replay`).
Inside a ``@plait.step`` body the calls are part of that step: they run as plain
calls, with no position and no entry of their own.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from plait.errors import CapabilityMissing, ConfigError
from plait.ids import new_id
from plait.programs import Grants
from plait.tools import ToolRegistry
from plait.workflows.replay import INSIDE_STEP, Replay, Replayed, StepPolicy, Verify, timer_ask

MAX_SLEEP_S = 366 * 24 * 3600.0


@dataclass(frozen=True)
class Answered:
    """A person's answer to :meth:`Decisions.ask`.

    Attributes:
        option: the option chosen (None for a free-text question).
        text: the answer as given.
        by: who answered.
    """

    option: str | None
    text: str
    by: str


class _Part:
    __slots__ = ("_ctx",)

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx


class Tools(_Part):
    """Tool calls, gated as the workflow's agent's own (its allow list, approvals)."""

    def call(
        self,
        ref: str,
        args: dict[str, Any] | None = None,
        *,
        on_indeterminate: StepPolicy | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Call tool ``ref`` with ``args``: a step named ``tools.<ref>``. Its default
        ``on_indeterminate`` is ``retry`` for a read-only tool, else ``escalate``."""
        ctx = self._ctx
        policy = on_indeterminate or ctx._tool_policy(ref)
        return ctx._call(
            f"tools.{ref}",
            {"ref": ref, "args": args or {}},
            lambda: ctx._grants_tools().call(ref, args),
            policy=policy,
        )

    def bash(
        self,
        command: str,
        timeout_s: float | None = None,
        *,
        on_indeterminate: StepPolicy | None = None,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Run ``command`` with the ``bash`` tool: ``{ok, exit_code, stdout, stderr}``."""
        ctx = self._ctx
        return ctx._call(
            "tools.bash",
            {"command": command, "timeout_s": timeout_s},
            lambda: ctx._grants_tools().bash(command, timeout_s),
            policy=on_indeterminate or ctx._tool_policy("bash"),
        )


class Agents(_Part):
    """Agent turns, spending from the run's budget."""

    def run(self, task: str, **options: Any) -> Coroutine[Any, Any, dict[str, Any]]:
        """One turn of an agent on ``task`` (``agent=``, ``max_rounds=``):
        ``{status, text, usage}``; its tokens and dollars count in the run's budget."""
        ctx = self._ctx

        async def run() -> dict[str, Any]:
            agents = ctx._grants().agents
            if agents is None:
                raise CapabilityMissing("this workflow was given no agents")
            return await agents.run(task, **options)

        return ctx._call("agents.run", {"task": task, **options}, run)


class Programs(_Part):
    """Programs run nested, with the workflow's capabilities and budget."""

    def run(self, ref: str, input: Any = None) -> Coroutine[Any, Any, Any]:
        """Run program ``ref`` on ``input`` (a promoted saved program, or a registered
        one): a step named ``programs.run``, escalated if interrupted."""
        ctx = self._ctx

        async def run() -> Any:
            from plait.programs.runner import ProgramsCapability

            return await ProgramsCapability(ctx._grants()).run(ref, input)

        return ctx._call("programs.run", {"ref": ref, "input": input}, run, policy="escalate")


class Decisions(_Part):
    """Questions to people: the run parks, holding no process, until one answers."""

    def ask(
        self,
        question: str,
        options: list[str] | None = None,
        *,
        expires_after_s: float | None = None,
        default: str | None = None,
    ) -> Coroutine[Any, Any, Answered]:
        """Ask a person ``question`` (a choice of ``options``, or free text)."""
        ctx = self._ctx

        async def run(pos: int) -> dict[str, Any]:
            answer = await ctx._replay.ask(
                pos, question, options, expires_after_s=expires_after_s, default=default
            )
            option = answer.text if options else None
            return {"option": option, "text": answer.text, "by": answer.by}

        asked = ctx._call_at("decisions.ask", {"question": question, "options": options}, run)

        async def answered() -> Answered:
            return Answered(**(await asked))

        return answered()

    def wait(self, decision_id: str) -> Coroutine[Any, Any, dict[str, Any]]:
        """Wait for decision ``decision_id`` (raised elsewhere) to close; parks the run
        meanwhile. Returns ``{status, value, by}``."""
        ctx = self._ctx

        async def run() -> dict[str, Any]:
            return await ctx._wait_decision(decision_id)

        return ctx._call("decisions.wait", {"id": decision_id}, run)


class MeshReads(_Part):
    """The mesh, as programs see it (service keys read-only); each call a step."""

    def get(self, key: str) -> Coroutine[Any, Any, dict[str, Any] | None]:
        """``{key, value, version}`` at ``key``, or None."""
        ctx = self._ctx
        return ctx._call("mesh.get", {"key": key}, lambda: ctx._mesh().get(key))

    def put(
        self, key: str, value: Any, if_version: int | None = None
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Write ``value`` at ``key`` (``if_version``: compare and set)."""
        ctx = self._ctx
        return ctx._call(
            "mesh.put",
            {"key": key, "value": value, "if_version": if_version},
            lambda: ctx._mesh().put(key, value, if_version),
        )

    def scan(self, prefix: str) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        """Every ``{key, value, version}`` under ``prefix``."""
        ctx = self._ctx
        return ctx._call("mesh.scan", {"prefix": prefix}, lambda: ctx._mesh().scan(prefix))


class Runs(_Part):
    """Child runs the workflow starts and awaits: the run parks, holding no process,
    until the child ends, and the child's output is the step's result."""

    def graph(
        self, agent: str, name: str, input: Any = None, *, version: int | None = None
    ) -> Coroutine[Any, Any, Any]:
        """Run stored graph ``agent``/``name`` (newest or ``version``) as a child run."""
        ctx = self._ctx

        async def run(pos: int) -> Any:
            return await ctx._child(pos, agent, name, version, input, None)

        args = {"agent": agent, "name": name, "version": version, "input": input}
        return ctx._call_at("runs.graph", args, run)

    def workflow(self, wf: Any, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        """Run workflow ``wf`` (a ``@plait.workflow``) with these arguments as a child run
        (in session: in this process)."""
        ctx = self._ctx
        input = wf.bind(*args, **kwargs)

        async def run(pos: int) -> Any:
            return await ctx._child(pos, wf.agent, wf.name, None, input, wf)

        return ctx._call_at("runs.workflow", {"workflow": wf.ref, "input": input}, run)


Child = Callable[[int, str, str, "int | None", Any, Any], Awaitable[Any]]
"""Runs a child (position, agent, name, version, input, workflow or None): its output."""


class Context:
    """A workflow's way to the world: every call through it is a journaled step.

    Attributes:
        run_id: the run.
        tools, agents, programs, decisions, mesh: the capabilities, as steps.
        runs: child runs (a graph or another workflow), as steps.
    """

    def __init__(
        self,
        replay: Replay,
        grants: Callable[[], Grants],
        *,
        registry: ToolRegistry | None = None,
        wait_decision: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
        child: Child | None = None,
        peek: Callable[[], Grants | None] | None = None,
    ) -> None:
        self._replay = replay
        self._grants = grants
        self._peek = peek or grants  # the capabilities if built (none: nothing tainted)
        self._registry = registry
        self._wait = wait_decision
        self._children = child
        self.run_id = replay.run_id
        self.tools = Tools(self)
        self.agents = Agents(self)
        self.programs = Programs(self)
        self.decisions = Decisions(self)
        self.mesh = MeshReads(self)
        self.runs = Runs(self)

    # -- the values the code may not recompute on replay ------------------------------

    def now(self) -> float:
        """The time (epoch seconds), as the first run saw it."""
        return float(self._replay.recorded("now", None, time.time))

    def random(self) -> float:
        """A random float in [0, 1), as the first run drew it."""
        return float(self._replay.recorded("random", None, random.random))

    def uuid(self) -> str:
        """A fresh id (hex), as the first run made it."""
        return str(self._replay.recorded("uuid", None, new_id))

    def patched(self, name: str) -> bool:
        """True in a run that reaches this call on code that has it; False in a run
        whose journal was written by code from before (its replay takes no position).

        Wrap a change to a workflow that has runs in flight::

            if ctx.patched("lint-first"):
                await ctx.tools.bash("ruff check .")
        """
        return self._replay.patched(name)

    def sleep(
        self, seconds: float = 0.0, *, minutes: float = 0.0, hours: float = 0.0
    ) -> Coroutine[Any, Any, None]:
        """Sleep durably: the run parks on a timer holding no process, and a restart
        or another host resumes it when the timer fires. The timer is a decision that
        expires then, so a person may end the sleep early (by answering it)."""
        total = float(seconds) + 60.0 * float(minutes) + 3600.0 * float(hours)
        if not 0 <= total <= MAX_SLEEP_S:
            raise ConfigError(f"a workflow sleeps 0 to {MAX_SLEEP_S:g} s, not {total:g}")
        replay = self._replay

        async def run(pos: int) -> None:
            if not replay.durable or pos < 0:  # in session, or inside a step's body
                await asyncio.sleep(total)
                return
            await replay.ask(
                pos,
                timer_ask(total),
                None,
                expires_after_s=max(total, 0.001),
                default="resume",
                kind="timer",
            )

        return self._call_at("sleep", {"seconds": total}, run)

    # -- the step machinery ----------------------------------------------------------

    def _call(
        self,
        name: str,
        args: Any,
        run: Callable[[], Awaitable[Any]],
        *,
        policy: StepPolicy = "retry",
        verify: Verify | None = None,
    ) -> Coroutine[Any, Any, Any]:
        return self._call_at(name, args, lambda _pos: run(), policy=policy, verify=verify)

    def _call_at(
        self,
        name: str,
        args: Any,
        run: Callable[[int], Awaitable[Any]],
        *,
        policy: StepPolicy = "retry",
        verify: Verify | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """The step ``name`` at the next position: ``run`` is given that position."""
        if INSIDE_STEP.get():
            return _plain(lambda: run(-1))
        pos, known = self._take(name, args)
        if known is not None:
            return known  # type: ignore[return-value]
        return self._run_at(pos, name, args, lambda: run(pos), policy=policy, verify=verify)

    def _take(self, name: str, args: Any) -> tuple[int, Replayed | None]:
        """The next position, and the journaled step there (checked), if any."""
        pos = self._replay.allocate()
        return pos, self._replay.replayed(pos, name, args)

    def _run_at(
        self,
        pos: int,
        name: str,
        args: Any,
        run: Callable[[], Awaitable[Any]],
        *,
        policy: StepPolicy = "retry",
        verify: Verify | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """The new step ``name`` at ``pos`` (see :meth:`_take`), run by ``run``."""
        peek = self._peek
        return self._replay.step(
            pos,
            name,
            args,
            run,
            policy=policy,
            verify=verify,
            taints=lambda: (held := peek()) is not None and held.taint.tainted,
        )

    def _grants_tools(self) -> Any:
        tools = self._grants().tools
        if tools is None:
            raise CapabilityMissing("this workflow was given no tools")
        return tools

    def _mesh(self) -> Any:
        mesh = self._grants().mesh
        if mesh is None:
            raise CapabilityMissing("this workflow runs without a mesh: ctx.mesh is missing")
        return mesh

    def _tool_policy(self, ref: str) -> StepPolicy:
        registry = self._registry
        if registry is not None and ref in registry and registry.get(ref).read_only:
            return "retry"
        return "escalate"

    async def _child(
        self, pos: int, agent: str, name: str, version: int | None, input: Any, wf: Any
    ) -> Any:
        if self._children is None:
            raise CapabilityMissing("this workflow was given no way to start child runs")
        return await self._children(pos, agent, name, version, input, wf)

    async def _wait_decision(self, decision_id: str) -> dict[str, Any]:
        if self._wait is None:
            raise CapabilityMissing("this workflow runs without a mesh: no decisions to wait on")
        return await self._wait(decision_id)


async def _plain(run: Callable[[], Awaitable[Any]]) -> Any:
    return await run()


__all__ = [
    "Agents",
    "Answered",
    "Context",
    "Decisions",
    "MeshReads",
    "Programs",
    "Runs",
    "Tools",
]
