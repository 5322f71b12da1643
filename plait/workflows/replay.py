"""One visit of a workflow: its function run from the top over the journal.

Every call the function makes through its :class:`~plait.workflows.context.Context`
is a step, given a position when the call is made (so positions follow the program,
not the order calls finish in). A step the journal holds at its position returns the
recorded result (or raises the recorded error) without running, once its name and
arguments are checked against the entry (:class:`~plait.errors.NonDeterminism` if they
differ). A new step runs.

Durably, a new step's result is not handed back: the step waits for the next visit,
which replays it. So the visit's batch is every new step the code can start without a
new result (the branches of a gather, within its limit), and the visit ends once they
all finished and the code started no more. Its entries are the visit's output,
committed by the run's owner in one transaction before anything that depends on them
runs. In session, nothing waits: each new step runs and is journaled in memory.

A new step whose ``on_indeterminate`` is ``verify`` or ``escalate`` is first marked as
started (one mesh write): a visit that finds the mark of a step it must run again knows
the step may have had its effect, and the step's policy decides (its verify function,
or a person).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from plait.errors import NonDeterminism, PlaitError, StepFailed, WorkflowParked
from plait.graphs.ports import Answer, ExecEnv
from plait.graphs.state import Waiting
from plait.mesh import Mesh
from plait.workflows.journal import Entry, digest

StepPolicy: TypeAlias = Literal["retry", "verify", "escalate"]
"""What a step found started but not journaled does: ``retry`` runs it again;
``verify`` runs its verify function first and runs it again only if that finds no
effect; ``escalate`` asks a person whether to run it again."""

Verify: TypeAlias = Callable[[], Awaitable[Any]]
"""A step's check after a crash: its result if its effect is there, else None."""

INSIDE_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "plait_workflow_inside_step", default=False
)
"""Set while a ``@plait.step`` body runs: the calls it makes are part of it, not steps."""


def started_key(run_id: str, pos: int) -> str:
    """Where a step whose policy asks for it is marked as started."""
    return f"runs/{run_id}/wfstep/{pos:010d}"


class Parked(Exception):
    """A step cannot finish until a person answers (or a timer fires)."""

    def __init__(self, waiting: Waiting) -> None:
        super().__init__(waiting.ask)
        self.waiting = waiting


