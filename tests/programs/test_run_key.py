"""In-session reruns under a run key: the nodes that passed are not run again.

The graphs' function nodes count their calls by the run's flag file, which each test
makes its own, and a node fails while its flag file exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import plait
from plait.decisions import Human
from plait.errors import RunKeyConflict
from plait.graphs import GraphRun
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.models import ScriptedModel
from plait.runs import Runs
from tests._support.timing import scaled
from tests.runs.helpers import hosting, settle

pytestmark = pytest.mark.anyio

CALLS: dict[str, list[str]] = {}


def called(input: dict[str, Any], node: str) -> None:
    """Count a call of ``node`` for the run whose flag file ``input`` names."""
    CALLS.setdefault(input["flag"], []).append(node)


async def fetch(input: dict[str, Any]) -> dict[str, Any]:
    """Always passes."""
    called(input, "fetch")
    return {"files": 3}


async def check(input: dict[str, Any], fetch: dict[str, Any]) -> dict[str, Any]:
    """Fails, with the flag file's text as its evidence, while the flag file exists."""
    called(input, "check")
    flag = Path(input["flag"])
    if flag.exists():
        raise RuntimeError(f"check failed: {flag.read_text()}")
    return {"ok": True, "files": fetch["files"]}


async def report(input: dict[str, Any], check: dict[str, Any]) -> str:
    """Says what was checked."""
    called(input, "report")
    return f"{check['files']} files checked"


