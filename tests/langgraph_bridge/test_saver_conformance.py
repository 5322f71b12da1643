"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against PlaitSaver on every mesh backend: every capability detected, every test passed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from plait.langgraph import PlaitSaver
from plait.mesh import open_mesh

pytestmark = pytest.mark.anyio


async def test_conformance_suite_passes_every_capability(mesh_url: str) -> None:
    @checkpointer_test(name=f"PlaitSaver[{mesh_url.split(':')[0]}]")
    async def factory() -> AsyncIterator[PlaitSaver]:
        async with open_mesh(mesh_url) as mesh:
            yield PlaitSaver(mesh)

    report = await validate(factory)
    results = report.results
    assert {r for r, res in results.items() if res.detected} == {c.value for c in ALL_CAPABILITIES}
    failures = {cap: res.failures for cap, res in results.items() if res.tests_failed}
    assert not failures
    passed = sum(res.tests_passed for res in results.values())
    skipped = sum(res.tests_skipped for res in results.values())
    assert (passed, skipped) == (81, 0)
