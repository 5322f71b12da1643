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
from plait.graphs import run_graph
from plait.mcp import declare, put_server
from plait.mcp.client import mcp_tools
from plait.mcp.results import MAX_TEXT_CHARS
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.profiles import AgentProfile
from plait.runs import heartbeats, serve
from plait.runs.heartbeats import live_heartbeats, missing_tools
from plait.tools import ToolContext, ToolRegistry
from tests.runs.helpers import eventually

pytestmark = pytest.mark.anyio

EDGE = [sys.executable, str(Path(__file__).with_name("edge_server.py"))]

AGENT_GRAPH = {
    "name": "grow",
    "agent": "grower",
    "entry": "work",
    "nodes": [{"id": "work", "type": "agent", "prompt": "Use what is there."}],
}


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


async def test_tools_a_server_adds_while_serving_are_offered_without_a_restart(
    mesh: Mesh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heartbeats, "BEAT_S", 0.05)
    await put_server(mesh, declare(name="edge", command=EDGE, approval="never"))
    registry = ToolRegistry()
    ctx = ToolContext(cwd=tmp_path, timeout_s=30)
    profile = AgentProfile(name="grower", tools=["edge.*"])
    async with (
        mcp_tools(mesh, registry, cwd=tmp_path) as clients,
        serve(mesh, tools=registry, cwd=tmp_path),
    ):
        (kept,) = clients.sessions("edge")
        assert "edge.sprout" not in registry
        assert await registry.call("edge.grow", {"name": "sprout"}, ctx) == "added sprout"
        # The server's notification has the table listed again: the new tool is there,
        # read-only as annotated, and the heartbeat advertises it from the next beat.
        await eventually(lambda: _async("edge.sprout" in registry))
        assert registry.get("edge.sprout").read_only

        async def advertised() -> bool:
            return any("edge.sprout" in b.tools for b in await live_heartbeats(mesh))

        await eventually(advertised)
        # A run started now calls it, through a model told of it: no restart.
        model = ScriptedModel(
            [
                {"node": "work", "round": 1,
                 "tool_calls": [{"name": "edge__sprout", "arguments": {}}]},
                {"node": "work", "round": 2, "text": "{{tool_result}}"},
            ]
        )  # fmt: skip
        run = await run_graph(
            AGENT_GRAPH, model=model, tools=registry, profiles={"grower": profile}
        )
        assert run.status == "done", run.error
        assert run.output == "sprout grown"
        assert "edge__sprout" in {spec.name for spec in model.calls[0].tools}

        await registry.call("edge.shrink", {"name": "sprout"}, ctx)
        await eventually(lambda: _async("edge.sprout" not in registry))
        assert kept.opened == 1  # the same session all along
        assert "edge.grow" in registry  # the rest of its tools stay


async def _async(value: bool) -> bool:
    return value


async def test_a_server_that_starts_late_offers_its_tools_once_it_opens(
    mesh: Mesh, tmp_path: Path
) -> None:
    ready = tmp_path / "installed"
    late = ["sh", "-c", f"test -e '{ready}' || exit 3; exec {' '.join(EDGE)}"]
    await put_server(mesh, declare(name="late", command=late))
    registry = ToolRegistry()
    async with mcp_tools(mesh, registry, cwd=tmp_path) as clients:
        (kept,) = clients.sessions("late")
        assert not kept.live and "late.big" not in registry
        ready.touch()  # as if it were installed now: the next try opens it
        await eventually(lambda: _async("late.big" in registry))
        assert kept.live and kept.opened == 1
