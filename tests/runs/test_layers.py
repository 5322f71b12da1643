"""The runs room's shape: a line of modules, one writer of run records, hosts injected."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from plait.actors import LocalRuntime
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs, serve
from plait.runs.record import record_key

from .helpers import ROOT as REPO
from .helpers import agent_chain, eventually, settle, store

RUNS = REPO / "plait" / "runs"

LINE = [
    "shared_loads",
    "record",
    "listing",
    "telemetry",
    "wake",
    "progress",
    "channel",
    "feed",
    "log",
    "audit",
    "persons",
    "mesh_ports",
    "heartbeats",
    "live",
    "store",
    "watch",
    "replay",
    "commit",
    "retention",
    "start",
    "rerun",
    "env",
    "asks",
    "owner_services",
    "services",
    "owner",
    "service",
    "serve",
]
"""plait/runs/ in import order: each module imports only those before it."""


def _runs_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "plait.runs":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("plait.runs."):
                found.add(node.module.removeprefix("plait.runs.").split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("plait.runs.").split(".")[0]
                for a in node.names
                if a.name.startswith("plait.runs.")
            )
    return found


def test_every_module_of_runs_is_in_the_line() -> None:
    modules = {p.stem for p in RUNS.glob("*.py")} - {"__init__"}
    assert modules == set(LINE)


@pytest.mark.parametrize("module", LINE)
def test_a_module_imports_only_those_before_it(module: str) -> None:
    before = set(LINE[: LINE.index(module)])
    assert _runs_imports(RUNS / f"{module}.py") <= before


def test_only_run_commit_writes_a_run_record() -> None:
    writers = [
        str(path.relative_to(REPO))
        for path in (REPO / "plait").rglob("*.py")
        if ".put(record_key(" in path.read_text()
    ]
    assert writers == ["plait/runs/commit.py"]


def test_retention_and_takeover_write_through_run_commit() -> None:
    # A finished run's record is deleted by RunCommit (for retention), and the wakes
    # of a takeover are sent by it: no run transaction is composed beside it.
    deleters = [
        str(path.relative_to(REPO))
        for path in (REPO / "plait").rglob("*.py")
        if "delete(record_key(" in path.read_text()
    ]
    assert deleters == ["plait/runs/commit.py"]
    senders = [
        module
        for module in LINE
        if module not in ("commit", "wake") and "tell_in(" in (RUNS / f"{module}.py").read_text()
    ]
    assert "live" not in senders and "retention" not in senders


@pytest.mark.anyio
async def test_a_runtime_without_a_run_host_serves_no_run(
    mesh: Mesh, caplog: pytest.LogCaptureFixture
) -> None:
    await store(mesh, agent_chain("bare", ["only"]))
    runs = Runs(mesh)
    started = await runs.start("assistant", "bare", "x")
    with caplog.at_level(logging.WARNING, logger="plait.actors"):
        async with LocalRuntime(mesh, visibility_timeout_ms=200, drain_timeout_s=1.0):

            async def refused() -> bool:
                return any("needs a OwnerServices" in r.getMessage() for r in caplog.records)

            await eventually(refused)
    rec = await runs.get(started.run_id)
    assert rec.status == "running" and not rec.visits  # left for a process that serves it
    entry = await mesh.get(record_key(started.run_id))
    assert entry is not None and entry.version == 1
    # The same run, served by a process built with serve(), runs to its end.
    model = ScriptedModel([{"text": "ok"}])
    async with serve(mesh, model=model, visibility_timeout_ms=200, beat=False):
        done = await settle(runs, started.run_id)
    assert done.status == "done"
