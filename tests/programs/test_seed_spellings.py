"""Program texts written for pi-style runtimes read as they are written: ``π``/``pi``,
camelCase keywords, ``answer["optionId"]``; plait's own names still work, and a
mistake in either is one line naming the program's line."""

from __future__ import annotations

from typing import Any

import pytest

from plait.agents import Agents
from plait.decisions import DecisionAnswerer, DecisionId, Human
from plait.errors import ConfigError, ProgramError, ToolError
from plait.mesh import Mesh
from plait.programs import DecisionsCapability, grant_all, run_source
from plait.programs.capabilities import snake_keywords

pytestmark = pytest.mark.anyio


async def run(mesh: Mesh, text: str, payload: Any = None, **grants: Any) -> Any:
    return await run_source(text, payload, grant_all(mesh, **grants), filename="p.py")


async def test_pi_reads_the_payload_and_runs_the_shell(mesh: Mesh) -> None:
    async def approve(tool: str, args: dict[str, Any]) -> bool:
        return True

    text = """
out = await pi.bash(command="echo " + π.target, settle=True)
also = await π.bash(command="exit 3")
return [π.target, out["ok"], out["stdout"].strip(), also["ok"], also["exit_code"]]
"""
    assert await run(mesh, text, {"target": "a.ts"}, approve=approve) == [
        "a.ts", True, "a.ts", False, 3,
    ]  # fmt: skip
    with pytest.raises(ToolError, match="exit code 3"):
        await run(mesh, 'await pi.bash(command="exit 3", settle=False)', approve=approve)
    with pytest.raises(ProgramError, match=r"^p.py:1: AttributeError: π has no 'nope'.*target"):
        await run(mesh, "return π.nope", {"target": "a.ts"})


async def test_camel_case_keywords_and_snake_case_alike(mesh: Mesh) -> None:
    text = """
first = await mesh.put(key="runs/x/k", value=1, ifVersion=0)
second = await mesh.put("runs/x/k", 2, if_version=first["version"])
await mesh.publish(topic="mine", kind="tick", afterMs=60000, key="t")
got = await mesh.get(key="runs/x/k")
return [got["value"], got["version"], (await mesh.self())["id"]]
"""
    assert await run(mesh, text, me={"id": "agent:me"}) == [2, 2, "agent:me"]
    twice = 'await mesh.put(key="runs/x/j", value=1, ifVersion=0, if_version=0)'
    with pytest.raises(
        ProgramError,
        match=r"^p.py:1: TypeError: mesh.put: if_version is given twice, as ifVersion and if_ver",
    ):
        await run(mesh, twice)
    assert snake_keywords("f", {"timeoutMs": 1, "requirePromoted": True, "id": "x"}) == {
        "timeout_ms": 1,
        "require_promoted": True,
        "id": "x",
    }


async def test_a_raise_by_ref_and_a_wait_read_the_answer_as_option_id(mesh: Mesh) -> None:
    args = '{"title": "Ship?", "input": "confirm"}'
    raised = await run(mesh, f'return await tools.call(ref="decisions.raise", args={args})')
    await DecisionAnswerer(mesh).answer(DecisionId(raised["id"]), option="yes", by=Human("bo"))
    text = "d = await decisions.wait(id=payload.id, timeoutMs=1000)\n"
    text += 'return [d["status"], d["answer"]["optionId"]]'
    assert await run(mesh, text, {"id": raised["id"]}) == ["answered", "yes"]


async def test_a_raise_without_an_id_is_one_decision_per_message_and_call(mesh: Mesh) -> None:
    board = DecisionAnswerer(mesh)

    async def raise_twice(message: str) -> list[str]:
        decisions = DecisionsCapability(board, "agent:a", scope=("agent:a", message))
        first = await decisions.raise_("One?")
        second = await decisions.raise_("Two?")
        return [first["id"], second["id"]]

    once = await raise_twice("m1")
    assert await raise_twice("m1") == once  # the message run again raises nothing new
    assert len(set(once + await raise_twice("m2"))) == 4
    assert len(await board.list()) == 4
    unscoped = DecisionsCapability(board, "program")
    assert (await unscoped.raise_("x"))["id"] != (await unscoped.raise_("x"))["id"]


async def test_agents_create_is_durable_only(mesh: Mesh) -> None:
    with pytest.raises(ConfigError, match="durable only"):
        await Agents(mesh).create("x", runner="pi", residency="ephemeral")
    with pytest.raises(ConfigError, match="give one of them"):
        await Agents(mesh).create("x", runner="pi", program="graph-step")
