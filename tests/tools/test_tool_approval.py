"""The approval gate and the per-agent tool check."""

from __future__ import annotations

from typing import Any

import pytest

from plait.errors import ToolNotFound, ToolNotPermitted
from plait.profiles import AgentProfile
from plait.tools import ToolContext, check_allowed, default_registry, gate, tool


@tool("deploy", requires_approval=True)
async def deploy(args: dict[str, Any], ctx: ToolContext) -> None:
    """Deploys."""


@tool("lookup", read_only=True)
async def lookup(args: dict[str, Any], ctx: ToolContext) -> None:
    """Looks up."""


@pytest.mark.parametrize(
    ("pre_approved", "trusted", "expected"),
    [
        (False, False, "needs_approval"),
        (False, True, "needs_approval"),
        (True, False, "needs_approval"),  # an untrusted node loses its pre-approval
        (True, True, "allow"),
    ],
)
def test_a_tool_requiring_approval(pre_approved: bool, trusted: bool, expected: str) -> None:
    names = ["deploy"] if pre_approved else ["something_else"]
    assert gate(deploy, trusted=trusted, pre_approved=names) == expected


@pytest.mark.parametrize("pre_approved", [True, False])
@pytest.mark.parametrize("trusted", [True, False])
def test_a_tool_not_requiring_approval_is_always_allowed(pre_approved: bool, trusted: bool) -> None:
    names = {"lookup"} if pre_approved else set()
    assert gate(lookup, trusted=trusted, pre_approved=names) == "allow"


def test_bash_requires_approval_unless_pre_approved_and_trusted() -> None:
    bash = default_registry().get("bash")
    assert gate(bash, trusted=True, pre_approved=()) == "needs_approval"
    assert gate(bash, trusted=True, pre_approved=("bash",)) == "allow"


def test_check_allowed() -> None:
    registry = default_registry()
    registry.register(lookup)
    profile = AgentProfile(name="researcher", tools=["http_get", "bash", "ghost", "lookup"])

    assert check_allowed("http_get", profile, registry=registry).name == "http_get"
    assert check_allowed("bash", profile, registry=registry).name == "bash"
    assert check_allowed("http_get", profile, registry=registry, read_only_only=True).read_only

    with pytest.raises(ToolNotPermitted, match="agent 'researcher' does not have tool 'read_file'"):
        check_allowed("read_file", profile, registry=registry)
    with pytest.raises(ToolNotPermitted, match="'bash' is not read-only"):
        check_allowed("bash", profile, registry=registry, read_only_only=True)
    with pytest.raises(ToolNotFound, match="'ghost'"):
        check_allowed("ghost", profile, registry=registry)
