from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from plait.errors import GraphValidationError
from plait.graphs.loader import load_graph, load_graph_file
from plait.graphs.spec import GraphSpec
from plait.graphs.validate import validate_graph
from plait.profiles import AgentProfile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AGENTS = {
    "assistant": AgentProfile(name="assistant", tools=["search", "fetch"], delegates=["helper"]),
    "helper": AgentProfile(name="helper", tools=["fetch"]),
    "intruder": AgentProfile(name="intruder", tools=["search"]),
}
KNOWN_TOOLS = {"search", "fetch", "rm_rf", "check_sent"}


def known(tool: str) -> bool:
    return tool in KNOWN_TOOLS


BROKEN: dict[str, Any] = {
    "name": "broken",
    "agent": "assistant",
    "entry": "start",
    "budget": {"steps": 500, "dollars": -1, "wall_seconds": math.nan},
    "nodes": [
        {"id": "start", "type": "begin"},
        {"id": "start2", "kind": "begin"},
        {
            "id": "loop",
            "type": "agent",
            "prompt": "{{ghost}} and {{item}}",
            "tools": ["search", "rm_rf"],
            "agent": "intruder",
        },
        {"id": "loop", "type": "tool", "tool": "nuke", "args": {"q": ["{{phantom.x}}"]}},
        {"id": "check", "type": "verifier", "prompt": "ok?"},
        {
            "id": "judge",
            "type": "verifier",
            "prompt": "{{loop}}",
            "verdicts": {"pass": "done", "fail": "nowhere"},
        },
        {"id": "partial", "type": "agent", "colour": "red", "next": "missing_next"},
        {"id": "done", "type": "end", "next": "loop"},
        {
            "id": "fan",
            "kind": "fan_out",
            "next": "loop",
            "specs": [
                {"kind": "map", "target_node_id": "worker"},
                {"kind": "broadcast", "target_node_id": "ghost_worker"},
                {"kind": "tee"},
            ],
        },
        {"id": "worker", "type": "agent", "prompt": "{{item}}", "agent": "stranger"},
        {"id": "odd", "type": "teleport"},
    ],
    "edges": [
        {"source": "start", "target": "loop"},
        {"source": "loop", "target": "loop"},
        {"source": "done", "target": "loop"},
        {"source": "fan", "target": "worker"},
        {"source": "nobody", "target": "nothing"},
    ],
}

EXPECTED = {
    # field errors, each with its path; bad nodes do not stop the others' checks
    "budget.dollars: input should be greater than or equal to 0",
    "budget.wall_seconds: input should be a finite number",
    "nodes[6].prompt: missing required field",
    "nodes[6].colour: unknown field",
    'nodes[10].type: unknown node type "teleport" (one of agent, verifier, human, parallel, '
    "tool, begin, end, fan_out, fan_in, subgraph, program, workflow)",
    # budget cap
    "budget.steps: 500 is over the cap of 100",
    # ids and begin/end form
    'nodes[3].id: duplicate id "loop" (first at nodes[2])',
    "nodes: a graph in begin/end form needs exactly one begin node, found 2 (nodes[0], nodes[1])",
    # routes
    'nodes[5].verdicts.fail: unknown target "nowhere"',
    'nodes[6].next: unknown target "missing_next"',
    "nodes[7].next: an end node has no successor",
    "nodes[8].next: a fan_out node dispatches through its specs, not next",
    'edges[2]: an end node has no outgoing edges ("done" -> "loop")',
    'edges[3]: a fan_out node has no real outgoing edges ("fan" -> "worker"); '
    "name its targets in its specs",
    'edges[4].source: unknown node "nobody"',
    'edges[4].target: unknown target "nothing"',
    "nodes[4].verdicts: a verifier needs at least one verdict",
    # fan-out specs
    "nodes[8].specs[0].source_node_id: map needs a source_node_id",
    "nodes[8].specs[1].count: broadcast needs a count",
    'nodes[8].specs[1].target_node_id: unknown target "ghost_worker" (did you mean "worker"?)',
    "nodes[8].specs[2].targets: tee needs at least one target",
    # templates ({{item}} is fine in nodes[9], the map target)
    'nodes[2].prompt: {{ghost}} names unknown node "ghost"',
    "nodes[2].prompt: {{item}} is only set in a map fan-out target or a parallel prompt",
    'nodes[3].args.q[0]: {{phantom.x}} names unknown node "phantom"',
    # agents and tools
    'nodes[2].agent: agent "assistant" may not use agent "intruder" (not among its delegates)',
    'nodes[2].tools[1]: agent "intruder" does not have tool "rm_rf"',
    'nodes[3].tool: unknown tool "nuke"',
    'nodes[9].agent: unknown agent "stranger"',
    # no way out
    'entry: no end is reachable from "start" (every path loops forever)',
}


