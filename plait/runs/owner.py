"""The run owner: a durable actor that runs one node per mailbox message.

Every message (a wake) goes the same way, whatever it says — the record decides what
runs, never the message: read → engine → execute → commit.

1. read the record (a warm host keeps it from its own last write); stop if terminal;
   a parked run re-checks what it waits on and the engine decides whether it resumes;
2. claim one ready node with a compare-and-swap of ``attempts[node]`` holding a fresh
   nonce (an attempt left by a host that died is indeterminate: the node's
   ``on_indeterminate`` policy decides);
3. execute it outside any lock;
4. commit in ONE mesh transaction (:class:`~plait.runs.commit.RunCommit`).

A conflict at commit means another wake changed the record meanwhile (a sibling fan-out
instance committed): the transition is recomputed on the fresh record as long as this
claim's nonce is still there; if it is not, this wake lost its node and stops.
"""

from __future__ import annotations

import asyncio
import logging
import time

from plait.actors import ActorContext, Mail
from plait.actors.directory import tell_now
from plait.errors import (
    ConfigError,
    DecisionNotFound,
    MeshUnavailable,
    PlaitError,
    RunError,
    ValueTooLarge,
    VersionConflict,
)
from plait.graphs import engine, waits
from plait.graphs.compiled import CompiledGraph
from plait.graphs.engine import NodeResult
from plait.graphs.events import Event
from plait.graphs.executors import execute
from plait.graphs.state import Attempt, Waiting
from plait.graphs.waits import Closed
from plait.mesh import Delivery, Transaction
from plait.runs.asks import ask_for_budget, ask_to_retry
from plait.runs.commit import TICK_MAX_MS, claim
from plait.runs.live import taken_over
from plait.runs.owner_services import OwnerServices
from plait.runs.record import (
    OWNER_KIND,
    RunRecord,
    as_record,
    listing_status,
    owner_id,
)
from plait.runs.store import read_record
from plait.runs.telemetry import annotate_visit
from plait.runs.wake import Wake
from plait.telemetry import STATE, current, in_run, visit_span

_CLAIM_TRIES = 50

log = logging.getLogger(__name__)


async def handle(ctx: ActorContext, mail: Mail) -> None:
    """The run owner's handler: one node per wake.

    A wake that fails is delivered again only if the failure may pass (the mesh was
    unreachable, the record kept moving) and this is not its last delivery; otherwise
    the run fails with the reason at once, so no node runs again for an error that
    cannot heal and no run stays ``running`` behind a dead-lettered message.

    Raises:
        ActorError: the runtime was built without owner services (build the serving
            process with :func:`plait.runs.serve`).
    """
    handler = _handler_of(ctx, mail)
    run_id = handler.run_id
    try:
        await handler.run()
        if handler.settled:
            ctx.rest()  # parked or over: the host keeps nothing of it (see RunStore)
    except Exception as exc:
        if isinstance(exc, MeshUnavailable):
            raise  # nothing can be written now; the runtime leaves it for redelivery
        last = mail.delivery.attempt >= ctx.runtime.max_attempts
        heals = isinstance(exc, RunError) or (isinstance(exc, PlaitError) and exc.retryable)
        if heals and not last:
            raise
        detail = "dead_lettered" if heals else "internal_error"
        reason = f"the wake failed {mail.delivery.attempt} time(s), last with " if heals else ""
        log.debug("run %s: wake %s failed", run_id, mail.delivery.id, exc_info=True)
        await handler.fail(detail, f"{reason}{type(exc).__name__}: {exc}")


async def on_dead_letter(ctx: ActorContext, mail: Mail, reason: str) -> None:
    """Fail the run of a wake the runtime dead-letters without its handler succeeding
    (its hosts died mid-node, or the mesh failed it, ``max_attempts`` times)."""
    await _handler_of(ctx, mail).fail("dead_lettered", f"the wake was dead-lettered: {reason}")


def _handler_of(ctx: ActorContext, mail: Mail) -> _WakeHandler:
    """The handling of ``mail``, its wake parsed once (see :class:`Wake`)."""
    woken = Wake.parse(mail.body, ctx.id.removeprefix("run:"))
    return _WakeHandler(ctx.service(OwnerServices), _OwnWakes(ctx, woken.run), woken, mail)


