"""A serving process SIGKILLed at the two edges of a transition's commit.

- ``before``: the commit of ``second`` is built (record and log entry) but not sent;
- ``after``: it landed, and the process dies before ``third`` (claimed by that same
  commit, its policy ``escalate``) starts.

The process serves through :func:`plait.runs.serve` with its commit patched to kill
itself there; a ``plait worker`` then takes over. Each visit commits once, the chain
verifies, and the claim the dead process never started asks no person.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest

from plait.decisions import DecisionAnswerer
from plait.mesh import open_mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from tests._support.timing import scaled

from .helpers import Cli, agent_chain, poll, store
from .test_crash import stop

pytestmark = pytest.mark.slow

GRAPH = agent_chain("edges", ["first", "second", "third"], third={"on_indeterminate": "escalate"})

DOOMED = """
import asyncio, os, signal, sys
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.runs import serve
from plait.runs.commit import RunCommit

url, where = sys.argv[1], sys.argv[2]
commit = RunCommit._commit

async def dying(self, tx, new, version):
    if new.visits.get("second") == 1 and where == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    result = await commit(self, tx, new, version)
    if new.visits.get("second") == 1 and where == "after":
        os.kill(os.getpid(), signal.SIGKILL)
    return result

RunCommit._commit = dying

async def main():
    model = ScriptedModel([{"text": "step"}])
    async with open_mesh(url) as mesh, serve(mesh, model=model, visibility_timeout_ms=1000):
        print("serving", flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


async def _start(url: str) -> str:
    async with open_mesh(url) as mesh:
        await store(mesh, GRAPH)
        return (await Runs(mesh).start("assistant", "edges", "x")).run_id


async def _record(url: str, run_id: str) -> RunRecord:
    async with open_mesh(url) as mesh:
        return await Runs(mesh).get(run_id)


async def _read(
    url: str, run_id: str
) -> tuple[RunRecord, Counter[tuple[str | None, int | None]], int]:
    async with open_mesh(url) as mesh:
        runs = Runs(mesh)
        await runs.verify(run_id)
        events = await read_events(mesh, run_id)
        committed = Counter((e.node, e.visit) for e in events if e.type == "node.committed")
        return await runs.get(run_id), committed, len(await DecisionAnswerer(mesh).list())


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize(
    "mesh_url", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)], indirect=True
)
def test_a_process_killed_at_either_edge_of_a_commit_loses_and_doubles_nothing(
    mesh_url: str, where: str, tmp_path: Path
) -> None:
    cli = Cli(tmp_path, mesh_url)
    run_id = anyio.run(_start, mesh_url)
    script = tmp_path / "doomed.py"
    script.write_text(DOOMED)
    doomed = subprocess.Popen(
        [sys.executable, str(script), mesh_url, where],
        cwd=tmp_path,
        env=cli.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert doomed.wait(timeout=scaled(30)) == -9, doomed.stderr.read() if doomed.stderr else ""
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.communicate()

    left, committed, _ = anyio.run(_read, mesh_url, run_id)
    if where == "before":  # nothing of second's commit landed: its claim is still there
        assert committed == {("first", 1): 1} and "second" in left.attempts
    else:  # second landed, and claimed third, which no one started
        assert committed == {("first", 1): 1, ("second", 1): 1}
        assert left.attempts["third"].begun is False

    model = tmp_path / "step.model.yaml"
    model.write_text('rules:\n  - text: "step"\n')
    worker = cli.spawn("worker", "--visibility-timeout", "1", "--model", f"scripted:{model}")
    try:

        def done() -> RunRecord | None:
            # the record alone: a chain verified while the worker commits may hold an
            # event the record read just before it does not pin yet
            rec = anyio.run(_record, mesh_url, run_id)
            return rec if rec.terminal else None

        poll(done, timeout=40)
    finally:
        stop(worker)
    rec, committed, decisions = anyio.run(_read, mesh_url, run_id)
    assert rec.status == "done", rec.error
    assert committed == {("first", 1): 1, ("second", 1): 1, ("third", 1): 1}
    assert rec.visits == {"first": 1, "second": 1, "third": 1}
    assert decisions == 0  # a claim never started is run again, not asked about
