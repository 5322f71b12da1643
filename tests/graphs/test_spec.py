from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from plait.errors import GraphValidationError
from plait.graphs.loader import load_graph, load_graph_file
from plait.graphs.spec import (
    NODE_TYPES,
    AgentNode,
    Budget,
    FanInNode,
    FanOutNode,
    GraphSpec,
    HumanNode,
    ParallelNode,
    SubgraphNode,
    ToolNode,
    VerifierNode,
    default_on_indeterminate,
    graph_json_schema,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def minimal() -> dict[str, Any]:
    return {"name": "g", "entry": "a", "nodes": [{"id": "a", "type": "agent", "prompt": "hi"}]}


def test_seed_example_loads_as_written() -> None:
    spec = load_graph(EXAMPLES / "research_and_verify.json")
    assert spec.name == "research-and-verify"
    assert spec.agent == "assistant"
    assert spec.entry_id == "draft"
    assert spec.node_ids == ["draft", "verify", "review_human", "publish"]
    verify = spec.node("verify")
    assert isinstance(verify, VerifierNode)
    assert verify.verdicts == {"pass": "review_human", "fail": "draft"}
    assert verify.max_attempts == 2
    assert isinstance(spec.node("review_human"), HumanNode)
    assert spec.budget == Budget()
    assert spec.budget.steps == 25


def test_helpers_follow_next_and_edges_but_not_verdicts() -> None:
    spec = load_graph(EXAMPLES / "research_and_verify.json")
    assert spec.successors("draft") == ["verify"]
    assert spec.successors("verify") == []
    assert spec.predecessors("draft") == []
    assert spec.predecessors("publish") == ["review_human"]
    assert spec.successors("publish") == []
    with pytest.raises(KeyError, match="nowhere"):
        spec.node("nowhere")
    with pytest.raises(KeyError):
        spec.successors("nowhere")


def test_kind_form_with_begin_edges_fan_out_and_fan_in_loads() -> None:
    spec = load_graph(EXAMPLES / "fan_out_map.json")
    assert spec.entry is None
    assert spec.entry_id == "begin"
    assert [spec.node(i).type for i in spec.node_ids] == [
        "begin",
        "agent",
        "fan_out",
        "agent",
        "fan_in",
        "end",
    ]
    fanout = spec.node("fanout")
    assert isinstance(fanout, FanOutNode)
    (fan,) = fanout.specs
    assert (fan.kind, fan.target_node_id, fan.source_node_id, fan.source_path) == (
        "map",
        "fetcher",
        "researcher",
        "urls",
    )
    assert fan.on_failure == "collect"
    researcher = spec.node("researcher")
    assert isinstance(researcher, AgentNode)
    assert researcher.response_format is not None
    assert researcher.response_format["properties"]["urls"]["type"] == "array"
    assert spec.successors("researcher") == ["fanout"]
    assert spec.successors("fanout") == []
    assert spec.predecessors("fanin") == ["fetcher"]
    assert isinstance(spec.node("fanin"), FanInNode)


def test_type_aliases_and_kind_are_accepted() -> None:
    spec = GraphSpec.model_validate(
        {
            "name": "g",
            "entry": "t",
            "nodes": [
                {"id": "t", "kind": "tool_call", "tool": "search", "next": "s"},
                {"id": "s", "type": "graph", "graph": "child"},
                {"id": "p", "kind": "parallel", "tasks": "t.results"},
            ],
        }
    )
    tool, sub, par = spec.nodes
    assert isinstance(tool, ToolNode) and tool.type == "tool" and tool.args == {}
    assert isinstance(sub, SubgraphNode) and sub.input == "{{input}}" and sub.version is None
    assert isinstance(par, ParallelNode) and par.prompt == "{{item}}" and par.max_concurrency == 4
    assert set(NODE_TYPES) == {
        "agent",
        "verifier",
        "human",
        "parallel",
        "tool",
        "begin",
        "end",
        "fan_out",
        "fan_in",
        "subgraph",
        "program",
        "workflow",
    }


def test_type_and_kind_that_disagree_are_refused() -> None:
    with pytest.raises(ValidationError, match="disagree"):
        GraphSpec.model_validate(
            {"name": "g", "nodes": [{"id": "a", "type": "agent", "kind": "tool", "prompt": "x"}]}
        )


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="promt"):
        GraphSpec.model_validate(
            {"name": "g", "nodes": [{"id": "a", "type": "agent", "promt": "x"}]}
        )


