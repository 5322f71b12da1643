"""What ``plait graph run`` shows on a terminal while a run goes: each visit as it
starts and as it commits, fed by the run's own progress events."""

from __future__ import annotations

import re
from typing import Any

import pytest

from plait.cli._common import err_console
from plait.cli.runs import _progress_printer
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.record import events_topic

from .helpers import EXAMPLES, hosting, settle, store

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
    events: list[dict[str, Any]] = []
    sub = mesh.subscribe(events_topic(run_id), "display", "t", start="begin")
    async for delivery in sub:
        events.append(delivery.data)
        await delivery.ack()
        if delivery.data.get("status") == "waiting_human":
            break
    await sub.close()

    show = _progress_printer(True)
    with err_console.capture() as captured:
        for event in events:
            show(event)
    # The elapsed time is the visit's own (a scripted model answers in microseconds).
    lines = [re.sub(r" \d+\.\d\ds ", " Ts ", line.strip()) for line in captured.get().splitlines()]
    assert lines == [
        "… draft (visit 1)",
        "✓ draft (visit 1) Ts running",
        "… verify (visit 1)",
        "✓ verify (visit 1) → fail Ts running",
        "… draft (visit 2)",
        "✓ draft (visit 2) Ts running",
        "… verify (visit 2)",
        "✓ verify (visit 2) → pass Ts running",
        "… review_human (visit 1)",
        "✓ review_human Ts waiting_human",
    ]
