"""The run owner served in-process: fan-out, several hosts on one mesh, fencing."""

from __future__ import annotations

from collections import Counter
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

from plait.decisions import Human
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from plait.tools import ToolContext, ToolRegistry, tool
from tests._support.timing import scaled

from .helpers import (
    EXAMPLES,
    agent_chain,
    commits,
    eventually,
    hosting,
    settle,
    store,
)

pytestmark = pytest.mark.anyio

FAN_OUT = EXAMPLES / "fan_out_map.json"
FAN_OUT_SCRIPT = EXAMPLES / "fan_out_map.model.yaml"


async def test_fan_out_map_runs_durably_to_done(mesh: Mesh) -> None:
    await store(mesh, FAN_OUT)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(FAN_OUT_SCRIPT)):
        started = await runs.start("assistant", "fan-out-map", "Q3 results")
        rec = await settle(runs, started.run_id)
    assert rec.status == "done", rec.error
    output = await runs.output(rec)
    assert isinstance(output, str)
    assert output.startswith("Summaries of ")
    assert "Page A: subscription revenue grew 12% in Q3." in output
    assert "Page B: churn fell to 2.1% in Q3." in output
    assert "the page could not be fetched (HTTP 503)" in output and "fetcher[2]" in output

    events = await read_events(mesh, rec.run_id)
    committed = Counter((e.node, e.visit) for e in events if e.type == "node.committed")
    assert committed == {
        ("begin", 1): 1,
        ("researcher", 1): 1,
        ("fanout", 1): 1,
        ("fetcher[0]", 1): 1,
        ("fetcher[1]", 1): 1,
        ("fetcher[2]", 1): 1,
        ("fanin", 1): 1,
        ("end", 1): 1,
    }
    broken = next(e for e in events if e.node == "fetcher[2]")
    assert broken.error is not None and "HTTP 503" in broken.error
    assert rec.visits["fetcher"] == 1  # the three instances aggregated once
    assert rec.attempts == {} and rec.ready == []
    assert await runs.verify(rec.run_id) == len(events)


async def test_two_hosts_serve_fan_out_runs_to_done(mesh: Mesh) -> None:
    """Each host caches the records it wrote; the other's commits make them stale."""
    await store(mesh, FAN_OUT)
    runs = Runs(mesh)
    async with AsyncExitStack() as stack:
        for _ in range(2):
            await stack.enter_async_context(hosting(mesh, ScriptedModel.from_file(FAN_OUT_SCRIPT)))
        started = [await runs.start("assistant", "fan-out-map", f"topic {i}") for i in range(8)]
        with anyio.fail_after(scaled(20)):
            done = [await settle(runs, r.run_id) for r in started]
    assert [r.status for r in done] == ["done"] * 8
    for rec in done:
        steps = await runs.trajectory(rec.run_id)
        assert len(commits(steps)) == len(set(commits(steps))) == 8
        await runs.verify(rec.run_id)


SLOW = agent_chain("slow-one", ["slow"])


async def test_a_slow_node_on_a_live_host_is_not_taken_over(mesh: Mesh) -> None:
    """A handler outliving the visibility timeout keeps its message while its host lives."""
    await store(mesh, SLOW)
    runs = Runs(mesh)
    models = [ScriptedModel([{"node": "slow", "delay_ms": 800, "text": "done"}]) for _ in range(2)]
    async with AsyncExitStack() as stack:
        for model in models:
            await stack.enter_async_context(hosting(mesh, model, visibility_timeout_ms=200))
        started = await runs.start("assistant", "slow-one", "x")
        rec = await settle(runs, started.run_id)
    assert rec.status == "done"
    assert sum(len(m.calls) for m in models) == 1
    assert rec.usage.retries == 0


# -- a host that dies mid-node, in this process ----------------------------------------
#
# Leaving a hosting block with a tiny drain timeout cancels the handler in flight and
# leaves its message unacked, as a dead process would; a second host takes it over once
# the visibility timeout passes.


async def claimed(runs: Runs, run_id: str, node: str) -> RunRecord:
    async def check() -> RunRecord | None:
        rec = await runs.get(run_id)
        return rec if node in rec.attempts else None

    return await eventually(check)


def chain_model(**second: Any) -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "first", "text": "one"},
            {"node": "second", **second},
            {"node": "third", "text": "three"},
        ]
    )


async def die_during_second(mesh: Mesh, runs: Runs, name: str) -> tuple[str, str]:
    """Start ``name`` and kill its host while ``second`` runs; the run id and that host."""
    async with hosting(
        mesh, chain_model(delay_ms=60_000), visibility_timeout_ms=300, drain_timeout_s=0.01
    ) as (_, host):
        started = await runs.start("assistant", name, "x")
        await claimed(runs, started.run_id, "second")
    return started.run_id, host.id


