"""Workflows as durable runs, served in this process on every mesh backend: the
issue's release workflow end to end (one decision, a timer, a verified step), the same
trajectory in session, a change that breaks determinism, ``ctx.patched``, and
``plait.gather`` journaling each branch."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.agents import Agents
from plait.decisions import DecisionAnswerer, Human
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile
from plait.profiles.store import put_profile
from plait.runs import RunRecord, Runs, serve
from plait.workflows import Entry, journal, stale_runs, start_workflow
from tests._support.timing import scaled
from tests.workflows import flows
from tests.workflows.release_flow import release

pytestmark = pytest.mark.anyio

ME = Human("tester")
PROFILE = AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"])


def _model() -> ScriptedModel:
    return ScriptedModel([{"text": "LGTM"}])


@asynccontextmanager
async def _served(mesh: Mesh) -> AsyncIterator[Runs]:
    await put_profile(mesh, PROFILE)
    async with serve(mesh, model=_model(), agents=Agents, beat=False):
        yield Runs(mesh)


async def _settle(runs: Runs, run_id: str, since: RunRecord | None = None) -> RunRecord:
    return await runs.wait(run_id, timeout=scaled(30), since=since)


async def _answer_until_done(runs: Runs, rec: RunRecord, answers: dict[str, str]) -> RunRecord:
    """Answer each question the run parks on from ``answers`` (by question) until it ends;
    a timer is left to fire."""
    with anyio.fail_after(scaled(60)):
        while not rec.terminal:
            waiting = rec.waiting
            if waiting is not None and waiting.ask in answers:
                await runs.resume(rec.run_id, answers[waiting.ask], by=ME)
                rec = await _settle(runs, rec.run_id, since=rec)
            else:
                await anyio.sleep(0.02)  # a timer: polled within the deadline above
                rec = await runs.get(rec.run_id)
    return rec


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The run's workspace, and this process's directory (the notes step writes there)."""
    before = Path.cwd()
    os.chdir(tmp_path)
    yield tmp_path  # type: ignore[misc]
    os.chdir(before)


async def test_release_runs_durably_with_one_decision_and_a_timer(
    mesh: Mesh, workspace: Path
) -> None:
    async with _served(mesh) as runs:
        rec = await start_workflow(mesh, release, "pkg", wait_s=0.2, workspace=workspace)
        rec = await _settle(runs, rec.run_id)
        assert rec.waiting is not None and rec.waiting.ask == "Release pkg?"
        rec = await _answer_until_done(runs, rec, {"Release pkg?": "yes"})
        assert rec.status == "done", rec.error
        assert await runs.output(rec) == {
            "status": "released",
            "review": "LGTM",
            "notes": "notes for pkg",
        }
        steps = await journal(mesh, rec.run_id)
        assert [s.name for s in steps] == [
            "tools.bash",
            "tools.bash",
            "agents.run",
            "decisions.ask",
            "sleep",
            "release_notes",
        ]
        assert await runs.verify(rec.run_id) > 0
        asked = [d for d in await DecisionAnswerer(mesh).list() if d.title == "Release pkg?"]
        assert len(asked) == 1
    effects = Counter((workspace / "effects.log").read_text().split())
    assert effects == {"types": 1, "tests": 1, "notes": 1}


def _trajectory(steps: list[Entry]) -> list[tuple[int, str, str, Any]]:
    def plain(value: Any) -> Any:
        if isinstance(value, dict):  # an agent turn's timing differs from run to run
            return {k: v for k, v in value.items() if k != "seconds"}
        return value

    return [(s.pos, s.name, s.args, plain(s.value)) for s in steps]


async def test_the_same_trajectory_in_session_and_durably(mesh: Mesh, workspace: Path) -> None:
    value, in_session = await release.session(
        {"target": "pkg", "wait_s": 0.0},
        model=_model(),
        answers={"Release pkg?": "yes"},
        profiles={"assistant": PROFILE},
    )
    assert value["status"] == "released"
    assert Counter((workspace / "effects.log").read_text().split())["notes"] == 1
    async with _served(mesh) as runs:
        rec = await start_workflow(mesh, release, "pkg", wait_s=0.0, workspace=workspace)
        rec = await _answer_until_done(
            runs, await _settle(runs, rec.run_id), {"Release pkg?": "yes"}
        )
        assert rec.status == "done", rec.error
        assert await runs.output(rec) == value
        durable = await journal(mesh, rec.run_id)
    assert _trajectory(durable)[:3] == _trajectory(in_session)[:3]
    # The answer names who gave it: the person durably, the up-front answers in session.
    assert [(s.pos, s.name, s.args) for s in durable] == [
        (s.pos, s.name, s.args) for s in in_session
    ]
    assert _trajectory(durable)[4:] == _trajectory(in_session)[4:]


async def test_a_change_that_breaks_determinism_fails_the_run_saying_where(
    mesh: Mesh, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(mesh) as runs:
        rec = await start_workflow(mesh, flows.gate, "x", workspace=workspace)
        rec = await _settle(runs, rec.run_id)
        assert rec.waiting is not None and rec.waiting.ask == "Go x?"
        assert await stale_runs(mesh) == []
        monkeypatch.setattr(flows, "gate", flows.gate_changed)
        assert [r.run_id for r, _ in await stale_runs(mesh)] == [rec.run_id]
        await runs.resume(rec.run_id, "yes", by=ME)
        rec = await _settle(runs, rec.run_id, since=rec)
        assert rec.status == "failed"
        assert rec.ended_detail == "non_deterministic"
        assert rec.error is not None
        assert "at step 0" in rec.error
        assert "tools.bash(" in rec.error and "agents.run(" in rec.error


async def test_patched_keeps_runs_in_flight_on_the_old_path_and_new_runs_on_the_new(
    mesh: Mesh, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(mesh) as runs:
        old = await start_workflow(mesh, flows.gate, "x", workspace=workspace)
        old = await _settle(runs, old.run_id)
        await runs.resume(old.run_id, "yes", by=ME)
        old = await _settle(runs, old.run_id, since=old)
        assert old.waiting is not None and old.waiting.ask == "Finish x?"
        monkeypatch.setattr(flows, "gate", flows.gate_patched)
        old = await _answer_until_done(runs, old, {"Finish x?": "yes"})
        assert old.status == "done", old.error
        assert await runs.output(old) == {"first": "one", "go": "yes", "done": "yes", "lint": None}

        new = await start_workflow(mesh, flows.gate_patched, "y", workspace=workspace)
        new = await _answer_until_done(
            runs, await _settle(runs, new.run_id), {"Go y?": "yes", "Finish y?": "yes"}
        )
        assert await runs.output(new) == {
            "first": "one",
            "go": "yes",
            "done": "yes",
            "lint": "lint",
        }
        assert [s.name for s in await journal(mesh, new.run_id)][:3] == [
            "tools.bash",
            "patched:lint",
            "tools.bash",
        ]


async def test_gather_journals_each_branch_within_its_limit(mesh: Mesh, workspace: Path) -> None:
    async with _served(mesh) as runs:
        rec = await start_workflow(mesh, flows.fan, 5, 2, workspace=workspace)
        rec = await _settle(runs, rec.run_id)
        assert rec.status == "done", rec.error
        assert await runs.output(rec) == ["0", "1", "2", "3", "4"]
        steps = await journal(mesh, rec.run_id)
        assert [s.pos for s in steps] == list(range(7))
        assert [s.name for s in steps][-2:] == ["now", "uuid"]
        # At most two at once: five echoes take three visits, the last with the stamps.
        assert rec.visits["workflow"] >= 3
