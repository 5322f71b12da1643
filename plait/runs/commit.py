"""RunCommit: the one writer of run transitions.

Every change of a run record — start, claim, step, park, resume, cancel, budget raise,
end — is one mesh transaction composed here, and nowhere else: the output under its own
key, the audit events, the record CAS, the listing summary when the listed status
moves, the next wakes (each claiming its node), the fallback tick or the end-of-run
wake, the progress event and the ack of the wake handled. All or none: a crash can
never leave a record without its event or a run without its next wake.

What changes is decided before (by :mod:`plait.graphs.engine`); a commit only writes it.
A record moved by someone else meanwhile raises ``VersionConflict`` and writes nothing.

Two writes that move no record come through here too, so every transaction that
touches a run's record or sends its owner a wake has one home: the takeover wakes a
runtime sends to the runs in flight under partitions it took over (:meth:`wake_all`),
and the delete of a finished run's record with its listing (:meth:`delete`, for
:mod:`plait.runs.retention`). The bulk of a prune — outputs, log, conversations,
decisions — is not a run transition and is deleted beside it, in batches, before the
record goes: a prune cut short leaves the record, and the next prune finishes it.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from plait.actors import ActorRecord, Mail, actor_key, tell_in
from plait.decisions import DecisionAsker
from plait.errors import DecisionNotFound, RunError, VersionConflict
from plait.graphs import engine
from plait.graphs.compiled import CompiledGraph
from plait.graphs.engine import NodeResult
from plait.graphs.events import Event, NodeCommitted, NodeRetrying
from plait.graphs.state import Attempt, copied
from plait.ids import new_id
from plait.mesh import Delivery, Mesh, Transaction, TransactionResult
from plait.runs.audit import AuditEvent, append, chained, chained_event, output_digest
from plait.runs.channel import RunChannels
from plait.runs.feed import announce
from plait.runs.live import list_run
from plait.runs.log import entry_value, output_ref
from plait.runs.mesh_ports import ended, history_delta, history_part_key
from plait.runs.progress import Progress, StartedVisit
from plait.runs.record import (
    RunRecord,
    as_record,
    audit_key,
    dump,
    index_key,
    listing_status,
    output_key,
    owner_id,
    record_key,
    tick_key,
)
from plait.runs.store import Lru, RunStore
from plait.runs.telemetry import committed as observe_transition
from plait.runs.wake import WakeReason
from plait.runs.wake import wake as wake_body
from plait.telemetry import STATE, in_run

TICK_MAX_MS = 3_600_000
"""The longest a parked run's fallback tick backs off to (its answer wakes it at once)."""

_TAKE_AT_MOST = 4
_WAKES_PER_TRANSACTION = 256


class OwnWakes(Protocol):
    """How the serving runtime takes the wakes a commit sends to runs it serves.

    ``take_in`` adds the take of up to ``count`` mailbox messages to ``tx`` (False if
    it added none); ``deliver`` hands what the committed takes found to the runtime.
    """

    def take_in(self, tx: Transaction, count: int) -> bool:
        """See :meth:`plait.actors.ActorRuntime.take_mail_in`."""

    def deliver(self, deliveries: list[Delivery]) -> None:
        """See :meth:`plait.actors.ActorRuntime.handle_taken`."""


def claim(
    spec: CompiledGraph,
    rec: RunRecord,
    key: str,
    wake: str,
    host: str = "",
    *,
    begun: bool | None = None,
) -> tuple[RunRecord, Attempt | None]:
    """``rec`` with ``key`` claimed for ``wake`` (see :func:`plait.graphs.engine.claim`);
    ``begun`` as the attempt records it (see :class:`plait.graphs.state.Attempt`)."""
    claimed, attempt = engine.claim(
        spec, rec, key, nonce=new_id(), now=time.time(), host=host, wake=wake, begun=begun
    )
    return as_record(claimed), attempt


