"""The registry: schema validation before any call, lookups, handler failures."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

import plait.tools
from plait.errors import ConfigError, ToolArgumentsInvalid, ToolError, ToolNotFound
from plait.tools import (
    Tool,
    ToolContext,
    ToolRegistry,
    ToolSpec,
    default_registry,
    tool,
)
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

CALLS: list[dict[str, Any]] = []


@tool(
    "echo",
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    read_only=True,
)
async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
    """Repeat the text.

    More detail that the model does not need.
    """
    CALLS.append(args)
    return args["text"] * args.get("times", 1)


@tool()
async def explode(args: dict[str, Any], ctx: ToolContext) -> None:
    """Always fails."""
    raise RuntimeError("boom")


@tool()
async def slow(args: dict[str, Any], ctx: ToolContext) -> None:
    """Sleeps."""
    await anyio.sleep(30)


@pytest.fixture
def registry() -> ToolRegistry:
    CALLS.clear()
    return ToolRegistry([echo, explode, slow])


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(run_id="run_1", node="n", cwd=tmp_path, timeout_s=5)


def test_decorator_builds_a_tool_from_the_function() -> None:
    assert isinstance(echo, Tool)
    assert echo.name == "echo"
    assert echo.description == "Repeat the text."
    assert echo.read_only and not echo.external and not echo.requires_approval
    assert explode.name == "explode"
    assert explode.parameters == {"type": "object", "properties": {}}
    assert echo.spec() == ToolSpec(
        name="echo", description="Repeat the text.", parameters=echo.parameters
    )


def test_lookup_names_contains_and_specs(registry: ToolRegistry) -> None:
    assert registry.names() == ["echo", "explode", "slow"]
    assert "echo" in registry and "nope" not in registry
    assert registry.get("echo") is echo
    assert [s.name for s in registry.specs(["slow", "echo"])] == ["slow", "echo"]
    assert [s.name for s in registry.specs()] == ["echo", "explode", "slow"]


def test_unknown_tool_lists_the_known_ones(registry: ToolRegistry) -> None:
    with pytest.raises(ToolNotFound, match=r"'nope'.*echo, explode, slow"):
        registry.get("nope")
    with pytest.raises(ToolNotFound):
        registry.specs(["echo", "nope"])
    with pytest.raises(ToolNotFound):
        registry.validate_args("nope", {})


def test_duplicate_registration_is_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigError, match="'echo' is already registered"):
        registry.register(echo)


def test_bad_names_and_schemas_are_refused_at_definition() -> None:
    async def h(args: dict[str, Any], ctx: ToolContext) -> None:
        return None

    with pytest.raises(ConfigError, match="invalid tool name"):
        Tool(name="has space", description="", parameters={}, handler=h)
    with pytest.raises(ConfigError, match="invalid parameters schema"):
        Tool(name="t", description="", parameters={"type": "nonsense"}, handler=h)


def test_every_violation_is_reported_with_its_path(registry: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentsInvalid) as info:
        registry.validate_args("echo", {"times": 0, "tags": ["a", 5], "extra": True})
    message = str(info.value)
    assert "4 invalid argument(s) for tool 'echo'" in message
    assert "args: 'text' is a required property" in message
    assert "args: Additional properties are not allowed ('extra' was unexpected)" in message
    assert "args.times: 0 is less than the minimum of 1" in message
    assert "args.tags[1]: 5 is not of type 'string'" in message


def test_non_object_arguments_are_invalid(registry: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentsInvalid, match="expected an object, got list"):
        registry.validate_args("echo", ["hi"])


async def test_call_validates_before_running(registry: ToolRegistry, ctx: ToolContext) -> None:
    with pytest.raises(ToolArgumentsInvalid):
        await registry.call("echo", {"text": 3}, ctx)
    assert CALLS == []
    assert await registry.call("echo", {"text": "ab", "times": 2}, ctx) == "abab"
    assert CALLS == [{"text": "ab", "times": 2}]


async def test_handler_failure_becomes_tool_error(registry: ToolRegistry, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="tool 'explode' failed: RuntimeError: boom") as info:
        await registry.call("explode", {}, ctx)
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_a_handler_running_past_its_limit_is_stopped(registry: ToolRegistry) -> None:
    ctx = ToolContext(node="n", timeout_s=0.05)
    with anyio.fail_after(scaled(5)):
        with pytest.raises(ToolError, match=re.escape("tool 'slow' timed out after 0.05s")):
            await registry.call("slow", {}, ctx)


async def test_cancellation_is_never_swallowed(registry: ToolRegistry, ctx: ToolContext) -> None:
    task = asyncio.ensure_future(registry.call("slow", {}, ctx))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_default_registry_is_fresh_and_holds_the_builtins() -> None:
    first, second = default_registry(), default_registry()
    assert first.names() == ["bash", "http_get", "read_file"]
    first.register(echo)
    assert "echo" not in second


def test_exported_names() -> None:
    public = {n for n in vars(plait.tools) if not n.startswith("_")}
    modules = {"approval", "builtin", "loading", "registry", "spec", "trust", "annotations"}
    modules |= {"workspace", "http_guard"}
    assert set(plait.tools.__all__) == public - modules
