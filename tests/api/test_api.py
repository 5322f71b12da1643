"""The HTTP API in process (httpx over ASGI) on SQLite and Redis: runs, decisions,
graphs, tokens and principals, problem objects, and a run's events as SSE."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from runs.helpers import eventually, hosting

from plait.api.tokens import create_token, revoke_token
from plait.mesh import Mesh
from tests._support.timing import scaled

from .helpers import HOSTILE, api_client, asking_graph, asking_model

pytestmark = pytest.mark.anyio


async def waiting_run(client: httpx.AsyncClient, name: str = "review") -> dict[str, object]:
    """Import the asking graph, start a run and poll until it waits on its person."""
    assert (await client.post("/api/graphs", json=asking_graph(name))).status_code == 201
    started = await client.post(
        "/api/runs", json={"agent": "assistant", "name": name, "input": "the release"}
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    async def parked() -> dict[str, object] | None:
        view = (await client.get(f"/api/runs/{run_id}")).json()
        return view if view["status"] == "waiting_human" else None

    return await eventually(parked)


async def test_a_run_waits_is_answered_and_finishes(mesh: Mesh) -> None:
    async with api_client(mesh) as client, hosting(mesh, asking_model()):
        view = await waiting_run(client)
        run_id, asking = view["run_id"], view["asking"]
        assert isinstance(asking, dict) and asking["ask"] == "Ship v2 notes?"
        assert view["current"] == ["approve"]
        listed = (await client.get("/api/decisions", params={"status": "open"})).json()
        assert [d["id"] for d in listed] == [asking["decision_id"]]
        assert "notify" not in listed[0]
        answered = await client.post(
            f"/api/decisions/{asking['decision_id']}/answer", json={"option": "approve"}
        )
        assert answered.status_code == 200, answered.text
        assert answered.json()["answer"]["by"] == "ana"

        async def done() -> dict[str, object] | None:
            got = (await client.get(f"/api/runs/{run_id}")).json()
            return got if got["status"] == "done" else None

        finished = await eventually(done)
        assert finished["output"] == "shipped"
        steps = (await client.get(f"/api/runs/{run_id}/trajectory")).json()
        assert [(s["node"], s["status"]) for s in steps] == [
            ("draft", "done"),
            ("approve", "done"),
            ("ship", "done"),
        ]
        assert steps[0]["prompt"] == "Draft the release" and steps[0]["output"] == "v2 notes"
        assert steps[1]["decision"]["answer"] == "approve"
        verified = (await client.get(f"/api/runs/{run_id}/verify")).json()
        assert verified["verified"] is True and verified["events"] >= 4
        again = await client.post(
            f"/api/decisions/{asking['decision_id']}/answer", json={"option": "reject"}
        )
        assert again.status_code == 409
        assert again.headers["content-type"] == "application/problem+json"
        assert "already answered" in again.json()["detail"]


async def test_a_service_token_may_start_and_read_but_not_answer_or_cancel(
    mesh: Mesh,
) -> None:
    async with hosting(mesh, asking_model()):
        async with api_client(mesh, "service", "ci") as bot:
            view = await waiting_run(bot)
            decision = view["asking"]["decision_id"]  # type: ignore[index]
            refused = await bot.post(
                f"/api/decisions/{decision}/answer", json={"option": "approve"}
            )
            assert refused.status_code == 403
            assert (
                refused.json()["detail"]
                == "only a human may answer a decision; agent 'ci' is not one"
            )
            resumed = await bot.post(f"/api/runs/{view['run_id']}/resume", json={"answer": "yes"})
            assert resumed.status_code == 403
            cancelled = await bot.post(f"/api/runs/{view['run_id']}/cancel")
            assert cancelled.status_code == 403
            budget = await bot.post(f"/api/runs/{view['run_id']}/budget", json={"steps": 2})
            assert budget.status_code == 403
            assert (await bot.get(f"/api/decisions/{decision}")).json()["status"] == "open"
        async with api_client(mesh) as ana:
            resumed = await ana.post(
                f"/api/runs/{view['run_id']}/resume", json={"answer": "approve"}
            )
            assert resumed.status_code == 200, resumed.text
            assert (await ana.get(f"/api/decisions/{decision}")).json()["answer"][
                "option"
            ] == "approve"


async def test_tokens_none_unknown_and_revoked_are_401(mesh: Mesh) -> None:
    record, token = await create_token(mesh, "human", "ana")
    async with api_client(mesh) as client:
        assert (await client.get("/api/runs", headers={"Authorization": ""})).status_code == 401
        bad = await client.get("/api/runs", headers={"Authorization": "Bearer plait_x_y"})
        assert bad.status_code == 401 and bad.headers["www-authenticate"].startswith("Bearer")
        mine = {"Authorization": f"Bearer {token}"}
        assert (await client.get("/api/whoami", headers=mine)).json() == {
            "kind": "human",
            "name": "ana",
        }
        forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        forged_headers = {"Authorization": f"Bearer {forged}"}
        assert (await client.get("/api/runs", headers=forged_headers)).status_code == 401
        await revoke_token(mesh, record.id)
        assert (await client.get("/api/runs", headers=mine)).status_code == 401
    stored = (await mesh.get(f"tokens/{record.id}")).value  # type: ignore[union-attr]
    assert token not in json.dumps(stored) and token.split("_", 2)[2] not in json.dumps(stored)


async def test_problems_have_the_right_status(mesh: Mesh) -> None:
    async with api_client(mesh) as client:
        missing = await client.get("/api/runs/grun_nope")
        assert missing.status_code == 404 and "grun_nope" in missing.json()["detail"]
        assert (await client.get("/api/runs/grun_nope/trajectory")).status_code == 404
        assert (await client.get("/api/runs/grun_nope/events")).status_code == 404
        assert (await client.get("/api/decisions/nope")).status_code == 404
        assert (await client.get("/api/graphs/assistant/nope")).status_code == 404
        unknown = await client.post("/api/runs", json={"agent": "assistant", "name": "nope"})
        assert unknown.status_code == 404
        bad_status = await client.get("/api/runs", params={"status": "sleeping"})
        assert bad_status.status_code == 422 and "status" in bad_status.json()["detail"]
        assert (await client.post("/api/runs", json={"agent": ""})).status_code == 422
        invalid = await client.post("/api/graphs", json={"name": "x", "nodes": []})
        assert invalid.status_code == 422 and invalid.json()["problems"]
        await client.post("/api/graphs", json=asking_graph())
        changed = asking_graph(ask="Really ship {{draft}}?")
        assert (await client.post("/api/graphs", json=changed)).status_code == 409
        started = await client.post("/api/runs", json={"agent": "assistant", "name": "review"})
        run_id = started.json()["run_id"]
        not_waiting = await client.post(f"/api/runs/{run_id}/resume", json={"answer": "yes"})
        assert not_waiting.status_code == 409
        cancelled = await client.post(f"/api/runs/{run_id}/cancel")
        assert cancelled.json()["status"] == "cancelled"
        over = await client.post(f"/api/runs/{run_id}/budget", json={"steps": 1})
        assert over.status_code == 409


async def test_listing_filters_and_pages(mesh: Mesh) -> None:
    async with api_client(mesh) as client:
        await client.post("/api/graphs", json=asking_graph())
        ids = []
        for n in range(5):
            body = {"agent": "assistant", "name": "review", "input": str(n)}
            ids.append((await client.post("/api/runs", json=body)).json()["run_id"])
        await client.post(f"/api/runs/{ids[0]}/cancel")
        page = (await client.get("/api/runs", params={"limit": 2, "offset": 1})).json()
        assert page["total"] == 5 and page["limit"] == 2
        newest_first = (await client.get("/api/runs")).json()["items"]
        assert [r["run_id"] for r in page["items"]] == [r["run_id"] for r in newest_first[1:3]]
        gone = (await client.get("/api/runs", params={"status": "cancelled"})).json()
        assert [r["run_id"] for r in gone["items"]] == [ids[0]]
        other = (await client.get("/api/runs", params={"agent": "someone"})).json()
        assert other["total"] == 0
        graphs = (await client.get("/api/graphs")).json()
        assert [(g["name"], g["latest"]) for g in graphs] == [("review", 1)]
        shown = (await client.get("/api/graphs/assistant/review")).json()
        assert shown["mermaid"].startswith("flowchart LR")


async def test_events_stream_until_the_run_settles(mesh: Mesh) -> None:
    async with api_client(mesh) as client, hosting(mesh, asking_model(HOSTILE)):
        await client.post("/api/graphs", json=asking_graph())
        run_id = (
            await client.post("/api/runs", json={"agent": "assistant", "name": "review"})
        ).json()["run_id"]
        events: list[tuple[str, dict[str, object]]] = []
        with anyio.fail_after(scaled(15)):
            async with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                kind = ""
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        events.append((kind, json.loads(line.removeprefix("data: "))))
        kinds = [k for k, _ in events]
        assert kinds[-1] == "settled" and "progress" in kinds
        last = events[-1][1]
        assert last["status"] == "waiting_human"
        assert last["asking"]["ask"] == f"Ship {HOSTILE}?"  # type: ignore[index]
        assert any(d.get("node") == "draft" for k, d in events if k == "progress")