def test_every_problem_is_reported_at_once() -> None:
    report = validate_graph(BROKEN, agents=AGENTS, tool_is_known=known)
    assert not report.ok
    assert report.spec is None
    assert set(report.problems) == EXPECTED
    assert len(report.problems) == len(EXPECTED)
    with pytest.raises(GraphValidationError) as info:
        report.raise_for_problems("broken.json")
    assert info.value.problems == report.problems
    assert info.value.source == "broken.json"
    assert 'nodes[5].verdicts.fail: unknown target "nowhere"' in str(info.value)


def test_unreachable_nodes_are_warnings() -> None:
    report = validate_graph(BROKEN, agents=AGENTS, tool_is_known=known)
    assert 'nodes[1]: "start2" is unreachable from "start"' in report.warnings
    assert 'nodes[9]: "worker" is unreachable from "start"' in report.warnings
    assert not any(w.startswith(("nodes[0]", "nodes[2]", "nodes[3]")) for w in report.warnings)

    data = json.loads((EXAMPLES / "research_and_verify.json").read_text())
    data["nodes"].append({"id": "orphan", "type": "agent", "prompt": "{{draft}}"})
    report = validate_graph(data)
    assert report.ok, report.problems
    assert report.warnings == ['nodes[4]: "orphan" is unreachable from "draft"']


@pytest.mark.parametrize("name", ["research_and_verify.json", "fan_out_map.json"])
def test_examples_are_clean(name: str) -> None:
    agents = {"assistant": AgentProfile(name="assistant")}
    report = validate_graph(load_graph_file(EXAMPLES / name), agents=agents, tool_is_known=known)
    assert report.ok, report.problems
    assert report.problems == report.warnings == []
    assert isinstance(report.spec, GraphSpec)
    assert report.raise_for_problems() is report.spec


def graph(nodes: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"name": "g", "entry": nodes[0]["id"], "nodes": nodes, **top}


def agent(node_id: str, prompt: str = "x", **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "agent", "prompt": prompt, **fields}


def test_entry_problems() -> None:
    assert validate_graph({"name": "g", "nodes": [agent("a")]}).problems == [
        "entry: no entry node (set entry, or add a begin node)"
    ]
    assert validate_graph(graph([agent("a")], entry="b")).problems == ['entry: unknown node "b"']
    nodes = [{"id": "b", "type": "begin"}, agent("a"), {"id": "e", "type": "end"}]
    edges = [{"source": "b", "target": "a"}, {"source": "a", "target": "e"}]
    assert validate_graph({"name": "g", "nodes": nodes, "edges": edges}).ok
    report = validate_graph({"name": "g", "entry": "a", "nodes": nodes, "edges": edges})
    assert report.problems == ['entry: "a" is not the begin node "b"']
    report = validate_graph({"name": "g", "nodes": nodes[1:], "edges": edges[1:]})
    assert report.problems == [
        "nodes: a graph in begin/end form needs exactly one begin node, found 0 (none)"
    ]


