"""``/api/schedules``: a person creates, pauses, resumes and deletes; a service token
may only list."""

from __future__ import annotations

import pytest

from plait.mesh import Mesh
from tests.api.helpers import api_client
from tests.runs.helpers import store

from .helpers import ONE_NODE

pytestmark = pytest.mark.anyio
BODY = {"agent": "assistant", "name": "report", "cron": "0 8 * * 1", "deliver": "stdout"}


async def test_a_person_manages_schedules_and_a_service_only_lists(mesh: Mesh) -> None:
    await store(mesh, ONE_NODE)
    async with api_client(mesh) as person, api_client(mesh, "service", "bot") as bot:
        refused = await bot.post("/api/schedules", json=BODY)
        assert refused.status_code == 403
        made = await person.post("/api/schedules", json={**BODY, "tz": "Europe/Berlin"})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        listed = await bot.get("/api/schedules")
        assert [s["id"] for s in listed.json()] == [sid]
        assert (await bot.post(f"/api/schedules/{sid}/pause")).status_code == 403
        paused = await person.post(f"/api/schedules/{sid}/pause")
        assert paused.json()["paused"] is True
        resumed = await person.post(f"/api/schedules/{sid}/resume")
        assert resumed.json()["next_fire"] is not None
        assert (await bot.delete(f"/api/schedules/{sid}")).status_code == 403
        assert (await person.delete(f"/api/schedules/{sid}")).status_code == 200
        assert (await person.get(f"/api/schedules/{sid}")).status_code == 404


async def test_a_bad_cron_or_zone_is_a_422_problem(mesh: Mesh) -> None:
    await store(mesh, ONE_NODE)
    async with api_client(mesh) as person:
        bad = await person.post("/api/schedules", json={**BODY, "tz": "Mars/Olympus"})
        assert bad.status_code == 422
        assert "unknown time zone 'Mars/Olympus'" in bad.text
        missing = await person.post("/api/schedules", json={**BODY, "name": "nope"})
        assert missing.status_code == 404
