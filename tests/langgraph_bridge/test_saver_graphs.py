"""PlaitSaver under real LangGraph graphs: an interrupt resumed after the mesh is closed
and reopened (async and sync), fenced writers, and names that look like paths."""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, TypedDict

import anyio
import pytest

pytest.importorskip("langgraph.graph")

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from plait.errors import ThreadFenced
from plait.langgraph import PlaitSaver, open_saver
from plait.mesh import open_mesh
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    answer: str


def _draft(state: State) -> dict[str, object]:
    return {"steps": ["draft"]}


def _review(state: State) -> dict[str, object]:
    answer = interrupt({"question": "approve?", "steps": state["steps"]})
    return {"steps": ["review"], "answer": answer}


def _publish(state: State) -> dict[str, object]:
    return {"steps": [f"publish:{state['answer']}"]}


def _builder() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("draft", _draft)
    builder.add_node("review", _review)
    builder.add_node("publish", _publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder


def _config(thread: str) -> dict[str, object]:
    return {"configurable": {"thread_id": thread}}


async def test_an_interrupt_resumes_after_the_mesh_is_closed_and_reopened(mesh_url: str) -> None:
    config = _config("review/1")
    async with open_mesh(mesh_url) as mesh:
        graph = _builder().compile(checkpointer=PlaitSaver(mesh))
        first = await graph.ainvoke({"steps": [], "answer": ""}, config, durability="sync")
        assert first["__interrupt__"][0].value == {"question": "approve?", "steps": ["draft"]}
        if mesh_url.startswith("memory"):
            resumed = await graph.ainvoke(Command(resume="yes"), config, durability="sync")
    if not mesh_url.startswith("memory"):
        async with open_mesh(mesh_url) as mesh:
            graph = _builder().compile(checkpointer=PlaitSaver(mesh))
            state = await graph.aget_state(config)
            assert state.next == ("review",)
            resumed = await graph.ainvoke(Command(resume="yes"), config, durability="sync")
            history = [s async for s in graph.aget_state_history(config)]
            assert len(history) >= 5
    assert resumed["steps"] == ["draft", "review", "publish:yes"]
    assert resumed["answer"] == "yes"


def test_sync_invoke_and_stream_resume_across_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    config = _config("sync-thread")
    with open_saver(url) as saver:
        graph = _builder().compile(checkpointer=saver)
        first = graph.invoke({"steps": [], "answer": ""}, config)
        assert "__interrupt__" in first
    with open_saver(url) as saver:
        graph = _builder().compile(checkpointer=saver)
        chunks = list(graph.stream(Command(resume="ok"), config, stream_mode="values"))
        assert chunks[-1]["steps"] == ["draft", "review", "publish:ok"]
        assert saver.get_tuple(config) is not None
        assert len(list(saver.list(config))) >= 5


async def test_sync_calls_on_the_mesh_loop_raise_instead_of_hanging(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        saver = PlaitSaver(mesh)
        with pytest.raises(RuntimeError, match="synchronous calls are not allowed"):
            saver.get_tuple(_config("t"))
        # from another thread the sync methods work
        assert await asyncio.to_thread(saver.get_tuple, _config("t")) is None


def _gated_builder(
    entered: dict[str, asyncio.Event], release: dict[str, asyncio.Event]
) -> StateGraph[State]:
    """The review graph whose review waits, once answered, until the test releases it."""

    async def review(state: State) -> dict[str, object]:
        answer = interrupt({"question": "approve?"})
        entered[answer].set()
        await release[answer].wait()
        return {"steps": ["review"], "answer": answer}

    builder = StateGraph(State)
    builder.add_node("draft", _draft)
    builder.add_node("review", review)
    builder.add_node("publish", _publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder


async def test_two_fenced_writers_resuming_one_thread_one_wins(mesh_url: str) -> None:
    config = _config("fenced")
    entered = {w: asyncio.Event() for w in "ab"}
    release = {w: asyncio.Event() for w in "ab"}
    async with open_mesh(mesh_url) as mesh:
        start = _gated_builder(entered, release).compile(checkpointer=PlaitSaver(mesh, fenced=True))
        await start.ainvoke({"steps": [], "answer": ""}, config, durability="sync")
        graph_a = _gated_builder(entered, release).compile(
            checkpointer=PlaitSaver(mesh, fenced=True, writer="worker-a")
        )
        graph_b = _gated_builder(entered, release).compile(
            checkpointer=PlaitSaver(mesh, fenced=True, writer="worker-b")
        )
        run_a = asyncio.create_task(graph_a.ainvoke(Command(resume="a"), config, durability="sync"))
        run_b = asyncio.create_task(graph_b.ainvoke(Command(resume="b"), config, durability="sync"))
        # both resumed from the same head and are inside the review before either writes
        with anyio.fail_after(scaled(30)):
            await entered["a"].wait()
            await entered["b"].wait()
        release["a"].set()
        done = await run_a
        assert done["answer"] == "a"
        release["b"].set()
        with pytest.raises(ThreadFenced) as caught:
            await run_b
        assert caught.value.writer == "worker-a"
        assert caught.value.mine == "worker-b"
        assert caught.value.thread_id == "fenced"
        assert "worker-a" in str(caught.value)
        assert (await graph_a.aget_state(config)).values["answer"] == "a"
        # the loser reloads the head, and may then write again
        assert (await graph_b.aget_state(config)).values["answer"] == "a"
        await graph_b.aupdate_state(config, {"answer": "b-after-reload"})
        assert (await graph_a.aget_state(config)).values["answer"] == "b-after-reload"


async def test_unfenced_writers_both_write(mesh_url: str) -> None:
    config = _config("open")
    async with open_mesh(mesh_url) as mesh:
        graph = _builder().compile(checkpointer=PlaitSaver(mesh))
        await graph.ainvoke({"steps": [], "answer": ""}, config, durability="sync")
        other = _builder().compile(checkpointer=PlaitSaver(mesh))
        await graph.ainvoke(Command(resume="a"), config, durability="sync")
        await other.aupdate_state(config, {"answer": "b"})
        assert (await graph.aget_state(config)).values["answer"] == "b"


async def test_thread_ids_that_look_like_paths_stay_apart(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        saver = PlaitSaver(mesh)
        graph = _builder().compile(checkpointer=saver)
        for thread in ("a", "a/b", "a%2Fb", "a/"):
            await graph.ainvoke({"steps": [], "answer": ""}, _config(thread), durability="sync")
        await graph.ainvoke(Command(resume="only-a/b"), _config("a/b"), durability="sync")
        assert (await graph.aget_state(_config("a"))).next == ("review",)
        assert (await graph.aget_state(_config("a/b"))).values["answer"] == "only-a/b"
        assert (await graph.aget_state(_config("a%2Fb"))).next == ("review",)
        a_only = [t async for t in saver.alist(_config("a"))]
        assert {t.config["configurable"]["thread_id"] for t in a_only} == {"a"}
        await saver.adelete_thread("a")
        assert await saver.aget_tuple(_config("a")) is None
        assert await saver.aget_tuple(_config("a/b")) is not None
        assert await saver.aget_tuple(_config("a/")) is not None


async def test_put_writes_keeps_the_first_write_of_a_task_index(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        saver = PlaitSaver(mesh)
        graph = _builder().compile(checkpointer=saver)
        await graph.ainvoke({"steps": [], "answer": ""}, _config("w"), durability="sync")
        head = await saver.aget_tuple(_config("w"))
        assert head is not None
        before = len(head.pending_writes or [])
        await saver.aput_writes(head.config, [("steps", ["x"]), ("answer", "1")], "task-1")
        await saver.aput_writes(head.config, [("steps", ["y"]), ("answer", "2")], "task-1")
        again = await saver.aget_tuple(head.config)
        assert again is not None
        mine = [w for w in again.pending_writes or [] if w[0] == "task-1"]
        assert mine == [("task-1", "steps", ["x"]), ("task-1", "answer", "1")]
        assert len(again.pending_writes or []) == before + 2
