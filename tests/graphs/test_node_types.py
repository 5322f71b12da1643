"""Every node type, run in-session with a scripted model: agent, verifier, human, tool,
parallel, begin/end and subgraph."""

from __future__ import annotations

from typing import Any

import pytest

from plait.errors import GraphError, GraphValidationError
from plait.graphs import load_graph, resume_graph, run_graph
from plait.models import Message, ScriptedModel
from plait.profiles import AgentProfile
from plait.tools import Tool, ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.anyio


def graph(nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "g", "nodes": nodes, **extra}
    if "edges" not in extra:
        data.setdefault("entry", nodes[0]["id"])
    return data


class Recorder:
    """Tools whose handlers record each call's arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def make(self, name: str, result: Any, **flags: Any) -> Tool:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
            self.calls.append((name, args))
            return result

        parameters = flags.pop("parameters", None)
        return tool(name, description=f"the {name} tool", parameters=parameters, **flags)(handler)


def user_prompts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


# -- agent -------------------------------------------------------------------------


async def test_agent_renders_its_prompt_and_its_reply_is_the_output() -> None:
    model = ScriptedModel([{"node": "a", "text": "Hello, Bob."}])
    run = await run_graph(
        graph([{"id": "a", "type": "agent", "prompt": "Greet {{input}}."}]), "Bob", model=model
    )
    assert (run.status, run.ended_detail, run.output) == ("done", "completed", "Hello, Bob.")
    assert [(s.node, s.visit, s.prompt, s.output) for s in run.trajectory] == [
        ("a", 1, "Greet Bob.", "Hello, Bob.")
    ]
    (call,) = model.calls
    assert call.context.node == "a"
    assert call.context.run_id == run.run_id
    assert [m.role for m in call.messages] == ["system", "user"]
    assert call.messages[-1].content == "Greet Bob."
    assert run.usage.steps == 1
    assert run.usage.output_tokens == 2


SCHEMA = {
    "type": "object",
    "properties": {"urls": {"type": "array", "items": {"type": "string"}}},
    "required": ["urls"],
}


async def test_response_format_is_sent_parsed_and_validated() -> None:
    model = ScriptedModel([{"node": "r", "text": '```json\n{"urls": ["https://a"]}\n```'}])
    nodes: list[dict[str, Any]] = [
        {"id": "r", "type": "agent", "prompt": "List.", "response_format": SCHEMA, "next": "u"},
        {"id": "u", "type": "agent", "prompt": "First: {{r.urls[0]}}"},
    ]
    model.rules += ScriptedModel([{"node": "u", "text": "ok"}]).rules
    run = await run_graph(graph(nodes), model=model)
    assert run.status == "done"
    assert run.trajectory[0].output == {"urls": ["https://a"]}
    assert model.calls[0].response_format == SCHEMA
    assert model.calls[1].response_format is None
    assert run.trajectory[1].prompt == "First: https://a"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ('{"urls": "https://a"}', "does not match the response_format at urls"),
        ("Here are some links.", "is not the JSON the response_format asks for"),
    ],
)
async def test_a_reply_that_does_not_match_the_response_format_fails_the_run(
    reply: str, message: str
) -> None:
    model = ScriptedModel([{"node": "r", "text": reply}])
    nodes = [{"id": "r", "type": "agent", "prompt": "List.", "response_format": SCHEMA}]
    run = await run_graph(graph(nodes), model=model)
    assert run.status == "failed"
    assert run.ended_detail == "node_failed"
    assert run.error is not None
    assert run.error.startswith("r: ")
    assert message in run.error
    assert run.output is None
    assert run.trajectory[0].error == run.error.removeprefix("r: ")


async def test_a_tool_loop_and_its_history_carry_over_to_the_next_visit() -> None:
    rec = Recorder()
    tools = ToolRegistry([rec.make("lookup", {"answer": 42}, read_only=True)])
    profile = AgentProfile(name="assistant", tools=["lookup"], system_prompt="Be brief.")
    model = ScriptedModel(
        [
            {"node": "a", "visit": 1, "round": 1,
             "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
            {"node": "a", "visit": 1, "round": 2, "text": "draft one"},
            {"node": "check", "visit": 1, "text": "too short\nfail"},
            {"node": "a", "visit": 2, "text": "draft two"},
            {"node": "check", "text": "fine\npass"},
            {"node": "finish", "text": "published"},
        ]
    )  # fmt: skip
    nodes: list[dict[str, Any]] = [
        {"id": "a", "type": "agent", "prompt": "Write. Critique: {{check?}}", "next": "check"},
        {
            "id": "check",
            "type": "verifier",
            "prompt": "Check {{a}}",
            "verdicts": {"pass": "finish", "fail": "a"},
        },
        {"id": "finish", "type": "agent", "prompt": "Publish {{a}}"},
    ]
    run = await run_graph(graph(nodes), model=model, tools=tools, profiles={"assistant": profile})
    assert run.status == "done", run.error
    assert run.output == "published"
    assert rec.calls == [("lookup", {"q": "x"})]
    assert [(s.node, s.visit, s.output) for s in run.trajectory] == [
        ("a", 1, "draft one"),
        ("check", 1, "too short\nfail"),
        ("a", 2, "draft two"),
        ("check", 2, "fine\npass"),
        ("finish", 1, "published"),
    ]
    a_calls = [c for c in model.calls if c.context.node == "a"]
    assert [(c.context.visit, c.round) for c in a_calls] == [(1, 1), (1, 2), (2, 1)]
    assert [t.name for t in a_calls[0].tools] == ["lookup"]
    round_two = a_calls[1].messages
    assert [m.role for m in round_two] == ["system", "user", "assistant", "tool"]
    assert round_two[2].tool_calls[0].name == "lookup"
    assert round_two[3].content == '{"answer": 42}'
    assert round_two[3].tool_call_id == round_two[2].tool_calls[0].id
    # The second visit sees the whole first visit, then its own prompt with the critique.
    second = a_calls[2].messages
    assert second[:4] == round_two
    assert [m.role for m in second[4:]] == ["assistant", "user"]
    assert second[4].content == "draft one"
    assert second[5].content == "Write. Critique: too short\nfail"
    assert sum(m.role == "system" for m in second) == 1


async def test_an_agent_that_keeps_calling_tools_fails_after_max_rounds() -> None:
    rec = Recorder()
    tools = ToolRegistry([rec.make("lookup", "r", read_only=True)])
    profile = AgentProfile(name="assistant", tools=["lookup"])
    model = ScriptedModel([{"tool_calls": [{"name": "lookup"}]}])
    nodes = [{"id": "a", "type": "agent", "prompt": "go", "max_rounds": 3}]
    run = await run_graph(graph(nodes), model=model, tools=tools, profiles={"assistant": profile})
    assert run.status == "failed"
    assert run.error is not None and "still called tools after 3 rounds" in run.error
    assert len(rec.calls) == 3


# -- verifier ----------------------------------------------------------------------


VERIFY: list[dict[str, Any]] = [
    {"id": "draft", "type": "agent", "prompt": "Write {{input}}", "next": "verify"},
    {
        "id": "verify",
        "type": "verifier",
        "prompt": "Review {{draft}}",
        "verdicts": {"pass": "ship", "fail": "draft"},
    },
    {"id": "ship", "type": "agent", "prompt": "Ship {{draft}}"},
]


@pytest.mark.parametrize(
    "reply",
    ["It reads well, no issues.", "Could be pass or fail.\npass fail", "ok\nverdict: passed"],
)
async def test_a_reply_without_one_valid_verdict_is_asked_again_then_fails(reply: str) -> None:
    model = ScriptedModel([{"node": "draft", "text": "d"}, {"node": "verify", "text": reply}])
    run = await run_graph(graph(VERIFY), "x", model=model)
    assert run.status == "failed"
    assert run.ended_detail == "no_valid_verdict"
    assert run.error is not None and "no valid verdict after 2 tries" in run.error
    verify_calls = [c for c in model.calls if c.context.node == "verify"]
    assert len(verify_calls) == 2
    reask = verify_calls[1].messages
    assert reask[-1].role == "user"
    assert reask[-1].content.endswith("holding exactly one of: pass, fail.")
    assert reask[-2].content == reply
    assert [s.node for s in run.trajectory] == ["draft", "verify"]
    assert run.trajectory[-1].verdict is None


async def test_a_verdict_is_the_one_verdict_word_on_the_last_line() -> None:
    model = ScriptedModel(
        [
            {"node": "draft", "text": "d"},
            {"node": "verify", "text": "Fails nothing; passes all.\n\n  Verdict: PASS.  \n"},
            {"node": "ship", "text": "shipped"},
        ]
    )
    run = await run_graph(graph(VERIFY), "x", model=model)
    assert run.status == "done"
    assert run.trajectory[1].verdict == "pass"
    assert len([c for c in model.calls if c.context.node == "verify"]) == 1


# -- human -------------------------------------------------------------------------

HUMAN: list[dict[str, Any]] = [
    {"id": "a", "type": "agent", "prompt": "Draft {{input}}", "next": "h"},
    {"id": "h", "type": "human", "ask": "Approve?\n\n{{a}}", "next": "b"},
    {"id": "b", "type": "agent", "prompt": "Final: {{a}} / {{h}}"},
]


def human_model() -> ScriptedModel:
    return ScriptedModel([{"node": "a", "text": "the draft"}, {"node": "b", "text": "final"}])


async def test_a_human_node_parks_the_run_with_its_rendered_ask() -> None:
    model = human_model()
    run = await run_graph(graph(HUMAN), "x", model=model)
    assert run.status == "waiting_human"
    assert run.waiting is not None
    assert (run.waiting.node, run.waiting.kind) == ("h", "human")
    assert run.waiting.ask == "Approve?\n\nthe draft"
    assert run.output is None
    assert run.ended_detail is None
    assert [s.node for s in run.trajectory] == ["a"]

    resumed = await resume_graph(run, "yes, ship it", graph=graph(HUMAN), model=model)
    assert resumed.status == "done"
    assert resumed.output == "final"
    assert [(s.node, s.visit) for s in resumed.trajectory] == [("a", 1), ("h", 1), ("b", 1)]
    assert resumed.trajectory[1].output == "yes, ship it"
    assert resumed.trajectory[2].prompt == "Final: the draft / yes, ship it"
    assert [c.context.node for c in model.calls] == ["a", "b"]


async def test_a_human_answer_given_up_front_does_not_park() -> None:
    run = await run_graph(graph(HUMAN), "x", model=human_model(), answers={"h": "go"})
    assert run.status == "done"
    assert run.trajectory[2].prompt == "Final: the draft / go"


async def test_resume_of_a_run_that_waits_on_nothing_is_refused() -> None:
    run = await run_graph(graph(HUMAN), "x", model=human_model(), answers={"h": "go"})
    with pytest.raises(GraphError, match="waits on no one"):
        await resume_graph(run, "again", graph=graph(HUMAN), model=human_model())


async def test_a_human_ask_offers_its_options() -> None:
    nodes = [{"id": "h", "type": "human", "ask": "Pick for {{input}}", "options": ["a", "b"]}]
    run = await run_graph(graph(nodes), "me")
    assert run.waiting is not None
    assert run.waiting.options == ["a", "b"]
    assert run.waiting.ask == "Pick for me"


# -- tool --------------------------------------------------------------------------

NUMBER_ARGS = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["n"],
}


def tool_setup(**flags: Any) -> tuple[Recorder, ToolRegistry, dict[str, AgentProfile]]:
    rec = Recorder()
    registry = ToolRegistry([rec.make("record", {"saved": True}, parameters=NUMBER_ARGS, **flags)])
    pre = ["record"] if flags.pop("pre", False) else []
    profile = AgentProfile(name="assistant", tools=["record"], pre_approved=pre)
    return rec, registry, {"assistant": profile}


TOOL_NODES: list[dict[str, Any]] = [
    {
        "id": "count",
        "type": "agent",
        "prompt": "Count {{input}}",
        "response_format": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "next": "save",
    },
    {"id": "save", "type": "tool", "tool": "record",
     "args": {"n": "{{count.n}}", "note": "n={{count.n}}"}},
]  # fmt: skip


def count_model() -> ScriptedModel:
    return ScriptedModel([{"node": "count", "text": '{"n": 3}'}])


async def test_a_tool_node_calls_its_tool_with_templated_raw_typed_args() -> None:
    rec, registry, profiles = tool_setup()
    run = await run_graph(
        graph(TOOL_NODES), "sheep", model=count_model(), tools=registry, profiles=profiles
    )
    assert run.status == "done", run.error
    assert rec.calls == [("record", {"n": 3, "note": "n=3"})]
    assert run.output == {"saved": True}
    assert run.trajectory[-1].node == "save"


async def test_a_tool_needing_approval_parks_and_rejection_fails_the_run() -> None:
    rec, registry, profiles = tool_setup(requires_approval=True)
    opts: dict[str, Any] = {"model": count_model(), "tools": registry, "profiles": profiles}
    run = await run_graph(graph(TOOL_NODES), "sheep", **opts)
    assert run.status == "waiting_approval"
    assert run.waiting is not None
    assert (run.waiting.kind, run.waiting.node, run.waiting.tool) == ("approval", "save", "record")
    assert "record" in run.waiting.ask
    assert rec.calls == []

    rejected = await resume_graph(run, "reject", graph=graph(TOOL_NODES), **opts)
    assert rejected.status == "failed"
    assert rejected.ended_detail == "tool_execution_failed"
    assert rejected.error is not None and "rejected" in rejected.error
    assert rec.calls == []

    approved = await resume_graph(run, "approve", graph=graph(TOOL_NODES), **opts)
    assert approved.status == "done"
    assert approved.output == {"saved": True}
    assert rec.calls == [("record", {"n": 3, "note": "n=3"})]


async def test_approve_tools_lets_a_gated_tool_run() -> None:
    rec, registry, profiles = tool_setup(requires_approval=True)
    run = await run_graph(
        graph(TOOL_NODES),
        "s",
        model=count_model(),
        tools=registry,
        profiles=profiles,
        approve_tools=True,
    )
    assert run.status == "done"
    assert len(rec.calls) == 1


async def test_a_tool_the_agent_does_not_have_fails_validation_and_the_run() -> None:
    rec, registry, _ = tool_setup()
    without = {"assistant": AgentProfile(name="assistant", tools=[])}
    with pytest.raises(GraphValidationError, match='agent "assistant" does not have tool'):
        load_graph(graph(TOOL_NODES), agents=without)
    run = await run_graph(
        graph(TOOL_NODES), "s", model=count_model(), tools=registry, profiles=without
    )
    assert run.status == "failed"
    assert run.error is not None and "does not have tool 'record'" in run.error
    assert rec.calls == []


async def test_tool_arguments_that_break_the_schema_fail_the_node() -> None:
    rec, registry, profiles = tool_setup()
    model = ScriptedModel([{"node": "count", "text": '{"n": "three"}'}])
    nodes = [dict(TOOL_NODES[0], response_format={"type": "object"}), TOOL_NODES[1]]
    run = await run_graph(graph(nodes), "s", model=model, tools=registry, profiles=profiles)
    assert run.status == "failed"
    assert run.error is not None and "args.n" in run.error
    assert rec.calls == []


# -- parallel ----------------------------------------------------------------------


def worker_setup() -> tuple[Recorder, ToolRegistry, dict[str, AgentProfile]]:
    rec = Recorder()
    registry = ToolRegistry(
        [rec.make("lookup", "found", read_only=True), rec.make("write_note", "written")]
    )
    profile = AgentProfile(name="assistant", tools=["lookup", "write_note"])
    return rec, registry, {"assistant": profile}


async def test_parallel_runs_a_worker_per_task_template() -> None:
    model = ScriptedModel(
        [
            {"node": "p", "match": "prices", "text": "cheap", "delay_ms": 20},
            {"node": "p", "match": "reviews", "text": "loved"},
        ]
    )
    nodes = [
        {"id": "p", "type": "parallel", "tasks": ["{{input}} prices", "{{input}} reviews"],
         "prompt": "Look up: {{item}}"},
    ]  # fmt: skip
    run = await run_graph(graph(nodes), "tea", model=model)
    assert run.status == "done", run.error
    assert run.output == "## Task 1: tea prices\ncheap\n\n## Task 2: tea reviews\nloved"
    assert sorted(c.context.prompt for c in model.calls) == [
        "Look up: tea prices",
        "Look up: tea reviews",
    ]
    assert {c.context.instance for c in model.calls} == {"p[0]", "p[1]"}


async def test_parallel_tasks_from_a_path_into_an_upstream_output() -> None:
    model = ScriptedModel(
        [
            {"node": "r", "text": '{"urls": ["https://a", "https://b", "https://c"]}'},
            {"node": "p", "text": "summary"},
        ]
    )
    nodes: list[dict[str, Any]] = [
        {"id": "r", "type": "agent", "prompt": "List", "response_format": SCHEMA, "next": "p"},
        {"id": "p", "type": "parallel", "tasks": "r.urls", "prompt": "Read {{item}}"},
    ]
    run = await run_graph(graph(nodes), model=model)
    assert run.status == "done", run.error
    prompts = sorted(c.context.prompt for c in model.calls if c.context.node == "p")
    assert prompts == ["Read https://a", "Read https://b", "Read https://c"]
    assert run.output.count("summary") == 3


async def test_parallel_tasks_from_the_input() -> None:
    model = ScriptedModel([{"node": "p", "text": "ok"}])
    nodes = [{"id": "p", "type": "parallel", "tasks": "input.topics", "prompt": "On {{item}}"}]
    run = await run_graph(graph(nodes), {"topics": ["x", "y"]}, model=model)
    assert run.status == "done", run.error
    assert sorted(c.context.prompt for c in model.calls) == ["On x", "On y"]


async def test_parallel_workers_get_read_only_tools_and_a_refusal_for_others() -> None:
    rec, registry, profiles = worker_setup()
    model = ScriptedModel(
        [
            {"node": "p", "round": 1, "tool_calls": [{"name": "write_note", "arguments": {}}]},
            {"node": "p", "round": 2, "text": "could not write"},
        ]
    )
    nodes = [{"id": "p", "type": "parallel", "tasks": ["one"]}]
    run = await run_graph(graph(nodes), model=model, tools=registry, profiles=profiles)
    assert run.status == "done", run.error
    assert rec.calls == []
    first, second = model.calls
    assert [t.name for t in first.tools] == ["lookup"]
    result = second.messages[-1]
    assert result.role == "tool"
    assert result.content.startswith("error: ")
    assert "write_note" in result.content
    assert run.output == "## Task 1: one\ncould not write"


async def test_a_failing_parallel_worker_fails_the_node_cleanly() -> None:
    model = ScriptedModel(
        [{"node": "p", "match": "bad", "error": "provider melted"}, {"node": "p", "text": "ok"}]
    )
    nodes = [{"id": "p", "type": "parallel", "tasks": ["good", "bad"]}]
    run = await run_graph(graph(nodes), model=model)
    assert run.status == "failed"
    assert run.ended_detail == "node_failed"
    assert run.error is not None and "provider melted" in run.error


# -- begin / end -------------------------------------------------------------------


BEGIN_END = {
    "name": "g",
    "nodes": [
        {"id": "start", "kind": "begin"},
        {"id": "a", "kind": "agent", "prompt": "a {{start}}"},
        {"id": "b", "kind": "agent", "prompt": "b {{a}}"},
        {"id": "stop", "kind": "end"},
    ],
    "edges": [
        {"source": "start", "target": "a"},
        {"source": "a", "target": "b"},
        {"source": "b", "target": "stop"},
    ],
}


async def test_the_begin_end_form_runs_along_its_edges() -> None:
    model = ScriptedModel([{"node": "a", "text": "A"}, {"node": "b", "text": "B"}])
    run = await run_graph(BEGIN_END, {"q": 1}, model=model)
    assert run.status == "done", run.error
    assert [s.node for s in run.trajectory] == ["start", "a", "b", "stop"]
    assert run.trajectory[0].output == {"q": 1}
    assert run.trajectory[1].prompt == 'a {"q":1}'
    assert run.trajectory[2].prompt == "b A"
    assert run.output == "B"


# -- subgraph ----------------------------------------------------------------------

CHILD = {
    "name": "child",
    "nodes": [
        {"id": "c1", "type": "agent", "prompt": "Child got {{input}}", "next": "c2"},
        {"id": "c2", "type": "agent", "prompt": "Then {{c1}}"},
    ],
    "entry": "c1",
}
PARENT: list[dict[str, Any]] = [
    {"id": "a", "type": "agent", "prompt": "Start {{input}}", "next": "sub"},
    {"id": "sub", "type": "subgraph", "graph": "child", "input": "{{a}}", "next": "b"},
    {"id": "b", "type": "agent", "prompt": "Sub said {{sub}}"},
]


def family_model() -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "a", "text": "alpha"},
            {"node": "c1", "text": "one"},
            {"node": "c2", "text": "two"},
            {"node": "b", "text": "beta"},
        ]
    )


async def test_a_subgraph_runs_its_child_to_completion() -> None:
    model = family_model()
    run = await run_graph(graph(PARENT), "x", model=model, graphs={"child": load_graph(CHILD)})
    assert run.status == "done", run.error
    assert run.output == "beta"
    assert [(s.node, s.parent) for s in run.trajectory] == [
        ("a", None),
        ("c1", "sub"),
        ("c2", "sub"),
        ("sub", None),
        ("b", None),
    ]
    assert run.trajectory[1].prompt == "Child got alpha"
    assert run.trajectory[3].output == "two"
    assert run.trajectory[4].prompt == "Sub said two"


async def test_a_missing_child_graph_fails_clearly() -> None:
    run = await run_graph(graph(PARENT), "x", model=family_model(), graphs={})
    assert run.status == "failed"
    assert run.ended_detail == "node_failed"
    assert run.error is not None
    assert run.error.startswith("sub: ")
    assert "subgraph 'child' is not among the graphs given" in run.error


async def test_a_failing_child_fails_the_parent() -> None:
    model = ScriptedModel([{"node": "a", "text": "alpha"}, {"node": "c1", "error": "down"}])
    run = await run_graph(graph(PARENT), "x", model=model, graphs={"child": load_graph(CHILD)})
    assert run.status == "failed"
    assert run.error is not None and "subgraph 'child' ended failed" in run.error
    assert "down" in run.error
    assert [(s.node, s.parent) for s in run.trajectory] == [
        ("a", None),
        ("c1", "sub"),
        ("sub", None),
    ]


async def test_a_parallel_worker_tool_needing_approval_parks_the_node() -> None:
    rec = Recorder()
    registry = ToolRegistry([rec.make("lookup", "found", read_only=True, requires_approval=True)])
    profiles = {"assistant": AgentProfile(name="assistant", tools=["lookup"])}
    model = ScriptedModel(
        [
            {"node": "p", "round": 1, "tool_calls": [{"name": "lookup", "arguments": {}}]},
            {"node": "p", "round": 2, "text": "looked"},
        ]
    )
    nodes = [{"id": "p", "type": "parallel", "tasks": ["one"]}]
    opts: dict[str, Any] = {"model": model, "tools": registry, "profiles": profiles}
    run = await run_graph(graph(nodes), **opts)
    assert run.status == "waiting_approval"
    assert run.waiting is not None
    assert (run.waiting.node, run.waiting.tool) == ("p[0]", "lookup")
    assert rec.calls == []
    done = await resume_graph(run, "approve", graph=graph(nodes), **opts)
    assert done.status == "done", done.error
    assert done.output == "## Task 1: one\nlooked"
    assert rec.calls == [("lookup", {})]


async def test_an_empty_tool_registry_means_no_tools() -> None:
    model = ScriptedModel([{"node": "a", "text": "ok"}])
    nodes = [{"id": "a", "type": "agent", "prompt": "go"}]
    run = await run_graph(graph(nodes), model=model, tools=ToolRegistry())
    assert run.status == "done", run.error
    assert model.calls[0].tools == []  # not the built-in http_get, read_file and bash
