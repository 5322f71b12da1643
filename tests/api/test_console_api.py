"""The API the console reads, in process on SQLite and Redis: a graph drawn as JSON
(for a version and for a run), the decisions inbox, runs search and cursor paging,
durations, the schedule that started a run, agents, topics and the cluster."""

from __future__ import annotations

import time

import httpx
import pytest
from runs.helpers import hosting

from plait.agents import Agents
from plait.mesh import Mesh
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs
from plait.runs.heartbeats import heartbeat
from plait.schedules.model import fire_run_id, schedule_of_run

from .helpers import api_client, asking_graph, asking_model
from .test_api import waiting_run

pytestmark = pytest.mark.anyio

LOOP = {
    "name": "loop",
    "agent": "assistant",
    "entry": "write",
    "nodes": [
        {"id": "write", "type": "agent", "prompt": "Write {{input}}", "next": "check"},
        {
            "id": "check",
            "type": "verifier",
            "prompt": "Check {{write}}",
            "verdicts": {"pass": "done", "fail": "write"},
        },
        {"id": "done", "type": "end"},
    ],
}


async def test_a_graph_version_is_served_as_nodes_and_edges(mesh: Mesh) -> None:
    async with api_client(mesh) as client:
        assert (await client.post("/api/graphs", json=asking_graph())).status_code == 201
        got = await client.get("/api/graphs/assistant/review/drawing", params={"version": 1})
        assert got.status_code == 200, got.text
        drawing = got.json()
        assert drawing["entry"] == "draft" and drawing["layers"] == 3
        assert [(n["id"], n["kind"], n["layer"], n["entry"]) for n in drawing["nodes"]] == [
            ("draft", "agent", 0, True),
            ("approve", "human", 1, False),
            ("ship", "agent", 2, False),
        ]
        assert [(e["source"], e["target"], e["kind"]) for e in drawing["edges"]] == [
            ("draft", "approve", "next"),
            ("approve", "ship", "next"),
        ]
        missing = await client.get("/api/graphs/assistant/nope/drawing")
        assert missing.status_code == 404


async def test_verdicts_are_drawn_as_labelled_routes_and_loops_keep_their_layer(
    mesh: Mesh,
) -> None:
    async with api_client(mesh) as client:
        imported = await client.post("/api/graphs", json=LOOP)
        assert imported.status_code == 201, imported.text
        drawing = (await client.get("/api/graphs/assistant/loop/drawing")).json()
        routes = {(e["source"], e["target"], e["label"]) for e in drawing["edges"]}
        assert ("check", "done", "pass") in routes and ("check", "write", "fail") in routes
        layers = {n["id"]: n["layer"] for n in drawing["nodes"]}
        assert layers == {"write": 0, "check": 1, "done": 2}


async def test_a_run_graph_marks_the_current_node_and_counts_visits(mesh: Mesh) -> None:
    async with api_client(mesh) as client, hosting(mesh, asking_model()):
        view = await waiting_run(client)
        got = await client.get(f"/api/runs/{view['run_id']}/graph")
        assert got.status_code == 200, got.text
        graph = got.json()
        assert graph["current"] == ["approve"] and graph["status"] == "waiting_human"
        assert graph["visits"] == {"draft": 1, "approve": 1}
        assert [n["id"] for n in graph["nodes"]] == ["draft", "approve", "ship"]
        assert graph["failed"] == []
        assert (await client.get("/api/runs/grun_nope/graph")).status_code == 404


async def test_the_inbox_lists_open_decisions_across_runs_and_says_who_serves(
    mesh: Mesh,
) -> None:
    async with api_client(mesh) as client, hosting(mesh, asking_model()):
        first = await waiting_run(client, "review")
        second = await waiting_run(client, "other")
        page = (await client.get("/api/inbox")).json()
        assert [item["decision"]["run_id"] for item in page["items"]] == [
            first["run_id"],
            second["run_id"],
        ]  # the longest waiting first
        assert page["total"] == 2 and page["served"] is False  # no heartbeat here
        assert page["items"][0]["run"]["graph"] == "review"
        assert "notify" not in page["items"][0]["decision"]
        only = (await client.get("/api/inbox", params={"graph": "other"})).json()
        assert [i["decision"]["run_id"] for i in only["items"]] == [second["run_id"]]
        prefix = str(first["run_id"])[:-3]
        by_id = (await client.get("/api/inbox", params={"q": prefix})).json()
        assert [i["decision"]["run_id"] for i in by_id["items"]] == [first["run_id"]]
        assert (await client.get("/api/inbox", params={"agent": "nobody"})).json()["total"] == 0
        asking = first["asking"]
        assert isinstance(asking, dict)
        answered = await client.post(
            f"/api/decisions/{asking['decision_id']}/answer", json={"option": "approve"}
        )
        assert answered.status_code == 200
        assert (await client.get("/api/inbox")).json()["total"] == 1
        async with heartbeat(mesh, "host-console-test", tools=[]):
            assert (await client.get("/api/inbox")).json()["served"] is True
            assert (await client.get("/api/cluster")).json()["served"] is True


