"""Agent nodes list and call the tools of real MCP servers (none written here) through
a scripted model's tool calls, under plait's gates: the allow list, approval, taint,
the workspace, structured results.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait.graphs import run_graph
from plait.mcp import declare, put_server
from plait.mcp.client import McpClients, mcp_tools
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.profiles import AgentProfile
from plait.tools import ToolRegistry

from .servers import everything, filesystem, git_server, time_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def mesh() -> AsyncIterator[Mesh]:
    async with open_mesh("memory://") as opened:
        yield opened


def graph_of(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A graph of agent ``assistant`` starting at its first node."""
    return {"name": "g", "agent": "assistant", "entry": nodes[0]["id"], "nodes": list(nodes)}


def one_agent(prompt: str = "Go") -> dict[str, Any]:
    return {
        "name": "use-mcp",
        "agent": "assistant",
        "entry": "work",
        "nodes": [{"id": "work", "type": "agent", "prompt": prompt}],
    }


async def offered(
    mesh: Mesh, tmp_path: Path, **servers: dict[str, Any]
) -> tuple[ToolRegistry, Any]:
    for name, fields in servers.items():
        await put_server(mesh, declare(name=name, **fields))
    registry = ToolRegistry()
    return registry, mcp_tools(mesh, registry, cwd=tmp_path)


