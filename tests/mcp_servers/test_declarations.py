"""``plait mcp add|list|show|remove``: declarations stored in the mesh, secrets never."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait.errors import ConfigError
from plait.mcp import declare
from tests.cli.helpers import invoke


@pytest.fixture
def mesh_args(tmp_path: Path) -> list[str]:
    return ["--mesh", f"sqlite:///{tmp_path / 'mesh.db'}"]


def test_add_list_show_remove_a_stdio_and_an_http_server(mesh_args: list[str]) -> None:
    code, out, err = invoke(
        "mcp", "add", "files", *mesh_args, "--env", "NODE_OPTIONS",
        "--safety", "write_file=idempotent",
        "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "{workspace}",
    )  # fmt: skip
    assert code == 0, err
    assert "stored MCP server files" in out
    code, _, err = invoke(
        "mcp", "add", "remote", "--url", "https://mcp.example.com/mcp",
        "--bearer-env", "REMOTE_TOKEN", "--header", "X-Team=TEAM_KEY", "--trusted", *mesh_args,
    )  # fmt: skip
    assert code == 0, err

    code, out, _ = invoke("mcp", "list", *mesh_args)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("files  stdio  untrusted  npx -y")
    assert lines[1] == "remote  http  trusted  https://mcp.example.com/mcp"

    code, out, _ = invoke("mcp", "show", "files", "--json", *mesh_args)
    shown = json.loads(out)
    assert shown["command"] == [
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "{workspace}",
    ]
    assert shown["env"] == ["NODE_OPTIONS"] and shown["safety"] == {"write_file": "idempotent"}
    code, out, _ = invoke("mcp", "show", "remote", "--json", *mesh_args)
    remote = json.loads(out)
    # Only the names of the variables holding secrets are stored.
    assert remote["bearer_env"] == "REMOTE_TOKEN" and remote["headers"] == {"X-Team": "TEAM_KEY"}

    assert invoke("mcp", "remove", "files", *mesh_args)[0] == 0
    code, out, _ = invoke("mcp", "list", "--json", *mesh_args)
    assert [s["name"] for s in json.loads(out)] == ["remote"]
    code, _, err = invoke("mcp", "remove", "files", *mesh_args)
    assert code == 1 and "no MCP server 'files'" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Files", "--", "x"], "lower-case letters"),
        (["files"], "give either -- COMMAND ARGS"),
        (["files", "--url", "https://x/mcp", "--", "x"], "give either -- COMMAND ARGS"),
        (["files", "--url", "ftp://x"], "is not an http:// or https:// URL"),
        (["files", "--env", "PLAIT_MESH", "--", "x"], "PLAIT_* variables are never passed"),
        (["files", "--header", "X-Key", "--url", "https://x/"], "--header takes KEY=VALUE"),
        (["files", "--safety", "t=maybe", "--", "x"], "safety.t"),
        (["files", "--approval", "sometimes", "--", "x"], "approval"),
    ],
)
def test_bad_declarations_are_refused_in_one_line(
    mesh_args: list[str], args: list[str], message: str
) -> None:
    code, _, err = invoke("mcp", "add", *args[:1], *mesh_args, *args[1:])
    assert code != 0
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_show_of_an_unknown_server_says_how_to_add_one(mesh_args: list[str]) -> None:
    code, _, err = invoke("mcp", "show", "nope", *mesh_args)
    assert code == 1 and "plait mcp add nope -- COMMAND ARGS" in err


def test_a_declaration_names_exactly_one_transport() -> None:
    with pytest.raises(ConfigError, match="either a command"):
        declare(name="both", command=["x"], url="https://x/")
    assert declare(name="ws", command=["srv", "{workspace}"]).per_workspace
    assert not declare(name="plain", command=["srv", "."]).per_workspace


def test_a_process_a_tool_started_may_not_declare_a_server(
    mesh_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_TOOL_PROCESS", "1")
    code, _, err = invoke("mcp", "add", "evil", *mesh_args, "--", "sh", "-c", "true")
    assert code == 1 and "person" in err
    monkeypatch.delenv("PLAIT_TOOL_PROCESS")
    assert invoke("mcp", "list", "--json", *mesh_args)[1].strip() == "[]"
