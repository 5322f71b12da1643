"""In-session streaming: ``run_graph(..., on_event=)`` and ``async for event in
graph.stream(input)`` give each model reply in pieces as it streams, each committed
visit, and last the run."""

from __future__ import annotations

import pytest

from plait import Graph, SessionEvent, run_graph
from plait.models import ScriptedModel

pytestmark = pytest.mark.anyio

TEXT = "".join(f"p{n} " for n in range(50))
GRAPH = {
    "name": "two",
    "agent": "assistant",
    "entry": "draft",
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft", "next": "polish"},
        {"id": "polish", "type": "agent", "prompt": "Polish {{draft}}"},
    ],
}


def model() -> ScriptedModel:
    return ScriptedModel(
        [{"node": "draft", "text": TEXT, "chunks": 50}, {"node": "polish", "text": "done."}]
    )


async def test_on_event_gets_the_pieces_then_the_step_then_the_end() -> None:
    events: list[SessionEvent] = []
    run = await run_graph(GRAPH, "x", model=model(), on_event=events.append)
    assert run.status == "done" and run.output == "done."
    kinds = [(e.kind, e.node) for e in events]
    assert kinds == [("delta", "draft")] * 50 + [
        ("step", "draft"),
        ("delta", "polish"),
        ("step", "polish"),
        ("end", None),
    ]
    assert "".join(e.text or "" for e in events[:50]) == TEXT == run.trajectory[0].output
    assert events[-1].run is run


async def test_graph_stream_yields_as_the_run_goes() -> None:
    graph = Graph("streamed")
    graph.agent("draft", "Draft")

    seen = [event async for event in graph.stream("x", model=model())]
    pieces = [e.text for e in seen if e.kind == "delta" and e.node == "draft"]
    assert "".join(p or "" for p in pieces) == TEXT and len(pieces) == 50
    assert seen[-1].kind == "end" and seen[-1].run is not None
    assert seen[-1].run.output == TEXT


async def test_a_failed_run_ends_the_stream_and_bad_input_raises_from_it() -> None:
    graph = Graph("broken")
    graph.agent("draft", "Draft")
    seen = [e async for e in graph.stream("x", model=ScriptedModel([{"node": "no", "text": "?"}]))]
    assert [e.kind for e in seen] == ["step", "end"]  # the failed visit, then the end
    assert seen[-1].run is not None and seen[-1].run.status == "failed"
    with pytest.raises(TypeError, match="no_such_option"):
        async for _ in graph.stream("x", no_such_option=1):
            pass
