"""A LangGraph graph with Send fan-out, a subgraph and an interrupt, its process
SIGKILLed while it waits, resumed by another process from the mesh: sync and async."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests._support.meshes import make_url_factory
from tests._support.processes import LoggedProcess
from tests._support.timing import scaled
from tests.langgraph_bridge.graph_child import INPUT, build

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("graph_child.py")
ROOT = Path(__file__).resolve().parents[2]


def _wait_for_line(process: LoggedProcess, word: str, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        for line in process.text().splitlines():
            if line.startswith(word + " "):
                payload: dict[str, object] = json.loads(line[len(word) + 1 :])
                return payload
        assert process.alive() or word == "done", process.text()[-3000:]
        time.sleep(0.05)  # polling the child's log until the deadline
    raise AssertionError(f"no {word!r} line within {timeout}s:\n{process.text()[-3000:]}")


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def shared_mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A mesh URL that other processes open too: SQLite and Redis (not memory)."""
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_killed_graph_resumes_in_another_process(
    shared_mesh_url: str, mode: str, tmp_path: Path
) -> None:
    mesh_url = shared_mesh_url
    thread = f"crash/{mode}"
    argv = [sys.executable, str(CHILD), mesh_url, thread]
    with LoggedProcess([*argv, "start", mode], tmp_path / "start.log", cwd=ROOT) as first:
        asked = _wait_for_line(first, "interrupted", 60)
        assert asked == {"results": ["A", "B", "C"]}
        first.sigkill()
    with LoggedProcess([*argv, "resume", mode], tmp_path / "resume.log", cwd=ROOT) as second:
        assert second.wait(60) == 0, second.text()[-3000:]
        done = _wait_for_line(second, "done", 1)
    assert done == _uninterrupted_answer()
    assert done["approved"] == "yes"


def _uninterrupted_answer() -> dict[str, object]:
    """What the graph ends with on LangGraph's own InMemorySaver, in one process."""
    graph = build().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    graph.invoke(INPUT, config)
    out = graph.invoke(Command(resume="yes"), config)
    return {k: out[k] for k in ("results", "log", "approved")}
