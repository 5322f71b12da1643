"""Programs: callables and saved texts, versions, promotion, capabilities and narrowing."""

from __future__ import annotations

import pytest

from plait.decisions import Agent, DecisionAnswerer, DecisionAsker, Human
from plait.errors import (
    BudgetExhausted,
    CapabilityMissing,
    NotPermitted,
    ProgramInputInvalid,
    ProgramNotFound,
    ProgramNotPromoted,
    ToolNotPermitted,
)
from plait.mesh import Mesh, open_mesh
from plait.profiles import AgentProfile
from plait.programs import (
    SharedBudget,
    get_program,
    grant_all,
    list_programs,
    promote,
    run_program,
    run_source,
    save_program,
)
from plait.programs.store import text_sha256

from . import sample_programs

pytestmark = pytest.mark.anyio

ANA = Human("ana")

TOP_LEVEL = """
import asyncio
first, second = await asyncio.gather(asyncio.sleep(0, "a"), asyncio.sleep(0, "b"))
if payload.stop:
    return {"stopped": True}
return {"joined": first + second + payload.suffix}
"""


async def test_a_registered_program_validates_its_input_and_output() -> None:
    grants = grant_all(None)
    out = await run_program("sample-greet", {"name": "ana", "times": 2}, grants)
    assert out == {"text": "hello ana hello ana"}
    with pytest.raises(ProgramInputInvalid, match="times"):
        await run_program("sample-greet", {"name": "ana", "times": "many"}, grants)


async def test_an_import_path_program_needs_no_registration() -> None:
    ref = f"{sample_programs.__name__}:run_nested"
    grants = grant_all(None)
    out = await run_program(ref, {"ref": "sample-greet", "input": {"name": "bo"}}, grants)
    assert out == {"text": "hello bo"}
    with pytest.raises(ProgramNotFound, match="has no nothing_here"):
        await run_program(f"{sample_programs.__name__}:nothing_here", {}, grants)


async def test_a_saved_text_may_await_and_return_at_top_level(mesh: Mesh) -> None:
    stored = await save_program(mesh, "joiner", TOP_LEVEL)
    assert (stored.version, stored.sha256) == (1, text_sha256(TOP_LEVEL))
    await promote(mesh, "joiner", 1, by=ANA)
    grants = grant_all(mesh)
    assert await run_program("joiner", {"stop": False, "suffix": "!"}, grants) == {"joined": "ab!"}
    assert await run_program("joiner", {"stop": True, "suffix": ""}, grants) == {"stopped": True}


async def test_versions_are_immutable_and_saving_the_same_text_is_a_no_op(mesh: Mesh) -> None:
    one = await save_program(mesh, "p", "return 1")
    again = await save_program(mesh, "p", "return 1")
    two = await save_program(mesh, "p", "return 2")
    assert (one.version, again.version, two.version) == (1, 1, 2)
    assert (await get_program(mesh, "p", 1)).text == "return 1"
    assert (await get_program(mesh, "p")).text == "return 2"
    [summary] = await list_programs(mesh)
    assert (summary.name, summary.versions, summary.promoted) == ("p", [1, 2], [])
    with pytest.raises(ProgramNotFound, match=r"no version 7 \(versions: 1, 2\)"):
        await get_program(mesh, "p", 7)


async def test_an_unpromoted_version_is_refused_naming_the_version_to_promote(
    mesh: Mesh,
) -> None:
    await save_program(mesh, "deploy", "return 'v1'")
    await promote(mesh, "deploy", 1, by=ANA)
    await save_program(mesh, "deploy", "return 'v2'")
    grants = grant_all(mesh)
    with pytest.raises(ProgramNotPromoted, match="plait programs promote deploy --version 2"):
        await run_program("deploy", None, grants)
    assert await run_program("deploy@1", None, grants) == "v1"
    assert await run_program("deploy", None, grants, require_promoted=False) == "v2"
    # A nested run is refused the same way.
    nested = "return await programs.run('deploy', None, require_promoted=True)"
    with pytest.raises(ProgramNotPromoted) as caught:
        await run_source(nested, None, grants)
    assert caught.value.version == 2


async def test_promotion_is_a_human_act_recorded_with_who_and_when(mesh: Mesh) -> None:
    await save_program(mesh, "p", "return 1")
    with pytest.raises(NotPermitted, match="only a human may promote a program"):
        await promote(mesh, "p", 1, by=Agent("release-bot"))
    assert (await get_program(mesh, "p", 1)).promotion is None
    promoted = await promote(mesh, "p", 1, by=ANA)
    assert promoted.promotion is not None and promoted.promotion.by == "ana"
    again = await promote(mesh, "p", 1, by=Human("bo"))
    assert again.promotion == promoted.promotion
    assert (await get_program(mesh, "p", 1)).promotion == promoted.promotion


