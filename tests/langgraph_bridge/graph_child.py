"""A child process running a LangGraph graph on PlaitSaver, for the crash tests.

``python graph_child.py URL THREAD start|resume sync|async [WRITER GATE_DIR]``: ``start``
runs the graph to its interrupt, prints ``interrupted`` and its payload as JSON, then
waits to be killed; ``resume`` resumes it with ``Command(resume="yes")`` and prints
``done`` and the final state as JSON. With ``WRITER`` and ``GATE_DIR`` the saver is
fenced and named ``WRITER``; the resumed node then writes ``GATE_DIR/entered-WRITER``
and waits for ``GATE_DIR/release-WRITER`` before it returns, and a fenced put prints
``fenced`` with the error's writers and exits 3.

The graph fans out with ``Send`` (one ``work`` task per item), then runs a subgraph
whose second node asks, with ``interrupt()``, for an approval.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from plait.errors import ThreadFenced
from plait.langgraph import PlaitSaver, open_saver
from plait.mesh import open_mesh


class Outer(TypedDict, total=False):
    """The state of the graph and of its subgraph."""

    items: list[str]
    item: str
    results: Annotated[list[str], operator.add]
    log: Annotated[list[str], operator.add]
    approved: str


def _fan_out(state: Outer) -> list[Send]:
    return [Send("work", {"item": item}) for item in state["items"]]


GATE: tuple[str, Path] | None = None
"""This writer's name and the gate directory, when the test holds the resumed node."""


def _ask(state: Outer) -> Outer:
    answer = interrupt({"results": sorted(state["results"])})
    if GATE is not None:
        writer, gate = GATE
        (gate / f"entered-{writer}").touch()
        while not (gate / f"release-{writer}").exists():
            time.sleep(0.02)
    return {"approved": answer}


def _subgraph() -> Any:
    inner = StateGraph(Outer)
    inner.add_node("collect", lambda s: {"log": [f"collected {len(s['results'])}"]})
    inner.add_node("ask", _ask)
    inner.add_edge(START, "collect")
    inner.add_edge("collect", "ask")
    inner.add_edge("ask", END)
    return inner.compile()


def build() -> StateGraph[Outer]:
    """The graph: plan -> work per item (Send) -> review (subgraph) -> finish."""
    graph = StateGraph(Outer)
    graph.add_node("plan", lambda s: {"log": ["planned"]})
    graph.add_node("work", lambda s: {"results": [s["item"].upper()]})
    graph.add_node("review", _subgraph())
    graph.add_node("finish", lambda s: {"log": [f"finished {s['approved']}"]})
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", _fan_out, ["work"])
    graph.add_edge("work", "review")
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph


INPUT: Outer = {"items": ["a", "b", "c"], "results": [], "log": []}


def _say(word: str, payload: Any) -> None:
    print(word, json.dumps(payload, sort_keys=True), flush=True)


def _answer(step: str, out: dict[str, Any]) -> None:
    if step == "start":
        _say("interrupted", out["__interrupt__"][0].value)
        threading.Event().wait()  # until killed
    _say("done", {k: out[k] for k in ("results", "log", "approved")})


async def _run_async(url: str, thread: str, step: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    async with open_mesh(url) as mesh:
        graph = build().compile(checkpointer=PlaitSaver(mesh, **_fencing()))
        arg: Any = INPUT if step == "start" else Command(resume="yes")
        out = await graph.ainvoke(arg, config, durability="sync")
        if step == "start":
            _say("interrupted", out["__interrupt__"][0].value)
            await asyncio.Event().wait()  # until killed
        _answer(step, out)


def _run_sync(url: str, thread: str, step: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    with open_saver(url, **_fencing()) as saver:
        graph = build().compile(checkpointer=saver)
        arg: Any = INPUT if step == "start" else Command(resume="yes")
        _answer(step, graph.invoke(arg, config, durability="sync"))


def _fencing() -> dict[str, Any]:
    return {} if GATE is None else {"fenced": True, "writer": GATE[0]}


if __name__ == "__main__":
    url, thread, step, mode = sys.argv[1:5]
    if len(sys.argv) > 6:
        GATE = (sys.argv[5], Path(sys.argv[6]))
    try:
        if mode == "async":
            asyncio.run(_run_async(url, thread, step))
        else:
            _run_sync(url, thread, step)
    except ThreadFenced as exc:
        _say("fenced", {"writer": exc.writer, "mine": exc.mine, "message": str(exc)})
        sys.exit(3)