def test_a_loop_with_no_way_out_and_one_with_a_verdict_exit() -> None:
    looping = graph([agent("a", next="b"), agent("b", next="a")])
    assert validate_graph(looping).problems == [
        'entry: no end is reachable from "a" (every path loops forever)'
    ]
    exit_by_verdict = graph(
        [
            agent("a", next="v"),
            {"id": "v", "type": "verifier", "prompt": "{{a}}", "verdicts": {"fail": "a"}},
        ]
    )
    assert validate_graph(exit_by_verdict).problems == [
        'entry: no end is reachable from "a" (every path loops forever)'
    ]
    exit_by_verdict["nodes"][1]["verdicts"]["pass"] = "out"
    exit_by_verdict["nodes"].append(agent("out", "{{a}}"))
    assert validate_graph(exit_by_verdict).ok


@pytest.mark.parametrize(
    ("budget", "problem"),
    [
        (101, "budget.steps: 101 is over the cap of 100"),
        ({"steps": -2}, "budget.steps: input should be greater than or equal to 1"),
        ({"tokens": -5}, "budget.tokens: input should be greater than or equal to 0"),
        ({"retries": -1}, "budget.retries: input should be greater than or equal to 0"),
        ({"dollars": math.inf}, "budget.dollars: input should be a finite number"),
        ({"dollars": math.nan}, "budget.dollars: input should be a finite number"),
        ({"on_exhausted": "panic"}, "budget.on_exhausted: input should be 'fail' or 'escalate'"),
        ("lots", "budget: expected an object"),
    ],
)
def test_budget_problems(budget: Any, problem: str) -> None:
    assert validate_graph(graph([agent("a")], budget=budget)).problems == [problem]


def test_budget_cap_is_configurable() -> None:
    assert validate_graph(graph([agent("a")], budget=100)).ok
    report = validate_graph(graph([agent("a")], budget=100), max_steps_cap=50)
    assert report.problems == ["budget.steps: 100 is over the cap of 50"]


def test_id_problems() -> None:
    report = validate_graph(graph([agent("a.b", next="input"), agent("input")]))
    assert report.problems == [
        'nodes[0].id: "a.b" is not a valid id (letters, digits, _ and -, starting with a letter'
        " or _)",
        'nodes[1].id: "input" is reserved for templates',
    ]


def test_node_level_problems() -> None:
    nodes: list[dict[str, Any]] = [
        {"id": "t", "type": "tool", "tool": "search", "on_indeterminate": "verify", "next": "h"},
        {
            "id": "h",
            "type": "human",
            "ask": "ship?",
            "options": ["yes", "no"],
            "on_expire": "default",
            "default": "maybe",
            "next": "h2",
        },
        {
            "id": "h2",
            "type": "human",
            "ask": "?",
            "options": [],
            "on_expire": "default",
            "next": "v",
        },
        {"id": "v", "type": "verifier", "prompt": "x", "verdicts": {"looks good": "p"}},
        {"id": "p", "type": "parallel", "tasks": "ghost.urls", "prompt": "{{item}}", "next": "p2"},
        {"id": "p2", "type": "parallel", "tasks": "{{t}}", "next": "s"},
        {"id": "s", "type": "agent", "prompt": "x", "response_format": {"type": "frobnicate"}},
    ]
    report = validate_graph(graph(nodes))
    assert set(report.problems) == {
        'nodes[0].verify: the "verify" policy needs a check tool here',
        'nodes[1].default: "maybe" is not one of the options',
        "nodes[2].options: give at least one option, or leave it out",
        'nodes[2].default: on_expire "default" needs a default answer',
        "nodes[3].verdicts.looks good: a verdict is a single word",
        'nodes[4].tasks: path "ghost.urls" names unknown node "ghost"',
        'nodes[5].tasks: malformed path "{{t}}" (like researcher.urls)',
        "nodes[6].response_format: not a valid JSON schema: 'frobnicate' is not valid under any"
        " of the given schemas",
    }


def test_tools_and_agents_checks() -> None:
    nodes = [
        {"id": "t", "type": "tool", "tool": "rm_rf", "verify": "no_such_check", "next": "a"},
        agent("a", tools=["fetch"], agent="helper", next="b"),
        agent("b", tools=["search"], agent="helper", next="c"),
        {"id": "c", "type": "subgraph", "graph": "child", "agent": "intruder"},
    ]
    report = validate_graph(graph(nodes), agents=AGENTS, tool_is_known=known)
    assert report.problems == [
        'nodes[0].tool: agent "assistant" does not have tool "rm_rf"',
        'nodes[0].verify: unknown tool "no_such_check"',
        'nodes[2].tools[0]: agent "helper" does not have tool "search"',
        'nodes[3].agent: agent "assistant" may not use agent "intruder" (not among its delegates)',
    ]
    assert validate_graph(graph(nodes)).ok  # nothing to check against
    report = validate_graph(graph([agent("a")], agent="nobody"), agents=AGENTS)
    assert report.problems == ['agent: unknown agent "nobody"']


