"""Decisions on the mesh: a board that asks and waits, and a desk where people answer.

Two classes on purpose. :class:`DecisionAsker` is the capability handed to models and
node code: it can raise a decision, read it, list them and wait for one, and has no
method that answers, cancels or raises a budget. :class:`DecisionAnswerer` is the human
surface (the CLI, an operator's tools): it adds :meth:`~DecisionAnswerer.answer` and
:meth:`~DecisionAnswerer.cancel`, and both refuse any principal that is not a
:class:`~plait.decisions.principals.Human`.

Every change is one mesh transaction: the record at ``decisions/<id>`` written with the
version that was read, the event on the decisions topic (``decision.raised``,
``decision.answered``, ``decision.cancelled``, ``decision.expired``, with data ``{id,
status, run_id, node, by}``) and the decision's ``notify`` event. So of two concurrent
answers exactly one lands, and a run woken by ``notify`` always finds the answer stored.
Expiry is lazy: the first read after ``expires_at`` closes the decision, exactly once.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from pydantic import ValidationError

from plait.decisions.model import (
    Decision,
    DecisionAnswer,
    DecisionKind,
    DecisionStatus,
    Notify,
    OnExpire,
)
from plait.decisions.principals import Principal, require_human
from plait.errors import DecisionClosed, DecisionError, DecisionNotFound, VersionConflict
from plait.ids import DecisionId, RunId, new_decision_id, new_id
from plait.mesh import Entry, Mesh, Subscription, skip_corrupt, skip_unreadable
from plait.telemetry import STATE, current, start_span, with_traceparent

PREFIX = "decisions/"
"""Where decision records live: ``decisions/<id>``."""

DEFAULT_TOPIC = "decisions"
"""The topic decision events are published on."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

MESH_TOPICS = (DEFAULT_TOPIC,)
"""The topics (or topic prefixes) this service owns: code given the mesh may not publish
on them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def decision_key(decision_id: DecisionId) -> str:
    """The mesh key of a decision's record."""
    return PREFIX + decision_id


