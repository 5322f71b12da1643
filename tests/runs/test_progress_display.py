"""What ``plait graph run`` shows on a terminal while a run goes: each visit as it
starts and as it commits, fed by the run's own progress events."""

from __future__ import annotations

import re

import pytest

from plait.actors import ActorRecord, actor_key
from plait.cli._common import err_console
from plait.cli.runs import _progress_printer
from plait.decisions import Human
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.log import read_log
from plait.runs.progress import Progress
from plait.runs.record import owner_id

from .helpers import EXAMPLES, agent_chain, hosting, settle, store

pytestmark = pytest.mark.anyio

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"


async def test_every_visit_shows_as_it_starts_and_as_it_commits(mesh: Mesh) -> None:
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        run_id = (await runs.start("assistant", "research-and-verify", "Q3")).run_id
        parked = await settle(runs, run_id)
    assert parked.status == "waiting_human"
    events = await progress_events(mesh, run_id)
    assert events[-1].status == "waiting_human"

    show = _progress_printer(True)
    with err_console.capture() as captured:
        for event in events:
            show(event)
    # The elapsed time is the visit's own (a scripted model answers in microseconds).
    lines = [re.sub(r" \d+\.\d\ds ", " Ts ", line.strip()) for line in captured.get().splitlines()]
    assert lines == [
        "… draft (visit 1)",
        "✓ draft (visit 1) Ts · run running",
        "… verify (visit 1)",
        "✓ verify (visit 1) → fail Ts · run running",
        "critique: The 12% figure has no source; cite where it comes from.",
        "… draft (visit 2)",
        "✓ draft (visit 2) Ts · run running",
        "… verify (visit 2)",
        "✓ verify (visit 2) → pass Ts · run running",
        "… review_human (visit 1)",
        "⏸ review_human (visit 1) · run waiting_human",  # parked on a person, not done
    ]


async def progress_events(mesh: Mesh, run_id: str) -> list[Progress]:
    """The progress a run's log entries hold, in order."""
    return [entry.progress async for entry in read_log(mesh, run_id) if entry.progress]


async def subscribed_topics(mesh: Mesh, run_id: str) -> list[str]:
    """The topics the run's owner actor subscribes to."""
    entry = await mesh.get(actor_key(owner_id(run_id)))
    assert entry is not None
    return ActorRecord.model_validate(entry.value).topics


async def test_a_finished_runs_progress_is_in_its_log_and_its_owner_has_no_topic(
    mesh: Mesh,
) -> None:
    await store(mesh, agent_chain("pair", ["one", "two"]))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        done = await settle(runs, (await runs.start("assistant", "pair", "x")).run_id)
        assert done.status == "done"
        assert [e.node for e in await progress_events(mesh, done.run_id)] == [
            None,
            "one",
            "two",
        ]
        # A watcher reads the log: the owner subscribes to nothing that is never written.
        assert await subscribed_topics(mesh, done.run_id) == []
    assert (await runs.get(done.run_id)).status == "done"
    assert await runs.verify(done.run_id) == 4  # the audit chain: started, 2 commits, done


async def test_a_cancelled_runs_progress_says_so(mesh: Mesh) -> None:
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        parked = await settle(
            runs, (await runs.start("assistant", "research-and-verify", "Q3")).run_id
        )
        await runs.cancel(parked.run_id, by=Human("ana"))
    shown = await progress_events(mesh, parked.run_id)
    assert shown[-1].status == "cancelled"
    assert shown[-1].ended_detail == "cancelled"
    assert (await runs.get(parked.run_id)).status == "cancelled"


async def test_resuming_shows_only_what_happened_after_the_run_parked(mesh: Mesh) -> None:
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        parked = await settle(
            runs, (await runs.start("assistant", "research-and-verify", "Q3")).run_id
        )
        before = await runs.resume(parked.run_id, "yes, ship it", by=Human("ana"))
        shown: list[Progress] = []
        done = await runs.wait(parked.run_id, since=before, on_progress=shown.append, timeout=10)
    assert done.status == "done"
    committed = [e.node for e in shown if e.node is not None]
    began = [v.node for e in shown for v in e.started]
    assert committed == ["review_human", "review_human", "publish"]  # claimed, committed
    assert began == ["publish"]
    assert shown[-1].status == "done"  # the settling event is shown before returning
