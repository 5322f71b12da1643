"""Fan-out (broadcast, tee, map), its failure policies, and fan-in, run in-session."""

from __future__ import annotations

from typing import Any

import pytest

from plait.graphs import run_graph
from plait.models import ScriptedModel

pytestmark = pytest.mark.anyio


def fan_graph(
    spec: dict[str, Any], workers: list[str], aggregate: str | None = None
) -> dict[str, Any]:
    """begin -> fan(spec) ~> workers -> join(fan_in) -> end."""
    join: dict[str, Any] = {"id": "join", "kind": "fan_in"}
    if aggregate is not None:
        join["aggregate_template"] = aggregate
    return {
        "name": "fan",
        "budget": 50,
        "nodes": [
            {"id": "begin", "kind": "begin"},
            {"id": "fan", "kind": "fan_out", "specs": [spec]},
            *[{"id": w, "kind": "agent", "prompt": f"{w} on {{{{input}}}}"} for w in workers],
            join,
            {"id": "end", "kind": "end"},
        ],
        "edges": [
            {"source": "begin", "target": "fan"},
            *[{"source": w, "target": "join"} for w in workers],
            {"source": "join", "target": "end"},
        ],
    }


def broadcast(count: int = 3, on_failure: str = "fail_fast") -> dict[str, Any]:
    spec = {"kind": "broadcast", "target_node_id": "w", "count": count, "on_failure": on_failure}
    return fan_graph(spec, ["w"])


async def test_broadcast_runs_the_target_n_times_and_fan_in_lists_their_outputs() -> None:
    model = ScriptedModel(
        [
            {"node": "w[0]", "text": "zero", "delay_ms": 30},
            {"node": "w[1]", "text": "one"},
            {"node": "w", "text": "other", "delay_ms": 10},
        ]
    )
    run = await run_graph(broadcast(3), "x", model=model)
    assert run.status == "done", run.error
    nodes = [s.node for s in run.trajectory]
    assert nodes[:2] == ["begin", "fan"]
    assert sorted(nodes[2:5]) == ["w[0]", "w[1]", "w[2]"]
    assert nodes[2] == "w[1]"  # instances run concurrently: the instant one commits first
    assert nodes[5:] == ["join", "end"]
    assert run.output == ["zero", "one", "other"]
    assert {c.context.node for c in model.calls} == {"w"}
    assert sorted(str(c.context.instance) for c in model.calls) == ["w[0]", "w[1]", "w[2]"]
    assert all(c.context.prompt == "w on x" for c in model.calls)
    assert run.trajectory[1].output == {"instances": {"w": 3}}


async def test_tee_runs_each_target_once() -> None:
    model = ScriptedModel([{"node": "x", "text": "ex"}, {"node": "y", "text": "why"}])
    spec = {"kind": "tee", "targets": ["x", "y"]}
    run = await run_graph(fan_graph(spec, ["x", "y"], aggregate="{{x}} + {{y[0]}}"), model=model)
    assert run.status == "done", run.error
    assert sorted(s.node for s in run.trajectory[2:4]) == ["x[0]", "y[0]"]
    assert run.output == '["ex"] + why'


MAP = {
    "kind": "map",
    "target_node_id": "fetch",
    "source_node_id": "researcher",
    "source_path": "found.urls",
}


def map_graph(on_failure: str = "fail_fast") -> dict[str, Any]:
    data = fan_graph(dict(MAP, on_failure=on_failure), ["fetch"])
    data["nodes"].insert(1, {"id": "researcher", "kind": "agent", "prompt": "List {{input}}",
                             "response_format": {"type": "object"}})  # fmt: skip
    data["nodes"][3]["prompt"] = "Fetch {{item}} ({{researcher.found.topic}})"
    data["edges"][0] = {"source": "begin", "target": "researcher"}
    data["edges"].insert(1, {"source": "researcher", "target": "fan"})
    return data


def map_model(urls: list[str], *extra: dict[str, Any]) -> ScriptedModel:
    import json

    listing = json.dumps({"found": {"topic": "q3", "urls": urls}})
    rules = [{"node": "researcher", "text": listing}, *extra]
    rules.append({"node": "fetch", "text": "page"})
    return ScriptedModel(rules)


async def test_map_spawns_one_instance_per_list_item() -> None:
    model = map_model(["u0", "u1", "u2"], {"node": "fetch", "match": "u1", "text": "second"})
    run = await run_graph(map_graph(), "topic", model=model)
    assert run.status == "done", run.error
    prompts = sorted(c.context.prompt for c in model.calls if c.context.node == "fetch")
    assert prompts == ["Fetch u0 (q3)", "Fetch u1 (q3)", "Fetch u2 (q3)"]
    assert run.output == ["page", "second", "page"]