async def both(input: dict[str, Any]) -> list[Any]:
    """Two calls at once through ``plait.gather``, one failing while the flag exists."""
    called(input, "both")

    async def half(n: int) -> int:
        if n and Path(input["flag"]).exists():
            raise RuntimeError("the second half failed")
        return n

    results = await plait.gather(half(0), half(1), limit=1)
    failed = [str(r) for r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError("; ".join(failed))
    return results


def flaky(version: int = 1, budget: int = 20, *, ask: bool = False) -> plait.Graph:
    """fetch -> check -> (a sign-off, if ``ask``) -> report."""
    g = plait.Graph("keyed-flaky", version=version, budget=budget)
    g.node(fetch, next="check")
    g.node(check, next="approve" if ask else "report")
    if ask:
        g.human("approve", "Report {{check.files}} files?", next="report")
    g.node(report)
    return g


def steps(run: GraphRun) -> list[tuple[str, str]]:
    return [(s.node, s.status) for s in run.trajectory]


@pytest.fixture
def flag(tmp_path: Path) -> Path:
    """This test's flag file, there: the nodes reading it fail until it is removed."""
    path = tmp_path / "broken"
    path.write_text("disk full")
    return path


async def test_a_rerun_under_the_key_runs_the_failed_node_not_those_before(
    flag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("PLAIT_HOME", str(home))
    monkeypatch.delenv("PLAIT_MESH", raising=False)
    g, input = flaky(), {"flag": str(flag)}

    first = await g.run(input, run_key="nightly")
    assert first.status == "failed"
    assert first.state.error_node == "check"
    assert first.error is not None and "disk full" in first.error
    assert steps(first) == [("fetch", "done"), ("check", "failed")]
    assert (
        first.trajectory[-1].error == "check raised RuntimeError: check failed: disk full"
    )  # the evidence
    assert first.run_key == "nightly" and first.reused == []

    flag.unlink()
    again = await g.run(input, run_key="nightly")
    assert again.status == "done", again.error
    assert again.output == "3 files checked"
    assert CALLS[str(flag)] == ["fetch", "check", "check", "report"]  # fetch ran once
    assert steps(again) == [("fetch", "done"), ("check", "done"), ("report", "done")]
    assert again.trajectory[0] == first.trajectory[0]  # fetch's step, as it first ran
    assert again.reused == ["fetch#1"]
    assert again.run_id == first.run_id

    done = await g.run(input, run_key="nightly")
    assert done.status == "done" and done.output == again.output
    assert len(CALLS[str(flag)]) == 4  # a run that ended done runs nothing again
    assert done.reused == ["fetch#1", "check#1", "report#1"]
    assert steps(done) == steps(again)

    # The record is in the default mesh, PLAIT_HOME's.
    async with open_mesh(f"sqlite:///{home / 'mesh.db'}") as mesh:
        entry = await mesh.get("sessions/assistant/keyed-flaky/nightly")
    assert entry is not None
    assert entry.value["runs"] == 3 and entry.value["last_status"] == "done"
    assert sorted(entry.value["visits"]) == ["check#1", "fetch#1", "report#1"]


async def test_another_input_or_graph_version_under_the_key_is_refused(
    flag: Path, tmp_path: Path, mesh: Mesh
) -> None:
    flag.unlink()
    g, input = flaky(), {"flag": str(flag)}
    assert (await g.run(input, run_key="k", mesh=mesh)).status == "done"
    other = {"flag": str(tmp_path / "other")}

    with pytest.raises(RunKeyConflict) as caught:
        await g.run(other, run_key="k", mesh=mesh)
    assert caught.value.reason == "input" and caught.value.run_key == "k"
    assert "another input" in str(caught.value) and "fresh=True" in str(caught.value)
    with pytest.raises(RunKeyConflict) as caught:
        await flaky(version=2).run(input, run_key="k", mesh=mesh)
    assert caught.value.reason == "graph"
    assert "version 1" in str(caught.value) and "version 2" in str(caught.value)
    assert other["flag"] not in CALLS  # nothing ran

    fresh = await g.run(other, run_key="k", mesh=mesh, fresh=True)
    assert fresh.status == "done" and fresh.reused == []
    assert CALLS[other["flag"]] == ["fetch", "check", "report"]
    with pytest.raises(RunKeyConflict):  # the key now holds the fresh run's input
        await g.run(input, run_key="k", mesh=mesh)
    again = await g.run(other, run_key="k", mesh=mesh)
    assert again.reused == ["fetch#1", "check#1", "report#1"]


async def test_the_record_goes_to_the_store_given(flag: Path, tmp_path: Path) -> None:
    g, input = flaky(), {"flag": str(flag)}
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert (await g.run(input, run_key="mine", store=url)).status == "failed"
    flag.unlink()
    async with open_mesh("memory://") as memory:
        elsewhere = await g.run(input, run_key="mine", store=memory)
        assert elsewhere.reused == []  # another store knows nothing of the first run
        assert await memory.get("sessions/assistant/keyed-flaky/mine") is not None
    again = await g.run(input, run_key="mine", store=url)
    assert again.status == "done" and again.reused == ["fetch#1"]
    assert CALLS[str(flag)] == ["fetch", "check", "fetch", "check", "report", "check", "report"]


async def test_a_parked_run_resumes_and_reruns_under_its_key(flag: Path, mesh: Mesh) -> None:
    flag.unlink()
    g, input = flaky(ask=True), {"flag": str(flag)}
    parked = await g.run(input, run_key="sign", mesh=mesh)
    assert parked.status == "waiting_human"
    # Run again instead of resuming: it asks again, having run nothing again.
    asked = await g.run(input, run_key="sign", mesh=mesh)
    assert asked.status == "waiting_human" and asked.reused == ["fetch#1", "check#1"]
    assert CALLS[str(flag)] == ["fetch", "check"]
    done = await g.resume(asked, "yes")
    assert done.status == "done", done.error
    assert steps(done) == [("fetch", "done"), ("check", "done"), ("approve", "done"),
                           ("report", "done")]  # fmt: skip
    again = await g.run(input, run_key="sign", mesh=mesh)
    assert again.status == "done" and len(again.reused) == 4  # the answer is kept too
    assert CALLS[str(flag)] == ["fetch", "check", "report"]
    with pytest.raises(RunKeyConflict) as caught:  # the key moved on since it parked
        await g.resume(parked, "yes")
    assert caught.value.reason == "changed"


async def test_the_budget_holds_each_rerun_reused_visits_included(flag: Path, mesh: Mesh) -> None:
    g, input = flaky(budget=2), {"flag": str(flag)}
    first = await g.run(input, run_key="b", mesh=mesh)
    assert first.status == "failed" and first.usage.steps == 2
    flag.unlink()
    again = await g.run(input, run_key="b", mesh=mesh)
    # fetch (reused) and check are two steps: report is past the budget.
    assert again.status == "failed" and again.ended_detail == "budget_exhausted"
    assert again.usage.steps == 2 and again.reused == ["fetch#1"]
    assert CALLS[str(flag)] == ["fetch", "check", "check"]


async def test_gather_in_a_node_and_a_failed_branch_rerun_alone(flag: Path, mesh: Mesh) -> None:
    g = plait.Graph("keyed-branches", budget=20, entry="split")
    g.node(fetch, next="join")
    g.node(both, next="join")
    g.fan_out("split", targets=["fetch", "both"], on_failure="drain_then_fail")
    g.fan_in("join")
    input = {"flag": str(flag)}
    first = await g.run(input, run_key="br", mesh=mesh)
    assert first.status == "failed"
    assert first.error is not None and "the second half failed" in first.error
    assert sorted(CALLS[str(flag)]) == ["both", "fetch"]
    flag.unlink()
    again = await g.run(input, run_key="br", mesh=mesh)
    assert again.status == "done", again.error
    assert sorted(again.reused) == ["fetch[0]#1", "split#1"]
    assert sorted(CALLS[str(flag)]) == ["both", "both", "fetch"]  # fetch passed: not again


GATES: dict[str, anyio.Event] = {}


async def slow(input: dict[str, Any]) -> str:
    """Waits for its test to open the gate."""
    called(input, "slow")
    await GATES[input["flag"]].wait()
    return "slow"


async def test_two_runs_under_one_key_at_once_are_not_interleaved(flag: Path, mesh: Mesh) -> None:
    g = plait.Graph("keyed-slow")
    g.node(slow)
    input = {"flag": str(flag)}
    GATES[str(flag)] = anyio.Event()
    outcome: list[RunKeyConflict | GraphRun] = []

    async def run() -> None:
        try:
            outcome.append(await g.run(input, run_key="once", mesh=mesh))
        except RunKeyConflict as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(scaled(10)):
            while CALLS.get(str(flag)) != ["slow"]:
                await anyio.sleep(0.01)
            tg.start_soon(run)  # the second reads the key after the first wrote it
            while CALLS.get(str(flag)) != ["slow", "slow"]:
                await anyio.sleep(0.01)
        GATES[str(flag)].set()
    # One is refused (the first: the second wrote the key after the first read it).
    refused, done = outcome if isinstance(outcome[0], RunKeyConflict) else outcome[::-1]
    assert isinstance(refused, RunKeyConflict) and refused.reason == "changed"
    assert "another run" in str(refused)
    assert isinstance(done, GraphRun) and done.status == "done"


async def judge(input: dict[str, Any], draft: str) -> str:
    """Fails while the flag file exists; else passes the draft on."""
    called(input, "judge")
    if Path(input["flag"]).exists():
        raise RuntimeError("not yet")
    return draft.upper()


async def test_an_agent_that_passed_is_not_asked_again(flag: Path, mesh: Mesh) -> None:
    model = ScriptedModel([{"node": "draft", "text": "three files"}])
    g = plait.Graph("keyed-agent", budget=20)
    g.agent("draft", "Describe {{input.flag}}", next="judge")
    g.node(judge)
    input = {"flag": str(flag)}
    first = await g.run(input, run_key="a", mesh=mesh, model=model)
    assert first.status == "failed" and len(model.calls) == 1
    flag.unlink()
    again = await g.run(input, run_key="a", mesh=mesh, model=model)
    assert again.status == "done", again.error
    assert again.output == "THREE FILES"
    assert again.reused == ["draft#1"] and len(model.calls) == 1  # the model was not asked
    assert again.trajectory[0] == first.trajectory[0]
    assert first.usage.tokens > 0
    assert again.usage.tokens == first.usage.tokens  # the reused visit counts what it spent


async def test_a_raising_function_fails_its_node_durably_too(flag: Path, mesh: Mesh) -> None:
    """The same graph run durably fails at the same node with the same evidence, and
    ``graph retry`` (the durable rerun) goes on from there, as a rerun under a key does."""
    g = flaky()
    input = {"flag": str(flag)}
    in_session = await g.run(input)
    await import_graph(mesh, g.compile(durable=True))
    runs = Runs(mesh)
    async with hosting(mesh):
        rec = await runs.start("assistant", "keyed-flaky", input=input)
        failed = await settle(runs, rec.run_id)
        assert failed.status == "failed"
        assert failed.error == in_session.error
        flag.unlink()
        await runs.retry(rec.run_id, by=Human("ana"))
        done = await settle(runs, rec.run_id, since=failed)
        assert done.status == "done", done.error
    assert CALLS[str(flag)] == ["fetch", "check", "fetch", "check", "check", "report"]
