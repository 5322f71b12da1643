"""Agent profiles in the mesh, and the default assistant."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import plait.profiles
from plait.errors import ConfigError
from plait.mesh import Mesh, open_mesh
from plait.profiles import (
    DEFAULT_ASSISTANT,
    AgentProfile,
    get_profile,
    list_profiles,
    profiles_map,
    put_profile,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def mesh() -> AsyncIterator[Mesh]:
    async with open_mesh("memory://") as opened:
        yield opened


async def test_the_default_assistant_exists_when_none_is_stored(mesh: Mesh) -> None:
    assistant = await get_profile(mesh, "assistant")
    assert assistant == DEFAULT_ASSISTANT
    assert assistant.tools == ["http_get", "read_file", "bash"]
    assert assistant.system_prompt
    assistant.tools.append("mutated")
    assert DEFAULT_ASSISTANT.tools == ["http_get", "read_file", "bash"]
    assert await list_profiles(mesh) == [DEFAULT_ASSISTANT]
    assert await mesh.get("agents/assistant") is None


async def test_profiles_round_trip(mesh: Mesh) -> None:
    researcher = AgentProfile(
        name="researcher",
        model="scripted:r.yaml",
        system_prompt="Find sources.",
        tools=["http_get", "bash"],
        pre_approved=["bash"],
        delegates=["assistant"],
    )
    await put_profile(mesh, researcher)
    assert await get_profile(mesh, "researcher") == researcher
    entry = await mesh.get("agents/researcher")
    assert entry is not None and entry.value["pre_approved"] == ["bash"]


async def test_a_stored_assistant_replaces_the_default(mesh: Mesh) -> None:
    custom = AgentProfile(name="assistant", tools=["read_file"])
    await put_profile(mesh, custom)
    assert await get_profile(mesh, "assistant") == custom
    assert await list_profiles(mesh) == [custom]


async def test_list_profiles_is_sorted_and_includes_the_default(mesh: Mesh) -> None:
    await put_profile(mesh, AgentProfile(name="zed"))
    await put_profile(mesh, AgentProfile(name="alpha"))
    await mesh.put("agents/alpha/notes", {"not": "a profile"})
    names = [p.name for p in await list_profiles(mesh)]
    assert names == ["alpha", "assistant", "zed"]


async def test_an_unknown_agent_says_how_to_create_one(mesh: Mesh) -> None:
    with pytest.raises(ConfigError, match=r"unknown agent 'ghost'.*put_profile"):
        await get_profile(mesh, "ghost")


async def test_invalid_names_and_stored_values_are_config_errors(mesh: Mesh) -> None:
    with pytest.raises(ConfigError, match="invalid agent name"):
        await get_profile(mesh, "a/b")
    with pytest.raises(ConfigError, match="invalid agent name"):
        await put_profile(mesh, AgentProfile(name=""))
    await mesh.put("agents/broken", {"name": "broken", "tools": "not-a-list"})
    with pytest.raises(ConfigError, match=r"'agents/broken' is invalid: tools"):
        await get_profile(mesh, "broken")
    with pytest.raises(ConfigError, match="'agents/broken' is invalid"):
        await profiles_map(mesh, ["broken"])


async def test_profiles_map_names_every_unknown_agent(mesh: Mesh) -> None:
    await put_profile(mesh, AgentProfile(name="writer"))
    found = await profiles_map(mesh, ["writer", "assistant", "writer"])
    assert set(found) == {"writer", "assistant"}
    assert found["writer"].name == "writer"
    with pytest.raises(ConfigError, match="unknown agent\\(s\\) 'x', 'y'"):
        await profiles_map(mesh, ["x", "writer", "y"])


def test_exported_names() -> None:
    public = {n for n in vars(plait.profiles) if not n.startswith("_")}
    assert set(plait.profiles.__all__) == public - {"record", "store", "annotations"}
    for name in plait.profiles.__all__:
        assert getattr(plait.profiles, name).__doc__, name