async def test_a_model_node_cut_off_is_retried_once_by_another_host(mesh: Mesh) -> None:
    await store(mesh, agent_chain("cut", ["first", "second", "third"]))
    runs = Runs(mesh)
    run_id, dead = await die_during_second(mesh, runs, "cut")
    assert (await runs.get(run_id)).attempts["second"].host == dead
    async with hosting(mesh, chain_model(text="two"), visibility_timeout_ms=300) as (_, host):
        rec = await settle(runs, run_id)
    assert rec.status == "done" and await runs.output(rec) == "three"
    assert rec.usage.retries == 1 and rec.visits == {"first": 1, "second": 1, "third": 1}
    events = await read_events(mesh, run_id)
    assert [(e.node, e.visit) for e in events if e.type == "node.committed"] == [
        ("first", 1),
        ("second", 1),
        ("third", 1),
    ]
    assert next(e for e in events if e.node == "second").actor == host.id
    await runs.verify(run_id)


async def test_an_escalated_node_a_person_will_not_retry_fails_the_run(mesh: Mesh) -> None:
    graph = agent_chain(
        "cut", ["first", "second", "third"], second={"on_indeterminate": "escalate"}
    )
    await store(mesh, graph)
    runs = Runs(mesh)
    run_id, _ = await die_during_second(mesh, runs, "cut")
    async with hosting(mesh, chain_model(text="two"), visibility_timeout_ms=300):
        parked = await settle(runs, run_id)
        assert parked.waiting is not None and parked.waiting.kind == "indeterminate"
        assert parked.waiting.options == ["retry", "fail"]
        await runs.resume(run_id, "fail", by=Human("ana"))
        rec = await settle(runs, run_id, since=parked)
    assert rec.status == "failed" and rec.ended_detail == "indeterminate"
    assert rec.error == "second: a person chose not to retry"
    events = await read_events(mesh, run_id)
    assert [e.type for e in events][-3:] == ["node.indeterminate", "run.resumed", "run.failed"]
    assert events[-2].detail["by"] == "ana" and events[-2].detail["answer"] == "fail"
    assert "second" not in {e.node for e in events if e.type == "node.committed"}
    await runs.verify(run_id)


def charging_tools(charges: list[str], effect_found: bool, hang: bool) -> ToolRegistry:
    registry = ToolRegistry()

    @tool("charge")
    async def charge(args: dict[str, Any], ctx: ToolContext) -> str:
        charges.append(ctx.node)
        if hang:
            await anyio.sleep_forever()
        return "receipt-2"

    @tool("charged", read_only=True)
    async def charged(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"done": True, "value": "receipt-1"} if effect_found else {"done": False}

    registry.register(charge)
    registry.register(charged)
    return registry


@pytest.mark.parametrize("effect_found", [True, False], ids=["found", "not-found"])
async def test_verify_checks_the_effect_before_running_a_tool_again(
    mesh: Mesh, effect_found: bool
) -> None:
    await put_profile(mesh, AgentProfile(name="assistant", tools=["charge"]))
    await store(
        mesh,
        {
            "name": "pay",
            "agent": "assistant",
            "entry": "pay",
            "nodes": [
                {
                    "id": "pay",
                    "type": "tool",
                    "tool": "charge",
                    "on_indeterminate": "verify",
                    "verify": "charged",
                }
            ],
        },
    )
    runs = Runs(mesh)
    first: list[str] = []
    async with hosting(
        mesh,
        visibility_timeout_ms=300,
        drain_timeout_s=0.01,
        tools=charging_tools(first, effect_found, hang=True),
    ):
        run_id = (await runs.start("assistant", "pay", "x")).run_id
        await claimed(runs, run_id, "pay")
        with anyio.fail_after(scaled(5)):
            while not first:  # the charge is under way when its host dies
                await anyio.sleep(0.01)
    second: list[str] = []
    async with hosting(
        mesh, visibility_timeout_ms=300, tools=charging_tools(second, effect_found, hang=False)
    ):
        rec = await settle(runs, run_id)
    assert rec.status == "done"
    assert first == ["pay"]
    if effect_found:  # the check found the charge made: it is not made twice
        assert second == [] and await runs.output(rec) == "receipt-1"
    else:
        assert second == ["pay"] and await runs.output(rec) == "receipt-2"
    assert rec.usage.retries == 1
    await runs.verify(run_id)
