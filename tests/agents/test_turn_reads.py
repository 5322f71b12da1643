"""One agent turn reads the actor's state and conversation once, and parses its message
once (:class:`~plait.agents.message.AgentMessage`), whatever shape the message has."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from plait.actors import tell_tracked
from plait.actors.topics import topic_mail
from plait.agents import Agents, agent_actor_id
from plait.agents.message import AgentMessage
from plait.agents.store import conversation_key, last_turns, state_key
from plait.mesh import Entry, Event
from plait.mesh.memory import MemoryMesh

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio


class CountingMesh(MemoryMesh):
    """A memory mesh that counts the reads of each key."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    async def get(self, key: str) -> Entry | None:
        self.reads[key] += 1
        return await super().get(key)


def test_a_message_is_parsed_into_one_model_with_room_for_a_trace_context() -> None:
    told = AgentMessage.parse({"text": "hi", "untrusted": True, "traceparent": "00-ab-cd-01"})
    assert (told.prompt, told.untrusted, told.traceparent) == ("hi", True, "00-ab-cd-01")
    assert told.identity("m1") == "m1"
    event = AgentMessage.parse(topic_mail(Event("e1", "news", "item", {"n": 1}, 5)))
    assert event.event is not None and event.event.topic == "news"
    assert event.identity("m2") == "event:e1"  # a forward again is the same message
    assert '"data": {"n": 1}' in event.prompt
    resume = AgentMessage.parse({"control": "resume", "decision": "dec_1"})
    assert (resume.control, resume.decision) == ("resume", "dec_1")
    assert AgentMessage.parse("plain").prompt == "plain"
    assert AgentMessage.parse({"other": 1}).prompt == '{"other": 1}'


async def test_a_turn_reads_the_agent_state_and_conversation_once_and_parses_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[Any] = []
    parse = AgentMessage.parse.__func__  # type: ignore[attr-defined]

    def counting(cls: type[AgentMessage], body: Any) -> AgentMessage:
        parsed.append(body)
        return parse(cls, body)  # type: ignore[no-any-return]

    monkeypatch.setattr(AgentMessage, "parse", classmethod(counting))
    mesh = CountingMesh()
    async with mesh:
        await profile(mesh, "helper", [])
        agents = Agents(mesh)
        async with serving(mesh, [{"text": "seen {{visit}}"}]):
            await agents.start("helper")
            event = Event("evt-1", "tasks.new", "task", {"id": "t1"}, 1)
            for n, body in enumerate([{"text": "hello"}, topic_mail(event)], 1):
                mesh.reads.clear()
                parsed.clear()
                await tell_tracked(mesh, agent_actor_id("helper"), body)
                turns = await eventually(
                    lambda n=n: _at_least(mesh, n)  # type: ignore[misc]
                )
                assert turns[-1].text == f"seen {n}"
                assert mesh.reads[state_key("helper")] == 1, mesh.reads
                assert mesh.reads[conversation_key("helper")] == 1, mesh.reads
                assert parsed == [body]


async def _at_least(mesh: CountingMesh, count: int) -> Any:
    # turn summaries are read by scan, not get: the count above is the turn's alone
    turns = await last_turns(mesh, "helper", count)
    return turns if len(turns) >= count else None
