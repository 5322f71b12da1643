"""``GET /api/runs/{id}/events`` as real server-sent events from ``plait serve``: 200
streamed pieces in order, then the commit; a client that drops at offset k and comes
back with ``Last-Event-ID: k`` misses nothing and gets nothing twice; 100 watchers of
one run all get every piece."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests._support.timing import scaled

from .helpers import check_run_event
from .server import Served, serving

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

TEXT = "".join(f"t{n:03d} " for n in range(200))
GRAPH = {
    "name": "draft",
    "agent": "assistant",
    "entry": "draft",
    "nodes": [{"id": "draft", "type": "agent", "prompt": "{{input}}"}],
}
RULES = [{"node": "draft", "text": "{{prompt}}", "chunks": 200, "chunk_delay_ms": 10}]
WATCHERS = 100


async def frames(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The SSE frames of a response: ``{"id", "event", "data"}`` each."""
    frame: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if "event" in frame:
                yield frame
            frame = {}
        elif line.startswith("id: "):
            frame["id"] = int(line.removeprefix("id: "))
        elif line.startswith("event: "):
            frame["event"] = line.removeprefix("event: ")
        elif line.startswith("data: "):
            frame["data"] = json.loads(line.removeprefix("data: "))


def start(served: Served) -> str:
    assert served.client.post("/api/graphs", json=GRAPH).status_code == 201
    started = served.client.post(
        "/api/runs", json={"agent": "assistant", "name": "draft", "input": TEXT}
    )
    assert started.status_code == 201, started.text
    return str(started.json()["run_id"])


def client_of(served: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=served.url,
        headers={"Authorization": f"Bearer {served.token}"},
        timeout=scaled(60),
        limits=httpx.Limits(max_connections=WATCHERS + 10),
    )


async def read_until(
    client: httpx.AsyncClient, run_id: str, *, last_id: int | None = None, deltas: int = 0
) -> list[dict[str, Any]]:
    """The frames of one connection: to ``settled``, or (``deltas``) until that many
    ``delta`` frames came, then it hangs up."""
    headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
    got: list[dict[str, Any]] = []
    async with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for frame in frames(response):
            got.append(frame)
            if deltas and sum(f["event"] == "delta" for f in got) >= deltas:
                break
    return got


async def test_a_client_that_drops_at_k_and_resumes_misses_nothing_twice(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, RULES) as served:
        run_id = start(served)
        async with client_of(served) as client:
            with anyio.fail_after(scaled(60)):
                first = await read_until(client, run_id, deltas=60)
                k = first[-1]["id"]
                rest = await read_until(client, run_id, last_id=k)
        output = served.client.get(f"/api/runs/{run_id}").json()["output"]
        spec = served.client.get("/openapi.json").json()
    for frame in first + rest:  # as the spec documents them
        sent = {"event": frame["event"], "data": json.dumps(frame["data"])}
        check_run_event(spec, sent | ({"id": str(frame["id"])} if "id" in frame else {}))
    ids = [f["id"] for f in first + rest if "id" in f]
    assert rest[0]["id"] == k + 1
    assert ids == list(range(ids[0], ids[-1] + 1))  # no gap, no duplicate
    pieces = [f["data"]["text"] for f in first + rest if f["event"] == "delta"]
    assert len(pieces) == 200 and "".join(pieces) == TEXT == output
    assert rest[-1]["event"] == "settled" and rest[-1]["data"]["status"] == "done"
    assert any(f["event"] == "progress" and f["data"]["node"] == "draft" for f in rest)
    attempt = next(f for f in first if f["event"] == "attempt")
    assert attempt["data"] == {"offset": attempt["id"], "node": "draft", "visit": 1,
                               "attempt": 1, "restart": False}  # fmt: skip


async def test_a_hundred_watchers_of_one_run_all_get_every_piece(tmp_path: Path) -> None:
    with serving(tmp_path, RULES) as served:
        run_id = start(served)
        seen: list[list[dict[str, Any]]] = []
        async with client_of(served) as client:

            async def watch() -> None:
                seen.append(await read_until(client, run_id))

            with anyio.fail_after(scaled(90)):
                async with anyio.create_task_group() as group:
                    for _ in range(WATCHERS):
                        group.start_soon(watch)
    assert len(seen) == WATCHERS
    for got in seen:
        pieces = [f["data"]["text"] for f in got if f["event"] == "delta"]
        assert "".join(pieces) == TEXT
        assert got[-1]["event"] == "settled" and got[-1]["data"]["output"] == TEXT
