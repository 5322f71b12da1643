"""An MCP server killed mid-call: the call is in doubt. A tool that may act asks a
person (``escalate``), who retries it on the restarted server; a read-only one is just
called again once the server is back.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait.decisions import DecisionAnswerer, Human
from plait.mcp import declare, put_server
from plait.mcp.client import McpClients, mcp_tools
from plait.mesh import Mesh, open_mesh
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs
from plait.tools import ToolRegistry
from tests.runs.helpers import eventually, hosting, settle, store

from .servers import everything, with_pid_file

pytestmark = pytest.mark.anyio

LONG = "trigger-long-running-operation"

GRAPH = {
    "name": "long",
    "agent": "assistant",
    "entry": "op",
    "nodes": [
        {"id": "op", "type": "tool", "tool": f"slow.{LONG}", "args": {"duration": 3, "steps": 6}},
    ],
}


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
    async with open_mesh(f"sqlite:///{tmp_path / 'mesh.db'}") as opened:
        yield opened


async def kill_mid_call(clients: McpClients, pid_file: Path) -> None:
    """Kill the server once a call on it has reported progress (so it is mid-call)."""
    (kept,) = clients.sessions("slow")

    async def reported() -> bool:
        return kept.progress is not None

    await eventually(reported, timeout=30)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("safety", ["destructive", "read_only"])
async def test_a_server_killed_mid_call(mesh: Mesh, tmp_path: Path, safety: str) -> None:
    pid_file = tmp_path / "server.pid"
    await put_server(
        mesh,
        declare(
            name="slow",
            command=with_pid_file(everything(), pid_file),
            safety={LONG: safety},
        ),
    )
    await put_profile(
        mesh, AgentProfile(name="assistant", tools=["slow.*"], pre_approved=["slow.*"])
    )
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    registry = ToolRegistry()
    async with mcp_tools(mesh, registry, cwd=tmp_path) as clients:
        assert registry.get(f"slow.{LONG}").retry_safe is (safety == "read_only")
        async with hosting(mesh, tools=registry):
            run_id = (await runs.start("assistant", "long")).run_id
            await kill_mid_call(clients, pid_file)
            rec = await settle(runs, run_id, timeout=60)
            if safety == "destructive":
                # Whether the call acted is unknown: a person is asked, never the model.
                assert rec.status == "waiting_human", rec.error
                assert rec.waiting is not None and rec.waiting.kind == "indeterminate"
                assert rec.waiting.node == "op" and rec.waiting.decision_id is not None
                await DecisionAnswerer(mesh).answer(
                    rec.waiting.decision_id, option="retry", by=Human(name="ana")
                )
                rec = await settle(runs, run_id, timeout=60, since=rec)
        (kept,) = clients.sessions("slow")
        restarts = kept.opened
    assert rec.status == "done", rec.error
    assert "Long running operation completed" in str(await runs.output(rec))
    assert restarts == 2  # the server was started again for the next call
    assert rec.visits["op"] == 1
