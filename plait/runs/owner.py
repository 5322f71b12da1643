"""The run owner: a durable actor that runs one node per mailbox message.

Every message (a wake) goes the same way, whatever it says — the record decides what
runs, never the message:

1. read the record (a warm host keeps it from its own last write); stop if terminal;
   a parked run re-checks its decision and stays parked or resumes;
2. claim one ready node with a compare-and-swap of ``attempts[node]`` holding a fresh
   nonce (an attempt left by a host that died is indeterminate: the node's
   ``on_indeterminate`` policy decides);
3. execute it outside any lock;
4. commit in ONE mesh transaction: the output under its own key, the record (only if
   this claim's nonce still holds it), the audit events, the next wakes, the progress
   event and the ack of this message. All or none: a crash can never leave a record
   without its event or a run without its next wake.

A conflict at commit means another wake changed the record meanwhile (a sibling fan-out
instance committed): the transition is recomputed on the fresh record as long as this
claim's nonce is still there; if it is not, this wake lost its node and stops.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from plait.actors import ActorContext, Mail, tell_in
from plait.errors import (
    ConfigError,
    DecisionNotFound,
    MeshUnavailable,
    PlaitError,
    RunError,
    ValueTooLarge,
    VersionConflict,
)
from plait.graphs import engine
from plait.graphs.engine import NodeResult
from plait.graphs.events import as_data
from plait.graphs.executors import execute
from plait.graphs.spec import GraphSpec, default_on_indeterminate
from plait.graphs.state import Attempt, Waiting
from plait.ids import RunId, new_id
from plait.mesh import Transaction, TransactionResult
from plait.runs import audit
from plait.runs.host import RunHost
from plait.runs.ports import decision_id, ended, store_history, wake_notify
from plait.runs.record import (
    RunRecord,
    as_record,
    dump,
    events_topic,
    index_key,
    load,
    owner_id,
    record_key,
    summary_of,
    tick_key,
)

OWNER_KIND = "plait.runs.owner:handle"
"""The actor kind of run owners."""

TICK_MAX_MS = 3_600_000
"""The longest a parked run's fallback tick backs off to (its answer wakes it at once)."""

_CLAIM_TRIES = 50
_TAKE_AT_MOST = 4

log = logging.getLogger(__name__)


async def handle(ctx: ActorContext, mail: Mail) -> None:
    """The run owner's handler: one node per wake.

    A wake that fails is delivered again only if the failure may pass (the mesh was
    unreachable, the record kept moving) and this is not its last delivery; otherwise
    the run fails with the reason at once, so no node runs again for an error that
    cannot heal and no run stays ``running`` behind a dead-lettered message.
    """
    wake = _wake_of(ctx, mail)
    run_id = wake.run_id
    try:
        await wake.run()
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
        await wake.fail(detail, f"{reason}{type(exc).__name__}: {exc}")


async def on_dead_letter(ctx: ActorContext, mail: Mail, reason: str) -> None:
    """Fail the run of a wake the runtime dead-letters without its handler succeeding
    (its hosts died mid-node, or the mesh failed it, ``max_attempts`` times)."""
    await _wake_of(ctx, mail).fail("dead_lettered", f"the wake was dead-lettered: {reason}")


def _wake_of(ctx: ActorContext, mail: Mail) -> _Wake:
    body = mail.body if isinstance(mail.body, dict) else {}
    run_id = RunId(body.get("run") or ctx.id.removeprefix("run:"))
    return _Wake(RunHost.of(ctx.runtime), run_id, mail)


def listing_status(status: str) -> str:
    """The status shown in listings: ``ready`` and ``running`` are both ``running``."""
    return "running" if status in ("ready", "running") else status


