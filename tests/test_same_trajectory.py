"""The same graph walks the same trajectory in-session and durably.

Every example graph (``examples/*.json`` with its ``.model.yaml``) and every node-type
graph of ``tests/graphs/test_node_types.py`` runs twice with the same scripted model:
once with :func:`plait.run_graph` (resumed with :func:`plait.resume_graph` while it waits
on a person) and once as a durable run (``Runs.start`` served by a local runtime on a
SQLite mesh, answered with ``Runs.resume``). Each visit's node, visit, status, verdict,
output and whether it failed must agree, and so must the run's end: status, detail and
output. Visits inside a subgraph are compared with the durable child run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from plait.decisions import Human
from plait.graphs import GraphRun, TrajectoryStep, load_graph, resume_graph, run_graph
from plait.graphs.store import import_graph
from plait.ids import RunId
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs
from plait.runs.record import child_run_id
from plait.tools import ToolRegistry
from tests.graphs.test_node_types import (
    BEGIN_END,
    CHILD,
    HUMAN,
    PARENT,
    SCHEMA,
    TOOL_NODES,
    VERIFY,
    Recorder,
    graph,
)
from tests.runs.helpers import EXAMPLES, eventually, hosting, settle

pytestmark = pytest.mark.anyio

WAITING = ("waiting_human", "waiting_approval")


@dataclass(frozen=True)
class Case:
    """A graph, its input, the scripted model's rules, and how a person answers."""

    graph: Mapping[str, Any] | Path
    input: Any
    rules: Sequence[Mapping[str, Any]] | Path
    answers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Per waiting node, the answers given in turn."""
    tools: Callable[[], ToolRegistry] | None = None
    profile: AgentProfile | None = None
    children: Sequence[Mapping[str, Any]] = ()

    def model(self) -> ScriptedModel:
        if isinstance(self.rules, Path):
            return ScriptedModel.from_file(self.rules)
        return ScriptedModel([dict(r) for r in self.rules])


def recorder(name: str, result: Any, **flags: Any) -> Callable[[], ToolRegistry]:
    """A fresh registry of one recording tool, for each of the two runs."""
    return lambda: ToolRegistry([Recorder().make(name, result, **flags)])


NUMBER_ARGS = {"type": "object", "properties": {"n": {"type": "integer"}}}
COUNT = [{"node": "count", "text": '{"n": 3}'}]
RECORDER = AgentProfile(name="assistant", tools=["record"])
LOOKUP = AgentProfile(name="assistant", tools=["lookup"])
FAMILY = [
    {"node": "a", "text": "alpha"},
    {"node": "c1", "text": "one"},
    {"node": "c2", "text": "two"},
    {"node": "b", "text": "beta"},
]
LISTED: list[dict[str, Any]] = [
    {"id": "r", "type": "agent", "prompt": "List", "response_format": SCHEMA, "next": "p"},
    {"id": "p", "type": "parallel", "tasks": "r.urls", "prompt": "Read {{item}}"},
]
CHECKED: list[dict[str, Any]] = [
    {"id": "a", "type": "agent", "prompt": "Write. Critique: {{check?}}", "next": "check"},
    {"id": "check", "type": "verifier", "prompt": "Check {{a}}",
     "verdicts": {"pass": "finish", "fail": "a"}},
    {"id": "finish", "type": "agent", "prompt": "Publish {{a}}"},
]  # fmt: skip


def gated_tool(answer: str) -> Case:
    """The tool node whose tool needs approval, answered ``answer``."""
    return Case(
        graph(TOOL_NODES),
        "sheep",
        COUNT,
        answers={"save": [answer]},
        tools=recorder("record", {"saved": True}, parameters=NUMBER_ARGS, requires_approval=True),
        profile=RECORDER,
    )


CASES: dict[str, Case] = {
    "example-research-and-verify": Case(
        EXAMPLES / "research_and_verify.json",
        "the Q3 numbers",
        EXAMPLES / "research_and_verify.model.yaml",
        answers={"review_human": ["yes, ship it"]},
    ),
    "example-fan-out-map": Case(
        EXAMPLES / "fan_out_map.json", "Q3", EXAMPLES / "fan_out_map.model.yaml"
    ),
    "agent": Case(
        graph([{"id": "a", "type": "agent", "prompt": "Greet {{input}}."}]),
        "Bob",
        [{"node": "a", "text": "Hello, Bob."}],
    ),
    "agent-response-format": Case(
        graph(
            [
                {
                    "id": "r",
                    "type": "agent",
                    "prompt": "List.",
                    "response_format": SCHEMA,
                    "next": "u",
                },
                {"id": "u", "type": "agent", "prompt": "First: {{r.urls[0]}}"},
            ]
        ),
        None,
        [{"node": "r", "text": '{"urls": ["https://a"]}'}, {"node": "u", "text": "ok"}],
    ),
    "agent-response-format-mismatch": Case(
        graph([{"id": "r", "type": "agent", "prompt": "List.", "response_format": SCHEMA}]),
        None,
        [{"node": "r", "text": "Here are some links."}],
    ),
    "agent-tool-loop-and-verifier": Case(
        graph(CHECKED),
        None,
        [
            {
                "node": "a",
                "visit": 1,
                "round": 1,
                "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}],
            },
            {"node": "a", "visit": 1, "round": 2, "text": "draft one"},
            {"node": "check", "visit": 1, "text": "too short\nfail"},
            {"node": "a", "visit": 2, "text": "draft two"},
            {"node": "check", "text": "fine\npass"},
            {"node": "finish", "text": "published"},
        ],
        tools=recorder("lookup", {"answer": 42}, read_only=True),
        profile=LOOKUP,
    ),
    "verifier-pass": Case(
        graph(VERIFY),
        "x",
        [
            {"node": "draft", "text": "d"},
            {"node": "verify", "text": "Reads well.\nPASS"},
            {"node": "ship", "text": "shipped"},
        ],
    ),
    "verifier-no-valid-verdict": Case(
        graph(VERIFY), "x", [{"node": "draft", "text": "d"}, {"node": "verify", "text": "hm"}]
    ),
    "human": Case(
        graph(HUMAN),
        "x",
        [{"node": "a", "text": "the draft"}, {"node": "b", "text": "final"}],
        answers={"h": ["yes, ship it"]},
    ),
    "human-options": Case(
        graph(
            [
                {
                    "id": "h",
                    "type": "human",
                    "ask": "Pick for {{input}}",
                    "options": ["a", "b"],
                    "next": "w",
                },
                {"id": "w", "type": "agent", "prompt": "Chose {{h}}"},
            ]
        ),
        "me",
        [{"node": "w", "text": "noted"}],
        answers={"h": ["b"]},
    ),
    "tool": Case(
        graph(TOOL_NODES),
        "sheep",
        COUNT,
        tools=recorder("record", {"saved": True}, parameters=NUMBER_ARGS),
        profile=RECORDER,
    ),
    "tool-approved": gated_tool("approve"),
    "tool-rejected": gated_tool("reject"),
    "parallel": Case(
        graph(
            [
                {
                    "id": "p",
                    "type": "parallel",
                    "tasks": ["{{input}} prices", "{{input}} reviews"],
                    "prompt": "Look up: {{item}}",
                }
            ]
        ),
        "tea",
        [
            {"node": "p", "match": "prices", "text": "cheap", "delay_ms": 20},
            {"node": "p", "match": "reviews", "text": "loved"},
        ],
    ),
    "parallel-from-a-path": Case(
        graph(LISTED),
        None,
        [
            {"node": "r", "text": '{"urls": ["https://a", "https://b", "https://c"]}'},
            {"node": "p", "text": "summary"},
        ],
    ),
    "parallel-worker-fails": Case(
        graph([{"id": "p", "type": "parallel", "tasks": ["good", "bad"]}]),
        None,
        [{"node": "p", "match": "bad", "error": "provider melted"}, {"node": "p", "text": "ok"}],
    ),
    "parallel-worker-approval": Case(
        graph([{"id": "p", "type": "parallel", "tasks": ["one"]}]),
        None,
        [
            {"node": "p", "round": 1, "tool_calls": [{"name": "lookup", "arguments": {}}]},
            {"node": "p", "round": 2, "text": "looked"},
        ],
        answers={"p[0]": ["approve"]},
        tools=recorder("lookup", "found", read_only=True, requires_approval=True),
        profile=LOOKUP,
    ),
    "begin-end": Case(
        BEGIN_END, {"q": 1}, [{"node": "a", "text": "A"}, {"node": "b", "text": "B"}]
    ),
    "subgraph": Case(graph(PARENT), "x", FAMILY, children=[CHILD]),
    "subgraph-child-fails": Case(
        graph(PARENT),
        "x",
        [{"node": "a", "text": "alpha"}, {"node": "c1", "error": "down"}],
        children=[CHILD],
    ),
}

Step = tuple[str, int, str, str | None, Any, bool]


def steps_of(trajectory: Sequence[TrajectoryStep]) -> list[Step]:
    """What must agree of each visit. Consecutive fan-out instances of one node run
    concurrently and may commit in any order, so they are put in instance order."""

    def wave(index: int, s: TrajectoryStep) -> tuple[str, int]:
        return (s.node.partition("[")[0], -1) if "[" in s.node else (s.node, index)

    out: list[Step] = []
    for _, group in groupby(enumerate(trajectory), key=lambda pair: wave(*pair)):
        steps = [(s.node, s.visit, s.status, s.verdict, s.output, s.error is not None)
                 for _, s in group]  # fmt: skip
        out += sorted(steps, key=lambda step: (step[0], step[1]))
    return out


@dataclass
class Outcome:
    """A run's end and its trajectory, children's visits apart."""

    status: str
    detail: str | None
    output: Any
    steps: list[Step]
    children: dict[str, list[Step]]


def answer_for(case: Case, node: str, given: dict[str, int]) -> str:
    turn = given.get(node, 0)
    given[node] = turn + 1
    return case.answers[node][turn]


async def in_session(case: Case) -> Outcome:
    options: dict[str, Any] = {"model": case.model()}
    if case.tools is not None:
        options["tools"] = case.tools()
    if case.profile is not None:
        options["profiles"] = {case.profile.name: case.profile}
    if case.children:
        options["graphs"] = {c["name"]: load_graph(dict(c)) for c in case.children}
    source = case.graph if isinstance(case.graph, Path) else dict(case.graph)
    run: GraphRun = await run_graph(source, case.input, **options)
    given: dict[str, int] = {}
    while run.status in WAITING:
        assert run.waiting is not None
        run = await resume_graph(run, answer_for(case, run.waiting.node, given))
    children: dict[str, list[TrajectoryStep]] = {}
    for s in run.trajectory:
        if s.parent is not None:
            children.setdefault(s.parent, []).append(s)
    return Outcome(
        run.status,
        run.ended_detail,
        run.output,
        steps_of([s for s in run.trajectory if s.parent is None]),
        {k: steps_of(v) for k, v in children.items()},
    )


async def moved_on(runs: Runs, run_id: RunId, asked: str | None) -> bool:
    """Whether the run no longer waits on the decision ``asked``."""
    rec = await runs.get(run_id)
    return rec.waiting is None or rec.waiting.decision_id != asked


async def durably(case: Case, tmp_path: Path) -> Outcome:
    async with open_mesh(f"sqlite:///{tmp_path / 'mesh.db'}") as mesh:
        for child in case.children:
            await import_graph(mesh, load_graph(dict(child)))
        spec = load_graph(case.graph if isinstance(case.graph, Path) else dict(case.graph))
        await import_graph(mesh, spec)
        if case.profile is not None:
            await put_profile(mesh, case.profile)
        tools = case.tools() if case.tools is not None else None
        async with hosting(mesh, case.model(), tools=tools):
            runs = Runs(mesh)
            rec = await runs.start(spec.agent, spec.name, case.input)
            rec = await settle(runs, rec.run_id)
            given: dict[str, int] = {}
            while rec.status in WAITING:
                assert rec.waiting is not None
                asked = rec.waiting.decision_id
                answer = answer_for(case, rec.waiting.node, given)
                await runs.resume(rec.run_id, answer, by=Human("ana"))
                await eventually(partial(moved_on, runs, rec.run_id, asked))
                rec = await settle(runs, rec.run_id)
            trajectory = await runs.trajectory(rec.run_id)
            children: dict[str, list[Step]] = {}
            subgraphs = {n.id for n in spec.nodes if getattr(n, "type", None) == "subgraph"}
            for s in trajectory:
                if s.node in subgraphs:
                    child = await runs.trajectory(child_run_id(rec.run_id, s.node, s.visit))
                    children[s.node] = steps_of(child)
            return Outcome(
                rec.status, rec.ended_detail, await runs.output(rec), steps_of(trajectory), children
            )


@pytest.mark.parametrize("name", list(CASES))
async def test_in_session_and_durable_runs_walk_the_same_trajectory(
    name: str, tmp_path: Path
) -> None:
    case = CASES[name]
    here = await in_session(case)
    there = await durably(case, tmp_path)
    assert here.steps, "the in-session run committed no visit"
    assert there.steps == here.steps
    assert there.children == here.children
    assert len(here.children) == len(case.children)
    assert (there.status, there.detail, there.output) == (here.status, here.detail, here.output)


def test_every_example_graph_with_a_model_script_is_a_case() -> None:
    scripted = {
        p
        for p in EXAMPLES.iterdir()
        if p.suffix in (".json", ".yaml", ".yml")
        and not p.name.endswith(".model.yaml")
        and p.with_name(p.name.rsplit(".", 1)[0] + ".model.yaml").exists()
    }
    covered = {c.graph for c in CASES.values() if isinstance(c.graph, Path)}
    assert scripted and scripted <= covered, f"examples without a case: {scripted - covered}"
