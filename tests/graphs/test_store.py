"""Stored graphs: versions, immutability, the index under concurrency, listing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.errors import GraphNotFound, GraphValidationError, GraphVersionExists
from plait.graphs.loader import load_graph_file
from plait.graphs.spec import GraphSpec
from plait.graphs.store import (
    StoredGraph,
    get_graph,
    import_graph,
    list_graphs,
)
from plait.mesh import Mesh

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "research_and_verify.json"


def spec(**changes: Any) -> GraphSpec:
    """The research-and-verify example with ``changes`` applied."""
    return GraphSpec.model_validate({**load_graph_file(EXAMPLE), **changes})


async def test_round_trip_keeps_the_spec_and_its_hash(mesh: Mesh) -> None:
    original = spec(description="first cut")
    stored = await import_graph(mesh, original)
    assert (stored.agent, stored.name, stored.version) == ("assistant", "research-and-verify", 1)
    assert stored.sha256 == original.sha256()
    assert stored.spec == original
    assert stored.imported_at > 0

    got = await get_graph(mesh, "assistant", "research-and-verify")
    assert got == stored
    assert got.spec.sha256() == original.sha256()

    raw = await mesh.get("graphs/assistant/research-and-verify/1")
    assert raw is not None
    assert raw.value["spec"] == json.loads(original.canonical_json())
    assert raw.value["sha256"] == original.sha256()
    index = await mesh.get("graphs/assistant/research-and-verify")
    assert index is not None
    assert index.value == {"latest": 1, "versions": [1]}


async def test_newest_version_is_the_default_and_older_ones_stay_pinned(mesh: Mesh) -> None:
    v2 = await import_graph(mesh, spec(version=2, description="second"))
    v1 = await import_graph(mesh, spec(version=1, description="first"))
    v3 = await import_graph(mesh, spec(version=3, description="third"))
    assert len({v1.sha256, v2.sha256, v3.sha256}) == 3

    newest = await get_graph(mesh, "assistant", "research-and-verify")
    assert newest.version == 3 and newest.sha256 == v3.sha256
    pinned = await get_graph(mesh, "assistant", "research-and-verify", version=1)
    assert pinned.version == 1 and pinned.sha256 == v1.sha256
    assert pinned.spec.description == "first"
    index = await mesh.get("graphs/assistant/research-and-verify")
    assert index is not None and index.value == {"latest": 3, "versions": [1, 2, 3]}


async def test_a_stored_version_is_immutable(mesh: Mesh) -> None:
    first = await import_graph(mesh, spec(description="as reviewed"))
    changed = spec(description="edited without a version bump")
    with pytest.raises(GraphVersionExists) as info:
        await import_graph(mesh, changed)
    message = str(info.value)
    assert "version 1" in message
    assert first.sha256[:12] in message and changed.sha256()[:12] in message
    assert first.sha256 not in message  # abbreviated
    assert "bump the version" in message
    kept = await get_graph(mesh, "assistant", "research-and-verify", version=1)
    assert kept == first


async def test_reimporting_the_identical_spec_is_a_no_op(mesh: Mesh) -> None:
    first = await import_graph(mesh, spec())
    before = await mesh.get("graphs/assistant/research-and-verify/1")
    again = await import_graph(mesh, spec())
    assert again == first  # same imported_at: nothing was rewritten
    after = await mesh.get("graphs/assistant/research-and-verify/1")
    assert before is not None and after is not None and after.version == before.version
    index = await mesh.get("graphs/assistant/research-and-verify")
    assert index is not None and index.version == 1


async def test_concurrent_imports_of_many_versions_all_land(mesh: Mesh) -> None:
    results: dict[int, StoredGraph] = {}

    async def one(version: int) -> None:
        results[version] = await import_graph(mesh, spec(version=version))

    async with anyio.create_task_group() as tg:
        for version in range(1, 9):
            tg.start_soon(one, version)

    index = await mesh.get("graphs/assistant/research-and-verify")
    assert index is not None
    assert index.value == {"latest": 8, "versions": list(range(1, 9))}
    for version, stored in results.items():
        assert (await get_graph(mesh, "assistant", "research-and-verify", version)) == stored


async def test_concurrent_clashing_imports_of_one_version_keep_exactly_one(mesh: Mesh) -> None:
    outcomes: list[StoredGraph | GraphVersionExists] = []

    async def one(description: str) -> None:
        try:
            outcomes.append(await import_graph(mesh, spec(description=description)))
        except GraphVersionExists as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        for k in range(6):
            tg.start_soon(one, f"draft {k}")

    winners = [o for o in outcomes if isinstance(o, StoredGraph)]
    assert len(winners) == 1 and len(outcomes) == 6
    assert await get_graph(mesh, "assistant", "research-and-verify") == winners[0]


async def test_list_graphs_by_agent(mesh: Mesh) -> None:
    await import_graph(mesh, spec(description="v1"))
    await import_graph(mesh, spec(version=2, description="the newest"))
    await import_graph(mesh, spec(name="research", description="other graph"))
    await import_graph(mesh, spec(agent="critic", name="review", description="a critic's"))

    everything = await list_graphs(mesh)
    assert [(g.agent, g.name, g.latest, g.versions, g.description) for g in everything] == [
        ("assistant", "research", 1, [1], "other graph"),
        ("assistant", "research-and-verify", 2, [1, 2], "the newest"),
        ("critic", "review", 1, [1], "a critic's"),
    ]
    assert [g.name for g in await list_graphs(mesh, agent="critic")] == ["review"]
    assert [g.name for g in await list_graphs(mesh, agent="assistant")] == [
        "research",
        "research-and-verify",
    ]
    assert await list_graphs(mesh, agent="nobody") == []


async def test_not_found_says_what_exists(mesh: Mesh) -> None:
    with pytest.raises(GraphNotFound, match="has no stored graphs"):
        await get_graph(mesh, "assistant", "research-and-verify")
    await import_graph(mesh, spec())
    await import_graph(mesh, spec(version=2))
    with pytest.raises(GraphNotFound) as info:
        await get_graph(mesh, "assistant", "nope")
    assert "research-and-verify (versions 1, 2)" in str(info.value)
    with pytest.raises(GraphNotFound, match=r"has no version 7 \(versions: 1, 2\)"):
        await get_graph(mesh, "assistant", "research-and-verify", version=7)
    with pytest.raises(GraphNotFound):
        await get_graph(mesh, "assistant/research-and-verify", "1")


async def test_import_refuses_an_invalid_spec(mesh: Mesh) -> None:
    looping = load_graph_file(EXAMPLE)
    looping["nodes"][1]["verdicts"] = {"pass": "draft", "fail": "draft"}
    looping["nodes"] = looping["nodes"][:2]
    with pytest.raises(GraphValidationError, match="no end is reachable"):
        await import_graph(mesh, GraphSpec.model_validate(looping))
    with pytest.raises(GraphValidationError, match="cannot name a stored graph"):
        await import_graph(mesh, spec(name="team/research"))
    assert await list_graphs(mesh) == []
