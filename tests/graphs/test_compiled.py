"""The compiled graph: one per graph identity, its topology and reads, and the node-kind table."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from plait.graphs import engine
from plait.graphs.compiled import cached_graph, compile_graph
from plait.graphs.engine import NodeResult
from plait.graphs.events import NodeCommitted, RunStatusChanged, VisitUsage
from plait.graphs.nodes import KINDS
from plait.graphs.spec import NODE_TYPES, GraphSpec

PLAIT = Path(__file__).resolve().parents[2] / "plait"

DATA: dict[str, Any] = {
    "name": "compiled",
    "nodes": [
        {"id": "begin", "type": "begin"},
        {"id": "plan", "type": "agent", "prompt": "Plan {{input}}"},
        {
            "id": "fan",
            "type": "fan_out",
            "specs": [
                {"kind": "map", "target_node_id": "fetch", "source_node_id": "plan"},
                {"kind": "broadcast", "target_node_id": "count", "count": 2},
            ],
        },
        {"id": "fetch", "type": "agent", "prompt": "Fetch {{item}}"},
        {"id": "count", "type": "agent", "prompt": "Count"},
        {"id": "join", "type": "fan_in"},
        {
            "id": "check",
            "type": "verifier",
            "prompt": "{{join}}",
            "verdicts": {"pass": "end", "fail": "plan"},
        },
        {"id": "end", "type": "end"},
    ],
    "edges": [
        {"source": "begin", "target": "plan"},
        {"source": "plan", "target": "fan"},
        {"source": "fetch", "target": "join"},
        {"source": "count", "target": "join"},
        {"source": "join", "target": "check"},
    ],
}


def test_one_compiled_graph_per_identity() -> None:
    first = compile_graph(GraphSpec.model_validate(DATA))
    again = compile_graph(GraphSpec.model_validate(DATA))
    assert again is first  # another spec object, the same graph
    assert cached_graph(first.key) is first
    assert first.key == ("assistant", "compiled", 1, first.spec.sha256())
    changed = first.spec.model_copy(update={"description": "other"})
    assert changed.sha256() != first.sha256  # a copy with changes hashes afresh
    assert compile_graph(changed) is not first


def test_topology_and_reads() -> None:
    graph = compile_graph(GraphSpec.model_validate(DATA))
    assert graph.successors("plan") == ("fan",)
    assert graph.successors("check") == ()  # verdict routes are not static successors
    assert graph.predecessors("join") == ("fetch", "count")
    assert graph.incoming("plan") == ("begin", "check")  # by edge, and by a verdict
    assert graph.incoming("end") == ("check",)
    assert graph.dispatch == {"fan": ("fetch", "count")}
    assert graph.reads("fetch") == {"plan"}  # its {{item}} is an element of plan's output
    assert graph.reads("fan") == {"plan"}
    assert graph.reads("join") == {"fetch", "count"}
    assert graph.reads("end") == {"check"}
    assert graph.reads("check") == {"join"}
    assert graph.reads_run_input == {"begin", "plan"}
    with pytest.raises(KeyError, match="graph 'compiled' has no node 'nowhere'"):
        graph.node("nowhere")


def test_a_compiled_graph_is_immutable() -> None:
    graph = compile_graph(GraphSpec.model_validate(DATA))
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.sha256 = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        graph.succ["plan"] = ()  # type: ignore[index]


def test_a_spec_compiled_twice_walks_alike() -> None:
    walks = []
    for graph in (compile_graph(GraphSpec.model_validate(DATA)), compile_graph(_fresh())):
        state = engine.start(graph, "r", "topic", now=1.0)
        state, _ = engine.claim(graph, state, "begin", nonce="n", now=1.0)
        state, events = engine.complete(graph, state, "begin", NodeResult(value="t"), now=1.0)
        walks.append((state.model_dump(exclude={"graph"}), [e.as_data() for e in events]))
    assert walks[0] == walks[1]  # two compiled graphs of one topology: the same walk
    assert walks[0][0]["ready"] == ["plan"]


def _fresh() -> GraphSpec:
    """The spec of DATA, compiled afresh (a copy with a change hashes and compiles anew)."""
    return GraphSpec.model_validate(DATA).model_copy(update={"description": "again"})


def test_a_spec_carries_no_compiled_graph() -> None:
    spec = GraphSpec.model_validate(DATA)
    compile_graph(spec)
    assert "_compiled" not in spec.__dict__  # the compiled graph is passed on, not stashed


def test_every_node_type_has_one_kind_in_the_table() -> None:
    assert tuple(KINDS) == NODE_TYPES
    for name, kind in KINDS.items():
        assert kind.type == name
        assert kind.spec.model_fields["type"].annotation.__args__ == (name,)


def test_events_have_their_stored_form() -> None:
    usage = VisitUsage(input_tokens=3, output_tokens=2, dollars=0.5)
    committed = NodeCommitted("a", 1, 4, "pass", None, usage, 1.0, 2.0)
    assert committed.as_data() == {
        "type": "node.committed",
        "node": "a",
        "visit": 1,
        "seq": 4,
        "verdict": "pass",
        "error": None,
        "usage": {"input_tokens": 3, "output_tokens": 2, "dollars": 0.5},
        "started_at": 1.0,
        "ended_at": 2.0,
    }
    done = RunStatusChanged("run.done", "done", "completed", None)
    assert "waiting" not in done.as_data()
    parked = RunStatusChanged("run.waiting", "waiting_human", None, None, {"node": "h"})
    assert parked.as_data()["waiting"] == {"node": "h"}


def _node_classes() -> set[str]:
    return {kind.spec.__name__ for kind in KINDS.values()}


def test_no_isinstance_on_node_classes_outside_their_kinds() -> None:
    """A node's class is its kind module's business: elsewhere the kind is asked."""
    classes = _node_classes()
    found = []
    for path in sorted(PLAIT.rglob("*.py")):
        if (PLAIT / "graphs" / "nodes") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if names & classes:
                    found.append(f"{path.relative_to(PLAIT.parent)}:{node.lineno}")
    assert not found, found
