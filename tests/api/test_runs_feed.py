"""``GET /api/runs/events`` through the ASGI app: each change of a run's listing status
reaches the feed as a ``run`` event (ids are offsets, each event as the served spec
says), resumable with ``Last-Event-ID``; nothing is written while nobody follows."""

from __future__ import annotations

import asyncio
import json

import pytest

from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.feed import FEED_CHANNEL
from tests._support.timing import scaled
from tests.agents.conftest import eventually
from tests.runs.helpers import agent_chain, hosting, settle, store

from .helpers import api_client, spec_validator
from .test_agent_events import frames_of

pytestmark = pytest.mark.anyio


async def test_a_runs_status_changes_reach_the_feed(mesh: Mesh) -> None:
    live = mesh.live
    assert live is not None
    await store(mesh, agent_chain("one", ["draft"]))
    runs = Runs(mesh)
    async with api_client(mesh) as client, hosting(mesh, ScriptedModel([{"text": "fine"}])):
        # Nobody follows: a run's changes write nothing.
        unseen = await settle(runs, (await runs.start("assistant", "one", "a")).run_id)
        assert (await live.read(FEED_CHANNEL)).last == 0
        spec = (await client.get("/openapi.json")).json()
        watching = asyncio.create_task(client.get("/api/runs/events?changes=2"))

        async def watched() -> bool:
            return live.watched(FEED_CHANNEL)

        await eventually(watched)
        rec = await runs.start("assistant", "one", "b")
        response = await asyncio.wait_for(watching, scaled(30))
        assert (await settle(runs, rec.run_id)).status == "done"
        resumed = await client.get(
            "/api/runs/events?changes=1",
            headers={"Last-Event-ID": frames_of(response.text)[0]["id"]},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = frames_of(response.text)
    media = spec["paths"]["/api/runs/events"]["get"]["responses"]["200"]["content"]
    kind = spec["components"]["schemas"]["RunsFeedEvent"]["oneOf"][0]
    for frame in frames:
        spec_validator(spec, media["text/event-stream"]["itemSchema"]).validate(frame)
        spec_validator(spec, kind["properties"]["data"]["contentSchema"]).validate(
            json.loads(frame["data"])
        )
    data = [json.loads(f["data"]) for f in frames]
    assert [(d["run_id"], d["status"]) for d in data] == [
        (rec.run_id, "running"),
        (rec.run_id, "done"),
    ]
    assert unseen.run_id not in {d["run_id"] for d in data}
    ids = [int(f["id"]) for f in frames]
    assert ids == sorted(set(ids))
    # Back after the first event: the second, nothing twice.
    assert frames_of(resumed.text) == frames[1:]
