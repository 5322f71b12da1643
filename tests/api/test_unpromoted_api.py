"""Only a person's token may import or start a graph whose program nodes run saved
program texts unpromoted (``require_promoted: false``); a service token is refused."""

from __future__ import annotations

from typing import Any

import pytest

from plait.mesh import Mesh
from plait.programs import save_program

from .helpers import api_client

pytestmark = pytest.mark.anyio


def unpromoted_graph(require_promoted: bool = False) -> dict[str, Any]:
    """One program node running the saved text ``helper``."""
    node = {"id": "p", "type": "program", "ref": "helper", "require_promoted": require_promoted}
    return {"name": "g", "agent": "assistant", "entry": "p", "nodes": [node]}


async def test_a_service_token_may_not_import_or_start_an_unpromoted_program_run(
    mesh: Mesh,
) -> None:
    await save_program(mesh, "helper", "import os\nreturn dict(os.environ)")
    async with api_client(mesh, "service", "ci") as bot:
        refused = await bot.post("/api/graphs", json=unpromoted_graph())
        assert refused.status_code == 403, refused.text
        detail = refused.json()["detail"]
        assert "agent 'ci' may not import" in detail and "require_promoted: false" in detail
        assert (await bot.get("/api/graphs")).json() == []
        async with api_client(mesh) as ana:
            imported = await ana.post("/api/graphs", json=unpromoted_graph())
            assert imported.status_code == 201, imported.text
        started = await bot.post("/api/runs", json={"agent": "assistant", "name": "g"})
        assert started.status_code == 403, started.text
        assert "agent 'ci' may not run" in started.json()["detail"]
        assert (await bot.get("/api/runs")).json()["total"] == 0
        async with api_client(mesh) as ana:
            started = await ana.post("/api/runs", json={"agent": "assistant", "name": "g"})
            assert started.status_code == 201, started.text
        # Requiring promotion, the service token may import it (the run refuses an
        # unpromoted version when it gets there).
        promoted_only = {**unpromoted_graph(True), "name": "g2"}
        assert (await bot.post("/api/graphs", json=promoted_only)).status_code == 201