class _Wake:
    def __init__(self, host: RunHost, run_id: RunId, mail: Mail) -> None:
        self.host = host
        self.run_id = run_id
        self.mail = mail
        self.mesh = host.mesh
        self.spec: GraphSpec | None = None

    async def run(self) -> None:
        """Handle the wake; a record another wake moved meanwhile is decided on again."""
        fresh = False
        for _ in range(_CLAIM_TRIES):
            rec, version = await self.host.record(self.run_id, fresh=fresh)
            if not fresh and (
                rec is None or rec.waiting is not None or rec.terminal or not self._has_work(rec)
            ):
                # This host's last write may miss another host's commit (the one that
                # sent this wake), so "nothing to do" is only believed of a fresh read.
                rec, version = await self.host.record(self.run_id, fresh=True)
            fresh = True
            if rec is None:
                return
            if rec.terminal:
                await self._sweep(rec)
                return
            try:
                await self._step(rec, version)
                return
            except VersionConflict:
                continue
        raise RunError(
            f"run {self.run_id}: the record kept moving under "
            f"{_CLAIM_TRIES} tries to handle one wake"
        )

    async def _sweep(self, rec: RunRecord) -> None:
        """Delete a run's progress topic once it has been over for the host's keep time.

        Its last commit scheduled the wake that comes then (:func:`ended`); a wake
        of a finished run much earlier (a straggler) leaves the topic for that one. Half
        the keep time is enough: a Redis mesh schedules by the server's clock, which
        may run behind this host's.
        """
        if time.time() - rec.updated_at >= self.host.progress_kept_s / 2:
            await self.mesh.delete_topic(events_topic(rec.run_id))

    async def fail(self, detail: str, reason: str) -> None:
        """End the run as failed with ``detail`` and ``reason``, and ack this wake."""
        for _ in range(_CLAIM_TRIES):
            rec, version = await self.host.record(self.run_id, fresh=True)
            if rec is None or rec.terminal:
                await self.mail.ack()
                return
            new = as_record(engine.fail(rec, detail, reason, now=time.time()))
            try:
                await self._write(rec, new, version, as_data(engine.status_events(rec, new)))
                return
            except VersionConflict:
                continue

    def _has_work(self, rec: RunRecord) -> bool:
        return bool(engine.claimable(rec)) or any(
            a.wake == self.mail.id for a in rec.attempts.values()
        )

    async def _step(self, rec: RunRecord, version: int) -> None:
        """Claim, run and commit one node of ``rec``; VersionConflict if the record moved."""
        spec = self.spec = await self.host.spec(rec)
        resumed: list[dict[str, Any]] = []
        if rec.waiting is not None:
            found = await self._recheck(rec)
            if found is None:
                await self._park(rec)
                return
            unparked, resumed = found
            if unparked.terminal:
                await self._write(
                    rec,
                    unparked,
                    version,
                    [*resumed, *as_data(engine.status_events(rec, unparked))],
                )
                return
            before, rec = rec, unparked
        else:
            before = rec
        policy = "retry"
        crashed = next((a for a in rec.attempts.values() if a.wake == self.mail.id), None)
        if crashed is not None and self.mail.attempt == 1 and not resumed:
            # Claimed for this very wake by the commit that sent it: nobody has run it.
            await self._execute_and_commit(spec, rec, version, crashed.node, crashed, False)
            return
        if crashed is not None:
            policy = await self._indeterminate(spec, rec, crashed)
            if policy == "escalate":
                await self._escalate(rec, version, crashed)
                return
            key = crashed.node
        else:
            keys = engine.claimable(rec)
            if not keys:
                if resumed:
                    await self._write(before, rec, version, resumed)
                return
            key = keys[0]
        claimed, attempt = self._claim(rec, key, self.mail.id)
        if attempt is None:  # the budget ended or parked the run
            await self._ask_for_budget(claimed)
            await self._write(
                before,
                claimed,
                version,
                [*resumed, *as_data(engine.status_events(before, claimed))],
            )
            return
        tx = self.mesh.transact()
        for event in resumed:
            audit.append_fields(tx, claimed, **self._audit_fields(event, None, {}))
        tx.put(record_key(self.run_id), dump(claimed), if_version=version)
        tx.publish(
            events_topic(self.run_id),
            "started",
            {
                "node": key,
                "visit": attempt.visit,
                "status": "running",
                "at": attempt.started_at,
                "audit_seq": claimed.audit_seq,
            },
        )
        if resumed:
            tx.put(index_key(self.run_id), summary_of(claimed).model_dump())
        await self._commit(tx, claimed, version)
        version += 1
        verify = crashed is not None and policy == "verify"
        await self._execute_and_commit(spec, claimed, version, key, attempt, verify)

    # -- parked runs -------------------------------------------------------------------

    async def _recheck(self, rec: RunRecord) -> tuple[RunRecord, list[dict[str, Any]]] | None:
        """A parked run's record once its decision closed (None while it is open), with
        the audit event saying who closed it and how."""
        waiting = rec.waiting
        assert waiting is not None
        if waiting.kind == "subgraph":
            return await self._child_ended(rec, waiting)
        if waiting.decision_id is None:
            return None
        try:
            decision = await self.host.board.get(waiting.decision_id)
        except DecisionNotFound:
            return None
        if decision.status == "open":
            return None
        if waiting.kind == "budget" and decision.value == "raise":
            # The answer carries no amounts: the raise itself comes through
            # Runs.raise_budget, which unparks the run when it lands.
            return None
        now = time.time()
        event = {
            "type": "run.resumed",
            "node": waiting.node,
            "decision_id": decision.id,
            "status": decision.status,
            "answer": decision.value,
            "by": decision.closed_by or ("expiry" if decision.status == "expired" else None),
        }
        if waiting.kind in ("human", "approval"):
            return as_record(engine.resume(rec, now=now)), [event]
        if waiting.kind == "indeterminate" and decision.value == "retry":
            retried = as_record(engine.resume(rec, now=now))
            retried.usage.retries += 1  # the interrupted visit runs again, as under "retry"
            return retried, [event]
        if waiting.kind == "indeterminate":
            return as_record(
                engine.fail(
                    rec, "indeterminate", f"{waiting.node}: a person chose not to retry", now=now
                )
            ), [event]
        return as_record(
            engine.fail(
                rec, "budget_exhausted", "the budget decision closed without a raise", now=now
            )
        ), [event]

    async def _child_ended(
        self, rec: RunRecord, waiting: Waiting
    ) -> tuple[RunRecord, list[dict[str, Any]]] | None:
        """A run parked on a subgraph's child run, unparked once the child ended (its
        node then runs again and takes the child's output), with the audit event."""
        entry = await self.mesh.get(record_key(waiting.child or ""))
        child = load(entry.value) if entry is not None else None
        if child is not None and not child.terminal:
            return None
        event = {
            "type": "run.resumed",
            "node": waiting.node,
            "child": waiting.child,
            "status": child.status if child is not None else "missing",
        }
        return as_record(engine.resume(rec, now=time.time())), [event]

    async def _park(self, rec: RunRecord) -> None:
        """Stay parked: schedule the fallback tick and ack, nothing else.

        The answer wakes the run itself, so a tick that finds it still parked backs off:
        each next one comes twice as late, up to TICK_MAX_MS.
        """
        body = self.mail.body if isinstance(self.mail.body, dict) else {}
        step = int(body.get("backoff", 0)) + 1 if body.get("why") == "tick" else 0
        tx = self.mesh.transact()
        await self._tick(tx, rec, step)
        self.mail.ack_in(tx)
        await tx.commit()

    async def _tick(self, tx: Transaction, rec: RunRecord, step: int = 0) -> None:
        """Schedule the fallback re-check: one per run (stable key), ``tick_ms`` doubled
        ``step`` times (at most TICK_MAX_MS), at the decision's expiry if sooner."""
        base = self.host.tick_ms
        after_ms = min(base * 2 ** min(step, 32), max(base, TICK_MAX_MS))
        if rec.waiting is not None and rec.waiting.decision_id is not None:
            try:
                expires = (await self.host.board.get(rec.waiting.decision_id)).expires_at
            except DecisionNotFound:
                expires = None
            if expires is not None:
                after_ms = max(10, min(after_ms, int((expires - time.time()) * 1000) + 50))
        tell_in(
            tx,
            owner_id(rec.run_id),
            {"run": rec.run_id, "why": "tick", "backoff": step},
            after_ms=after_ms,
            key=tick_key(rec.run_id),
        )

    # -- indeterminate attempts --------------------------------------------------------

    async def _indeterminate(self, spec: GraphSpec, rec: RunRecord, crashed: Attempt) -> str:
        node = engine.node_of(spec, rec, crashed.node)
        policy = node.on_indeterminate
        if policy is None:
            tool = getattr(node, "tool", None)
            read_only = bool(
                tool and tool in self.host.tools and self.host.tools.get(tool).read_only
            )
            policy = default_on_indeterminate(node, read_only)
        return policy

    async def _escalate(self, rec: RunRecord, version: int, crashed: Attempt) -> None:
        did = decision_id(self.run_id, "interrupted", crashed.node, crashed.visit)
        ask = (
            f"Node {crashed.node} (visit {crashed.visit}) was interrupted mid-flight and "
            "its effect is unknown. Retry it?"
        )
        await self.host.board.raise_(
            ask,
            "choice",
            ["retry", "fail"],
            id=did,
            run_id=self.run_id,
            node=crashed.node,
            notify=wake_notify(self.mesh, self.run_id, "decision"),
            by=self.host.principal(self.run_id),
        )
        parked = rec.model_copy(deep=True)
        parked.attempts.pop(crashed.node, None)
        parked.waiting = Waiting(
            node=crashed.node,
            kind="indeterminate",
            ask=ask,
            decision_id=did,
            options=["retry", "fail"],
        )
        parked.status = "waiting_human"
        await self._write(
            rec,
            parked,
            version,
            [{"type": "node.indeterminate", "node": crashed.node, "visit": crashed.visit}],
        )

    # -- execute and commit ------------------------------------------------------------

    async def _execute_and_commit(
        self,
        spec: GraphSpec,
        rec: RunRecord,
        version: int,
        key: str,
        attempt: Attempt,
        verify: bool,
    ) -> None:
        result: NodeResult | None = None
        if verify:
            result = await self.host.verify_effect(spec, rec, key, attempt.visit)
        if result is None:
            try:
                env = await self.host.env(spec, rec)
            except ConfigError as exc:  # the run's model cannot be loaded: no try mends it
                now = time.time()
                result = NodeResult(
                    error=str(exc), detail="configuration_error", started_at=now, ended_at=now
                )
            else:
                values = await self.host.values_for(spec, rec, key)
                result = await execute(env, spec, rec, key, attempt.visit, values)
        base, base_version = rec, version
        while True:
            hydrated = await self.host.hydrate(spec, base, key)
            new_state, committed = engine.complete(spec, hydrated, key, result, now=time.time())
            events = as_data(committed)
            new = as_record(new_state)
            await self._ask_for_budget(new)
            try:
                await self._write(base, new, base_version, events, key=key, result=result)
                return
            except ValueTooLarge as exc:
                if result.detail == "output_too_large":
                    raise
                # The same output would fail every commit: the node fails instead.
                result = _too_large(key, result, exc)
            except VersionConflict:
                fresh, fresh_version = await self.host.record(self.run_id, fresh=True)
                mine = fresh.attempts.get(key) if fresh is not None else None
                if fresh is None or mine is None or mine.nonce != attempt.nonce:
                    await self.mail.ack()  # fenced out: another wake owns this node now
                    return
                base, base_version = fresh, fresh_version

    async def _write(
        self,
        before: RunRecord,
        new: RunRecord,
        version: int,
        events: list[dict[str, Any]],
        *,
        key: str | None = None,
        result: NodeResult | None = None,
    ) -> None:
        """Commit a transition atomically; raises VersionConflict if the record moved."""
        tx = self.mesh.transact()
        # A shallow copy owning its outputs dict: audit appends set scalars on it, and
        # store_outputs replaces entries that may be shared with the state it came from.
        new = new.model_copy(update={"outputs": dict(new.outputs)})
        digests: dict[str, str] = {}
        outputs = self.host.store_outputs(tx, new, key, result, digests)
        # Outputs written with no event of their own (a fan-out target's aggregate) are
        # pinned by the first event, so every pointer in the record is in the chain.
        named = {e.get("node") for e in events if e["type"] == "node.committed"}
        also = {
            name: {"ref": ref, "sha256": digests[name]}
            for name, ref in outputs.items()
            if name not in named
        }
        for index, event in enumerate(events):
            node = event.get("node")
            if event["type"] == "node.committed" and node in digests:
                event = {**event, "output_sha256": digests[node]}
            if also and index == 0:
                event = {**event, "outputs": also}
            audit.append_fields(tx, new, **self._audit_fields(event, result, outputs))
        started: list[dict[str, Any]] = []
        new = self._claim_next(tx, new, started)
        # This runtime takes the wakes it sends in the same commit (up to a few), and
        # handles them without reading them back from the mesh.
        took = bool(started) and self.host.runtime.take_mail_in(
            tx, owner_id(new.run_id), min(len(started), _TAKE_AT_MOST)
        )
        tx.put(record_key(new.run_id), dump(new), if_version=version)
        history: tuple[str, tuple[int, list[Any]]] | None = None
        if result is not None and result.history is not None and key is not None:
            visit = new.visits.get(key) or (new.attempts[key].visit if key in new.attempts else 1)
            history = store_history(tx, self.host.histories, new.run_id, key, visit, result.history)
        if new.waiting is not None:
            await self._tick(tx, new)
        elif new.terminal:
            ended(tx, new, self.host.progress_kept_s)
        if listing_status(new.status) != listing_status(before.status):
            tx.put(index_key(new.run_id), summary_of(new).model_dump())
        tx.publish(
            events_topic(new.run_id), "progress", _progress(new, key, result, events, started)
        )
        self.mail.ack_in(tx)
        try:
            committed = await self._commit(tx, new, version)
        except VersionConflict:
            self.mail.acked = False  # nothing of the transaction landed, its ack neither
            raise
        if history is not None:
            self.host.histories[history[0]] = history[1]
        if took and committed.taken:
            self.host.runtime.handle_taken(committed.taken)

    def _claim_next(
        self, tx: Transaction, new: RunRecord, started: list[dict[str, Any]]
    ) -> RunRecord:
        """Send one wake per node that may run next, each node claimed for its wake.

        The claim rides in this commit, so the wake's handler runs its node at once
        instead of writing a claim of its own. A wake arriving a second time finds its
        attempt unfinished: its first handler died, and the node's policy decides.
        Each claimed visit is added to ``started`` (for the progress event).
        """
        for key in engine.claimable(new):
            assert self.spec is not None
            # A retry after a transient error waits its backoff in the mailbox, not in
            # a task: the wake that runs it is delivered later.
            delay_ms = int(engine.retry_delay_s(self.spec, new, key) * 1000)
            why = "retry" if delay_ms else "next"
            wake = tell_in(
                tx, owner_id(new.run_id), {"run": new.run_id, "why": why}, after_ms=delay_ms
            )
            claimed, attempt = self._claim(new, key, wake)
            if attempt is None:
                continue  # a budget is spent: the plain wake's handler says so
            new = claimed
            if not delay_ms:
                started.append({"node": key, "visit": attempt.visit, "at": attempt.started_at})
        return new

    def _claim(self, rec: RunRecord, key: str, wake: str) -> tuple[RunRecord, Attempt | None]:
        """``rec`` with ``key`` claimed by this host for ``wake`` (see :func:`engine.claim`)."""
        assert self.spec is not None
        claimed, attempt = engine.claim(
            self.spec,
            rec,
            key,
            nonce=new_id(),
            now=time.time(),
            host=self.host.id,
            wake=wake,
        )
        return as_record(claimed), attempt

    async def _ask_for_budget(self, rec: RunRecord) -> None:
        """Raise the decision a run just parked on its budget waits for (in place)."""
        waiting = rec.waiting
        if waiting is not None and waiting.kind == "budget" and waiting.decision_id is None:
            waiting.decision_id = await self.host.raise_budget_decision(rec)

    async def _commit(self, tx: Transaction, new: RunRecord, version: int) -> TransactionResult:
        """Commit ``tx`` writing ``new`` over ``version``, then cache ``new``.

        Only a committed record is cached: a record cached before its commit landed
        could be taken for the different record another host commits under the same
        version number.
        """
        result = await tx.commit()
        self.host.remember(new, version + 1)
        return result

    def _audit_fields(
        self, event: dict[str, Any], result: NodeResult | None, outputs: dict[str, str]
    ) -> dict[str, Any]:
        """The audit event of an engine event, as :func:`audit.append_fields` takes it."""
        node = event.get("node")
        detail = {
            k: v
            for k, v in event.items()
            if k not in ("type", "node", "visit", "verdict", "error", "usage", "seq")
        }
        return {
            "type": event["type"],
            "node": node,
            "visit": event.get("visit"),
            "verdict": event.get("verdict"),
            "error": event.get("error"),
            "usage": event.get("usage") or {},
            "output_ref": outputs.get(node or ""),
            "detail": detail,
            "actor": self.host.id,
            "at": time.time(),
        }


def _too_large(key: str, result: NodeResult, exc: ValueTooLarge) -> NodeResult:
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


def _progress(
    new: RunRecord,
    key: str | None,
    result: NodeResult | None,
    events: list[dict[str, Any]],
    started: list[dict[str, Any]],
) -> dict[str, Any]:
    """The progress event of a commit: the visit it committed, the run's status, the
    visits it started (``started``: node, visit and epoch seconds of each), and the
    record's ``audit_seq`` after it (which orders a run's events for a watcher)."""
    committed = next((e for e in events if e["type"] == "node.committed"), None)
    return {
        "node": key,
        "visit": committed["visit"] if committed else None,
        "status": new.status,
        "error": result.error if result else None,
        "verdict": result.verdict if result else None,
        "elapsed": (result.ended_at - result.started_at) if result else None,
        "critique": result.value if result is not None and result.verdict else None,
        "ended_detail": new.ended_detail,
        "waiting": new.waiting.model_dump() if new.waiting else None,
        "started": started,
        "audit_seq": new.audit_seq,
    }


__all__ = ["OWNER_KIND", "TICK_MAX_MS", "handle", "listing_status"]
