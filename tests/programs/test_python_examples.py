"""The Python graph examples, end to end: in-session, durably, and across restarts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from examples import release_graph, review_graph
from plait.decisions import Human
from plait.graphs.store import import_graph
from plait.ids import RunId
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.runs import RunRecord, Runs
from tests._support.timing import scaled
from tests.runs.helpers import EXAMPLES, ROOT, Cli, commits, hosting

pytestmark = pytest.mark.anyio

RELEASE_MODEL = f"scripted:{EXAMPLES / 'release_graph.model.yaml'}"


async def test_the_review_graph_passes_the_sample_package() -> None:
    run = await review_graph.graph.run(
        "sample_pkg",
        model=f"scripted:{EXAMPLES / 'review_graph.model.yaml'}",
        approve_tools=True,
        cwd=EXAMPLES,
    )
    assert run.status == "done", run.error
    assert run.output["status"] == "success"
    assert run.output["review"].startswith("APPROVE")
    assert [s.node for s in run.trajectory] == ["checks", "checks_route", "review", "verdict"]
    checks = run.trajectory[0].output
    assert checks["types"]["ok"] and checks["tests"]["ok"]
    assert "2 passed" in checks["tests"]["stdout"]


async def test_a_failing_check_names_its_node_and_evidence(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "sample_pkg", tmp_path / "sample_pkg")
    prices = tmp_path / "sample_pkg" / "prices.py"
    prices.write_text(prices.read_text().replace("+ 50) // 100", "+ 50) / 100"))
    run = await review_graph.graph.run(
        "sample_pkg",
        model=f"scripted:{EXAMPLES / 'review_graph.model.yaml'}",
        approve_tools=True,
        cwd=tmp_path,
    )
    assert run.status == "done", run.error
    out = run.output
    assert out["status"] == "failed" and out["node"] == "checks"
    assert not out["types"]["ok"] and "prices.py" in out["types"]["stdout"]  # mypy's finding
    assert out["tests"]["ok"] is False and out["tests"]["exit_code"] != 0
    assert "review" not in [s.node for s in run.trajectory]  # no model asked


async def test_the_release_graph_in_session() -> None:
    await release_graph.main()  # asserts it parks, then answers and finishes


async def _committed(runs: Runs, run_id: RunId) -> int:
    return len([s for s in await runs.trajectory(run_id) if s.status == "done"])


async def test_the_release_graph_survives_restarts_at_any_point(mesh: Mesh) -> None:
    """Each host serves until one more node commits, then stops at once (cutting off a
    node it had begun, if any): the run goes on on the next host, each node committed
    once and the release recorded once."""
    await import_graph(mesh, release_graph.graph.compile(durable=True))
    runs = Runs(mesh)
    model = ScriptedModel.from_file(EXAMPLES / "release_graph.model.yaml")
    hosts = 0
    rec: RunRecord | None = None
    answered = False
    with anyio.fail_after(scaled(60)):
        while rec is None or rec.status not in ("done", "failed"):
            async with hosting(mesh, model, drain_timeout_s=0.01):
                hosts += 1
                if rec is None:
                    rec = await runs.start("assistant", "release", input="v2.0.0")
                before = await _committed(runs, rec.run_id)
                while True:
                    rec = await runs.get(rec.run_id)
                    if rec.status == "waiting_human" and not answered:
                        await runs.resume(rec.run_id, "yes", by=Human("ana"))
                        answered = True
                    if rec.status in ("done", "failed"):
                        break
                    if await _committed(runs, rec.run_id) > before:
                        break
                    await anyio.sleep(0.02)
    assert rec.status == "done", rec.error
    output: dict[str, Any] = await runs.output(rec)
    assert output["status"] == "released" and output["key"] == "releases/v2.0.0"
    assert output["state"] == f"runs/{rec.run_id}"
    nodes = [node for node, _ in commits(await runs.trajectory(rec.run_id))]
    assert nodes == ["fetch", "test", "test_route", "notes", "approve", "release"]
    assert hosts >= 2  # at the least, one stop while it waited on the sign-off
    stored = await mesh.get("releases/v2.0.0")
    assert stored is not None and stored.version == 1  # recorded once


def test_the_release_graph_from_the_cli_parks_and_resumes(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    cli.env["PYTHONPATH"] = str(ROOT)  # where examples/ imports from, for every process
    assert (
        "imported assistant/release"
        in cli("graph", "import", "examples.release_graph:graph").stdout
    )
    parked = cli.json(
        "graph", "run", "assistant", "release", "--input", "v3.1.0", "--model", RELEASE_MODEL
    )
    assert parked["status"] == "waiting_human"
    assert parked["waiting"]["ask"].startswith("Release v3.1.0?")
    done = cli.json("graph", "resume", parked["run_id"], "yes")  # a new process
    assert done["status"] == "done", done
    assert done["output"]["status"] == "released"
    assert done["output"]["state"] == f"runs/{parked['run_id']}"
    assert done["output"]["actor"] == f"run:{parked['run_id']}"
    stored = cli.json("mesh", "get", "releases/v3.1.0")
    assert stored["value"]["version"] == "v3.1.0"