class _OwnWakes:
    """The runtime's take of the wakes a commit sends (see :class:`RunCommit.step`)."""

    def __init__(self, ctx: ActorContext, run_id: str) -> None:
        self.runtime = ctx.runtime
        self.owner = owner_id(run_id)

    def take_in(self, tx: Transaction, count: int) -> bool:
        """Add the take of up to ``count`` wakes for this runtime to ``tx``."""
        return self.runtime.take_mail_in(tx, self.owner, count)

    def deliver(self, deliveries: list[Delivery]) -> None:
        """Hand the wakes the commit took to this runtime."""
        self.runtime.handle_taken(deliveries)

    def keeps(self) -> bool:
        """Whether the wake being handled may go on with the run's next node."""
        return self.runtime.keeps(self.owner)


class _WakeHandler:
    def __init__(self, host: OwnerServices, wakes: _OwnWakes, woken: Wake, mail: Mail) -> None:
        self.host = host
        self.store = host.store
        self.commit = host.commit
        self.wakes = wakes
        self.woken = woken
        self.run_id = woken.run
        self.mail = mail
        self.continuation: Attempt | None = None
        self.settled = False
        """The last commit of this wake parked or ended the run."""
        self.indeterminate: str | None = None
        """The ``on_indeterminate`` policy applied to a claim a crash left, if any."""
        self.cause = woken.traceparent
        """Who sent the wake (a trace context), for the link of its first visit's span."""

    async def run(self) -> None:
        """Handle the wake; a record another wake moved meanwhile is decided on again."""
        fresh = False
        for _ in range(_CLAIM_TRIES):
            rec, version = await self.store.record(self.run_id, fresh=fresh)
            if not fresh and (
                rec is None or rec.waiting is not None or rec.terminal or not self._has_work(rec)
            ):
                # This host's last write may miss another host's commit (the one that
                # sent this wake), so "nothing to do" is only believed of a fresh read.
                rec, version = await self.store.record(self.run_id, fresh=True)
            fresh = True
            if rec is None:
                return
            if rec.terminal:
                return  # a straggler (a wake sent before the run ended) finds it over
            try:
                if STATE.tracing:
                    with in_run(rec.run_id, rec.trace):
                        await self._step(rec, version)
                else:
                    await self._step(rec, version)
            except VersionConflict as exc:
                if self.mail.lost(exc):
                    return  # redelivered to another handler (or its partition moved)
                continue
            await self._continue()
            return
        raise RunError(
            f"run {self.run_id}: the record kept moving under "
            f"{_CLAIM_TRIES} tries to handle one wake"
        )

    async def _continue(self) -> None:
        """Run the nodes the commits of this wake claimed for it, one after another.

        Each commit that claims the next node for this wake (see
        :meth:`RunCommit.step`) leaves it unacked, so the chain needs no message per
        transition; the last commit acks it. The loop yields once per transition.
        """
        while (attempt := self.continuation) is not None:
            self.continuation = None
            if not self.host.mesh.commit_yields:
                # The commit before this node gave the loop no turn (a memory mesh):
                # one per transition, so runs served together take turns.
                await asyncio.sleep(0)
            rec, version = await self.store.record(self.run_id)
            if not _holds(rec, attempt):
                rec, version = await self.store.record(self.run_id, fresh=True)
            if rec is None or not _holds(rec, attempt):
                if not self.mail.acked:
                    await self.mail.ack()  # fenced out: someone else runs this node now
                return
            spec = await self.store.graph(rec)
            await self._execute_and_commit(spec, rec, version, attempt, verify=False)

    async def fail(self, detail: str, reason: str) -> None:
        """End the run as failed with ``detail`` and ``reason``, and ack this wake."""
        for _ in range(_CLAIM_TRIES):
            rec, version = await self.store.record(self.run_id, fresh=True)
            if rec is None or rec.terminal:
                await self.mail.ack()
                return
            new = as_record(engine.fail(rec, detail, reason, now=time.time()))
            try:
                events = engine.status_events(rec, new)
                await self._write(None, rec, new, version, events)
                return
            except VersionConflict as exc:
                if self.mail.lost(exc):
                    return
                continue

    def _has_work(self, rec: RunRecord) -> bool:
        return bool(engine.claimable(rec)) or any(
            a.wake == self.mail.id for a in rec.attempts.values()
        )

    async def _step(self, rec: RunRecord, version: int) -> None:
        """Claim, run and commit one node of ``rec``; VersionConflict if the record moved."""
        spec = await self.store.graph(rec)
        before = rec
        resumed: list[Event] = []
        if rec.waiting is not None:
            found = waits.recheck(rec, await self._closed(rec.waiting), now=time.time())
            if found is None:
                await self.commit.park(rec, self.mail, self._backoff())
                self.settled = True
                return
            unparked, resumed = as_record(found[0]), found[1]
            if unparked.terminal:
                events = [*resumed, *engine.status_events(rec, unparked)]
                await self._write(spec, rec, unparked, version, events)
                return
            rec = unparked
        crashed = next((a for a in rec.attempts.values() if a.wake == self.mail.id), None)
        if crashed is None and (orphans := await self._taken_over(rec)):
            crashed = orphans[0]  # a holder before this one left it: a crash as well
        elif crashed is not None and self.mail.attempt == 1 and not resumed:
            # Claimed for this very wake by the commit that sent it: nobody has run it.
            await self._execute_and_commit(spec, rec, version, crashed, verify=False)
            return
        policy = "retry"
        if crashed is not None:
            # A claim no handler recorded as begun (nodes whose policy asks record it)
            # ran nothing: it is simply run again.
            if crashed.begun is not False:
                policy = self.host.env.on_indeterminate(spec, rec, crashed)
            self.indeterminate = policy
            if policy == "escalate":
                did = await ask_to_retry(self.host.board, self.host.mesh, self.run_id, crashed)
                parked, events = waits.escalate(rec, crashed, decision_id=did)
                await self._write(spec, rec, as_record(parked), version, events)
                return
            key = crashed.node
        else:
            keys = engine.claimable(rec)
            if not keys:
                if resumed:
                    await self._write(spec, before, rec, version, resumed)
                return
            key = keys[0]
        claimed, attempt = claim(spec, rec, key, self.mail.id, self.host.id, begun=True)
        if attempt is None:  # the budget ended or parked the run
            await ask_for_budget(self.host.board, self.host.mesh, claimed)
            events = [*resumed, *engine.status_events(before, claimed)]
            await self._write(spec, before, claimed, version, events)
            return
        await self.commit.claim(claimed, version, attempt, resumed, self.mail)
        verify = crashed is not None and policy == "verify"
        await self._execute_and_commit(spec, claimed, version + 1, attempt, verify=verify)

    async def _taken_over(self, rec: RunRecord) -> list[Attempt]:
        """For a takeover wake, the claims of ``rec`` left by an earlier holder (see
        :mod:`plait.runs.live`); with more than one, another such wake takes the next."""
        orphans = taken_over(self.wakes.runtime, self.host, self.woken, rec)
        if len(orphans) > 1:
            await tell_now(self.host.mesh, self.wakes.owner, self.woken.body())
        return orphans

    async def _closed(self, waiting: Waiting) -> Closed | None:
        """How what the run waits on stands now (None if there is nothing to read)."""
        if waiting.kind == "subgraph":
            child, _ = await read_record(self.host.mesh, waiting.child or "")
            return Closed(status=child.status if child is not None else "missing")
        if waiting.decision_id is None:
            return None
        try:
            decision = await self.host.board.get(waiting.decision_id)
        except DecisionNotFound:
            return None
        return Closed(
            status=decision.status,
            value=decision.value,
            by=decision.closed_by,
            decision_id=decision.id,
        )

    def _backoff(self) -> int:
        """How many times the fallback tick has found the run still parked."""
        return self.woken.backoff + 1 if self.woken.why == "tick" else 0

    async def _execute_and_commit(
        self, spec: CompiledGraph, rec: RunRecord, version: int, attempt: Attempt, *, verify: bool
    ) -> None:
        if not STATE.tracing:
            await self._visit(spec, rec, version, attempt, verify=verify)
            return
        kind = spec.kinds.get(attempt.node.partition("[")[0])
        span = visit_span(
            rec.run_id,
            rec.trace,
            attempt.node,
            attempt.visit,
            attempt=self.mail.delivery.attempt,
            caused_by=self.cause,
            attributes={
                "plait.node.kind": kind.type if kind is not None else None,
                "plait.host": self.host.id,
                "plait.wake.reason": self.woken.why,
                "plait.verify": verify or None,
                "plait.on_indeterminate": self.indeterminate,
            },
        )
        self.cause = None  # the visits this one's commit goes on with are not caused by it
        with current(span):
            await self._visit(spec, rec, version, attempt, verify=verify)

    async def _visit(
        self, spec: CompiledGraph, rec: RunRecord, version: int, attempt: Attempt, *, verify: bool
    ) -> None:
        """Run the claimed visit of ``attempt`` and commit it."""
        key = attempt.node
        if attempt.begun is False and self.host.env.on_indeterminate(spec, rec, attempt) in (
            "verify",
            "escalate",
        ):
            try:
                rec, version = await self.commit.begin(rec, version, attempt, self.mail)
            except VersionConflict as exc:
                if self.mail.lost(exc):
                    return  # not begun: the handler that holds the wake runs it
                raise
        result = await self._execute(spec, rec, attempt, verify)
        if STATE.tracing:
            annotate_visit(result, rec)
        base, base_version = rec, version
        while True:
            values = await self.store.fan_in_values(base, key)
            new_state, events = engine.complete_with(
                spec, base, key, result, values, now=time.time()
            )
            new = as_record(new_state)
            await ask_for_budget(self.host.board, self.host.mesh, new)
            try:
                await self._write(spec, base, new, base_version, events, key=key, result=result)
                return
            except ValueTooLarge as exc:
                if result.detail == "output_too_large":
                    raise
                # The same output would fail every commit: the node fails instead.
                result = _too_large(result, exc)
            except VersionConflict as exc:
                if self.mail.lost(exc):
                    return  # the wake's holder now decides this node (its nonce fences us)
                fresh, fresh_version = await self.store.record(self.run_id, fresh=True)
                mine = fresh.attempts.get(key) if fresh is not None else None
                if fresh is None or mine is None or mine.nonce != attempt.nonce:
                    await self.mail.ack()  # fenced out: another wake owns this node now
                    return
                base, base_version = fresh, fresh_version

    async def _execute(
        self, spec: CompiledGraph, rec: RunRecord, attempt: Attempt, verify: bool
    ) -> NodeResult:
        """Run the claimed visit (or find its effect already there, with ``verify``)."""
        if verify:
            found = await self.host.env.verify_effect(spec, rec, attempt.node, attempt.visit)
            if found is not None:
                return found
        try:
            env = await self.host.env.env(spec, rec)
        except ConfigError as exc:  # the run's model cannot be loaded: no try mends it
            now = time.time()
            return NodeResult(
                error=str(exc), detail="configuration_error", started_at=now, ended_at=now
            )
        values = await self.store.values_for(spec, rec, attempt.node)
        return await execute(env, spec, rec, attempt.node, attempt.visit, values)

    async def _write(
        self,
        spec: CompiledGraph | None,
        before: RunRecord,
        new: RunRecord,
        version: int,
        events: list[Event],
        *,
        key: str | None = None,
        result: NodeResult | None = None,
    ) -> None:
        self.settled = new.waiting is not None or new.terminal
        self.continuation = await self.commit.step(
            spec,
            before,
            new,
            version,
            events,
            self.mail,
            key=key,
            result=result,
            wakes=self.wakes,
            # A runtime closing or handing the run's partition over sends a wake
            # instead, so the run goes on wherever its mailbox is served next.
            own=self.wakes.keeps(),
        )


def _holds(rec: RunRecord | None, attempt: Attempt) -> bool:
    """Whether ``rec`` still holds ``attempt``'s claim."""
    mine = rec.attempts.get(attempt.node) if rec is not None else None
    return mine is not None and mine.nonce == attempt.nonce


def _too_large(result: NodeResult, exc: ValueTooLarge) -> NodeResult:
    """The failed result of a visit whose output (or conversation) is over the limit."""
    return NodeResult(
        error=(
            f"its output is {exc.size} bytes encoded, over the mesh's limit of "
            f"{exc.limit} bytes (return less, or store large data elsewhere)"
        ),
        detail="output_too_large",
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        dollars=result.dollars,
        started_at=result.started_at,
        ended_at=result.ended_at,
    )


__all__ = ["OWNER_KIND", "TICK_MAX_MS", "handle", "listing_status", "on_dead_letter"]
