"""The executor ports of a durable run, answered from the mesh.

Human questions and tool approvals become decisions whose ids derive from the run,
the node (or instance) and the visit, so a node that runs again after a crash finds the
decision it raised before instead of raising a second one. Each decision carries a
``notify`` event that wakes the run's owner the moment a person answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from plait.actors import MAIL_KIND, mail_data, mailbox_of, tell_in
from plait.decisions import Agent, Decision, DecisionAsker, Notify
from plait.errors import DecisionClosed
from plait.graphs.ports import Answer
from plait.graphs.state import Waiting
from plait.ids import DecisionId, RunId
from plait.mesh import Mesh, Transaction
from plait.models import Message
from plait.runs.log import read_log
from plait.runs.record import (
    RunRecord,
    history_key,
    owner_id,
    parent_run_id,
    tick_key,
)
from plait.runs.wake import WakeReason, wake

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _escape_char(match: re.Match[str]) -> str:
    return "".join(f"~{byte:02X}" for byte in match.group(0).encode("utf-8"))


def escape_id_part(text: str) -> str:
    """``text`` with every character outside letters, digits, ``_`` and ``-`` escaped.

    Each such character becomes ``~XX`` per UTF-8 byte (``.`` -> ``~2E``, ``[`` ->
    ``~5B``, ``~`` -> ``~7E``), so the result holds no ``.`` (the separator of decision
    ids) and distinct texts stay distinct, while a plain node id reads as itself.
    """
    return _UNSAFE.sub(_escape_char, text)


def decision_id(run_id: str, kind: str, key: str, visit: int, extra: str = "") -> DecisionId:
    """The stable id of the decision a node visit raises.

    Injective in ``key``, ``visit`` and ``extra`` for one run and kind: ``key`` and
    ``extra`` are escaped (see :func:`escape_id_part`), so fan-out instance ``fetch[0]``
    and a node named ``fetch_0`` get different ids.
    """
    tail = f".{escape_id_part(extra)}" if extra else ""
    return DecisionId(f"{kind}.{run_id}.{escape_id_part(key)}.{visit}{tail}")


def ended(tx: Transaction, rec: RunRecord) -> None:
    """Add to ``tx`` (a run's last commit) what follows the end of a run.

    Its fallback tick, if one is scheduled (it ended while parked), is cancelled: a
    finished run leaves no scheduled message. A child run wakes the run it belongs to.
    """
    tx.cancel(tick_key(rec.run_id))
    parent = parent_run_id(rec)
    if parent is not None:
        tell_in(tx, owner_id(parent), wake(parent, "child"))


def wake_notify(mesh: Mesh, run_id: str, why: WakeReason) -> Notify:
    """The event that wakes a run's owner when a decision closes."""
    return Notify(
        topic=mailbox_of(mesh, owner_id(run_id)),
        kind=MAIL_KIND,
        data=mail_data(owner_id(run_id), wake(run_id, why)),
    )


class RunDecisions:
    """Human answers and tool approvals of one durable run, as decisions."""

    def __init__(self, board: DecisionAsker, run_id: RunId, mesh: Mesh) -> None:
        self.board = board
        self.mesh = mesh
        self.run_id = run_id

    @functools.cached_property
    def principal(self) -> Agent:
        """Who the run's decisions are asked by: its owner (built when first asked:
        every node gets this object, few ask anything)."""
        return Agent(owner_id(self.run_id))

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
        did = decision_id(self.run_id, "ask", key, visit)
        decision = await self.board.raise_(
            ask,
            "choice" if options else "text",
            options,
            id=did,
            expires_at=time.time() + expires_after_s if expires_after_s else None,
            on_expire="default" if on_expire == "default" else "fail",
            default=default,
            run_id=self.run_id,
            node=key,
            notify=wake_notify(self.mesh, self.run_id, "decision"),
            by=self.principal,
        )
        return _answer_or_wait(decision, key, "human", ask, options)

    async def approve(
        self, *, key: str, visit: int, tool: str, args: dict[str, Any]
    ) -> bool | Waiting:
        """See :class:`plait.graphs.ports.ApprovalPort`."""
        digest = hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode())
        did = decision_id(self.run_id, "approve", key, visit, f"{tool}.{digest.hexdigest()[:8]}")
        ask = f"Approve calling {tool} with {json.dumps(args, default=str)}?"
        decision = await self.board.raise_(
            ask,
            "choice",
            ["approve", "reject"],
            id=did,
            run_id=self.run_id,
            node=key,
            data={"tool": tool, "args": args},
            notify=wake_notify(self.mesh, self.run_id, "approval"),
            by=self.principal,
        )
        answer = _answer_or_wait(decision, key, "approval", ask, ["approve", "reject"])
        if isinstance(answer, Waiting):
            answer.tool = tool
            return answer
        return answer.text == "approve"


def _answer_or_wait(
    decision: Decision, key: str, kind: str, ask: str, options: list[str] | None
) -> Answer | Waiting:
    if decision.status == "answered" and decision.answer is not None:
        return Answer(str(decision.value), by=decision.answer.by)
    if decision.status == "expired" and decision.on_expire == "default" and decision.default:
        return Answer(decision.default, by="expiry")
    if decision.status != "open":
        raise DecisionClosed(f"decision {decision.id} was {decision.status} without an answer")
    return Waiting(
        node=key,
        kind="approval" if kind == "approval" else "human",
        ask=ask,
        decision_id=decision.id,
        options=options,
    )


class MeshHistories:
    """Agent conversations, stored append-only: each visit's log entry holds the
    messages it added (see :mod:`plait.runs.log`).

    Each visit stores only the messages it added, so a long revise loop writes the same
    few messages per visit however long the conversation grows; the whole conversation
    is kept in this process's cache (as messages, validated once) with the visit count
    it is current for. A cached conversation is used only while the run's record still
    counts that many visits of the node: another worker may have run one since.
    """

    def __init__(
        self,
        mesh: Mesh,
        run_id: str,
        cache: OrderedDict[str, Any],
        visits: dict[str, int] | None = None,
    ) -> None:
        self.mesh = mesh
        self.run_id = run_id
        self.cache = cache
        self.visits = visits

    async def load(self, key: str) -> Sequence[Message]:
        """See :class:`plait.graphs.ports.HistoryPort`."""
        hkey = history_key(self.run_id, key)
        done = self.visits.get(key, 0) if self.visits is not None else None
        cached = self.cache.get(hkey)
        if cached is not None and (done is None or cached[0] == done):
            return cached[1]  # type: ignore[no-any-return]  # read-only (see HistoryPort)
        if done == 0:
            return []  # the node's first visit: nothing to read
        messages = [
            Message.model_validate(m)
            for _, part in await self._parts(key, hkey, done)
            for m in part
        ]
        self.cache[hkey] = (done if done is not None else -1, messages)
        return messages

    async def _parts(self, key: str, hkey: str, done: int | None) -> list[tuple[int, list[Any]]]:
        """What each visit of ``key`` up to ``done`` added, in visit order: from the run's
        log entries, and from the keys of the layout before them."""
        parts = [
            (_part_visit(entry.key), entry.value)
            async for entry in self.mesh.scan(f"{hkey}/")
            if done is None or _part_visit(entry.key) <= done
        ]
        async for entry in read_log(self.mesh, self.run_id):
            found = entry.history.get(key)
            if isinstance(found, dict) and (done is None or int(found["visit"]) <= done):
                parts.append((int(found["visit"]), list(found["messages"])))
        return sorted(parts, key=lambda part: part[0])


def _part_visit(key: str) -> int:
    tail = key.rpartition("/")[2]
    return int(tail) if tail.isdigit() else 0


def history_part_key(run_id: str, key: str, visit: int) -> str:
    """The mesh key of the messages one visit added to a node's conversation."""
    return f"{history_key(run_id, key)}/{visit:06d}"


_MESSAGES = TypeAdapter(list[Message])
"""Dumps a visit's messages in one call (as each one's ``model_dump`` would)."""


def dump_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """``messages`` as stored: what each one's ``model_dump`` gives."""
    if any(message.tool_calls for message in messages):
        return _MESSAGES.dump_python(messages)  # type: ignore[no-any-return]
    # Most visits add text messages only: plain dicts, with no serializer between.
    return [
        {"role": m.role, "content": m.content, "tool_calls": [], "tool_call_id": m.tool_call_id}
        for m in messages
    ]


def history_delta(
    cache: OrderedDict[str, Any],
    run_id: str,
    key: str,
    visit: int,
    history: list[Message],
) -> tuple[dict[str, Any], tuple[str, tuple[int, list[Message]]]]:
    """The messages this visit appended to its node's conversation, as its log entry
    holds them (``{"visit": N, "messages": [...]}``).

    The visit's conversation began with what :meth:`MeshHistories.load` cached for the
    visit before it. Returns the cache entry to set once the entry commits too (not
    before: a commit that conflicts and is recomputed must store the same messages).
    """
    hkey = history_key(run_id, key)
    cached = cache.get(hkey)
    before = len(cached[1]) if cached is not None and cached[0] in (visit - 1, -1) else 0
    added = history[before:] if len(history) >= before else history
    part = {"visit": visit, "messages": dump_messages(added)}
    # The visit's own list, built for its result and changed by no one after (the
    # cache hands it out read-only): no copy of a conversation that only grows.
    return part, (hkey, (visit, history))


__all__ = [
    "MeshHistories",
    "RunDecisions",
    "decision_id",
    "escape_id_part",
    "history_delta",
    "history_part_key",
    "wake_notify",
]