class RunCommit:
    """Writes run transitions to ``mesh`` (see the module docstring).

    Args:
        mesh: the mesh holding the runs.
        store: the serving process's reads, told each record it commits (None for a
            process that only manages runs).
        board: where a parked run's decision is read, for its tick's time.
        actor: who the audit events of steps name (the serving runtime's host id).
        tick_ms: how often a parked run re-checks its decision as a fallback.
        channels: the live channels each committed transition's progress goes to
            (None: it goes to none; watchers read it from the log).
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        store: RunStore | None = None,
        board: DecisionAsker | None = None,
        actor: str | None = None,
        tick_ms: int = 60_000,
        channels: RunChannels | None = None,
    ) -> None:
        self.mesh = mesh
        self.channels = channels
        self.store = store
        self.board = board or DecisionAsker(mesh)
        self.actor = actor
        self.tick_ms = tick_ms

    # -- what a person or a parent run starts or changes -------------------------------

    async def start(
        self, spec: CompiledGraph, rec: RunRecord, owner: ActorRecord, detail: dict[str, Any]
    ) -> RunRecord:
        """Write a new run: its record, listing, owner actor, first audit event and first
        wake, which claims the entry node as every commit claims the next. A run id
        already taken raises VersionConflict."""
        tx = self.mesh.transact()
        first = chained(rec, type="run.started", detail=detail, at=rec.created_at)
        wake = tell_in(tx, owner.id, wake_body(rec.run_id, "start"))
        claimed, attempt = claim(spec, rec, rec.ready[0], wake)
        started: list[StartedVisit] = []
        if attempt is not None:
            rec = claimed
            started.append(StartedVisit.of(attempt))
        progress = Progress(status=rec.status, audit_seq=rec.audit_seq, started=started)
        tx.put(
            audit_key(rec.run_id, first["seq"]),
            entry_value([first], {}, {}, progress),
            if_version=0,
        )
        tx.put(record_key(rec.run_id), dump(rec), if_version=0)
        list_run(tx, rec)
        tx.put(actor_key(owner.id), owner.model_dump(), if_version=0)
        if STATE.tracing:
            with in_run(rec.run_id, rec.trace):
                await tx.commit()
        else:
            await tx.commit()
        announce(self.mesh, rec)
        return rec

    async def cancel(self, new: RunRecord, version: int, *, by: str) -> None:
        """Write a run's cancellation (``new``, from :func:`engine.cancel`)."""
        tx = self.mesh.transact()
        body = chained(new, type="run.cancelled", actor=by, at=time.time())
        progress = Progress(status="cancelled", ended_detail="cancelled", audit_seq=new.audit_seq)
        tx.put(
            audit_key(new.run_id, body["seq"]),
            entry_value([body], {}, {}, progress),
            if_version=0,
        )
        tx.put(record_key(new.run_id), dump(new), if_version=version)
        list_run(tx, new)
        ended(tx, new)
        await tx.commit()
        announce(self.mesh, new)
        if STATE.tracing or STATE.metrics:
            observe_transition(None, new.model_copy(update={"status": "running"}), new, [body])

    async def raise_budget(
        self, new: RunRecord, version: int, extra: dict[str, float], *, by: str
    ) -> None:
        """Write a person's budget raise (``new``) and wake the run's owner."""
        tx = self.mesh.transact()
        append(
            tx,
            new,
            AuditEvent(
                seq=0, type="budget.raised", actor=by, detail={"extra": extra}, at=time.time()
            ),
        )
        tx.put(record_key(new.run_id), dump(new), if_version=version)
        list_run(tx, new)
        tell_in(tx, owner_id(new.run_id), wake_body(new.run_id, "budget"))
        await tx.commit()
        announce(self.mesh, new)

    async def reopen(
        self,
        spec: CompiledGraph,
        rec: RunRecord,
        version: int,
        event: AuditEvent,
        *,
        owner: ActorRecord | None = None,
        puts: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Write a run that goes on again: a failed run retried (over ``version``), or a
        fork starting from another run's state (``version`` 0, with its ``owner`` and
        the outputs and conversations it starts with in ``puts``, by key).

        One transaction: ``event`` chained, one wake per ready node (each claiming its
        node, as every commit claims the next), the record, its listing and a progress
        event. Returns the record written; VersionConflict if the record moved.
        """
        tx = self.mesh.transact()
        for key, value in (puts or {}).items():
            tx.put(key, value)
        rec = rec.model_copy()
        body = chained(rec, **event.model_dump(exclude={"seq", "prev", "mac", "hash"}))
        event.seq, event.prev, event.hash = body["seq"], body["prev"], body["hash"]
        event.mac = body.get("mac")
        started: list[StartedVisit] = []
        rec, _, _ = self._claim_next(tx, spec, rec, started, None)
        tx.put(record_key(rec.run_id), dump(rec), if_version=version)
        list_run(tx, rec)
        if owner is not None:
            tx.put(actor_key(owner.id), owner.model_dump(), if_version=0)
        progress = Progress(status=rec.status, started=started, audit_seq=rec.audit_seq)
        tx.put(
            audit_key(rec.run_id, body["seq"]), entry_value([body], {}, {}, progress), if_version=0
        )
        await tx.commit()
        announce(self.mesh, rec)
        return rec

    async def wake_all(self, run_ids: list[str], why: WakeReason) -> None:
        """Send one wake to each run of ``run_ids`` (a runtime's takeover of the runs
        in flight under partitions it gained), in transactions of at most
        ``_WAKES_PER_TRANSACTION``: a partition may list thousands. No record moves: the
        record, never the wake, decides what each run does."""
        for start in range(0, len(run_ids), _WAKES_PER_TRANSACTION):
            tx = self.mesh.transact()
            for run_id in run_ids[start : start + _WAKES_PER_TRANSACTION]:
                tell_in(tx, owner_id(run_id), wake_body(run_id, why))
            await tx.commit()

    async def delete(self, rec: RunRecord, version: int) -> None:
        """Delete finished run ``rec``'s record (over ``version``) with its listing,
        and cancel its fallback tick: the last step of a prune (see
        :mod:`plait.runs.retention`). Raises VersionConflict if the record moved."""
        if not rec.terminal:
            raise RunError(f"run {rec.run_id} is {rec.status}: only a finished run is deleted")
        tx = self.mesh.transact()
        tx.delete(record_key(rec.run_id), if_version=version)
        tx.delete(index_key(rec.run_id))
        tx.cancel(tick_key(rec.run_id))
        await tx.commit()

    # -- what a run's owner writes -----------------------------------------------------

    async def begin(
        self, rec: RunRecord, version: int, attempt: Attempt, mail: Mail
    ) -> tuple[RunRecord, int]:
        """Record that ``attempt`` (claimed by a commit) starts now: the one extra write
        of nodes whose ``on_indeterminate`` is ``verify`` or ``escalate``, so a crash
        before this write is known to have run nothing; only while ``mail`` is still its
        handler's (see :meth:`Mail.hold_in`). Returns the record and version.
        """
        begun = rec.model_copy(update={"attempts": dict(rec.attempts)})
        begun.attempts[attempt.node] = attempt.model_copy(update={"begun": True})
        tx = self.mesh.transact()
        tx.put(record_key(rec.run_id), dump(begun), if_version=version)
        mail.hold_in(tx)
        await self._commit(tx, begun, version)
        return begun, version + 1

    async def park(self, rec: RunRecord, mail: Mail, step: int) -> None:
        """Stay parked: schedule the fallback tick (backed off ``step`` times) and ack."""
        tx = self.mesh.transact()
        await self._tick(tx, rec, step)
        mail.ack_in(tx)
        await tx.commit()

    async def claim(
        self,
        claimed: RunRecord,
        version: int,
        attempt: Attempt,
        resumed: list[Event],
        mail: Mail,
    ) -> None:
        """Write a claim of ``attempt`` for ``mail`` (the run resumed first, if
        ``resumed`` says how), only while ``mail`` is still its handler's: a claim under
        a wake another consumer holds, or has acked, would be left with no message to
        come again if its handler died (see :meth:`Mail.hold_in`)."""
        tx = self.mesh.transact()
        mail.hold_in(tx)
        first = claimed.audit_seq + 1
        at = time.time()
        actor = self.actor or ""
        bodies = [chained_event(claimed, event, actor=actor, at=at) for event in resumed]
        tx.put(record_key(claimed.run_id), dump(claimed), if_version=version)
        if bodies:
            # A claim with nothing to audit writes no log entry: a watcher learns of
            # the visit from the commit that ends it.
            progress = Progress(
                node=attempt.node,
                visit=attempt.visit,
                status="running",
                at=attempt.started_at,
                audit_seq=claimed.audit_seq,
            )
            tx.put(
                audit_key(claimed.run_id, first),
                entry_value(bodies, {}, {}, progress),
                if_version=0,
            )
            list_run(tx, claimed)
        await self._commit(tx, claimed, version)
        if bodies:
            announce(self.mesh, claimed)
            if self.channels is not None:
                self.channels.progress(claimed.run_id, progress)

    async def step(
        self,
        spec: CompiledGraph | None,
        before: RunRecord,
        new: RunRecord,
        version: int,
        events: list[Event],
        mail: Mail,
        *,
        key: str | None = None,
        result: NodeResult | None = None,
        wakes: OwnWakes | None = None,
        own: bool = False,
    ) -> Attempt | None:
        """Write one transition from ``before`` (at ``version``) to ``new`` and ack
        ``mail``: a visit's commit, a park, a resume, an escalation or the run's end.

        ``events`` are the engine's, as it returned them: each is chained into the
        audit log straight from its typed parts (see :func:`chained_event`), and the
        transition's :class:`Progress` is read from them too, in the same pass.

        Each node that may run next is claimed in this same commit (``spec`` may be
        None only for a transition that leaves nothing to run). With ``own``, the first
        one that may run now is claimed for ``mail`` itself, with no message: the
        caller continues with it (the returned attempt) and ``mail`` stays unacked
        until the commit that claims nothing for it, so a crash meanwhile is taken
        over as any unacked wake is, and the claim in the record says what was in
        flight (that commit lands only while ``mail`` is still this handler's, see
        :meth:`Mail.hold_in`). Every other node gets a wake; ``wakes``, if given, takes
        up to a few of them straight back for this runtime. Raises VersionConflict
        (nothing written, ``mail`` not acked) if the record moved or ``mail`` was lost.
        """
        tx = self.mesh.transact()
        # A shallow copy owning its outputs dict: audit appends set scalars on it, and
        # _store_outputs replaces entries that may be shared with the state it came from.
        new = copied(new, {"outputs": dict(new.outputs)})
        # The log entry's key is its first event's seq (see plait.runs.log); with no
        # event to audit there is no entry, and outputs go under keys of their own.
        entry_key = audit_key(new.run_id, new.audit_seq + 1) if events else None
        digests: dict[str, str] = {}
        payloads: dict[str, Any] = {}
        outputs = self._store_outputs(tx, new, key, result, digests, payloads, entry_key)
        # Outputs written with no event of their own (a fan-out target's aggregate) are
        # pinned by the first event, so every pointer in the record is in the chain.
        visited: NodeCommitted | None = None
        retrying: NodeRetrying | None = None
        for event in events:
            if isinstance(event, NodeCommitted):
                visited = visited or event
            elif isinstance(event, NodeRetrying):
                retrying = retrying or event
        named = {e.node for e in events if isinstance(e, NodeCommitted)}
        also = {
            name: {"ref": ref, "sha256": digests[name]}
            for name, ref in outputs.items()
            if name not in named
        }
        at = time.time()
        actor = self.actor or ""
        bodies: list[dict[str, Any]] = []
        for index, event in enumerate(events):
            pins: dict[str, Any] | None = None
            if isinstance(event, NodeCommitted) and event.node in digests:
                pins = {"output_sha256": digests[event.node]}
            if also and index == 0:
                pins = {**(pins or {}), "outputs": also}
            bodies.append(chained_event(new, event, actor=actor, at=at, refs=outputs, pins=pins))
        started: list[StartedVisit] = []
        new, mine, sent = self._claim_next(tx, spec, new, started, mail.id if own else None)
        # The runtime takes the wakes this commit sends (up to a few), and handles them
        # without reading them back from the mesh.
        took = sent > 0 and wakes is not None and wakes.take_in(tx, min(sent, _TAKE_AT_MOST))
        tx.put(record_key(new.run_id), dump(new), if_version=version)
        history: tuple[str, tuple[int, list[Any]]] | None = None
        parts: dict[str, Any] = {}
        if result is not None and result.history is not None and key is not None:
            visit = new.visits.get(key) or (new.attempts[key].visit if key in new.attempts else 1)
            cache = self.store.histories if self.store is not None else Lru()
            part, history = history_delta(cache, new.run_id, key, visit, result.history)
            if entry_key is not None:
                parts[key] = part
            else:
                tx.put(history_part_key(new.run_id, key, visit), part["messages"])
        if new.waiting is not None:
            await self._tick(tx, new)
        elif new.terminal:
            ended(tx, new)
        relisted = listing_status(new.status) != listing_status(before.status)
        if relisted:
            list_run(tx, new)
        progress: Progress | None = None
        if entry_key is not None:
            progress = _progress(new, key, result, visited, retrying, started)
            tx.put(entry_key, entry_value(bodies, payloads, parts, progress), if_version=0)
        if mine is None:
            mail.ack_in(tx)
        else:
            mail.hold_in(tx)  # the next node goes on under mail: only while it is ours
        try:
            committed = await self._commit(tx, new, version)
        except VersionConflict:
            mail.acked = False  # nothing of the transaction landed, its ack neither
            raise
        if STATE.tracing or STATE.metrics:
            observe_transition(spec, before, new, bodies)
        if relisted:
            announce(self.mesh, new)
        if progress is not None and self.channels is not None:
            self.channels.progress(new.run_id, progress)
        if history is not None and self.store is not None:
            self.store.histories[history[0]] = history[1]
        if took and committed.taken and wakes is not None:
            wakes.deliver(committed.taken)
        return mine

    # -- the parts of a commit ---------------------------------------------------------

    def _claim_next(
        self,
        tx: Transaction,
        spec: CompiledGraph | None,
        new: RunRecord,
        started: list[StartedVisit],
        own: str | None,
    ) -> tuple[RunRecord, Attempt | None, int]:
        """Claim every node that may run next: the first that may run now for ``own``
        (the message being handled, if given), each other for a wake of its own.

        The claim rides in this commit, so whoever runs the node runs it at once
        instead of writing a claim of its own. A message arriving a second time finds
        its attempt unfinished: its handler died, and the node's policy decides.
        Each claimed visit is added to ``started`` (for the progress). Returns the
        record, the attempt claimed for ``own`` (or None) and how many wakes were sent.
        """
        keys = engine.claimable(new)
        if keys and spec is None:
            raise RunError(f"run {new.run_id}: a commit that claims nodes needs their graph")
        mine: Attempt | None = None
        sent = 0
        for key in keys:
            assert spec is not None
            # A retry after a transient error waits its backoff in the mailbox, not in
            # a task: the wake that runs it is delivered later.
            delay_ms = int(engine.retry_delay_s(spec, new, key) * 1000)
            if own is not None and mine is None and not delay_ms:
                claimed, attempt = claim(spec, new, key, own, self.actor or "", begun=False)
                if attempt is not None:
                    new, mine = claimed, attempt
                    started.append(StartedVisit.of(attempt))
                    continue
            why: WakeReason = "retry" if delay_ms else "next"
            wake = tell_in(tx, owner_id(new.run_id), wake_body(new.run_id, why), after_ms=delay_ms)
            sent += 0 if delay_ms else 1
            claimed, attempt = claim(spec, new, key, wake, self.actor or "", begun=False)
            if attempt is None:
                continue  # a budget is spent: the plain wake's handler says so
            new = claimed
            if not delay_ms:
                started.append(StartedVisit.of(attempt))
        return new, mine, sent

    def _store_outputs(
        self,
        tx: Transaction,
        new: RunRecord,
        key: str | None,
        result: NodeResult | None,
        digests: dict[str, str],
        payloads: dict[str, Any],
        entry_key: str | None,
    ) -> dict[str, str]:
        """Move the values of this transition's outputs into its log entry.

        ``new`` must own its ``outputs`` dict; its entries are replaced, never changed
        in place, since they may be shared with older states. Returns the output ref
        written per node; ``digests`` receives each payload's sha256 per node and
        ``payloads`` the payloads for the log entry at ``entry_key`` (None: there is no
        entry, and each payload is put under a key of its own in ``tx``).
        """
        refs: dict[str, str] = {}
        outputs = new.outputs
        for name, out in list(outputs.items()):
            if out.value is None and name != key:
                continue
            if out.seq == new.seq and out.ref is None:
                payload: dict[str, Any] = {"value": out.value}
                if name == key and result is not None:
                    payload.update(prompt=result.prompt, error=result.error)
                if entry_key is not None:
                    ref = output_ref(entry_key, name)
                    payloads[name] = payload
                else:
                    ref = output_key(new.run_id, name, out.visit)
                    tx.put(ref, payload)
                digests[name] = output_digest(payload)
                if self.store is not None:
                    self.store.values[ref] = out.value
                refs[name] = ref
                outputs[name] = copied(out, {"value": None, "ref": ref})
        return refs

    async def _tick(self, tx: Transaction, rec: RunRecord, step: int = 0) -> None:
        """Schedule the fallback re-check: one per run (stable key), ``tick_ms`` doubled
        ``step`` times (at most TICK_MAX_MS), at the decision's expiry if sooner."""
        base = self.tick_ms
        after_ms = min(base * 2 ** min(step, 32), max(base, TICK_MAX_MS))
        if rec.waiting is not None and rec.waiting.decision_id is not None:
            try:
                expires = (await self.board.get(rec.waiting.decision_id)).expires_at
            except DecisionNotFound:
                expires = None
            if expires is not None:
                after_ms = max(10, min(after_ms, int((expires - time.time()) * 1000) + 50))
        tell_in(
            tx,
            owner_id(rec.run_id),
            wake_body(rec.run_id, "tick", backoff=step),
            after_ms=after_ms,
            key=tick_key(rec.run_id),
        )

    async def _commit(self, tx: Transaction, new: RunRecord, version: int) -> TransactionResult:
        """Commit ``tx`` writing ``new`` over ``version``, then tell the store.

        Only a committed record is remembered: a record cached before its commit landed
        could be taken for the different record another host commits under the same
        version number.
        """
        result = await tx.commit()
        if self.store is not None:
            self.store.remember(new, version + 1)
        return result


def _progress(
    new: RunRecord,
    key: str | None,
    result: NodeResult | None,
    committed: NodeCommitted | None,
    retrying: NodeRetrying | None,
    started: list[StartedVisit],
) -> Progress:
    """The progress of a step: the visit it committed, the run's status, the visits it
    started, and the record's ``audit_seq`` after it (which orders a run's progress)."""
    return Progress.of(
        new.status,
        new.audit_seq,
        node=key,
        visit=committed.visit if committed else None,
        error=result.error if result else None,
        verdict=result.verdict if result else None,
        elapsed=(result.ended_at - result.started_at) if result else None,
        critique=result.value if result is not None and result.verdict else None,
        ended_detail=new.ended_detail,
        waiting=new.waiting,
        started=started,
        retry_in=retrying.delay_s if retrying else None,
    )


__all__ = ["TICK_MAX_MS", "OwnWakes", "RunCommit", "claim"]
