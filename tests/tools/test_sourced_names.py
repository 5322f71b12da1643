"""Tools a source offers (an MCP server's): ``SOURCE.TOOL`` names, told to models as
``SOURCE__TOOL``, and ``SOURCE.*`` in allow and pre-approval lists."""

from __future__ import annotations

from typing import Any

import pytest

from plait.errors import ConfigError, ToolNotPermitted
from plait.profiles import AgentProfile
from plait.tools import Tool, ToolContext, ToolRegistry, check_allowed, gate, names_match


async def _echo(args: dict[str, Any], ctx: ToolContext) -> Any:
    return args


def sourced(name: str, **flags: bool) -> Tool:
    return Tool(name=name, description="", parameters={"type": "object"}, handler=_echo, **flags)


def test_a_sourced_name_is_told_to_models_without_its_dot() -> None:
    registry = ToolRegistry([sourced("files.read_file"), sourced("files.write_file")])
    assert registry.get("files.read_file").spec().name == "files__read_file"
    assert registry.get("files__read_file").name == "files.read_file"
    assert registry.canonical("files__write_file") == "files.write_file"
    assert registry.canonical("nope") == "nope"
    assert "files__read_file" in registry and "files__nope" not in registry
    assert registry.expand(["files.*", "files.read_file", "other.*", "x"]) == [
        "files.read_file",
        "files.write_file",
    ]


@pytest.mark.parametrize("name", ["Files.read", "files.", ".read", "a.b.c", "f" * 33 + ".x"])
def test_malformed_sourced_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid tool name"):
        sourced(name)


def test_a_source_wildcard_allows_and_pre_approves_its_tools_only() -> None:
    registry = ToolRegistry([sourced("files.write_file", requires_approval=True)])
    registry.register(sourced("shell", requires_approval=True))
    profile = AgentProfile(name="a", tools=["files.*", "shell"], pre_approved=["files.*"])
    tool = check_allowed("files.write_file", profile, registry=registry)
    assert gate(tool, trusted=True, pre_approved=profile.pre_approved) == "allow"
    assert gate(tool, trusted=False, pre_approved=profile.pre_approved) == "needs_approval"
    shell = check_allowed("shell", profile, registry=registry)
    assert gate(shell, trusted=True, pre_approved=profile.pre_approved) == "needs_approval"
    assert names_match("files.x", ["files.*"]) and not names_match("filesx.y", ["files.*"])
    assert not names_match("files", ["files.*"])
    with pytest.raises(ToolNotPermitted):
        check_allowed("other.tool", profile, registry=registry)
