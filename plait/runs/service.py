"""Durable runs as a service: start, watch, resume, cancel, list and inspect runs.

Everything goes through the mesh, so a run started in one process can be inspected,
resumed and finished from another. Starting a run writes its record, its owner actor,
its first audit event and its first wake in one transaction; some process built by
:func:`plait.runs.serve` (``plait worker``, or ``plait graph run`` itself) then serves
it. This is the surface people use; the run owners never build it.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from plait.actors import load_partitions
from plait.decisions import DecisionAnswerer, Human, Principal, require_human
from plait.errors import (
    ConfigError,
    DecisionClosed,
    DecisionNotFound,
    MeshUnavailable,
    RunError,
    RunNotFound,
    RunNotWaiting,
    VersionConflict,
)
from plait.graphs import waits
from plait.graphs.state import Waiting
from plait.graphs.trajectory import StepDecision, StepUsage, ToolCall, TrajectoryStep
from plait.ids import DecisionId, RunId
from plait.mesh import Backoff, LiveWatch, Mesh
from plait.runs.audit import AuditEvent, read_events
from plait.runs.audit import verify as verify_chain
from plait.runs.channel import LiveEvent, channel_of
from plait.runs.commit import RunCommit
from plait.runs.listing import LISTING_STATUSES, list_runs
from plait.runs.log import LogEntry, LogFollower, read_log, read_payload, split_ref
from plait.runs.mesh_ports import history_part_key
from plait.runs.progress import Progress
from plait.runs.record import RunRecord, RunSummary, as_record
from plait.runs.rerun import KEEP_INPUT, ForkOrigin, fork_origin, fork_run, retry_run
from plait.runs.retention import prune as prune_runs
from plait.runs.start import OWNER_CONCURRENCY, on_mesh, start_run
from plait.runs.store import read_record, run_output
from plait.runs.watch import channel_end

log = logging.getLogger("plait.runs")

_FOLLOW_MIN_S = 0.005
_FOLLOW_MAX_S = 0.1
"""How often a watch reads a run's log again: soon after news, backing off to this."""

_WATCHED_MAX_S = 1.0
"""The same, for a watch woken by the run's live channel: a fallback only."""

BUDGET_LIMITS = ("steps", "tokens", "dollars", "wall_seconds", "retries")
"""The limits a person may raise."""


