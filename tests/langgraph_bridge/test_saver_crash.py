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


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def shared_mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A mesh URL that other processes open too: SQLite, Redis and PostgreSQL (not
    memory)."""
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


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_fenced_processes_resuming_one_thread_one_wins(
    shared_mesh_url: str, mode: str, tmp_path: Path
) -> None:
    thread = f"fenced/{mode}"
    argv = [sys.executable, str(CHILD), shared_mesh_url, thread]
    with LoggedProcess([*argv, "start", mode], tmp_path / "start.log", cwd=ROOT) as first:
        _wait_for_line(first, "interrupted", 60)
        first.sigkill()
    gate = tmp_path / "gate"
    gate.mkdir()
    with (
        LoggedProcess(
            [*argv, "resume", mode, "worker-a", str(gate)], tmp_path / "a.log", cwd=ROOT
        ) as a,
        LoggedProcess(
            [*argv, "resume", mode, "worker-b", str(gate)], tmp_path / "b.log", cwd=ROOT
        ) as b,
    ):
        # both resumed from the same head and are inside the node before either writes
        _wait_for_file(gate / "entered-worker-a", a, 60)
        _wait_for_file(gate / "entered-worker-b", b, 60)
        (gate / "release-worker-a").touch()
        assert a.wait(60) == 0, a.text()[-3000:]
        assert _wait_for_line(a, "done", 1)["approved"] == "yes"
        (gate / "release-worker-b").touch()
        assert b.wait(60) == 3, b.text()[-3000:]
        fenced = _wait_for_line(b, "fenced", 1)
    assert fenced["writer"] == "worker-a"
    assert fenced["mine"] == "worker-b"
    assert "another writer, 'worker-a'" in str(fenced["message"])


def _wait_for_file(path: Path, process: LoggedProcess, timeout: float) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not path.exists():
        assert process.alive(), process.text()[-3000:]
        assert time.monotonic() < deadline, f"no {path.name} within {timeout}s"
        time.sleep(0.05)  # polling for the child's marker until the deadline
