"""``plait mcp serve`` driven by the official MCP client, over stdio and over HTTP: it
lists a tool per graph and the run tools (none answers a decision), runs a graph to its
human node, returns the decision and how a person answers it, and reads the run once a
person has answered in the CLI. HTTP refuses a request without a plait token.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from plait.mcp import declare, put_server
from plait.mcp.client import mcp_tools
from plait.mesh import open_mesh
from plait.profiles import AgentProfile
from plait.tools import ToolContext, ToolRegistry
from tests.runs.helpers import Cli, poll

pytestmark = pytest.mark.anyio

GRAPH = """
name: review
agent: assistant
entry: draft
nodes:
  - id: draft
    type: agent
    prompt: "Draft {{input}}"
    next: approve
  - id: approve
    type: human
    ask: "Ship {{draft}}?"
    options: ["yes", "no"]
    next: ship
  - id: ship
    type: agent
    prompt: "Ship {{draft}} ({{approve}})"
"""

RULES = """
rules:
  - node: draft
    text: "a draft of {{prompt}}"
  - node: ship
    text: "shipped"
"""


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path)
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "review.yaml").write_text(GRAPH)
    cli("graph", "import", str(tmp_path / "review.yaml"))
    cli.profile(AgentProfile(name="assistant", model=f"scripted:{tmp_path / 'rules.yaml'}"))
    worker = cli.spawn("worker")
    try:
        yield cli
    finally:
        worker.terminate()
        worker.communicate(timeout=60)


@asynccontextmanager
async def over_stdio(cli: Cli) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=cli.argv()[0], args=[*cli.argv("mcp", "serve")[1:]], env=cli.env, cwd=cli.cwd
    )
    with (cli.cwd / "serve.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams, ClientSession(*streams) as s:
            await s.initialize()
            yield s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(cli: Cli) -> Iterator[tuple[str, str]]:
    """``plait mcp serve --http`` on a free port: its URL and a service token."""
    token = cli("tokens", "create", "--service", "desktop").stdout.strip()
    port = free_port()
    server = subprocess.Popen(
        cli.argv("mcp", "serve", "--http", "--port", str(port)),
        cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:

        def up() -> int | None:
            try:
                return httpx2.post(url, json={}).status_code
            except httpx2.TransportError:
                return None

        assert poll(up) == 401  # no token: refused
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer plait_x_y"})
        assert wrong.status_code == 401
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=60)


@asynccontextmanager
async def over_http(cli: Cli) -> AsyncIterator[ClientSession]:
    with http_server(cli) as (url, token):
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            create_mcp_http_client(headers=headers) as client,
            streamable_http_client(url, http_client=client) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            yield session


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.mark.parametrize("transport", [over_stdio, over_http], ids=["stdio", "http"])
async def test_an_mcp_client_runs_a_graph_to_its_human_node_and_reads_it_after_a_person_answers(
    cli: Cli, transport: Callable[[Cli], AbstractAsyncContextManager[ClientSession]]
) -> None:
    async with transport(cli) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"run_assistant_review", "get_run", "list_runs", "tell_agent"} <= names
        assert not any("answer" in n or "decide" in n or "approve" in n for n in names)

        started = structured(
            await session.call_tool("run_assistant_review", {"input": "the plan", "wait_s": 120})
        )
        assert started["status"] == "waiting_human", started
        waiting = started["waiting"]
        assert waiting["node"] == "approve" and waiting["options"] == ["yes", "no"]
        assert waiting["ask"] == "Ship a draft of Draft the plan?"
        assert f"plait decisions answer {waiting['decision_id']}" in waiting["how_to_answer"]

        listed = structured(await session.call_tool("list_runs", {"agent": "assistant"}))
        assert [r["run_id"] for r in listed["runs"]] == [started["run_id"]]

        # A person answers, in the CLI; the MCP client then reads the finished run.
        cli("decisions", "answer", waiting["decision_id"], "--option", "yes")
        done = structured(
            await session.call_tool("get_run", {"run_id": started["run_id"], "wait_s": 120})
        )
        assert done["status"] == "done", done
        assert done["output"] == "shipped"
        missing = structured(await session.call_tool("get_run", {"run_id": "grun_nope"}))
        assert missing["error"] == "no run 'grun_nope'"


async def test_plait_reaches_a_streamable_http_server_with_a_bearer_token_from_the_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    with http_server(cli) as (url, token):
        async with open_mesh(cli.mesh_url) as mesh:
            await put_server(mesh, declare(name="remote", url=url, bearer_env="REMOTE_TOKEN"))
            monkeypatch.delenv("REMOTE_TOKEN", raising=False)
            registry = ToolRegistry()
            async with mcp_tools(mesh, registry, cwd=cli.cwd) as clients:
                (kept,) = clients.sessions("remote")
                assert "REMOTE_TOKEN" in (kept.error or "") and registry.names() == []
            monkeypatch.setenv("REMOTE_TOKEN", token)
            async with mcp_tools(mesh, registry, cwd=cli.cwd):
                assert {"remote.get_run", "remote.list_runs"} <= set(registry.names())
                assert registry.get("remote.list_runs").read_only
                listed = await registry.call(
                    "remote.list_runs", {}, ToolContext(cwd=cli.cwd, timeout_s=60)
                )
    assert listed == {"runs": []}
