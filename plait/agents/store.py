"""What an agent actor keeps in the mesh between messages, under ``agent-actors/NAME/``.

- ``conversation``: the messages carried into the next turn (:class:`Conversation`),
  bounded by the actor's ``window``: older ones are dropped, and counted.
- ``state``: :class:`AgentState`, its day's spending, whether it is parked, turns so far.
- ``turns/NNNNNNNNNN``: a :class:`TurnSummary` per turn, the last ``turns_kept``.
- ``inflight/<message id>``: a turn started and not yet committed (:class:`InFlight`);
  found on a redelivery, it makes the turn indeterminate.
- ``held/<message id>``: a message that arrived while the actor was parked, told again
  when it resumes.

A turn's commit writes ``conversation``, ``state``, its summary, drops its ``inflight``
marker and acks its message in one transaction with the turn's own mesh effects. A
message settled without a model turn (a program actor's run, a skipped or dead-lettered
turn) goes through :func:`settle_turn`.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from plait.actors import ActorContext, Mail, clear_backlog_in
from plait.errors import VersionConflict
from plait.mesh import Entry, Mesh, Transaction
from plait.models import Message

AGENT_DATA_PREFIX = "agent-actors/"
"""Where every agent actor's data lives."""

MESH_KEYS = (AGENT_DATA_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def data_prefix(name: str) -> str:
    """The key prefix of agent actor ``name``'s data."""
    return f"{AGENT_DATA_PREFIX}{name}/"


def conversation_key(name: str) -> str:
    """The key of an agent actor's conversation."""
    return data_prefix(name) + "conversation"


def state_key(name: str) -> str:
    """The key of an agent actor's state."""
    return data_prefix(name) + "state"


def turn_key(name: str, seq: int) -> str:
    """The key of an agent actor's turn ``seq`` summary."""
    return f"{data_prefix(name)}turns/{seq:010d}"


def inflight_key(name: str, message_id: str) -> str:
    """The key of the marker of a turn in flight."""
    return f"{data_prefix(name)}inflight/{message_id}"


def held_key(name: str, message_id: str) -> str:
    """The key of a message held while the actor is parked."""
    return f"{data_prefix(name)}held/{message_id}"


def today() -> str:
    """The UTC day budgets count in, ``YYYY-MM-DD``."""
    return time.strftime("%Y-%m-%d", time.gmtime())


class Conversation(BaseModel):
    """The conversation an agent actor carries from turn to turn.

    Attributes:
        messages: the newest messages, at most the actor's ``window``.
        dropped: how many older ones were let go.
        tainted: outside content entered it (a turn read a fetched page, or handled a
            message from an untrusted source): every later turn carrying it runs
            untrusted. It stays so when the window drops the messages that brought it
            in, since the answers after them may carry it on; only a person's reset
            (:meth:`plait.agents.Agents.reset`) clears it, with the messages.
        reset_by: who last reset it, if anyone.
        reset_at: when (epoch seconds).
    """

    messages: list[Message] = Field(default_factory=list)
    dropped: int = 0
    tainted: bool = False
    reset_by: str | None = None
    reset_at: float | None = None

    def extended(self, added: list[Message], window: int, *, tainted: bool = False) -> Conversation:
        """This conversation with ``added`` appended, cut to the ``window`` newest;
        ``tainted`` when ``added`` carries outside content."""
        every = [*self.messages, *added]
        cut = max(0, len(every) - window)
        while cut < len(every) and every[cut].role == "tool":
            cut += 1  # never start on a tool result whose call was cut away
        return self.model_copy(
            update={
                "messages": every[cut:],
                "dropped": self.dropped + cut,
                "tainted": self.tainted or tainted,
            }
        )

    def reset(self, by: str, at: float) -> Conversation:
        """This conversation with every message let go and its taint cleared, by ``by``."""
        return Conversation(dropped=self.dropped + len(self.messages), reset_by=by, reset_at=at)


SETTLED_KEPT = 64
"""How many settled messages an agent actor's state remembers (see AgentState.settled)."""


class AgentState(BaseModel):
    """An agent actor's day and standing.

    Attributes:
        day: the UTC day ``tokens`` and ``dollars`` count.
        tokens: tokens spent that day.
        dollars: dollars spent that day.
        raised_tokens: tokens a person added to the day's limit.
        raised_dollars: dollars a person added to the day's limit.
        parked: why it is parked (``budget``, ``indeterminate``), or None.
        decision: the decision that unparks it.
        turns: turns committed so far (the last one's summary number).
        settled: the last :data:`SETTLED_KEPT` messages settled, by their identity
            (:meth:`plait.agents.message.AgentMessage.identity`): delivery is at least
            once, and a copy of one of them delivered again is dropped instead of
            taking a turn of its own.
    """

    day: str = ""
    tokens: int = 0
    dollars: float = 0.0
    raised_tokens: int = 0
    raised_dollars: float = 0.0
    parked: str | None = None
    decision: str | None = None
    turns: int = 0
    settled: list[str] = Field(default_factory=list)

    def for_today(self) -> AgentState:
        """This state with the day's spending reset if the day changed."""
        day = today()
        if self.day == day:
            return self
        return self.model_copy(
            update={
                "day": day,
                "tokens": 0,
                "dollars": 0.0,
                "raised_tokens": 0,
                "raised_dollars": 0.0,
            }
        )


class TurnSummary(BaseModel):
    """One turn, as ``agents show`` lists it.

    Attributes:
        seq: its number.
        message: the id of the message it handled.
        prompt: what the model was given for it.
        text: the answer.
        tools: the tools it called, in order.
        tokens: tokens spent.
        dollars: dollars spent.
        outcome: ``answered``, ``skipped`` (interrupted, and skipped as the actor says),
            ``failed`` (it kept failing and was dead-lettered) or, for a program actor,
            ``conflict`` (its program lost a race on a key it owns).
        tainted: it read outside content (and so ran, from then on, untrusted).
        at: when it committed, in epoch seconds.
    """

    seq: int
    message: str
    prompt: str
    text: str = ""
    tools: list[str] = Field(default_factory=list)
    tokens: int = 0
    dollars: float = 0.0
    outcome: str = "answered"
    tainted: bool = False
    at: float = 0.0


class InFlight(BaseModel):
    """A turn started and not committed: who started it, and what it did outside the mesh.

    Attributes:
        host: the runtime that ran it.
        attempt: the delivery it ran on.
        effects: the tools with effects outside the mesh it called (none: a retry is safe).
    """

    host: str
    attempt: int
    effects: list[str] = Field(default_factory=list)


def model_of(entry: Entry | None, kind: type[Any]) -> Any:
    """``entry``'s value as a ``kind`` (a fresh one when there is none)."""
    return kind() if entry is None else kind.model_validate(entry.value)


async def read_state(mesh: Mesh, name: str) -> tuple[AgentState, int]:
    """An agent actor's state and its key's version (0: none yet)."""
    entry = await mesh.get(state_key(name))
    return model_of(entry, AgentState), 0 if entry is None else entry.version


async def read_conversation(mesh: Mesh, name: str) -> tuple[Conversation, int]:
    """An agent actor's conversation and its key's version (0: none yet)."""
    entry = await mesh.get(conversation_key(name))
    return model_of(entry, Conversation), 0 if entry is None else entry.version


def settle_turn_in(
    tx: Transaction,
    ctx: ActorContext,
    mail: Mail,
    name: str,
    state: AgentState,
    version: int,
    summary: TurnSummary,
    *,
    settled: str,
    kept: int | None,
    drop_inflight: bool,
) -> None:
    """Add to ``tx`` the end of a turn: ``state`` (at ``version``, remembering the
    message as ``settled``), ``summary`` (new), the deletion of the oldest summary beyond
    ``kept`` (None: keep every one) and, with ``drop_inflight``, of the in-flight marker,
    the backlog marker's removal and the ack."""
    state.settled = [*state.settled, settled][-SETTLED_KEPT:]
    tx.put(state_key(name), state.model_dump(), version)
    tx.put(turn_key(name, summary.seq), summary.model_dump(), if_version=0)
    if kept is not None and summary.seq > kept:
        tx.delete(turn_key(name, summary.seq - kept))
    if drop_inflight:
        tx.delete(inflight_key(name, mail.id))
    clear_backlog_in(tx, ctx.id, mail.id)
    mail.ack_in(tx)


async def settle_turn(
    ctx: ActorContext,
    mail: Mail,
    name: str,
    *,
    settled: str,
    prompt: str,
    text: str,
    outcome: str,
    tainted: bool = False,
    kept: int | None = None,
    drop_inflight: bool = False,
    tools: list[str] | None = None,
    spent: tuple[int, float] = (0, 0.0),
) -> TurnSummary:
    """Settle ``mail`` with a turn summary and no conversation: count the turn in the
    state, write its summary, clear its backlog marker and ack it, in one transaction;
    the summary written.

    Args:
        ctx: the actor's context.
        mail: the message settled.
        name: the agent actor's name.
        settled: the message's identity, remembered as settled.
        prompt: the summary's prompt (what the message said).
        text: the summary's text.
        outcome: the summary's outcome (see :class:`TurnSummary`).
        tainted: the turn read outside content.
        kept: how many turn summaries to keep (the oldest beyond them is deleted);
            None keeps every one.
        drop_inflight: also delete the message's in-flight marker.
        tools: the tools the turn called.
        spent: the tokens and dollars the turn's model call spent (counted in the
            day's figures).

    Raises:
        VersionConflict: on a key other than this actor's state or the new summary
            (those mean another message of the actor settled first: it counts after it).
    """
    mesh = ctx.mesh
    while True:
        state, version = await read_state(mesh, name)
        if spent != (0, 0.0):
            state = state.for_today()
            state.tokens += spent[0]
            state.dollars += spent[1]
        state.turns += 1
        summary = TurnSummary(
            seq=state.turns,
            message=mail.id,
            prompt=prompt,
            text=text,
            tools=list(tools or []),
            tokens=spent[0],
            dollars=spent[1],
            outcome=outcome,
            tainted=tainted,
            at=time.time(),
        )
        tx = mesh.transact()
        settle_turn_in(
            tx,
            ctx,
            mail,
            name,
            state,
            version,
            summary,
            settled=settled,
            kept=kept,
            drop_inflight=drop_inflight,
        )
        try:
            await tx.commit()
        except VersionConflict as exc:
            mail.acked = False
            if exc.key in (state_key(name), turn_key(name, summary.seq)):
                continue
            raise
        return summary


async def last_turns(mesh: Mesh, name: str, count: int) -> list[TurnSummary]:
    """The last ``count`` turn summaries, oldest first."""
    found = [
        TurnSummary.model_validate(e.value) async for e in mesh.scan(data_prefix(name) + "turns/")
    ]
    return found[-count:]


async def held_messages(mesh: Mesh, name: str) -> list[Entry]:
    """The messages held while the actor is parked, oldest first."""
    return [e async for e in mesh.scan(data_prefix(name) + "held/")]


__all__ = [
    "AGENT_DATA_PREFIX",
    "MESH_KEYS",
    "AgentState",
    "Conversation",
    "InFlight",
    "TurnSummary",
    "conversation_key",
    "data_prefix",
    "held_key",
    "held_messages",
    "inflight_key",
    "last_turns",
    "model_of",
    "read_conversation",
    "read_state",
    "settle_turn",
    "settle_turn_in",
    "state_key",
    "today",
    "turn_key",
]