async def test_a_program_run_without_decisions_cannot_raise_one_through_a_nested_one(
    mesh: Mesh,
) -> None:
    full = grant_all(mesh)
    raised = await run_program("sample-raise", {"title": "Ship?", "id": "d1"}, full)
    assert raised["status"] == "open"
    narrow = full.without("decisions")
    ref = f"{sample_programs.__name__}:run_nested"
    with pytest.raises(CapabilityMissing, match="without the decisions capability"):
        await run_program(ref, {"ref": "sample-raise", "input": {"title": "x"}}, narrow)
    # Nor through the tools capability's decisions.raise ref, nor in a saved text.
    text = "return await tools.call('decisions.raise', {'title': 'x'})"
    with pytest.raises(CapabilityMissing):
        await run_source(text, None, narrow)
    assert [d.id for d in await DecisionAsker(mesh).list()] == ["d1"]


async def test_decisions_raise_and_wait_but_never_answer(mesh: Mesh) -> None:
    text = """
raised = await tools.call("decisions.raise", {"title": "Release?", "id": "rel-1"})
first = await decisions.wait(raised["id"], timeout_ms=10)
return {"id": raised["id"], "status": first["status"], "methods": sorted(
    n for n in dir(decisions) if not n.startswith("_"))}
"""
    out = await run_source(text, None, grant_all(mesh))
    assert out == {"id": "rel-1", "status": "open", "methods": ["raise", "raise_", "wait"]}
    await DecisionAnswerer(mesh).answer("rel-1", option="yes", by=ANA)
    again = await run_source("return await decisions.wait('rel-1', 10)", None, grant_all(mesh))
    assert again["status"] == "answered"


async def test_capabilities_have_exactly_their_methods(mesh: Mesh) -> None:
    text = """
return {name: sorted(n for n in dir(cap) if not n.startswith("_")) for name, cap in
        [("mesh", mesh), ("programs", programs), ("tools", tools), ("agents", agents)]}
"""
    out = await run_source(text, None, grant_all(mesh))
    assert out == {
        "mesh": ["get", "publish", "put", "scan", "self"],
        "programs": ["run"],
        "tools": ["bash", "call"],
        "agents": ["create", "run", "tell"],
    }
    with pytest.raises(CapabilityMissing, match="agent actors are not available yet"):
        await run_source("return await agents.run(task='review')", None, grant_all(mesh))


async def test_the_mesh_capability_writes_with_cas_and_keeps_off_service_keys(
    mesh: Mesh,
) -> None:
    text = """
key = "runs/" + payload.run + "/graph"
await mesh.put(key, {"node": "fetch"}, if_version=0)
entry = await mesh.get(key)
await mesh.put(key, {"node": "test"}, if_version=entry["version"])
await mesh.publish("graph." + payload.run, "graph.tick", {}, after_ms=60000, key="tick-r1")
return [(await mesh.get(key))["value"], [e["key"] for e in await mesh.scan("runs/r1/")]]
"""
    out = await run_source(text, {"run": "r1"}, grant_all(mesh))
    assert out == [{"node": "test"}, ["runs/r1/graph"]]
    with pytest.raises(CapabilityMissing, match="belongs to a plait service"):
        await run_source("await mesh.put('programs/p', {'promoted': {}})", None, grant_all(mesh))


async def test_tools_are_gated_and_bash_answers_ok_and_output(tmp_path: object) -> None:
    text = "return await tools.bash('echo hi; exit 3')"
    with pytest.raises(ToolNotPermitted, match="needs a person's approval"):
        await run_source(text, None, grant_all(None))
    trusted = AgentProfile(name="ops", tools=["bash"], pre_approved=["bash"])
    out = await run_source(text, None, grant_all(None, profile=trusted))
    assert out == {"ok": False, "exit_code": 3, "stdout": "hi\n", "stderr": ""}
    none = AgentProfile(name="none", tools=[])
    with pytest.raises(ToolNotPermitted, match="does not have tool 'bash'"):
        await run_source(text, None, grant_all(None, profile=none))


async def test_nested_runs_share_the_callers_budget() -> None:
    text = """
for n in range(10):
    await programs.run("sample-greet", {"name": str(n)})
"""
    budget = SharedBudget(steps=4)
    with pytest.raises(BudgetExhausted, match="4 step"):
        await run_source(text, None, grant_all(None, budget=budget))
    assert budget.used_steps == 4


async def test_a_saved_program_on_sqlite_survives_reopening(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/mesh.db"
    async with open_mesh(url) as first:
        await save_program(first, "p", "return payload.x * 2")
        await promote(first, "p", 1, by=ANA)
    async with open_mesh(url) as second:
        assert await run_program("p", {"x": 21}, grant_all(second)) == 42