class Runs:
    """Start and manage durable runs on a mesh."""

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self.desk = DecisionAnswerer(mesh)

    # start_run's parameters and docstring, written once: a subgraph node's child run
    # starts through start_run itself, without the service.
    start = on_mesh(start_run)

    async def get(self, run_id: RunId) -> RunRecord:
        """A run's record."""
        rec, _ = await self._read(run_id)
        return rec

    async def _read(self, run_id: RunId) -> tuple[RunRecord, int]:
        """A run's record and its version; RunNotFound if there is none."""
        rec, version = await read_record(self.mesh, run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r} in {self.mesh.url}")
        return rec, version

    async def list(
        self, *, agent: str | None = None, status: str | None = None
    ) -> list[RunSummary]:
        """Runs, newest first, filtered by agent and listing status.

        Raises:
            ConfigError: ``status`` is not one of :data:`LISTING_STATUSES`.
        """
        return await list_runs(self.mesh, agent=agent, status=status)

    async def wait(
        self,
        run_id: RunId,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        on_progress: Callable[[Progress], None] | None = None,
        since: RunRecord | None = None,
        on_event: Callable[[LiveEvent], None] | None = None,
    ) -> RunRecord:
        """Wait until the run is done, failed, cancelled or waiting on a person.

        Args:
            run_id: the run.
            timeout: seconds to wait at most (TimeoutError after).
            on_progress: called with each progress event of the run (after ``since``
                only those published since it parked).
            since: a record that waited on a decision just answered (what
                :meth:`resume` returns); waiting on that same decision does not count
                as settled.
            on_event: called with each ``attempt`` and ``delta`` event of the run's
                live channel from now on (its models' replies as they stream; see
                :mod:`plait.runs.channel`).

        A run parked on a subgraph's child run settles when that child (or its own
        child) waits on a person; see :meth:`asks`. The wait watches the run's live
        channel and reads the run again when it moves; on a mesh without live
        channels, or a quiet channel, it reads again after a pause.
        """
        live = self.mesh.live
        if live is None:
            return await self._wait(run_id, timeout, on_progress, since, None, None)
        after = await channel_end(self.mesh, run_id)
        async with live.watch(channel_of(run_id)) as watch:
            return await self._wait(run_id, timeout, on_progress, since, watch, on_event, after)

    async def _wait(
        self,
        run_id: RunId,
        timeout: float | None,  # noqa: ASYNC109
        on_progress: Callable[[Progress], None] | None,
        since: RunRecord | None,
        watch: LiveWatch | None,
        on_event: Callable[[LiveEvent], None] | None,
        after: int = 0,
    ) -> RunRecord:
        answered = since.waiting.decision_id if since and since.waiting else None
        # Resuming, only what happened since the run parked is news worth showing: its
        # events carry the record's audit_seq, which every commit moves on.
        shown_after = -1
        if since is not None:
            watched = since if since.run_id == run_id else await self.get(run_id)
            shown_after = watched.audit_seq
        follower = LogFollower(self.mesh, run_id, max(0, shown_after))
        backoff = Backoff(log)
        pause = _FOLLOW_MIN_S
        with anyio.fail_after(timeout):
            while True:
                try:
                    rec = await self.get(run_id)
                    settled = rec.terminal
                    if not settled:
                        asking = await self.asks(rec)
                        settled = asking is not None and asking[1].decision_id != answered
                    # Read after the record: every entry its commit wrote is there now,
                    # so a settled run's last progress is shown before returning.
                    news = [e.progress for e in await follower.poll() if e.progress]
                    for progress in news:
                        if on_progress is not None:
                            on_progress(progress)
                    if settled:
                        return rec
                    if watch is None:
                        pause = _FOLLOW_MIN_S if news else min(pause * 2, _FOLLOW_MAX_S)
                        await anyio.sleep(pause)
                        continue
                    pause = _FOLLOW_MIN_S if news else min(pause * 2, _WATCHED_MAX_S)
                    after = await self._streamed(watch, after, pause, on_event)
                except MeshUnavailable as exc:
                    # A watch changes nothing a run needs: once the mesh is back, it
                    # reads on.
                    await backoff.wait(exc)

    @staticmethod
    async def _streamed(
        watch: LiveWatch,
        after: int,
        pause: float,
        on_event: Callable[[LiveEvent], None] | None,
    ) -> int:
        """Hand the run's streamed events to ``on_event`` until the channel brings a
        progress (or stays quiet for ``pause``): then the run is worth reading again.
        Returns the offset read up to."""
        while True:
            found = await watch.next(after, pause)
            if found.last < after:
                return 0  # the channel began again
            if not found.items:
                return after
            moved = False
            for item in found.items:
                after = item.offset
                event = LiveEvent.parse(item.offset, item.data)
                if event is None:
                    continue
                if event.kind == "progress":
                    moved = True
                elif on_event is not None:
                    on_event(event)
            if moved:
                return after

    async def asks(self, rec: RunRecord) -> tuple[RunRecord, Waiting] | None:
        """What a person must answer for ``rec`` to go on, and the run that asks it.

        The run itself, or, when it is parked on a subgraph's child run, whatever that
        child (or its own child) waits on. None if no person is waited on.
        """
        seen = {rec.run_id}
        while rec.waiting is not None and rec.waiting.child is not None:
            child = rec.waiting.child
            found, _ = await read_record(self.mesh, child)
            if found is None or child in seen:
                return None
            seen.add(child)
            rec = found
        if rec.waiting is None or rec.terminal:
            return None
        return rec, rec.waiting

    async def resume(self, run_id: RunId, answer: str, *, by: Principal) -> RunRecord:
        """Answer what the run waits on; its owner wakes at once through the mesh.

        A run parked on a subgraph's child run answers what that child asks (see
        :meth:`asks`). Returns the record of the run whose question was answered, as
        it was before the answer.
        """
        outer = await self.get(run_id)
        asking = await self.asks(outer)
        rec, waiting = asking if asking is not None else (outer, None)
        if waiting is None or waiting.decision_id is None:
            raise RunNotWaiting(f"run {run_id} is {outer.status}: it waits on no answer")
        if waiting.kind == "budget":
            raise RunNotWaiting(
                f"run {run_id} waits on a budget raise: raise it with "
                f"plait graph raise-budget {run_id} --steps N"
            )
        answer = waits.answer_for(waiting, answer)
        if waiting.options:
            await self.desk.answer(waiting.decision_id, option=answer, by=by)
        else:
            await self.desk.answer(waiting.decision_id, text=answer, by=by)
        return rec

    async def cancel(self, run_id: RunId, *, by: Principal) -> RunRecord:
        """Cancel a run: nothing of it runs again."""
        require_human(by, "cancel a run")
        await load_partitions(self.mesh)  # its end mails the owner (see start)
        while True:
            rec, version = await self._read(run_id)
            new = waits.cancel_run(rec, now=time.time())
            if new is None:
                return rec
            cancelled = as_record(new)
            try:
                await RunCommit(self.mesh).cancel(cancelled, version, by=by.name)
            except VersionConflict:
                continue
            if rec.waiting is not None and rec.waiting.decision_id is not None:
                # Withdrawn, so no one is left asked about a run that is gone.
                with contextlib.suppress(DecisionClosed, DecisionNotFound):
                    await self.desk.cancel(rec.waiting.decision_id, by=by)
            if rec.waiting is not None and rec.waiting.child is not None:
                with contextlib.suppress(RunNotFound):  # its subgraph's run goes too
                    await self.cancel(rec.waiting.child, by=by)
            return cancelled

    async def retry(self, run_id: RunId, *, by: Principal) -> RunRecord:
        """Continue a failed run from the node that failed, keeping every committed
        visit, pinned to the same graph version (``temporal workflow reset``).

        The nodes ready or in flight when it failed run again (the failed node as its
        next visit); a ``run.retried`` audit event names ``by`` and what had failed.

        Raises:
            NotPermitted: ``by`` is not a person (a person only, as for cancel).
            RunNotFound: there is no such run.
            RunNotRetryable: it did not fail, or failed on its budget (a retry would
                fail again; fork it from an earlier visit instead).
        """
        require_human(by, "retry a run")
        return await retry_run(self.mesh, run_id, by=by.name)

    async def fork(
        self,
        run_id: RunId,
        at: str,
        *,
        by: Principal,
        input: Any = KEEP_INPUT,
        input_untrusted: bool = False,
    ) -> RunRecord:
        """Start a new run from the state after a committed visit of ``run_id``.

        Args:
            run_id: the parent run.
            at: the visit, as ``node:visit`` (``graph inspect`` shows them) or ``node``
                for that node's last visit.
            by: who forks it: a person, if the fork would re-use a person's answer or
                budget raise (the visits before ``at`` hold one).
            input: the new run's input (default: the parent's).
            input_untrusted: a new ``input`` is outside content.

        The fork is pinned to the parent's graph version; only what comes after the
        visit runs. Its first audit event (``run.forked``) names the parent's event it
        starts from (run id, seq and hash).

        Raises:
            NotPermitted: ``by`` is no person and a person answered or raised a budget
                before ``at`` (in this run, the run it was forked from, or a subgraph's
                run); nothing is written.
            RunNotFound: there is no such run.
            VisitNotFound: ``at`` is no committed visit, or nothing runs after it; the
                error lists the visits to fork at.
        """
        return await fork_run(
            self.mesh, run_id, at, input=input, input_untrusted=input_untrusted, by=by
        )

    async def forked_from(self, run_id: RunId) -> ForkOrigin | None:
        """Where a run was forked from: its parent's event (None if it is no fork)."""
        return await fork_origin(self.mesh, run_id)

    async def raise_budget(
        self, run_id: RunId, extra: dict[str, float], *, by: Principal
    ) -> RunRecord:
        """Raise a run's budget (a person only) and wake it if it waited on that.

        Args:
            run_id: the run.
            extra: amounts to add per limit: ``steps``, ``tokens``, ``dollars``,
                ``wall_seconds``, ``retries``.
            by: the person raising it.

        Raises:
            NotPermitted: ``by`` is not a human; nothing changes.
            ConfigError: an unknown limit, or an amount that is not positive.
            RunNotFound: there is no such run.
            RunError: the run is already over.
        """
        human: Human = require_human(by, "raise a budget")
        for name, amount in extra.items():
            if name not in BUDGET_LIMITS:
                raise ConfigError(
                    f"cannot raise budget {name!r}: the limits are {', '.join(BUDGET_LIMITS)}"
                )
            if not float(amount) > 0:
                raise ConfigError(f"a budget raise must be positive, got {name}={amount!r}")
        await load_partitions(self.mesh)  # the raise mails the owner (see start)
        while True:
            rec, version = await self._read(run_id)
            if rec.terminal:
                raise RunError(f"run {run_id} is {rec.status}: its budget can no longer be raised")
            new = as_record(waits.budget_raised(rec, extra, now=time.time()))
            try:
                await RunCommit(self.mesh).raise_budget(new, version, extra, by=human.name)
            except VersionConflict:
                continue
            waiting = rec.waiting
            if waiting is not None and waiting.kind == "budget" and waiting.decision_id:
                # Already closed if the person chose "raise" on the desk first.
                with contextlib.suppress(DecisionClosed, DecisionNotFound):
                    await self.desk.answer(waiting.decision_id, option="raise", by=human)
            return new

    async def prune(
        self, *, ended_before: float, dry_run: bool = False
    ) -> builtins.list[RunSummary]:
        """Delete the runs that ended before ``ended_before``; see :func:`prune_runs`."""
        return await prune_runs(
            self.mesh, await self.list(), ended_before=ended_before, dry_run=dry_run
        )

    async def trajectory(self, run_id: RunId) -> builtins.list[TrajectoryStep]:
        """Committed visits in commit order, then any visit parked on a person.

        Each step carries its status (``done``, ``failed`` or ``waiting``), the tool
        calls the visit made and the decision it raised (see :class:`TrajectoryStep`).
        """
        # The events first: a stored entry that does not decode is named as the audit
        # event it holds (AuditChainBroken), as verify names it.
        events = await read_events(self.mesh, run_id)
        entries = [entry async for entry in read_log(self.mesh, run_id)]
        asked = {
            (e.node, e.visit): (e.detail.get("decision_id"), e.detail.get("ask"))
            for e in events
            if e.type == "node.waiting"
        }
        steps = []
        for entry in entries:
            for value in entry.events:
                event = AuditEvent.model_validate(value)
                if event.type != "node.committed" or event.node is None or event.visit is None:
                    continue
                payload = await self._payload(entry, event.output_ref)
                steps.append(
                    TrajectoryStep(
                        node=event.node,
                        visit=event.visit,
                        status="failed" if event.error else "done",
                        prompt=payload.get("prompt"),
                        output=payload.get("value"),
                        verdict=event.verdict,
                        usage=StepUsage.model_validate(event.usage or {}),
                        started_at=event.detail.get("started_at"),
                        ended_at=event.detail.get("ended_at"),
                        error=event.error,
                        tools=await self._tool_calls(entry, run_id, event.node, event.visit),
                        decision=await self._decision(
                            asked.pop((event.node, event.visit), (None, None))[0]
                        ),
                    )
                )
        for (node, visit), (decision, ask) in asked.items():  # parked: asked, not committed
            if node is None or visit is None:
                continue
            steps.append(
                TrajectoryStep(
                    node=node,
                    visit=visit,
                    status="waiting",
                    prompt=ask,
                    decision=await self._decision(decision),
                )
            )
        return steps

    async def _payload(self, entry: LogEntry, ref: str | None) -> dict[str, Any]:
        """The output payload at ``ref``, read in ``entry`` if it is there."""
        if ref is None:
            return {}
        key, node = split_ref(ref)
        found = entry.outputs.get(node) if key == entry.key and node else None
        if found is None:
            found = await read_payload(self.mesh, ref)
        return found if isinstance(found, dict) else {}

    async def _tool_calls(
        self, entry: LogEntry, run_id: str, node: str, visit: int
    ) -> builtins.list[ToolCall]:
        """The tool calls an agent visit made, each with its result, from its conversation
        (in its log entry, or under its own key in the layout before entries)."""
        part = entry.history.get(node)
        if isinstance(part, dict) and part.get("visit") == visit:
            messages = list(part.get("messages") or [])
        else:
            stored = await self.mesh.get(history_part_key(run_id, node, visit))
            messages = stored.value if stored is not None and isinstance(stored.value, list) else []
        calls: dict[str, ToolCall] = {}
        for message in messages:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or ():
                calls[call.get("id", "")] = ToolCall(
                    name=call.get("name"), arguments=call.get("arguments")
                )
            if message.get("role") == "tool" and message.get("tool_call_id") in calls:
                calls[message["tool_call_id"]].result = message.get("content")
        return builtins.list(calls.values())

    async def _decision(self, decision_id: DecisionId | None) -> StepDecision | None:
        """Who answered a decision and when (None if there is none, or it is gone)."""
        if not decision_id:
            return None
        try:
            d = await self.desk.get(decision_id)
        except DecisionNotFound:
            return StepDecision(id=decision_id, status="gone")
        answer = d.answer
        return StepDecision(
            id=d.id,
            status=d.status,
            answer=None if answer is None else (answer.option or answer.text),
            by=answer.by if answer is not None else d.closed_by,
            label=answer.label if answer is not None else None,
            at=answer.at if answer is not None else d.closed_at,
        )

    async def output(self, rec: RunRecord) -> Any:
        """The output of a finished run."""
        return await run_output(self.mesh, rec)

    async def verify(self, run_id: RunId) -> int:
        """Verify a run's audit chain; the number of events it holds."""
        return await verify_chain(self.mesh, await self.get(run_id))


__all__ = ["BUDGET_LIMITS", "LISTING_STATUSES", "OWNER_CONCURRENCY", "Runs"]