@dataclass
class Replay:
    """The state of one visit (see the module docstring).

    Attributes:
        run_id: the run.
        journal: the entries committed before this visit, by position.
        env: the run's environment (its ports answer decisions).
        key: the node key the visit runs as.
        mesh: the mesh started marks go to (None in session: none are written).
        durable: a new step's result waits for the next visit (see the module).
    """

    run_id: str
    journal: dict[int, Entry]
    env: ExecEnv
    key: str = "workflow"
    mesh: Mesh | None = None
    durable: bool = True
    new: list[Entry] = field(default_factory=list)
    waiting: Waiting | None = None
    fatal: BaseException | None = None
    tainted: bool = False
    next_pos: int = 0
    in_flight: int = 0
    started: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def allocate(self) -> int:
        """The position of the next call."""
        pos = self.next_pos
        self.next_pos += 1
        return pos

    def _check(self, pos: int, name: str, args: str) -> Entry | None:
        found = self.journal.get(pos)
        if found is None:
            return None
        if found.name != name or found.args != args:
            exc = NonDeterminism(self.run_id, pos, found.label(), f"{name}({args})")
            self.fatal = self.fatal or exc
            raise exc
        self.tainted = self.tainted or found.tainted
        return found

    def replayed(self, pos: int, name: str, args: Any) -> Replayed | None:
        """The journaled result of the step at ``pos``, checked against ``name`` and
        ``args`` (NonDeterminism if it differs); None if the step is new."""
        if not self.journal:
            return None
        found = self._check(pos, name, digest(args))
        return None if found is None else Replayed(found)

    def recorded(self, name: str, args: Any, compute: Callable[[], Any]) -> Any:
        """A value the function may not recompute on replay (a clock, a random draw, an
        id): journaled with the visit's batch, no visit of its own."""
        if INSIDE_STEP.get():
            return compute()
        pos = self.allocate()
        key = digest(args)
        found = self._check(pos, name, key)
        if found is not None:
            return found.value
        value = compute()
        self._journal(Entry(pos=pos, name=name, args=key, value=value))
        return value

    def patched(self, name: str) -> bool:
        """See :meth:`plait.workflows.Context.patched`."""
        pos = self.next_pos
        found = self.journal.get(pos)
        label = f"patched:{name}"
        if found is not None and found.name != label:
            return False  # journaled by code from before the patch: no position taken
        return bool(self.recorded(label, None, lambda: True))

    def _journal(self, entry: Entry) -> None:
        self.new.append(entry)
        if not self.durable:
            self.journal[entry.pos] = entry

    async def step(
        self,
        pos: int,
        name: str,
        args: Any,
        run: Callable[[], Awaitable[Any]],
        *,
        policy: StepPolicy = "retry",
        verify: Verify | None = None,
        taints: Callable[[], bool] | None = None,
    ) -> Any:
        """Step ``name`` at ``pos``: replayed if journaled, else run (see the module)."""
        key = digest(args)
        found = self._check(pos, name, key)
        if found is not None:
            if found.error is not None:
                raise StepFailed(name, pos, found.error)
            return found.value
        if self.durable and self.fatal:
            await _forever()  # the visit ends without this batch
        self.in_flight += 1
        self.started += 1
        entry = Entry(pos=pos, name=name, args=key)
        parked: Waiting | None = None
        fatal: PlaitError | None = None
        try:
            try:
                entry.value = await self._run(pos, name, key, run, policy, verify)
            except Parked as exc:
                parked = exc.waiting
                self.waiting = self.waiting or parked
            except PlaitError as exc:
                if exc.retryable or isinstance(exc, NonDeterminism):
                    fatal = exc
                    self.fatal = self.fatal or exc
                else:
                    entry.error = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # the step's failure is journaled, raised to the code
                entry.error = f"{type(exc).__name__}: {exc}"
            if parked is None and fatal is None:
                entry.tainted = bool(taints and taints())
                self.tainted = self.tainted or entry.tainted
                self._journal(entry)
        finally:
            self.in_flight -= 1
            self.changed.set()
        if self.durable:
            # Nothing after a new step runs before its entry commits: the code sees
            # the result when the next visit replays it.
            await _forever()
        if parked is not None:
            raise WorkflowParked(parked.ask, parked.options)
        if fatal is not None:
            raise fatal
        if entry.error is not None:
            raise StepFailed(name, pos, entry.error)
        return entry.value

    async def _run(
        self,
        pos: int,
        name: str,
        key: str,
        run: Callable[[], Awaitable[Any]],
        policy: StepPolicy,
        verify: Verify | None,
    ) -> Any:
        if self.mesh is None or policy == "retry":
            return await run()
        mark = started_key(self.run_id, pos)
        stored = await self.mesh.get(mark)
        if stored is not None and stored.value == {"name": name, "args": key}:
            # Started by a visit that never committed: its effect is unknown.
            if policy == "verify" and verify is not None:
                found = await verify()
                if found is not None:
                    return found
            elif policy == "escalate":
                answer = await self.ask(
                    pos,
                    f"Step {pos} ({name}) was interrupted mid-flight and its effect is "
                    "unknown. Run it again?",
                    ["retry", "fail"],
                    kind="indeterminate",
                )
                if answer.text != "retry":
                    raise StepFailed(name, pos, "a person chose not to run it again")
        else:
            await self.mesh.put(mark, {"name": name, "args": key})
        return await run()

    async def ask(
        self,
        pos: int,
        ask: str,
        options: list[str] | None,
        *,
        expires_after_s: float | None = None,
        default: str | None = None,
        kind: str = "human",
    ) -> Answer:
        """A person's answer to ``ask`` (raised once per step); Parked while open."""
        answer = await self.env.human.ask(
            key=self.key if kind == "human" else f"{self.key}.{kind}",
            visit=pos + 1,
            ask=ask,
            options=options,
            expires_after_s=expires_after_s,
            default=default,
            on_expire="default" if default is not None else "fail",
        )
        if isinstance(answer, Waiting):
            answer.node = self.key
            raise Parked(answer)
        return answer

    async def until_settled(self, task: asyncio.Task[Any]) -> None:
        """Wait until the function returned, or this visit's batch is complete: every
        new step it started has finished (each waits for the next visit), and the code
        has had a turn to start more (the branches of a gather), starting none."""
        task.add_done_callback(lambda _: self.changed.set())
        while not task.done():
            if self.in_flight == 0 and (self.new or self.waiting or self.fatal):
                seen = self.started
                await asyncio.sleep(0)  # a turn for the code to run on to where it waits
                if self.in_flight == 0 and self.started == seen:
                    break
                continue
            self.changed.clear()
            await self.changed.wait()


class Replayed:
    """A journaled step, awaited without running: its recorded result (or error) at
    once, with no task and no turn of the loop (a replay of a thousand steps does a
    thousand of these)."""

    __slots__ = ("entry",)

    def __init__(self, entry: Entry) -> None:
        self.entry = entry

    def result(self) -> Any:
        """The recorded value; StepFailed if the step raised."""
        entry = self.entry
        if entry.error is not None:
            raise StepFailed(entry.name, entry.pos, entry.error)
        return entry.value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.result()
        yield  # a generator, so that ``await`` takes it

    def close(self) -> None:
        """Nothing to close (as a coroutine that was never awaited)."""


async def _forever() -> None:
    """Wait until the visit ends (it cancels the function)."""
    await asyncio.Event().wait()


def timer_ask(seconds: float) -> str:
    """The question a durable timer is raised as (a person may end it early)."""
    at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + seconds))
    return f"Timer: the workflow sleeps until {at}. Answer it to end it early."


__all__ = [
    "INSIDE_STEP",
    "Parked",
    "Replay",
    "Replayed",
    "StepPolicy",
    "Verify",
    "started_key",
    "timer_ask",
]
