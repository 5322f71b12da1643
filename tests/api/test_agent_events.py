"""``GET /api/agents/{name}/events`` through the ASGI app: an agent actor's turn as
server-sent events (ids are offsets, each event as the served spec says), resumable
with ``Last-Event-ID``; an unknown actor is a 404 before any stream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from plait.agents import Agents
from plait.agents.live import agent_channel
from plait.mesh import Mesh
from tests._support.timing import scaled
from tests.agents.conftest import eventually, profile, serving

from .helpers import api_client, spec_validator

pytestmark = pytest.mark.anyio

TEXT = "".join(f"tok{n} " for n in range(30)) + "\x1b[2J done"
RULES = [{"node": "helper", "text": TEXT, "chunks": 30, "chunk_delay_ms": 1}]


def frames_of(body: str) -> list[dict[str, str]]:
    """The events of an SSE body: ``{"id", "event", "data"}`` as sent (comments skipped)."""
    out = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if fields:
            out.append(fields)
    return out


def check(spec: dict[str, Any], frame: dict[str, str]) -> None:
    media = spec["paths"]["/api/agents/{name}/events"]["get"]["responses"]["200"]["content"]
    spec_validator(spec, media["text/event-stream"]["itemSchema"]).validate(frame)
    kinds = spec["components"]["schemas"]["AgentStreamEvent"]["oneOf"]
    kind = next(k for k in kinds if k["properties"]["event"]["const"] == frame["event"])
    spec_validator(spec, kind["properties"]["data"]["contentSchema"]).validate(
        json.loads(frame["data"])
    )


async def test_a_turn_streams_as_server_sent_events(mesh: Mesh) -> None:
    assert mesh.live is not None
    live = mesh.live
    await profile(mesh, "helper", [])
    agents = Agents(mesh)
    async with api_client(mesh) as client, serving(mesh, RULES):
        assert (await client.get("/api/agents/nobody/events")).status_code == 404
        await agents.start("helper")
        spec = (await client.get("/openapi.json")).json()
        watching = asyncio.create_task(client.get("/api/agents/helper/events?turns=1"))

        async def watched() -> bool:
            return live.watched(agent_channel("helper"))

        await eventually(watched)
        message = await agents.tell("helper", "go")
        response = await asyncio.wait_for(watching, scaled(30))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = frames_of(response.text)
        for frame in frames:
            check(spec, frame)
        assert [f["event"] for f in frames] == ["turn"] + ["delta"] * 30 + ["end"]
        ids = [int(f["id"]) for f in frames]
        assert ids == sorted(set(ids))
        data = [json.loads(f["data"]) for f in frames]
        assert all(
            d["message"] == message and d["offset"] == i for d, i in zip(data, ids, strict=True)
        )
        assert "".join(d["text"] for d in data[1:-1]) == TEXT == data[-1]["summary"]["text"]
        # come back after offset k: what followed it, nothing twice
        k = ids[10]
        resumed = await asyncio.wait_for(
            client.get("/api/agents/helper/events?turns=1", headers={"Last-Event-ID": str(k)}),
            scaled(30),
        )
        assert [int(f["id"]) for f in frames_of(resumed.text)] == ids[11:]
