"""People in durable runs: budgets only they raise, answers given once, expiry, parking."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from plait.decisions import Agent, DecisionAnswerer, Human
from plait.errors import ConfigError, DecisionClosed, NotPermitted, RunError, RunNotWaiting
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from plait.runs.log import LogFollower
from plait.runs.record import record_key
from tests._support.timing import scaled

from .helpers import agent_chain, commits, hosting, settle, store

pytestmark = pytest.mark.anyio

ANA, BOB = Human("ana"), Human("bob")


def chain_model() -> ScriptedModel:
    return ScriptedModel([{"node": n, "text": f"{n} done"} for n in ("one", "two", "three")])


def ask_graph(name: str, **human: Any) -> dict[str, Any]:
    return {
        "name": name,
        "agent": "assistant",
        "entry": "prep",
        "nodes": [
            {"id": "prep", "type": "agent", "prompt": "Prepare {{input}}", "next": "ask"},
            {
                "id": "ask",
                "type": "human",
                "ask": "Go on with {{prep}}?",
                "next": "finish",
                **human,
            },
            {"id": "finish", "type": "agent", "prompt": "Finish with {{ask}}"},
        ],
    }


def ask_model() -> ScriptedModel:
    return ScriptedModel(
        [{"node": "prep", "text": "the plan"}, {"node": "finish", "text": "finished"}]
    )


async def parked_on_budget(mesh: Mesh, runs: Runs, budget: dict[str, Any]) -> RunRecord:
    await store(mesh, {**agent_chain("tight", ["one", "two", "three"]), "budget": budget})
    started = await runs.start("assistant", "tight", "x")
    rec = await settle(runs, started.run_id)
    assert rec.status == "waiting_human", rec.error
    assert rec.waiting is not None and rec.waiting.kind == "budget"
    return rec


@pytest.mark.parametrize(
    "budget",
    [
        {"steps": 2, "on_exhausted": "escalate"},  # caught as the third visit would start
        {"tokens": 12, "on_exhausted": "escalate"},  # caught as a visit commits past it
    ],
    ids=["steps", "tokens"],
)
async def test_only_a_person_raises_a_budget_and_the_run_finishes(
    mesh: Mesh, budget: dict[str, Any]
) -> None:
    runs = Runs(mesh)
    async with hosting(mesh, chain_model()):
        parked = await parked_on_budget(mesh, runs, budget)
        assert parked.waiting is not None and parked.waiting.decision_id is not None
        asked = await DecisionAnswerer(mesh).get(parked.waiting.decision_id)
        assert asked.status == "open" and asked.options == ["raise", "stop"]
        assert asked.run_id == parked.run_id and "budget" in asked.title

        before = await mesh.get(record_key(parked.run_id))
        with pytest.raises(NotPermitted):
            await runs.raise_budget(parked.run_id, {"steps": 5, "tokens": 1000}, by=Agent("model"))
        assert await mesh.get(record_key(parked.run_id)) == before  # nothing changed
        assert (await DecisionAnswerer(mesh).get(asked.id)).status == "open"

        raised = await runs.raise_budget(parked.run_id, {"steps": 5, "tokens": 1000}, by=ANA)
        assert raised.waiting is None
        rec = await settle(runs, parked.run_id, since=parked)
    assert rec.status == "done", rec.error
    assert await runs.output(rec) == "three done"
    answered = await DecisionAnswerer(mesh).get(asked.id)
    assert answered.status == "answered" and answered.value == "raise"
    assert answered.closed_by == "ana"
    events = await read_events(mesh, rec.run_id)
    raised_event = next(e for e in events if e.type == "budget.raised")
    assert raised_event.actor == "ana"
    assert [e.type for e in events].count("run.waiting") == 1
    assert await runs.verify(rec.run_id) == len(events)


async def test_a_budget_raise_is_checked(mesh: Mesh) -> None:
    runs = Runs(mesh)
    async with hosting(mesh, chain_model()):
        parked = await parked_on_budget(mesh, runs, {"steps": 1, "on_exhausted": "escalate"})
        with pytest.raises(ConfigError, match="stepz"):
            await runs.raise_budget(parked.run_id, {"stepz": 5}, by=ANA)
        with pytest.raises(ConfigError, match="positive"):
            await runs.raise_budget(parked.run_id, {"steps": -1}, by=ANA)
        await runs.cancel(parked.run_id, by=ANA)
        with pytest.raises(RunError, match="cancelled"):
            await runs.raise_budget(parked.run_id, {"steps": 5}, by=ANA)


async def test_a_raise_does_not_answer_a_human_node(mesh: Mesh) -> None:
    await store(mesh, ask_graph("asks"))
    runs = Runs(mesh)
    async with hosting(mesh, ask_model()) as (runtime, _):
        parked = await settle(runs, (await runs.start("assistant", "asks", "x")).run_id)
        raised = await runs.raise_budget(parked.run_id, {"steps": 3}, by=ANA)
        assert raised.status == "waiting_human" and raised.waiting == parked.waiting
        await anyio.sleep(0.2)
        await runtime.wait_idle()
    rec = await runs.get(parked.run_id)
    assert rec.waiting == parked.waiting and rec.budget_extra == {"steps": 3}


async def test_a_decision_is_answered_once(mesh: Mesh) -> None:
    await store(mesh, ask_graph("asks"))
    runs = Runs(mesh)
    desk = DecisionAnswerer(mesh)
    async with hosting(mesh, ask_model()):
        parked = await settle(runs, (await runs.start("assistant", "asks", "x")).run_id)
        assert parked.waiting is not None and parked.waiting.ask == "Go on with the plan?"
        decision_id = parked.waiting.decision_id
        assert decision_id is not None
        with pytest.raises(NotPermitted):
            await desk.answer(decision_id, text="sure", by=Agent("model"))
        await runs.resume(parked.run_id, "yes, go", by=ANA)
        with pytest.raises(DecisionClosed, match=r"already answered by ana at \d{4}-"):
            await desk.answer(decision_id, text="no, stop", by=BOB)
        rec = await settle(runs, parked.run_id, since=parked)
    assert rec.status == "done"
    with pytest.raises(RunNotWaiting):
        await runs.resume(parked.run_id, "again", by=BOB)
    steps = await runs.trajectory(rec.run_id)
    assert [s.output for s in steps] == ["the plan", "yes, go", "finished"]
    assert "Finish with yes, go" == steps[2].prompt
    resumed = [e for e in await read_events(mesh, rec.run_id) if e.type == "run.resumed"]
    assert len(resumed) == 1
    assert resumed[0].detail["by"] == "ana" and resumed[0].detail["answer"] == "yes, go"


@pytest.mark.parametrize(
    ("policy", "status", "output"),
    [
        ({"on_expire": "fail"}, "failed", None),
        ({"on_expire": "default", "default": "take the default"}, "done", "finished"),
    ],
    ids=["fail", "default"],
)
async def test_an_unanswered_question_expires(
    mesh: Mesh, policy: dict[str, Any], status: str, output: str | None
) -> None:
    await store(mesh, ask_graph("expiring", expires_after_s=0.3, **policy))
    runs = Runs(mesh)
    # The fallback tick is an hour away: only the tick due at expiry can end the wait
    # within the deadline.
    async with hosting(mesh, ask_model(), tick_ms=3_600_000):
        parked = await settle(runs, (await runs.start("assistant", "expiring", "x")).run_id)
        assert parked.status == "waiting_human"
        rec = await settle(runs, parked.run_id, since=parked, timeout=scaled(5))
    assert rec.status == status
    assert parked.waiting is not None and parked.waiting.decision_id is not None
    decision = await DecisionAnswerer(mesh).get(parked.waiting.decision_id)
    assert decision.status == "expired"
    steps = await runs.trajectory(rec.run_id)
    if status == "done":
        assert await runs.output(rec) == output
        assert [s.output for s in steps] == ["the plan", "take the default", "finished"]
    else:
        assert rec.error is not None and "expired" in rec.error
        assert rec.ended_detail == "decision_closed"
        assert commits(steps) == [("prep", 1), ("ask", 1)]
    await runs.verify(rec.run_id)


def _stack(task: asyncio.Task[Any]) -> list[str]:
    names: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        names.append(getattr(coro, "__qualname__", repr(coro)))
        coro = getattr(coro, "cr_await", None)
    return names


async def test_a_parked_run_holds_no_task(mesh: Mesh) -> None:
    await store(mesh, ask_graph("asks"))
    runs = Runs(mesh)
    async with hosting(mesh, ask_model()) as (runtime, _):
        parked = await settle(runs, (await runs.start("assistant", "asks", "x")).run_id)
        assert parked.status == "waiting_human"
        await runtime.wait_idle()
        assert runtime.active_tasks == 0
        stacks = [_stack(t) for t in asyncio.all_tasks()]
        assert not [
            s
            for s in stacks
            if any("handle" in n or "_Wake" in n or n == "LocalRuntime._work" for n in s)
        ]
        # The runtime's pooled worker tasks hold no actor: each waits for work.
        pooled = [s for s in stacks if "LocalRuntime._pool_worker" in s]
        assert pooled and all(
            s[s.index("LocalRuntime._pool_worker") + 1] == "Queue.get" for s in pooled
        )
        await runs.resume(parked.run_id, "yes", by=ANA)
        rec = await settle(runs, parked.run_id, since=parked)
    assert rec.status == "done"


async def test_an_answer_wakes_the_run_at_once(mesh: Mesh) -> None:
    # The fallback tick is an hour away and a wake is redelivered after an hour: only the
    # answer's own wake can start the next node within the deadline. How soon it does is
    # bench/runs.py's resume_latency_ms.
    await store(mesh, ask_graph("asks"))
    runs = Runs(mesh)
    async with hosting(mesh, ask_model(), tick_ms=3_600_000, visibility_timeout_ms=3_600_000):
        parked = await settle(runs, (await runs.start("assistant", "asks", "x")).run_id)
        follower = LogFollower(mesh, parked.run_id, parked.audit_seq)
        with anyio.fail_after(scaled(5)):
            await runs.resume(parked.run_id, "yes", by=ANA)
            seen = False
            while not seen:
                for entry in await follower.poll():
                    p = entry.progress
                    began_nodes = [v.node for v in p.started] if p is not None else []
                    seen = seen or (p is not None and p.node == "finish") or "finish" in began_nodes
                await anyio.sleep(0.002)  # polling the log, within the deadline above
        rec = await settle(runs, parked.run_id, since=parked)
    assert rec.status == "done"


TOOL_GRAPH = {
    "name": "shell",
    "agent": "assistant",
    "entry": "run",
    "nodes": [
        {"id": "run", "type": "tool", "tool": "bash", "args": {"command": "echo durable-{{input}}"}}
    ],
}


@pytest.mark.parametrize(("answer", "status"), [("yes", "done"), ("no", "failed")])
async def test_a_tool_call_waits_for_its_approval(mesh: Mesh, answer: str, status: str) -> None:
    await store(mesh, TOOL_GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([])):
        parked = await settle(runs, (await runs.start("assistant", "shell", "x")).run_id)
        assert parked.status == "waiting_approval"
        assert parked.waiting is not None and parked.waiting.tool == "bash"
        assert "echo durable-x" in parked.waiting.ask
        with pytest.raises(NotPermitted):
            await runs.resume(parked.run_id, answer, by=Agent("model"))
        await runs.resume(parked.run_id, answer, by=ANA)
        rec = await settle(runs, parked.run_id, since=parked)
    assert rec.status == status
    assert parked.waiting.decision_id is not None
    decision = await DecisionAnswerer(mesh).get(parked.waiting.decision_id)
    assert decision.value == ("approve" if answer == "yes" else "reject")
    if status == "done":
        output = await runs.output(rec)
        assert output["stdout"] == "durable-x\n" and output["exit_code"] == 0
    else:
        assert rec.ended_detail == "tool_execution_failed"
    await runs.verify(rec.run_id)
