"""Edge cases against an SDK-built server: a large result is cut, a call that never
answers ends at the tool's time budget (and the server still serves the next), a
failing tool is a tool error, a stdio server sees only the scrubbed environment plus
the variables its declaration names, and a server that cannot start offers nothing.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from plait.errors import ToolArgumentsInvalid, ToolError
from plait.mcp import declare, put_server
from plait.mcp.client import mcp_tools
from plait.mcp.results import MAX_TEXT_CHARS
from plait.mesh import Mesh, open_mesh
from plait.runs import serve
from plait.runs.heartbeats import live_heartbeats, missing_tools
from plait.tools import ToolContext, ToolRegistry
from tests.runs.helpers import eventually

pytestmark = pytest.mark.anyio

EDGE = [sys.executable, str(Path(__file__).with_name("edge_server.py"))]


@pytest.fixture
async def mesh() -> AsyncIterator[Mesh]:
    async with open_mesh("memory://") as opened:
        yield opened


async def test_edge_cases(mesh: Mesh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_WANTED", "given")
    monkeypatch.setenv("EDGE_SECRET", "kept back")
    monkeypatch.setenv("PLAIT_MESH", "redis://secret-host/0")
    await put_server(mesh, declare(name="edge", command=EDGE, env=["EDGE_WANTED"], timeout_s=30))
    registry = ToolRegistry()
    ctx = ToolContext(cwd=tmp_path, timeout_s=30)
    async with mcp_tools(mesh, registry, cwd=tmp_path):
        hang, where = registry.get("edge.hang"), registry.get("edge.where")
        assert hang.read_only and not hang.requires_approval
        assert where.idempotent and where.retry_safe and where.requires_approval
        assert registry.get("edge.fail").requires_approval  # no hint: it may act

        # too large a structured result: its text, cut
        text = await registry.call("edge.big", {"chars": MAX_TEXT_CHARS + 10}, ctx)
        assert text.startswith("x" * 100) and text.endswith(
            f"[truncated after {MAX_TEXT_CHARS} of {MAX_TEXT_CHARS + 10} characters]"
        )

        # The per-call time budget: the node's, when smaller than the declaration's.
        marker = tmp_path / "cancelled"
        with pytest.raises(ToolError, match=r"tool 'edge.hang' timed out after 0.5s"):
            await registry.call(
                "edge.hang", {"marker": str(marker)}, ToolContext(cwd=tmp_path, timeout_s=0.5)
            )
        # the server was told the call is cancelled, and stopped working on it
        await eventually(lambda: anyio.to_thread.run_sync(marker.exists))
        # still serving; a small structured result is the value itself
        assert await registry.call("edge.big", {"chars": 3}, ctx) == {"result": "xxx"}

        with pytest.raises(ToolError, match=r"tool 'edge\.fail' failed: Error executing tool fail"):
            await registry.call("edge.fail", {"why": "no good"}, ctx)
        with pytest.raises(ToolArgumentsInvalid, match=r"args\.chars"):
            await registry.call("edge.big", {"chars": "many"}, ctx)

        assert await registry.call("edge.env", {"name": "EDGE_WANTED"}, ctx) == "given"
        assert await registry.call("edge.env", {"name": "EDGE_SECRET"}, ctx) == ""
        assert await registry.call("edge.env", {"name": "PLAIT_MESH"}, ctx) == ""
        assert await registry.call("edge.env", {"name": "PLAIT_TOOL_PROCESS"}, ctx) == "1"
        assert await registry.call("edge.where", {}, ctx) == str(tmp_path.resolve())


async def test_a_server_that_cannot_start_offers_no_tools(mesh: Mesh, tmp_path: Path) -> None:
    await put_server(
        mesh, declare(name="broken", command=[sys.executable, "-c", "raise SystemExit(3)"])
    )
    await put_server(mesh, declare(name="edge", command=EDGE))
    registry = ToolRegistry()
    async with mcp_tools(mesh, registry, cwd=tmp_path) as clients:
        (kept,) = clients.sessions("broken")
        assert not kept.live and kept.error
        assert [n for n in registry.names() if n.startswith("broken.")] == []
        assert "edge.big" in registry.names()


async def test_a_serving_process_advertises_its_mcp_tools(mesh: Mesh, tmp_path: Path) -> None:
    await put_server(mesh, declare(name="edge", command=EDGE))
    registry = ToolRegistry()
    async with mcp_tools(mesh, registry, cwd=tmp_path), serve(mesh, tools=registry, cwd=tmp_path):
        (beat,) = await live_heartbeats(mesh)
    assert {"edge.big", "edge.hang", "edge.where"} <= set(beat.tools)
    # A run naming the server's tools, one by one or all at once, finds them offered;
    # one naming a server no process has does not.
    assert missing_tools(["edge.big", "edge.*"], beat.tools) == []
    assert missing_tools(["files.*", "edge.nope"], beat.tools) == ["edge.nope", "files.*"]