async def _started(client: httpx.AsyncClient, count: int) -> list[str]:
    assert (await client.post("/api/graphs", json=asking_graph())).status_code == 201
    ids = []
    for n in range(count):
        got = await client.post(
            "/api/runs", json={"agent": "assistant", "name": "review", "input": f"r{n}"}
        )
        assert got.status_code == 201, got.text
        ids.append(got.json()["run_id"])
    return ids


async def test_runs_are_searched_by_id_prefix_and_paged_by_cursor(mesh: Mesh) -> None:
    async with api_client(mesh) as client:
        ids = await _started(client, 5)
        newest_first = list(reversed(ids))
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params: dict[str, str | int] = {"limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/api/runs", params=params)).json()
            assert page["total"] == 5
            seen += [r["run_id"] for r in page["items"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == newest_first and pages == 3
        # An id prefix finds its run; the whole id too; a prefix of none finds none.
        target = ids[2]
        for q in (target, target[:-4]):
            found = (await client.get("/api/runs", params={"q": q})).json()
            assert [r["run_id"] for r in found["items"]] == [target]
        assert (await client.get("/api/runs", params={"q": "grun_zz"})).json()["total"] == 0
        assert (await client.get("/api/runs", params={"graph": "review"})).json()["total"] == 5
        assert (await client.get("/api/runs", params={"graph": "other"})).json()["total"] == 0
        later = (await client.get("/api/runs", params={"since": time.time() + 60})).json()
        assert later["total"] == 0
        before = (await client.get("/api/runs", params={"until": time.time() + 60})).json()
        assert before["total"] == 5
        bad = await client.get("/api/runs", params={"cursor": "not-a-cursor"})
        assert bad.status_code == 422 and "next_cursor" in bad.json()["detail"]


async def test_durations_and_the_schedule_that_started_a_run(mesh: Mesh) -> None:
    async with api_client(mesh) as client:
        (run_id,) = await _started(client, 1)
        assert (await client.get(f"/api/runs/{run_id}")).json()["duration"] is None
        cancelled = await client.post(f"/api/runs/{run_id}/cancel")
        assert cancelled.status_code == 200
        view = cancelled.json()
        assert view["duration"] == pytest.approx(view["updated_at"] - view["created_at"])
        row = (await client.get("/api/runs", params={"q": run_id})).json()["items"][0]
        assert row["duration"] is not None and row["schedule_id"] is None

        fired = fire_run_id("sch_0123456789abcdef0123456789abcdef", 1_767_000_000)
        assert schedule_of_run(fired) == ("sch_0123456789abcdef0123456789abcdef", 1.767e9)
        await Runs(mesh).start("assistant", "review", "x", run_id=fired)
        scheduled = (await client.get(f"/api/runs/{fired}")).json()
        assert scheduled["schedule_id"] == "sch_0123456789abcdef0123456789abcdef"
        assert scheduled["fire_at"] == 1_767_000_000
        by_schedule = await client.get(
            "/api/runs", params={"schedule": "sch_0123456789abcdef0123456789abcdef"}
        )
        assert [r["run_id"] for r in by_schedule.json()["items"]] == [fired]


async def test_agents_topics_and_cluster_pages_have_their_data(mesh: Mesh) -> None:
    await put_profile(mesh, AgentProfile(name="writer", model="scripted:x.yaml", tools=["echo"]))
    await Agents(mesh).start("scribe", profile="writer", topics=["notes.*"])
    await mesh.publish("notes.daily", "note", {"text": "hi"})
    async with api_client(mesh) as client:
        agents = (await client.get("/api/agents")).json()
        profiles = {p["name"]: p for p in agents["profiles"]}
        assert "writer" in profiles and profiles["writer"]["tools"] == ["echo"]
        assert [p["name"] for p in agents["profiles"]] == sorted(profiles)
        (actor,) = agents["actors"]
        assert actor["name"] == "scribe" and actor["topics"] == ["notes.*"]
        topics = (await client.get("/api/topics", params={"prefix": "notes."})).json()
        (row,) = topics["items"]
        assert row["name"] == "notes.daily" and row["subscribers"] == ["scribe"]
        assert row["held"] >= 1
        cluster = (await client.get("/api/cluster")).json()
        assert cluster["served"] is False and cluster["members"] == []
        assert len(cluster["backlog"]) == cluster["partitions"] >= 1