async def test_an_empty_map_list_goes_straight_to_the_fan_in() -> None:
    model = map_model([])
    run = await run_graph(map_graph(), "topic", model=model)
    assert run.status == "done", run.error
    assert [s.node for s in run.trajectory] == ["begin", "researcher", "fan", "join", "end"]
    assert run.output == []
    assert all(c.context.node != "fetch" for c in model.calls)


async def test_a_map_over_something_not_a_list_fails_naming_the_path() -> None:
    data = map_graph()
    run = await run_graph(data, "t", model=ScriptedModel([{"text": '{"found": {"urls": "u"}}'}]))
    assert run.status == "failed"
    assert run.ended_detail == "template_error"
    assert run.error is not None
    assert "researcher.found.urls" in run.error
    assert "not a list" in run.error


FAILING = {"node": "w[1]", "error": "instance one broke"}
SLOW = {"node": "w", "text": "fine", "delay_ms": 40}


async def test_fail_fast_ends_the_run_at_the_first_failed_instance() -> None:
    run = await run_graph(broadcast(3, "fail_fast"), model=ScriptedModel([FAILING, SLOW]))
    assert run.status == "failed"
    assert run.ended_detail == "node_failed"
    assert run.error == "w[1]: instance one broke"
    assert [s.node for s in run.trajectory] == ["begin", "fan", "w[1]"]
    assert run.trajectory[-1].error == "instance one broke"


async def test_drain_then_fail_lets_every_sibling_finish_then_fails() -> None:
    model = ScriptedModel([FAILING, SLOW])
    run = await run_graph(broadcast(3, "drain_then_fail"), model=model)
    assert run.status == "failed"
    assert run.ended_detail == "fanin_upstream_failed"
    assert run.error == "w[1]: instance one broke"
    nodes = [s.node for s in run.trajectory]
    assert nodes[:3] == ["begin", "fan", "w[1]"]
    assert sorted(nodes[3:]) == ["w[0]", "w[2]"]  # the siblings finished; join never ran
    assert [s.output for s in run.trajectory[3:]] == ["fine", "fine"]


async def test_collect_stamps_the_error_and_the_fan_in_sees_it() -> None:
    run = await run_graph(broadcast(3, "collect"), model=ScriptedModel([FAILING, SLOW]))
    assert run.status == "done", run.error
    assert run.ended_detail == "completed"
    assert run.output == ["fine", {"instance": "w[1]", "error": "instance one broke"}, "fine"]
    assert [s.node for s in run.trajectory][-2:] == ["join", "end"]


async def test_collect_in_the_example_shape_renders_an_aggregate_template() -> None:
    model = map_model(["a", "bad"], {"node": "fetch", "match": "bad", "error": "HTTP 503"})
    data = map_graph("collect")
    data["nodes"][4]["aggregate_template"] = "{{fetch}} | first: {{fetch[0]}}"
    run = await run_graph(data, "t", model=model)
    assert run.status == "done", run.error
    assert run.output == ('["page",{"instance":"fetch[1]","error":"HTTP 503"}] | first: page')


async def test_a_fan_out_inside_a_loop_spawns_fresh_instances() -> None:
    data = broadcast(2)
    data["nodes"][4] = {"id": "end", "kind": "verifier", "prompt": "{{join}}",
                        "verdicts": {"pass": "done", "fail": "fan"}}  # fmt: skip
    data["nodes"].append({"id": "done", "kind": "agent", "prompt": "ok {{join}}"})
    model = ScriptedModel(
        [
            {"node": "w", "visit": 1, "text": "v1"},
            {"node": "w", "visit": 2, "text": "v2"},
            {"node": "end", "visit": 1, "text": "again\nfail"},
            {"node": "end", "text": "good\npass"},
            {"node": "done", "text": "finished"},
        ]
    )
    run = await run_graph(data, model=model)
    assert run.status == "done", run.error
    steps = [(s.node, s.visit) for s in run.trajectory]
    assert steps.count(("join", 1)) == 1 and steps.count(("join", 2)) == 1
    assert ("w[0]", 2) in steps and ("w[1]", 2) in steps
    assert run.trajectory[-1].prompt == 'ok ["v2","v2"]'


async def test_a_fanned_out_verifier_routes_along_its_edges() -> None:
    data = fan_graph({"kind": "broadcast", "target_node_id": "v", "count": 2}, ["v"])
    data["nodes"][2] = {"id": "v", "kind": "verifier", "prompt": "check",
                        "verdicts": {"pass": "end", "fail": "end"}}  # fmt: skip
    model = ScriptedModel([{"node": "v[0]", "text": "ok\npass"}, {"text": "no\nfail"}])
    run = await run_graph(data, model=model)
    assert run.status == "done", run.error
    assert sorted(str(s.verdict) for s in run.trajectory[2:4]) == ["fail", "pass"]
    assert run.output == ["ok\npass", "no\nfail"]
