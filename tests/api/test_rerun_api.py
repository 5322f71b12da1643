"""Retry and fork through the HTTP API: the routes, their problems (a retry is a
person's only), and the trajectory as the one
:class:`~plait.graphs.trajectory.TrajectoryStep` model shows it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from runs.helpers import agent_chain, eventually, hosting

from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel

from .helpers import api_client, asking_graph, asking_rules

pytestmark = pytest.mark.anyio

RULES = [
    {"node": "b", "visit": 1, "error": "b fell over"},
    {"node": "c", "match": "second", "text": "c after the fork"},
    {"node": "b", "text": "b again"},
    {"text": "ok"},
]


async def _until(client: httpx.AsyncClient, run_id: str, status: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        view: dict[str, Any] = (await client.get(f"/api/runs/{run_id}")).json()
        return view if view["status"] == status else None

    return await eventually(reached)


async def test_retry_and_fork_over_http(mesh: Mesh) -> None:
    graph = agent_chain("chain", ["a", "b", "c"])
    graph["nodes"][2]["prompt"] = "Go on from {{b}} with {{input}}"
    async with api_client(mesh) as client, hosting(mesh, ScriptedModel(RULES)):
        assert (await client.post("/api/graphs", json=graph)).status_code == 201
        started = await client.post(
            "/api/runs", json={"agent": "assistant", "name": "chain", "input": "first"}
        )
        run_id = started.json()["run_id"]
        failed = await _until(client, run_id, "failed")
        assert failed["error_node"] == "b"

        retried = await client.post(f"/api/runs/{run_id}/retry")
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] in ("running", "done")
        done = await _until(client, run_id, "done")
        assert done["output"] == "ok"
        steps = (await client.get(f"/api/runs/{run_id}/trajectory")).json()
        assert [(s["node"], s["visit"], s["status"]) for s in steps] == [
            ("a", 1, "done"), ("b", 1, "failed"), ("b", 2, "done"), ("c", 1, "done")
        ]  # fmt: skip
        assert set(steps[0]["usage"]) == {"input_tokens", "output_tokens", "dollars"}
        assert steps[0]["elapsed"] is not None and steps[0]["parent"] is None
        again = await client.post(f"/api/runs/{run_id}/retry")
        assert again.status_code == 409
        assert again.headers["content-type"] == "application/problem+json"
        assert "only a failed run can be retried" in again.json()["detail"]

        forked = await client.post(
            f"/api/runs/{run_id}/fork", json={"at": "b:2", "input": "second"}
        )
        assert forked.status_code == 201, forked.text
        fork_id = forked.json()["run_id"]
        assert forked.json()["sha256"] == done["sha256"]
        origin = forked.json()["forked_from"]
        assert (origin["run_id"], origin["node"], origin["visit"]) == (run_id, "b", 2)
        assert done["forked_from"] is None
        assert (await _until(client, fork_id, "done"))["output"] == "c after the fork"
        verified = (await client.get(f"/api/runs/{fork_id}/verify")).json()
        assert verified["verified"] is True, verified
        fork_steps = (await client.get(f"/api/runs/{fork_id}/trajectory")).json()
        assert [(s["node"], s["visit"]) for s in fork_steps] == [("c", 1)]

        # From after a:1, b runs as its first visit again, which the model fails.
        kept = await client.post(f"/api/runs/{run_id}/fork", json={"at": "a"})
        assert kept.status_code == 201
        assert (await _until(client, kept.json()["run_id"], "failed"))["error_node"] == "b"

        bad = await client.post(f"/api/runs/{run_id}/fork", json={"at": "nope"})
        assert bad.status_code == 422
        assert "the visits to fork at are: a:1, b:2" in bad.json()["detail"]
        missing = await client.post("/api/runs/grun_nope/retry")
        assert missing.status_code == 404


async def test_a_service_token_may_not_retry(mesh: Mesh) -> None:
    async with api_client(mesh) as ana, hosting(mesh, ScriptedModel(RULES)):
        stored = await ana.post("/api/graphs", json=agent_chain("chain", ["a", "b"]))
        assert stored.status_code == 201
        started = await ana.post("/api/runs", json={"agent": "assistant", "name": "chain"})
        run_id = started.json()["run_id"]
        await _until(ana, run_id, "failed")
        async with api_client(mesh, "service", "ci") as bot:
            refused = await bot.post(f"/api/runs/{run_id}/retry")
        assert refused.status_code == 403
        assert refused.json()["detail"] == "only a human may retry a run; agent 'ci' is not one"
        assert (await ana.get(f"/api/runs/{run_id}")).json()["status"] == "failed"


async def test_a_service_token_may_not_fork_past_a_persons_answer(mesh: Mesh) -> None:
    graph = asking_graph()
    graph["nodes"][2]["next"] = "notify"
    graph["nodes"].append({"id": "notify", "type": "agent", "prompt": "Tell {{ship}}"})
    model = ScriptedModel([*asking_rules(), {"node": "notify", "text": "told"}])
    async with api_client(mesh) as ana, hosting(mesh, model):
        assert (await ana.post("/api/graphs", json=graph)).status_code == 201
        started = await ana.post(
            "/api/runs", json={"agent": "assistant", "name": "review", "input": "v2"}
        )
        run_id = started.json()["run_id"]
        await _until(ana, run_id, "waiting_human")
        answered = await ana.post(f"/api/runs/{run_id}/resume", json={"answer": "approve"})
        assert answered.status_code == 200, answered.text
        await _until(ana, run_id, "done")
        async with api_client(mesh, "service", "ci") as bot:
            for body in ({"at": "approve"}, {"at": "ship", "input": "v3, never seen"}):
                refused = await bot.post(f"/api/runs/{run_id}/fork", json=body)
                assert refused.status_code == 403, refused.text
                detail = refused.json()["detail"]
                assert detail.startswith("only a human may fork a run past a person's decision")
                assert f"ana answered approve in run {run_id}" in detail
            asks_again = await bot.post(f"/api/runs/{run_id}/fork", json={"at": "draft"})
            assert asks_again.status_code == 201, asks_again.text
            await _until(bot, asks_again.json()["run_id"], "waiting_human")
        assert (await ana.get("/api/runs")).json()["total"] == 2  # the parent, the asking fork
        mine = await ana.post(f"/api/runs/{run_id}/fork", json={"at": "approve"})
        assert mine.status_code == 201, mine.text