def test_budget_int_is_step_shorthand() -> None:
    spec = GraphSpec.model_validate({**minimal(), "budget": 40})
    assert spec.budget == Budget(steps=40)
    assert Budget.model_validate(7).steps == 7
    with pytest.raises(ValidationError):
        Budget.model_validate(True)


@pytest.mark.parametrize(
    "budget",
    [{"dollars": math.nan}, {"wall_seconds": math.inf}, {"tokens": -1}, {"steps": 0}, -3],
)
def test_budget_refuses_negative_and_non_finite(budget: Any) -> None:
    with pytest.raises(ValidationError):
        Budget.model_validate(budget)


def test_canonical_json_is_stable_across_key_order_and_spelling() -> None:
    data = json.loads((EXAMPLES / "research_and_verify.json").read_text())
    reordered = {k: data[k] for k in reversed(list(data))}
    reordered["nodes"] = [{k: n[k] for k in sorted(n, reverse=True)} for n in data["nodes"]]
    a, b = GraphSpec.model_validate(data), GraphSpec.model_validate(reordered)
    assert a.canonical_json() == b.canonical_json()
    assert a.sha256() == b.sha256()
    assert len(a.sha256()) == 64
    text = a.canonical_json()
    assert text == json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert json.loads(text)["budget"]["steps"] == 25  # defaults are included
    assert json.loads(text)["nodes"][0]["max_rounds"] == 8
    as_kinds = [{"kind" if k == "type" else k: v for k, v in n.items()} for n in data["nodes"]]
    assert GraphSpec.model_validate({**data, "nodes": as_kinds}).sha256() == a.sha256()
    changed = {**data, "budget": 30}
    assert GraphSpec.model_validate(changed).sha256() != a.sha256()


def test_default_on_indeterminate() -> None:
    spec = load_graph(EXAMPLES / "fan_out_map.json")
    assert {default_on_indeterminate(n) for n in spec.nodes} == {"retry"}
    tool = ToolNode(id="t", type="tool", tool="send_email")
    assert default_on_indeterminate(tool) == "escalate"
    assert default_on_indeterminate(tool, tool_is_read_only=True) == "retry"


def test_json_schema_accepts_both_examples_and_refuses_junk(tmp_path: Path) -> None:
    schema = graph_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in ("research_and_verify.json", "fan_out_map.json"):
        jsonschema.validate(load_graph_file(EXAMPLES / name), schema)
    jsonschema.validate({**minimal(), "budget": 10, "$schema": "graph.schema.json"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "g", "nodes": [{"id": "a", "type": "agent"}]}, schema)


def test_schema_key_is_ignored_by_the_model() -> None:
    spec = GraphSpec.model_validate({**minimal(), "$schema": "./graph.schema.json"})
    assert spec.sha256() == GraphSpec.model_validate(minimal()).sha256()


def test_entry_id_without_entry_or_begin_raises() -> None:
    spec = GraphSpec.model_validate({"name": "g", "nodes": [{"id": "a", "type": "end"}]})
    with pytest.raises(GraphValidationError, match="no entry"):
        _ = spec.entry_id


def test_lookups_follow_a_copy_with_other_nodes() -> None:
    spec = load_graph(EXAMPLES / "research_and_verify.json")
    assert spec.successors("review_human") == ["publish"]
    trimmed = spec.model_copy(update={"nodes": spec.nodes[:3]})
    assert trimmed.node_ids == ["draft", "verify", "review_human"]
    with pytest.raises(KeyError):
        trimmed.node("publish")
    assert spec.node("publish").id == "publish"