def test_template_fields_of_every_node_type_are_checked() -> None:
    nodes = [
        {"id": "b", "type": "begin"},
        {"id": "h", "type": "human", "ask": "{{x1}}"},
        {"id": "p", "type": "parallel", "tasks": ["{{x2}}", "{{input}}"], "prompt": "{{x3}}"},
        {"id": "f", "type": "fan_in", "aggregate_template": "{{x4}} {{ not a ref }}"},
        {"id": "s", "type": "subgraph", "graph": "child", "input": "{{x5?}}"},
        {"id": "e", "type": "end"},
    ]
    edges = [{"source": "b", "target": n} for n in "hpfs"] + [
        {"source": n, "target": "e"} for n in "hpfs"
    ]
    report = validate_graph({"name": "g", "nodes": nodes, "edges": edges})
    assert report.problems == [
        'nodes[1].ask: {{x1}} names unknown node "x1"',
        'nodes[2].tasks[0]: {{x2}} names unknown node "x2"',
        'nodes[2].prompt: {{x3}} names unknown node "x3"',
        'nodes[3].aggregate_template: {{x4}} names unknown node "x4"',
        'nodes[4].input: {{x5?}} names unknown node "x5"',
    ]
    assert report.warnings == [
        "nodes[3].aggregate_template: {{ not a ref }} is not a template and stays as written"
    ]


def test_not_a_graph() -> None:
    assert validate_graph([1, 2]).problems == ["(root): a graph is an object, found list"]  # type: ignore[arg-type]
    assert validate_graph({"name": "g"}).problems == ["nodes: missing required field"]
    report = validate_graph({"nodes": [], "edges": {}})
    assert report.problems == [
        "name: missing required field",
        "nodes: a graph needs at least one node",
        "edges: expected a list of edges",
    ]


def test_a_spec_is_accepted_as_input() -> None:
    spec = load_graph(EXAMPLES / "fan_out_map.json")
    assert validate_graph(spec).ok
    assert validate_graph(spec).spec == spec


def test_load_graph_yaml_and_problems(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        "name: g\nentry: a\nnodes:\n  - id: a\n    type: agent\n    prompt: hi {{input}}\n"
    )
    assert load_graph(path).node("a").type == "agent"
    bare = tmp_path / "g.graph"
    bare.write_text(path.read_text())
    assert load_graph_file(bare) == load_graph_file(path)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(graph([agent("a", next="b")])))
    with pytest.raises(GraphValidationError) as info:
        load_graph(bad)
    assert info.value.problems == ['nodes[0].next: unknown target "b"']
    assert info.value.source == str(bad)
    with pytest.raises(GraphValidationError, match="over the cap of 10"):
        load_graph(graph([agent("a")], budget=20), max_steps_cap=10)


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "broken.json",
            '{\n  "name": "g",\n  "nodes": [,]\n}',
            "(file): line 3, column 13: invalid JSON",
        ),
        ("broken.yaml", "name: g\nnodes: [\n  - x\n", "(file): line 3, column 3: invalid YAML"),
        ("broken.txt", "{\n\n  oops: [}", "(file): line 3, column 3: invalid JSON"),
        ("list.json", "[1, 2]", "(root): a graph is an object, found list"),
        ("empty.yaml", "", "(root): a graph is an object, found nothing"),
    ],
)
def test_parse_errors_name_file_and_line(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GraphValidationError) as info:
        load_graph_file(path)
    assert info.value.source == str(path)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(problem), info.value.problems
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphValidationError, match="cannot read"):
        load_graph_file(tmp_path / "nope.json")
