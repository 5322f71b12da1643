"""Agent actors on every mesh backend: one turn per message with a durable, bounded
conversation; the capabilities as tools, their mesh effects committed with the turn; a
claim race with one winner; a run the agent starts and inspects; a spent budget parks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plait.actors import tell_tracked
from plait.actors.topics import topic_mail
from plait.agents import Agents, agent_actor_id
from plait.agents.store import read_conversation, read_state
from plait.decisions import DecisionAnswerer, DecisionId, Human
from plait.graphs import GraphSpec
from plait.graphs.store import import_graph
from plait.mesh import Event, Mesh
from tests.programs import sample_programs

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio


async def turns_of(agents: Agents, name: str, count: int) -> Any:
    async def check() -> Any:
        shown = await agents.show(name)
        return shown if len(shown.turns) >= count and not shown.backlog else None

    return await eventually(check)


async def test_one_turn_per_message_with_a_bounded_conversation(mesh: Mesh) -> None:
    await profile(mesh, "helper", [], system_prompt="You help.")
    rules = [
        {"node": "helper", "visit": 1, "text": "first answer"},
        {"node": "helper", "text": "answer {{visit}}"},
    ]
    agents = Agents(mesh)
    async with serving(mesh, rules) as served:
        await agents.start("helper", window=4)
        for n in range(3):
            await agents.tell("helper", f"message {n}")
        shown = await turns_of(agents, "helper", 3)
        model = served.owner_services.env.model
    assert [t.text for t in shown.turns] == ["first answer", "answer 2", "answer 3"]
    assert [t.prompt for t in shown.turns] == ["message 0", "message 1", "message 2"]
    conversation, _ = await read_conversation(mesh, "helper")
    assert [m.content for m in conversation.messages] == [
        "message 1",
        "answer 2",
        "message 2",
        "answer 3",
    ]
    assert conversation.dropped == 2
    # the third turn saw the instructions and the window carried from the turns before
    assert model is not None
    third = model.calls[-1].messages  # type: ignore[attr-defined]
    assert [m.content for m in third] == [
        "You help.",
        "message 0",
        "first answer",
        "message 1",
        "answer 2",
        "message 2",
    ]
    listed = {a.name: a for a in await agents.list()}
    assert listed["helper"].backlog == 0 and listed["helper"].status == "running"


CLAIM_RULES: list[dict[str, Any]] = [
    {"node": "worker", "tool_result": "onflict", "text": "lost {{prompt.data.id}}"},
    {
        "node": "worker",
        "round": 1,
        "tool_calls": [
            {
                "name": "mesh_put",
                "arguments": {
                    "key": "tasks/{{prompt.data.id}}",
                    "value": {"by": "{{instance}}"},
                    "if_version": 0,
                },
            }
        ],
    },
    {
        "node": "worker",
        "round": 2,
        "tool_calls": [
            {
                "name": "mesh_publish",
                "arguments": {
                    "topic": "tasks.done",
                    "kind": "done",
                    "data": {"id": "{{prompt.data.id}}", "by": "{{instance}}"},
                },
            }
        ],
    },
    {"node": "worker", "round": 3, "text": "done {{prompt.data.id}}"},
]


async def test_a_claim_race_among_workers_has_one_winner(mesh: Mesh) -> None:
    await profile(mesh, "worker", ["mesh_get", "mesh_put", "mesh_publish"])
    agents = Agents(mesh)
    async with serving(mesh, CLAIM_RULES):
        for n in (1, 2, 3):
            await agents.start(f"w{n}", profile="worker", topics=["tasks.new"])
        done = mesh.subscribe("tasks.done", "test", "t", start="begin")
        async with done:
            # subscribed before these publishes: each worker gets every one of them
            for n in range(4):
                await mesh.publish("tasks.new", "task", {"id": f"t{n}"})
            finished: list[Any] = []
            async for delivery in done:
                finished.append(delivery.data)
                await delivery.ack()
                if len(finished) == 4:
                    break
        for n in (1, 2, 3):
            await turns_of(agents, f"w{n}", 4)
    assert sorted(d["id"] for d in finished) == ["t0", "t1", "t2", "t3"]
    for n in range(4):
        entry = await mesh.get(f"tasks/t{n}")
        assert entry is not None and entry.version == 1
        assert entry.value["by"] == next(d["by"] for d in finished if d["id"] == f"t{n}")
    texts = [t.text for n in (1, 2, 3) for t in (await agents.show(f"w{n}")).turns]
    assert sorted(texts) == sorted(
        [f"done t{n}" for n in range(4)] + [f"lost t{n}" for n in range(4) for _ in (1, 2)]
    )


async def test_an_agent_starts_a_durable_run_and_inspects_it(mesh: Mesh) -> None:
    spec = GraphSpec.model_validate(
        {
            "name": "greet",
            "agent": "assistant",
            "entry": "hello",
            "nodes": [{"id": "hello", "type": "agent", "prompt": "Greet {{input}}"}],
        }
    )
    await import_graph(mesh, spec)
    await profile(mesh, "runner", ["run_graph", "inspect_graph_run"])
    rules: list[dict[str, Any]] = [
        {"node": "hello", "text": "hello there"},
        {
            "node": "runner",
            "round": 1,
            "tool_calls": [
                {
                    "name": "run_graph",
                    "arguments": {"agent": "assistant", "name": "greet", "input": "ana"},
                }
            ],
        },
        {"node": "runner", "round": 2, "text": "{{tool_result.run_id}}"},
    ]
    rules[:0] = [
        {
            "node": "runner",
            "match": "inspect",
            "tool_result": '"status": "done"',
            "text": "done {{tool_result.output}}",
        },
        {"node": "runner", "match": "inspect", "round": 2, "text": "{{tool_result.status}}"},
        {
            "node": "runner",
            "match": "inspect",
            "round": 1,
            "tool_calls": [
                {"name": "inspect_graph_run", "arguments": {"run_id": "{{prompt.run}}"}}
            ],
        },
    ]
    agents = Agents(mesh)
    async with serving(mesh, rules):
        await agents.start("runner")
        await agents.tell("runner", "start it")
        shown = await turns_of(agents, "runner", 1)
        run_id = shown.turns[0].text
        assert run_id.startswith("grun_")

        async def inspected() -> Any:
            await agents.tell("runner", json.dumps({"do": "inspect", "run": run_id}))
            seen = await turns_of(agents, "runner", len((await agents.show("runner")).turns) + 1)
            return seen.turns[-1].text.startswith("done") and seen

        shown = await eventually(inspected)
    assert shown.turns[-1].text == "done hello there"
    assert shown.turns[0].tools == ["run_graph"]


async def test_a_spent_budget_parks_the_actor_until_a_person_raises_it(mesh: Mesh) -> None:
    await profile(mesh, "spender", [])
    rules = [{"node": "spender", "text": "ok", "usage": {"input_tokens": 3, "output_tokens": 2}}]
    agents = Agents(mesh)
    async with serving(mesh, rules):
        await agents.start("spender", budget={"tokens_per_day": 10})
        await agents.tell("spender", "one")
        await agents.tell("spender", "two")
        await turns_of(agents, "spender", 2)
        await agents.tell("spender", "three")  # 10 tokens spent: this one parks the actor

        async def parked() -> Any:
            state, _ = await read_state(mesh, "spender")
            return state if state.parked == "budget" else None

        state = await eventually(parked)
        assert state.decision is not None
        listed = {a.name: a for a in await agents.list()}
        assert listed["spender"].status == "parked (budget)"
        desk = DecisionAnswerer(mesh)
        decision = await desk.get(DecisionId(state.decision))
        assert decision.options == ["raise", "keep parked"]
        await eventually(lambda: _held(agents, 1))
        await desk.answer(DecisionId(state.decision), option="raise", by=Human("ana"))
        shown = await turns_of(agents, "spender", 3)
    assert [t.prompt for t in shown.turns] == ["one", "two", "three"]
    state, _ = await read_state(mesh, "spender")
    assert state.parked is None and state.tokens == 15 and state.raised_tokens == 10


async def test_the_call_that_spent_the_budget_counts_in_the_days_spending(mesh: Mesh) -> None:
    # The first call spends 6 of 10 tokens and asks for a tool; the second would not
    # fit, so the turn stops there and the actor parks. The 6 tokens were spent: the
    # day's figures count them, though the turn never committed.
    await profile(mesh, "spender", ["mesh_get"])
    usage = {"input_tokens": 4, "output_tokens": 2}
    rules = [
        {
            "node": "spender",
            "round": 1,
            "tool_calls": [{"name": "mesh_get", "arguments": {"key": "notes"}}],
            "usage": usage,
        },
        {"node": "spender", "text": "ok", "usage": usage},
    ]
    agents = Agents(mesh)
    async with serving(mesh, rules):
        await agents.start("spender", budget={"tokens_per_day": 10})
        await agents.tell("spender", "look it up")

        async def parked() -> Any:
            state, _ = await read_state(mesh, "spender")
            return state if state.parked == "budget" else None

        state = await eventually(parked)
    assert state.tokens == 6 and state.turns == 0


async def test_a_program_an_agent_runs_spends_the_agents_daily_budget(mesh: Mesh) -> None:
    # The program a turn runs (programs_run) loops on agents.run: its turns spend the
    # day's budget of the agent that ran it, and stop where that budget does.
    await profile(mesh, "boss", ["programs_run"], pre_approved=["programs_run"])
    await profile(mesh, "helper", [])
    spend = {"agent": "helper", "task": "count", "times": 50}
    rules = [
        {
            "node": "boss",
            "round": 1,
            "tool_calls": [{"name": "programs_run", "arguments": {"ref": "sample-spend",
                                                                  "input": spend}}],
            "usage": {"input_tokens": 2, "output_tokens": 1},
        },
        {"node": "boss", "text": "done", "usage": {"input_tokens": 2, "output_tokens": 1}},
        {"node": "helper", "text": "counted", "usage": {"input_tokens": 4, "output_tokens": 1}},
    ]  # fmt: skip
    assert sample_programs.spend.__name__ == "spend"  # registered as sample-spend
    agents = Agents(mesh)
    async with serving(mesh, rules):
        await agents.start("boss", budget={"tokens_per_day": 20})
        await agents.tell("boss", "count a lot")

        async def parked() -> Any:
            state, _ = await read_state(mesh, "boss")
            return state if state.parked == "budget" else None

        state = await eventually(parked)
    assert state.tokens == 18  # its own call (3), then three helper turns (5 each)


async def _held(agents: Agents, count: int) -> bool:
    return len([e async for e in agents.mesh.scan("agent-actors/spender/held/")]) >= count


async def test_an_agent_started_from_earliest_gets_what_its_topic_holds(mesh: Mesh) -> None:
    await profile(mesh, "reader", [])
    await mesh.publish("news", "item", {"n": 1})  # before the agent exists
    agents = Agents(mesh)
    async with serving(mesh, [{"node": "reader", "text": "read {{prompt.data.n}}"}]):
        await agents.start("late", profile="reader", topics=["news"])
        await agents.start("replay", profile="reader", topics=["news"], start="earliest")
        await mesh.publish("news", "item", {"n": 2})
        late = await turns_of(agents, "late", 1)
        replay = await turns_of(agents, "replay", 2)
    assert [t.text for t in late.turns] == ["read 2"]
    assert [t.text for t in replay.turns] == ["read 1", "read 2"]


async def test_a_message_delivered_again_after_its_turn_takes_no_second_turn(mesh: Mesh) -> None:
    # Delivery is at least once: a router that forwards an event again (its visibility
    # ran out) gives it a new mailbox id. The actor settles each event once.
    await profile(mesh, "helper", [])
    agents = Agents(mesh)
    event = Event("evt-1", "tasks.new", "task", {"id": "t1"}, 1)
    async with serving(mesh, [{"text": "seen"}]) as served:
        await agents.start("helper")
        await tell_tracked(mesh, agent_actor_id("helper"), topic_mail(event))
        await turns_of(agents, "helper", 1)
        await tell_tracked(mesh, agent_actor_id("helper"), topic_mail(event))  # again

        async def drained() -> Any:
            shown = await agents.show("helper")
            return not shown.backlog and served.runtime.handled >= 2 and shown

        shown = await eventually(drained)
        await agents.tell("helper", "another")  # a different message still takes a turn
        shown = await turns_of(agents, "helper", 2)
    assert [t.text for t in shown.turns] == ["seen", "seen"]
    assert [t.prompt for t in shown.turns][1] == "another"
    state, _ = await read_state(mesh, "helper")
    assert state.settled[0] == "event:evt-1" and state.turns == 2