class DecisionAsker:
    """Raise, read, list and wait on decisions; the surface models and node code get.

    Args:
        mesh: an open mesh.
        topic: the topic decision events are published on.
        clock: the wall clock in epoch seconds, for ``created_at`` and expiry.
        recheck_s: the longest :meth:`wait` goes without reading the record again, a
            fallback for an event it could not have seen.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        topic: str = DEFAULT_TOPIC,
        clock: Callable[[], float] = time.time,
        recheck_s: float = 1.0,
    ) -> None:
        self._mesh = mesh
        self._topic = topic
        self._clock = clock
        self._recheck_s = recheck_s

    @property
    def topic(self) -> str:
        """The topic decision events are published on."""
        return self._topic

    async def raise_(
        self,
        title: str,
        kind: DecisionKind = "confirm",
        options: builtins.list[str] | None = None,
        *,
        id: DecisionId | None = None,
        expires_at: float | None = None,
        on_expire: OnExpire = "fail",
        default: str | None = None,
        run_id: RunId | None = None,
        node: str | None = None,
        data: Mapping[str, Any] | None = None,
        notify: Notify | Mapping[str, Any] | None = None,
        by: Principal,
    ) -> Decision:
        """Raise a decision and publish ``decision.raised``, atomically.

        Args:
            title: the question.
            kind: ``confirm``, ``choice`` or ``text``.
            options: the options of a choice (a confirm always has yes and no).
            id: a stable id; if a decision with it exists, that one is returned
                unchanged, so a restarted node never raises a second decision.
            expires_at: when it expires unanswered, in epoch seconds.
            on_expire: ``fail``, or ``default`` to take ``default`` as the value.
            default: the value on a ``default`` expiry (an option, for confirm and choice).
            run_id: the run that waits on it.
            node: the node of that run.
            data: free context shown to the person.
            notify: an event ``{topic, kind, data}`` to publish when it closes.
            by: who raises it (any principal).

        Raises:
            DecisionError: the arguments do not make a valid decision.
        """
        if not isinstance(by, Principal):
            raise DecisionError(f"by must be a Principal, got {by!r}")
        if id is not None and (not isinstance(id, str) or not id.strip()):
            raise DecisionError(f"a decision id must be a non-empty string, got {id!r}")
        try:
            if isinstance(notify, Mapping):
                notify = Notify.model_validate(notify)
            decision = Decision(
                id=id or new_decision_id(),
                title=title,
                kind=kind,
                options=list(options or []),
                default=default,
                on_expire=on_expire,
                expires_at=expires_at,
                created_at=self._clock(),
                raised_by=by.name,
                run_id=run_id,
                node=node,
                data=dict(data or {}),
                notify=notify,
            )
        except ValidationError as exc:
            raise DecisionError(f"cannot raise the decision: {_problems(exc)}") from None
        try:
            await self._commit(decision, 0, "decision.raised", by.name)
        except VersionConflict:
            return await self.get(decision.id)
        return decision

    async def get(self, id: DecisionId) -> Decision:
        """The decision with this id; an open one past ``expires_at`` is expired first.

        Raises:
            DecisionNotFound: there is no such decision.
        """
        decision, _ = await self._current(id)
        return decision

    # A timeout argument, not a cancel scope: on timeout the caller gets the open decision.
    async def wait(self, id: DecisionId, timeout: float) -> Decision:  # noqa: ASYNC109
        """The decision as soon as it is no longer open, or still open after ``timeout``.

        Args:
            id: the decision.
            timeout: seconds to wait at most; 0 reads once.

        Raises:
            DecisionNotFound: there is no such decision.
        """
        deadline = anyio.current_time() + max(0.0, timeout)
        decision = await self.get(id)
        if not decision.is_open or timeout <= 0:
            return decision
        group = new_id("decision-wait-")
        try:
            async with self._mesh.subscribe(self._topic, group, "waiter", start="new") as sub:
                while True:
                    # Read after subscribing, so an answer either shows here or as an event.
                    decision = await self.get(id)
                    remaining = deadline - anyio.current_time()
                    if not decision.is_open or remaining <= 0:
                        return decision
                    pause = min(remaining, self._recheck_s)
                    if decision.expires_at is not None:
                        pause = min(pause, max(0.0, decision.expires_at - self._clock()))
                    with anyio.move_on_after(pause):
                        await _next_event_about(sub, id)
        finally:
            with anyio.CancelScope(shield=True):
                await self._mesh.drop_group(self._topic, group)

    async def list(self, status: DecisionStatus | None = None) -> builtins.list[Decision]:
        """Every decision (or those with ``status``), newest first; expired ones as expired."""
        found: builtins.list[Decision] = []
        async for entry in self._mesh.scan(PREFIX, on_corrupt=skip_corrupt):
            try:
                decision, _ = await self._settle(entry)
            except DecisionError as exc:
                skip_unreadable(entry.key, str(exc))
                continue
            if status is None or decision.status == status:
                found.append(decision)
        found.sort(key=lambda d: (d.created_at, d.id), reverse=True)
        return found

    # -- internals --------------------------------------------------------------------

    async def _current(self, id: DecisionId) -> tuple[Decision, int]:
        """The decision and the version of its record, expiring it if it is due."""
        entry = await self._mesh.get(decision_key(id))
        if entry is None:
            raise DecisionNotFound(f"no decision has the id {id!r}")
        return await self._settle(entry)

    async def _settle(self, entry: Entry) -> tuple[Decision, int]:
        decision = _parse(entry)
        due = decision.expires_at is not None and decision.expires_at <= self._clock()
        if not (decision.is_open and due):
            return decision, entry.version
        expired = decision.model_copy(
            update={"status": "expired", "closed_at": decision.expires_at}
        )
        try:
            version = await self._commit(expired, entry.version, "decision.expired", None)
        except VersionConflict:
            return await self._current(decision.id)  # closed meanwhile; read what landed
        return expired, version

    async def _commit(self, decision: Decision, version: int, kind: str, by: str | None) -> int:
        """Write ``decision`` if its record is at ``version``, with its events; the new version.

        Raises:
            VersionConflict: the record is no longer at ``version``; nothing happened.
        """
        key = decision_key(decision.id)
        tx = self._mesh.transact()
        tx.put(key, decision.model_dump(), if_version=version)
        event = {
            "id": decision.id,
            "status": decision.status,
            "run_id": decision.run_id,
            "node": decision.node,
            "by": by,
        }
        tx.publish(self._topic, kind, event)
        if not STATE.tracing:
            if decision.notify is not None and not decision.is_open:
                tx.publish(decision.notify.topic, decision.notify.kind, decision.notify.data)
            result = await tx.commit()
            return result.entries[key].version
        span = start_span(
            f"decision {decision.status}",
            {"plait.decision.id": decision.id, "plait.run.id": decision.run_id, "plait.by": by},
        )
        with current(span):
            if decision.notify is not None and not decision.is_open:
                # with this span's context: the visit of the run it wakes links to it
                data = with_traceparent(decision.notify.data)
                tx.publish(decision.notify.topic, decision.notify.kind, data)
            result = await tx.commit()
        return result.entries[key].version
        span = start_span(
            f"decision {decision.status}",
            {"plait.decision.id": decision.id, "plait.run.id": decision.run_id, "plait.by": by},
        )
        with current(span):
            if decision.notify is not None and not decision.is_open:
                # published with this span's context: the woken run links to it
                tx.ops[-1] = tx.mesh._publish_op(
                    decision.notify.topic,
                    decision.notify.kind,
                    with_traceparent(data),
                    0,
                    None,
                    False,
                )
            result = await tx.commit()
        return result.entries[key].version


class DecisionAnswerer(DecisionAsker):
    """The human surface: everything a board does, plus answering and cancelling.

    Give it to the CLI and to operators' tools, never to models or node code.
    """

    async def answer(
        self,
        id: DecisionId,
        *,
        option: str | None = None,
        text: str | None = None,
        by: Principal,
    ) -> Decision:
        """Answer an open decision and publish ``decision.answered`` (and its notify event).

        Args:
            id: the decision.
            option: the chosen option (confirm: yes or no, in any case; choice: one of
                its options).
            text: the answer of a text decision, or a note with an option.
            by: the person answering.

        Raises:
            NotPermitted: ``by`` is not a human; nothing is written.
            DecisionNotFound: there is no such decision.
            DecisionClosed: it was already answered, cancelled or expired (the message
                says by whom and when); also for the loser of two concurrent answers.
            DecisionError: the answer does not fit the decision (the message lists the
                options).
        """
        human = require_human(by, "answer a decision")
        while True:
            decision, version = await self._open(id)
            chosen, note = decision.resolve_answer(option, text)
            at = self._clock()
            answered = decision.model_copy(
                update={
                    "status": "answered",
                    "answer": DecisionAnswer(
                        option=chosen, text=note, by=human.name, at=at, label=human.label
                    ),
                    "closed_by": human.name,
                    "closed_at": at,
                }
            )
            try:
                await self._commit(answered, version, "decision.answered", human.name)
            except VersionConflict:
                continue  # closed by someone else: the next read says how
            return answered

    async def cancel(self, id: DecisionId, *, by: Principal) -> Decision:
        """Withdraw an open decision and publish ``decision.cancelled`` (and its notify event).

        Raises:
            NotPermitted: ``by`` is not a human; nothing is written.
            DecisionNotFound: there is no such decision.
            DecisionClosed: it was already answered, cancelled or expired.
        """
        human = require_human(by, "cancel a decision")
        while True:
            decision, version = await self._open(id)
            cancelled = decision.model_copy(
                update={"status": "cancelled", "closed_by": human.name, "closed_at": self._clock()}
            )
            try:
                await self._commit(cancelled, version, "decision.cancelled", human.name)
            except VersionConflict:
                continue
            return cancelled

    async def _open(self, id: DecisionId) -> tuple[Decision, int]:
        decision, version = await self._current(id)
        if not decision.is_open:
            raise DecisionClosed(decision.describe_closed())
        return decision, version


async def _next_event_about(sub: Subscription, id: str) -> None:
    """Return at the next event that names decision ``id``, acking every event read."""
    async for delivery in sub:
        await delivery.ack()
        data = delivery.data
        if isinstance(data, dict) and data.get("id") == id:
            return


def _parse(entry: Entry) -> Decision:
    try:
        return Decision.model_validate(entry.value)
    except ValidationError as exc:
        raise DecisionError(
            f"the record at {entry.key!r} is not a decision: {_problems(exc)}"
        ) from None


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


__all__ = [
    "DEFAULT_TOPIC",
    "MESH_KEYS",
    "MESH_TOPICS",
    "PREFIX",
    "DecisionAnswerer",
    "DecisionAsker",
    "decision_key",
    "new_decision_id",
]
