"""Hostile and mistaken graph files are refused with one clear problem each, never a crash."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from plait.errors import GraphValidationError
from plait.graphs.loader import MAX_FILE_BYTES, load_graph_file
from plait.graphs.problems import Problem, locate
from plait.graphs.template import MAX_TEMPLATE_CHARS, loose_braces, unclosed_references
from plait.graphs.validate import validate_graph
from plait.tools import default_registry

BOMB = "name: g\nnodes: []\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def agent(node_id: str, prompt: str = "go", **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "agent", "prompt": prompt, **extra}


def graph(nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "g", "entry": nodes[0]["id"], "nodes": nodes, **extra}


def problems_of(path: Path, text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphValidationError) as info:
        load_graph_file(path)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    assert len(BOMB) < 700
    began = time.perf_counter()
    [problem] = problems_of(tmp_path / "bomb.yaml", BOMB)
    assert time.perf_counter() - began < 0.5
    assert "aliases expand to over" in problem


def test_a_self_referring_anchor_is_refused(tmp_path: Path) -> None:
    [problem] = problems_of(tmp_path / "self.yaml", "name: g\nnodes: &n [1, *n]\n")
    assert problem.startswith("nodes[1]: line 2, column 8: an anchor refers to itself")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("dup.yaml", "name: g\nnodes: []\nname: h\n"),
        ("dup.json", '{"name": "g",\n "nodes": [],\n "name": "h"}'),
    ],
)
def test_duplicate_keys_are_refused_with_their_line(tmp_path: Path, name: str, text: str) -> None:
    [problem] = problems_of(tmp_path / name, text)
    assert 'duplicate key "name" (first on line 1)' in problem
    assert isinstance(problem, Problem) and problem.line == 3


def test_files_over_the_size_limit_are_refused(tmp_path: Path) -> None:
    text = json.dumps({"name": "g", "nodes": [], "description": "x" * MAX_FILE_BYTES})
    [problem] = problems_of(tmp_path / "big.json", text)
    assert problem == f"(file): the file is over the limit of {MAX_FILE_BYTES} bytes"


@pytest.mark.parametrize(
    ("name", "text"),
    [("deep.json", "[" * 100_000 + "]" * 100_000), ("deep.yaml", "a: " + "[" * 3000 + "]" * 3000)],
)
def test_deep_nesting_is_refused_without_recursion_error(
    tmp_path: Path, name: str, text: str
) -> None:
    [problem] = problems_of(tmp_path / name, text)
    assert problem == "(file): nested too deep to read (flatten the file)"


def test_invalid_utf8_and_lone_surrogates_are_refused(tmp_path: Path) -> None:
    [problem] = problems_of(tmp_path / "bytes.json", b'{"name": "g\xff", "nodes": []}')
    assert problem.startswith("(file): line 1, column 12: not UTF-8 (byte 0xff)")
    surrogate = load_graph_file(_write(tmp_path / "s.json", '{"name": "g\\ud800", "nodes": []}'))
    assert validate_graph(surrogate).problems == [
        "name: a string holds a lone surrogate (not valid text)"
    ]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_deeply_nested_response_format_is_refused_at_validate() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"x": schema}}
    report = validate_graph(graph([agent("a", response_format=schema)]))
    assert not report.ok
    assert report.problems[0].startswith("nodes[0].response_format.properties.x")
    assert report.problems[0].endswith("nested over 64 levels deep (flatten it)")


def test_an_unclosed_reference_is_a_problem() -> None:
    report = validate_graph(graph([agent("researcher", next="w"), agent("w", "Use {{researcher}")]))
    assert report.problems == [
        'nodes[1].prompt: {{researcher} is not closed (close the reference with "}}")'
    ]


def test_a_node_reading_its_own_output_needs_a_question_mark() -> None:
    report = validate_graph(graph([agent("draft", "Improve {{draft}}")]))
    [problem] = report.problems
    assert problem.path == "nodes[0].prompt"
    assert problem.hint == "use {{draft?}} for no output yet, or a default"
    assert validate_graph(graph([agent("draft", "Improve {{draft?}}")])).ok


def test_static_tool_args_are_checked_against_the_tools_schema() -> None:
    registry = default_registry()

    def schema(name: str) -> dict[str, Any] | None:
        return registry.get(name).parameters if name in registry else None

    bad = {"id": "t", "type": "tool", "tool": "read_file", "args": {"path": 7, "nope": 1}}
    report = validate_graph(graph([bad]), tool_schema=schema)
    assert [p.path for p in report.problems] == ["nodes[0].args", "nodes[0].args.path"]
    assert all(p.hint == 'see the parameters of tool "read_file"' for p in report.problems)
    templated = {**bad, "args": {"path": "{{input}}"}}
    assert validate_graph(graph([templated]), tool_schema=schema).ok


def test_a_typo_in_next_is_one_problem_with_a_guess_and_no_unreachable_warnings() -> None:
    ids = ["draft", "review", "edit", "check", "polish", "publish", "notify"]
    nodes = [agent(i, next=ids[k + 1] if k + 1 < len(ids) else None) for k, i in enumerate(ids)]
    nodes[0]["next"] = "reveiw"
    report = validate_graph(graph(nodes))
    assert report.problems == ['nodes[0].next: unknown target "reveiw" (did you mean "review"?)']
    assert report.problems[0].hint == 'did you mean "review"?'
    assert report.warnings == []


@pytest.mark.parametrize(
    ("node", "path", "bound"),
    [
        (agent("a", max_rounds=10**12), "nodes[0].max_rounds", "100"),
        ({"id": "a", "type": "parallel", "tasks": ["x"], "max_concurrency": 10**9},
         "nodes[0].max_concurrency", "256"),
    ],
)  # fmt: skip
def test_numeric_fields_have_upper_bounds(node: dict[str, Any], path: str, bound: str) -> None:
    assert validate_graph(graph([node])).problems == [
        f"{path}: input should be less than or equal to {bound}"
    ]


def test_budgets_have_upper_bounds() -> None:
    budget = {"tokens": 10**12, "dollars": 1e9, "wall_seconds": 1e12, "retries": 10**6}
    paths = {p.path for p in validate_graph(graph([agent("a")], budget=budget)).problems}
    assert paths == {f"budget.{k}" for k in budget}


def test_problems_are_located_in_json_and_yaml_sources() -> None:
    text = '{\n  "name": "g",\n  "nodes": [\n    {"id": "a", "next": "b"}\n  ]\n}'
    assert locate(text, "nodes[0].next") == (4, 17)
    assert locate("name: g\nnodes:\n  - id: a\n    next: b\n", "nodes[0].next") == (4, 5)
    assert locate("name: g\n", "nodes[0].next") == (1, 1)


HOSTILE_TEMPLATES = [
    "{{" * 400_000,  # every {{ once sent a search to the end of the text
    "{{a" * 300_000,  # every unclosed {{name once sliced and searched the rest
    "{{ " * 300_000,
    "{{a}" * 200_000,
]


@pytest.mark.parametrize("text", HOSTILE_TEMPLATES, ids=["braces", "names", "spaced", "half"])
def test_template_checks_take_one_pass_over_a_hostile_text(text: str) -> None:
    # Quadratic checks took 4.76 s on 20k characters, so hours on these: the suite's
    # per-test timeout fails the test long before, with no clock read here.
    loose, unclosed = loose_braces(text), unclosed_references(text)
    assert loose == []
    assert len(unclosed) == (text.count("{{a") if "a" in text else 0)


def test_a_template_over_the_cap_is_one_problem_and_under_it_is_checked() -> None:
    over = validate_graph(graph([agent("a", "x" * MAX_TEMPLATE_CHARS + "{{nowhere}}")]))
    assert [str(p) for p in over.problems] == [
        f"nodes[0].prompt: a template of {MAX_TEMPLATE_CHARS + 11} characters is over the "
        f"cap of {MAX_TEMPLATE_CHARS} (pass long text as the run's input and read it "
        "with {{input}})"
    ]
    under = validate_graph(graph([agent("a", "{{" * (MAX_TEMPLATE_CHARS // 2 - 8) + "{{b")]))
    assert any("{{b is not closed" in str(p) for p in under.problems)
