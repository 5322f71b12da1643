"""The fleet example (examples/fleet) on every mesh backend, in this process: each task
is claimed by exactly one worker and reported once; the reporter's sign-off waits for a
person."""

from __future__ import annotations

from typing import Any

import pytest

from plait.decisions import DecisionAnswerer, Human
from plait.mesh import Mesh
from plait.models import ScriptedModel

from .conftest import eventually, serving
from .fleet import MODEL, WORKERS, set_up_fleet

pytestmark = pytest.mark.anyio


async def test_the_fleet_claims_each_task_once_and_signs_off(mesh: Mesh) -> None:
    rules = [r.model_dump(exclude_none=True) for r in ScriptedModel.from_file(MODEL).rules]
    async with serving(mesh, rules):
        agents = await set_up_fleet(mesh)
        await agents.tell("dispatcher", "three tasks, please")

        async def reported() -> Any:
            found = [e async for e in mesh.scan("reports/fleet/")]
            return len(found) == 3 and found

        notes = await eventually(reported)
        claims = {n: await mesh.get(f"tasks/{n}") for n in ("t1", "t2", "t3")}
        results = {n: await mesh.get(f"results/{n}") for n in ("t1", "t2", "t3")}
        for n in ("t1", "t2", "t3"):
            claim, result = claims[n], results[n]
            assert claim is not None and claim.version == 1
            assert result is not None and result.version == 1
            assert result.value["by"] == claim.value["claimed_by"]
        assert {e.value["by"] for e in notes} <= {f"{w}" for w in WORKERS}

        await agents.tell("reporter", "the report, please")
        desk = DecisionAnswerer(mesh)

        async def raised() -> Any:
            return [d for d in await desk.list() if d.raised_by == "agent:reporter"]

        (decision,) = await eventually(raised)
        assert decision.title.startswith("Sign off the fleet report")
        await desk.answer(decision.id, option="yes", by=Human("ana"))

        async def signed() -> Any:
            shown = await agents.show("reporter")
            return shown.turns and shown.turns[-1].text.startswith("report") and shown

        shown = await eventually(signed)

        async def every_turn() -> Any:
            # a worker that lost a claim may still be ending its turn when the report is in
            found = [t.text for w in WORKERS for t in (await agents.show(w)).turns]
            return len(found) >= 9 and found

        outcomes = await eventually(every_turn)
    assert shown.turns[-1].text == "report answered: yes"
    assert sorted(o.split()[0] for o in outcomes) == ["did"] * 3 + ["lost"] * 6