async def test_an_agent_lists_and_calls_the_time_and_everything_servers(
    mesh: Mesh, tmp_path: Path
) -> None:
    registry, serving = await offered(
        mesh, tmp_path, time={"command": time_server()}, everything={"command": everything()}
    )
    model = ScriptedModel(
        [
            {"node": "work", "round": 1,
             "tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
            {"node": "work", "round": 2,
             "tool_calls": [{"name": "everything__echo", "arguments": {"message": "hi plait"}}]},
            {"node": "work", "round": 3, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip
    profile = AgentProfile(name="assistant", tools=["time.*", "everything.echo"])
    async with serving as clients:
        assert isinstance(clients, McpClients)
        assert {"time.get_current_time", "time.convert_time", "everything.echo"} <= set(
            registry.names()
        )
        run = await run_graph(
            one_agent(), model=model, tools=registry, profiles={"assistant": profile}
        )
    assert run.status == "done", run.error
    assert run.output == "Echo: hi plait"
    told = {spec.name for spec in model.calls[0].tools}
    # The model is told exactly the profile's tools, with provider-safe names.
    assert told == {"time__get_current_time", "time__convert_time", "everything__echo"}
    time_result = model.calls[1].messages[-1].content
    assert '"timezone": "UTC"' in time_result and "datetime" in time_result
    # the server's tools are gone with the block
    assert registry.names() == []


async def test_a_tool_the_profile_lacks_is_refused_and_never_reaches_the_server(
    mesh: Mesh, tmp_path: Path
) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    model = ScriptedModel(
        [
            {"node": "work", "round": 1,
             "tool_calls": [{"name": "everything__get-env", "arguments": {}}]},
            {"node": "work", "round": 2, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip
    profile = AgentProfile(name="assistant", tools=["everything.echo"])
    async with serving:
        run = await run_graph(
            one_agent(), model=model, tools=registry, profiles={"assistant": profile}
        )
    assert run.status == "done", run.error
    assert run.output == "error: tool 'everything.get-env' is not available to this node"


async def test_structured_content_is_a_tool_nodes_output_value(mesh: Mesh, tmp_path: Path) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    graph = {
        "name": "weather",
        "agent": "assistant",
        "entry": "ask",
        "nodes": [
            {"id": "ask", "type": "tool", "tool": "everything.get-structured-content",
             "args": {"location": "{{input}}"}},
        ],
    }  # fmt: skip
    profile = AgentProfile(name="assistant", tools=["everything.*"])
    async with serving:
        run = await run_graph(graph, "Chicago", tools=registry, profiles={"assistant": profile})
        bad = await run_graph(graph, "Paris", tools=registry, profiles={"assistant": profile})
    assert run.status == "done", run.error
    assert set(run.output) == {"temperature", "conditions", "humidity"}
    # The input schema (an enum of cities) is checked before any call.
    assert bad.status == "failed" and "is not one of" in (bad.error or "")


async def test_resources_and_prompts_are_tools_too(mesh: Mesh, tmp_path: Path) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    async with serving:
        read = registry.get("everything.read_resource")
        prompt = registry.get("everything.get_prompt")
        assert read.read_only and read.external
        from plait.tools import ToolContext

        text = await registry.call(
            "everything.read_resource",
            {"uri": "demo://resource/static/document/architecture.md"},
            ToolContext(cwd=tmp_path),
        )
        got = await registry.call(
            "everything.get_prompt", {"name": "simple-prompt"}, ToolContext(cwd=tmp_path)
        )
    assert isinstance(text, str) and "Architecture" in text
    assert got["messages"][0]["role"] == "user" and prompt.name == "everything.get_prompt"


def _gated_model() -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "work", "round": 1,
             "tool_calls": [{"name": "everything__echo", "arguments": {"message": "do it"}}]},
            {"node": "work", "round": 2,
             "tool_calls": [{"name": "everything__toggle-simulated-logging", "arguments": {}}]},
            {"node": "work", "round": 3, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip


def _toggling() -> tuple[ScriptedModel, AgentProfile]:
    """A model whose node ``work`` calls the pre-approved, not read-only toggle tool, and
    the agent whose profile pre-approves it."""
    model = ScriptedModel(
        [
            {"node": "work", "round": 1,
             "tool_calls": [{"name": "everything__toggle-simulated-logging", "arguments": {}}]},
            {"node": "work", "round": 2, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip
    profile = AgentProfile(
        name="assistant",
        tools=["everything.*"],
        pre_approved=["everything.toggle-simulated-logging"],
    )
    return model, profile


@pytest.mark.parametrize("trusted", [False, True])
async def test_an_untrusted_servers_result_drops_pre_approvals_a_trusted_ones_does_not(
    mesh: Mesh, tmp_path: Path, trusted: bool
) -> None:
    registry, serving = await offered(
        mesh, tmp_path, everything={"command": everything(), "trusted": trusted}
    )
    profile = AgentProfile(
        name="assistant",
        tools=["everything.*"],
        pre_approved=["everything.toggle-simulated-logging"],
    )
    async with serving:
        toggle = registry.get("everything.toggle-simulated-logging")
        assert toggle.requires_approval and not toggle.read_only
        run = await run_graph(
            one_agent(), model=_gated_model(), tools=registry, profiles={"assistant": profile}
        )
    if trusted:
        assert run.status == "done", run.error
        assert "logging" in str(run.output).lower()
    else:
        assert run.status == "waiting_approval", run.error
        assert run.waiting is not None
        assert run.waiting.tool == "everything.toggle-simulated-logging"


async def test_the_filesystem_server_is_confined_to_the_runs_workspace(
    mesh: Mesh, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    registry, serving = await offered(mesh, tmp_path, files={"command": filesystem()})
    model = ScriptedModel(
        [
            {"node": "work", "round": 1, "tool_calls": [
                {"name": "files__write_file",
                 "arguments": {"path": str(workspace / "note.txt"), "content": "kept"}}]},
            {"node": "work", "round": 2, "tool_calls": [
                {"name": "files__read_text_file", "arguments": {"path": str(outside)}}]},
            {"node": "work", "round": 3, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip
    profile = AgentProfile(
        name="assistant", tools=["files.*"], pre_approved=["files.*"], workspace=str(workspace)
    )
    async with serving as clients:
        run = await run_graph(
            one_agent(), model=model, tools=registry, profiles={"assistant": profile},
            cwd=tmp_path,
        )  # fmt: skip
        places = {kept.workspace for kept in clients.sessions("files")}
    assert run.status == "done", run.error
    assert (workspace / "note.txt").read_text() == "kept"
    assert "secret" not in str(run.output)
    assert "outside allowed directories" in str(run.output) or "denied" in str(run.output).lower()
    # one session for the serving process's directory, one for the run's workspace
    assert places == {tmp_path.resolve(), workspace.resolve()}


async def test_the_git_server_reads_a_repository(mesh: Mesh, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "draft.md").write_text("# draft\n")
    registry, serving = await offered(mesh, tmp_path, git={"command": git_server(repo)})
    model = ScriptedModel(
        [
            {"node": "work", "round": 1, "tool_calls": [
                {"name": "git__git_status", "arguments": {"repo_path": str(repo)}}]},
            {"node": "work", "round": 2, "text": "{{tool_result}}"},
        ]
    )  # fmt: skip
    profile = AgentProfile(name="assistant", tools=["git.git_status"])
    async with serving:
        run = await run_graph(
            one_agent(), model=model, tools=registry, profiles={"assistant": profile}
        )
    assert run.status == "done", run.error
    assert "draft.md" in str(run.output)


async def test_a_prompt_is_a_nodes_template_source_and_a_resource_its_tainted_input(
    mesh: Mesh, tmp_path: Path
) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    graph = {
        "name": "from-mcp",
        "agent": "assistant",
        "entry": "template",
        "nodes": [
            {"id": "template", "type": "tool", "tool": "everything.get_prompt",
             "args": {"name": "args-prompt", "arguments": {"city": "Paris"}}, "next": "doc"},
            {"id": "doc", "type": "tool", "tool": "everything.read_resource",
             "args": {"uri": "demo://resource/static/document/architecture.md"}, "next": "work"},
            {"id": "work", "type": "agent",
             "prompt": "{{template.messages[0].content}} Notes: {{doc}}"},
        ],
    }  # fmt: skip
    model, profile = _toggling()
    async with serving:
        run = await run_graph(graph, tools=registry, model=model, profiles={"assistant": profile})
    prompt = model.calls[0].messages[-1].content
    assert "Paris" in prompt and "Architecture" in prompt
    # The resource is outside content: the node reading it lost its pre-approval.
    assert run.status == "waiting_approval", run.error
    assert run.waiting is not None
    assert (run.waiting.node, run.waiting.tool) == ("work", "everything.toggle-simulated-logging")


@pytest.mark.parametrize("trusted", [False, True])
async def test_an_mcp_prompt_is_an_agent_nodes_prompt_template(
    mesh: Mesh, tmp_path: Path, trusted: bool
) -> None:
    registry, serving = await offered(
        mesh, tmp_path, everything={"command": everything(), "trusted": trusted}
    )
    graph = graph_of(
        {"id": "work", "type": "agent", "tools": ["everything.toggle-simulated-logging"],
         "prompt_from": {"server": "everything", "name": "args-prompt",
                         "arguments": {"city": "{{input}}"}},
         "prompt": "Answer in one word."},
    )  # fmt: skip
    model, profile = _toggling()
    async with serving:
        run = await run_graph(
            graph, "Paris", tools=registry, model=model, profiles={"assistant": profile}
        )
    # The server's prompt, its argument filled from the run, opens the turn; the node's
    # own prompt follows it.
    sent = [(m.role, m.content) for m in model.calls[0].messages]
    assert sent[-2:] == [("user", "What's weather in Paris?"), ("user", "Answer in one word.")]
    # Only the node's own tool is told to the model, not the prompt's.
    assert {spec.name for spec in model.calls[0].tools} == {"everything__toggle-simulated-logging"}
    if trusted:
        assert run.status == "done", run.error
    else:
        # An untrusted server's prompt is outside content: the pre-approval is lost.
        assert run.status == "waiting_approval", run.error
        assert run.waiting is not None
        assert run.waiting.tool == "everything.toggle-simulated-logging"


async def test_a_prompt_source_needs_the_agent_to_have_its_servers_prompts(
    mesh: Mesh, tmp_path: Path
) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    graph = graph_of(
        {"id": "work", "type": "agent",
         "prompt_from": {"server": "everything", "name": "simple-prompt"}},
    )  # fmt: skip
    profile = AgentProfile(name="assistant", tools=["everything.echo"])
    model = ScriptedModel([{"node": "work", "round": 1, "text": "never"}])
    async with serving:
        run = await run_graph(graph, tools=registry, model=model, profiles={"assistant": profile})
    assert run.status == "failed"
    assert "everything.get_prompt" in (run.error or "")
    assert model.calls == []  # refused before any model call


async def test_a_verifier_takes_its_prompt_from_an_mcp_prompt_too(
    mesh: Mesh, tmp_path: Path
) -> None:
    registry, serving = await offered(mesh, tmp_path, everything={"command": everything()})
    graph = graph_of(
        {"id": "judge", "type": "verifier", "verdict_mode": "last_line",
         "prompt_from": {"server": "everything", "name": "args-prompt",
                         "arguments": {"city": "{{input}}", "state": "TX"}},
         "verdicts": {"pass": "done", "fail": "done"}},
        {"id": "done", "type": "end"},
    )  # fmt: skip
    model = ScriptedModel([{"node": "judge", "round": 1, "text": "pass"}])
    profile = AgentProfile(name="assistant", tools=["everything.get_prompt"])
    async with serving:
        run = await run_graph(
            graph, "Paris", tools=registry, model=model, profiles={"assistant": profile}
        )
    assert run.status == "done", run.error
    assert model.calls[0].messages[-1].content == "What's weather in Paris, TX?"
    assert run.state.outputs["judge"].tainted  # an untrusted server's prompt: outside content
