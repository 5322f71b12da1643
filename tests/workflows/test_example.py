"""``examples/fabric_workflow.py``: the seed's in-session program as a workflow runs in
session and durably to the same end, parking once on its approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples import fabric_workflow as example
from plait.agents import Agents
from plait.decisions import Human
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile
from plait.profiles.store import put_profile
from plait.runs import Runs, serve
from plait.workflows import start_workflow
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

PROFILE = AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"])


@pytest.fixture(autouse=True)
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(example, "TYPECHECK", "true")
    monkeypatch.setattr(example, "TESTS", "true")
    monkeypatch.setattr(example, "RELEASED", tmp_path / "released.txt")
    return tmp_path / "released.txt"


async def test_in_session(stand_ins: Path) -> None:
    value, steps = await example.checked_release.session(
        {"target": "src"},
        model=ScriptedModel([{"text": "APPROVE"}]),
        answers={"Release src?": "yes"},
        profiles={"assistant": PROFILE},
    )
    assert value == {"status": "success", "review": "APPROVE", "released": "src"}
    assert [s.name for s in steps][-2:] == ["decisions.ask", "release"]
    assert stand_ins.read_text().split() == ["src"]


async def test_durably(mesh: Mesh, stand_ins: Path, tmp_path: Path) -> None:
    await put_profile(mesh, PROFILE)
    model = ScriptedModel([{"text": "APPROVE"}])
    async with serve(mesh, model=model, agents=Agents, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, example.checked_release, "src", workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.waiting is not None and rec.waiting.ask == "Release src?"
        await runs.resume(rec.run_id, "yes", by=Human("tester"))
        rec = await runs.wait(rec.run_id, timeout=scaled(30), since=rec)
        assert rec.status == "done", rec.error
        assert await runs.output(rec) == {
            "status": "success",
            "review": "APPROVE",
            "released": "src",
        }
    assert stand_ins.read_text().split() == ["src"]
