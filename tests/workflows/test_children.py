"""A workflow that runs another as a child run, parks until it ends, and reads and
writes the mesh through its steps; in session the child runs in this process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from plait.decisions import Human
from plait.errors import WorkflowParked
from plait.mesh import Mesh
from plait.runs import Runs, serve
from plait.workflows import journal, start_workflow
from tests._support.timing import scaled
from tests.workflows import flows

pytestmark = pytest.mark.anyio


async def test_a_child_workflow_parks_its_parent_until_it_ends(mesh: Mesh, tmp_path: Path) -> None:
    async with serve(mesh, beat=False):
        runs = Runs(mesh)
        rec = await start_workflow(mesh, flows.parent, workspace=tmp_path)
        rec = await runs.wait(rec.run_id, timeout=scaled(30))
        assert rec.waiting is not None and rec.waiting.kind == "subgraph"
        asking = await runs.asks(rec)
        assert asking is not None and asking[1].ask == "Proceed?"
        await runs.resume(rec.run_id, "yes", by=Human("tester"))
        with anyio.fail_after(scaled(30)):
            while not rec.terminal:  # the child ends, then its parent
                await anyio.sleep(0.02)  # polling the record, within the deadline above
                rec = await runs.get(rec.run_id)
        assert rec.status == "done", rec.error
        assert await runs.output(rec) == "parent got yes"
        steps = await journal(mesh, rec.run_id)
    assert [s.name for s in steps] == ["runs.workflow", "random", "uuid", "mesh.put", "mesh.get"]
    assert steps[0].value == "yes"


async def test_in_session_the_child_runs_here() -> None:
    value, steps = await flows.parent.session(answers={"Proceed?": "yes"})
    assert value == "parent got yes"
    assert [s.name for s in steps] == ["runs.workflow", "random", "uuid", "mesh.put", "mesh.get"]


async def test_in_session_a_question_nobody_answered_says_so() -> None:
    with pytest.raises(WorkflowParked, match="Proceed"):
        await flows.asks.session()
    value, _ = await flows.asks.session(answers={"*": "no"})
    assert value == "no"
