"""The in-session runner: the revise loop, budgets, template failures, resuming, and
the shipped examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.errors import ConfigError, GraphError
from plait.graphs import TrajectoryStep, load_graph, resume_graph, run_graph
from plait.models import ScriptedModel
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def revise(budget: Any = None, publish_reads: str = "{{draft}}") -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "revise",
        "entry": "draft",
        "nodes": [
            {"id": "draft", "type": "agent",
             "prompt": "Write about {{input}}. Earlier critique: {{verify?}}", "next": "verify"},
            {"id": "verify", "type": "verifier", "prompt": "Review:\n\n{{draft}}",
             "verdicts": {"pass": "publish", "fail": "draft"}},
            {"id": "publish", "type": "agent", "prompt": f"Publish {publish_reads}"},
        ],
    }  # fmt: skip
    if budget is not None:
        data["budget"] = budget
    return data


async def test_the_revise_loop_feeds_the_critique_back_to_the_draft() -> None:
    model = ScriptedModel(
        [
            {"node": "draft", "visit": 1, "text": "Revenue rose 12%."},
            {"node": "verify", "visit": 1, "text": "The 12% has no source.\nfail"},
            {"node": "draft", "visit": 2, "match": "has no source",
             "text": "Revenue rose 12% [1]."},
            {"node": "verify", "visit": 2, "text": "Sourced now.\npass"},
            {"node": "publish", "text": "FINAL"},
        ]
    )  # fmt: skip
    steps: list[TrajectoryStep] = []
    run = await run_graph(revise(), "Q3", model=model, on_step=steps.append)
    assert run.status == "done", run.error
    assert run.output == "FINAL"
    assert [(s.node, s.visit, s.verdict) for s in run.trajectory] == [
        ("draft", 1, None),
        ("verify", 1, "fail"),
        ("draft", 2, None),
        ("verify", 2, "pass"),
        ("publish", 1, None),
    ]
    assert steps == run.trajectory
    assert run.trajectory[0].prompt == "Write about Q3. Earlier critique: (no output yet)"
    assert run.trajectory[2].prompt == (
        "Write about Q3. Earlier critique: The 12% has no source.\nfail"
    )
    assert run.trajectory[3].prompt == "Review:\n\nRevenue rose 12% [1]."
    assert run.trajectory[4].prompt == "Publish Revenue rose 12% [1]."
    assert run.usage.steps == 5
    assert run.usage.tokens == sum(s.usage.input_tokens + s.usage.output_tokens for s in steps)
    assert all(s.ended_at >= s.started_at > 0 for s in steps)


NEVER = [{"node": "draft", "text": "a draft"}, {"node": "verify", "text": "still bad\nfail"}]


async def test_a_verifier_that_never_passes_spends_the_default_budget_and_fails() -> None:
    with anyio.fail_after(scaled(10)):
        run = await run_graph(revise(), "x", model=ScriptedModel(NEVER))
    assert run.status == "failed"
    assert run.ended_detail == "budget_exhausted"
    assert run.error == "steps: 25 of 25 used"
    assert len(run.trajectory) == 25
    assert run.usage.steps == 25
    assert [s.node for s in run.trajectory[:4]] == ["draft", "verify", "draft", "verify"]
    assert (run.trajectory[-1].node, run.trajectory[-1].visit) == ("draft", 13)
    assert run.output is None


async def test_the_step_budget_is_settable() -> None:
    run = await run_graph(revise(budget=7), "x", model=ScriptedModel(NEVER))
    assert (run.status, run.ended_detail) == ("failed", "budget_exhausted")
    assert len(run.trajectory) == 7
    run = await run_graph(revise(budget={"steps": 100}), "x", model=ScriptedModel(NEVER))
    assert len(run.trajectory) == 100


async def test_a_token_budget_ends_the_run_after_the_visit_that_overspent() -> None:
    spend = {"input_tokens": 6, "output_tokens": 4}
    rules = [dict(rule, usage=spend) for rule in NEVER]
    run = await run_graph(revise(budget={"tokens": 25}), "x", model=ScriptedModel(rules))
    assert (run.status, run.ended_detail) == ("failed", "budget_exhausted")
    assert run.error == "tokens: 30 spent, limit 25"
    assert len(run.trajectory) == 3
    assert run.usage.tokens == 30


async def test_a_dollar_budget_counts_the_model_price() -> None:
    rules = [dict(rule, usage={"input_tokens": 100_000, "output_tokens": 10_000}) for rule in NEVER]
    model = ScriptedModel(rules)
    model.spec = "openai:gpt-4o"  # priced at $2.50 in / $10 out per million tokens
    run = await run_graph(revise(budget={"dollars": 0.5}), "x", model=model)
    assert (run.status, run.ended_detail) == ("failed", "budget_exhausted")
    assert len(run.trajectory) == 2
    assert run.usage.dollars == pytest.approx(0.7)
    assert run.trajectory[0].usage.dollars == pytest.approx(0.35)


async def test_an_escalating_budget_parks_for_a_person_who_may_raise_it() -> None:
    budget = {"steps": 4, "on_exhausted": "escalate"}
    model = ScriptedModel(
        [{"node": "verify", "visit": 3, "text": "good\npass"}, *NEVER, {"text": "published"}]
    )
    run = await run_graph(revise(budget=budget), "x", model=model)
    assert run.status == "waiting_human"
    assert run.ended_detail is None
    assert run.waiting is not None
    assert run.waiting.kind == "budget"
    assert "steps: 4 of 4 used" in run.waiting.ask
    assert len(run.trajectory) == 4

    with pytest.raises(GraphError, match="raise_budget"):
        await resume_graph(run, "go on")
    done = await resume_graph(run, "go on", raise_budget={"steps": 3})
    assert done.status == "done", done.error
    assert done.output == "published"
    assert [s.node for s in done.trajectory[4:]] == ["draft", "verify", "publish"]
    assert done.usage.steps == 7


async def test_a_budget_spent_while_instances_are_in_flight_stops_them() -> None:
    data = {
        "name": "wide",
        "budget": 4,
        "nodes": [
            {"id": "begin", "kind": "begin"},
            {"id": "fan", "kind": "fan_out",
             "specs": [{"kind": "broadcast", "target_node_id": "w", "count": 3}]},
            {"id": "w", "kind": "agent", "prompt": "work"},
            {"id": "join", "kind": "fan_in"},
        ],
        "edges": [{"source": "begin", "target": "fan"}, {"source": "w", "target": "join"}],
    }  # fmt: skip
    model = ScriptedModel([{"node": "w", "text": "done", "delay_ms": 20}])
    run = await run_graph(data, model=model)
    assert (run.status, run.ended_detail) == ("failed", "budget_exhausted")
    # w[0] and w[1] took the last two steps; w[2] found none, and the run stopped them.
    assert run.error == "steps: 2 of 4 used, 2 in flight"
    assert [s.node for s in run.trajectory] == ["begin", "fan"]
    await anyio.sleep(0.05)
    assert len(run.trajectory) == 2


async def test_a_template_reading_a_node_without_output_fails_naming_node_and_key() -> None:
    data = revise()
    data["nodes"][0]["prompt"] = "Write about {{input}}. Critique: {{verify.notes}}"
    model = ScriptedModel(NEVER)
    run = await run_graph(data, "x", model=model)
    assert run.status == "failed"
    assert run.ended_detail == "template_error"
    assert run.error == (
        "draft: node 'draft': template {{verify.notes}}: node 'verify' has no output yet"
    )
    assert model.calls == []
    assert run.trajectory[0].node == "draft"


async def test_a_missing_field_in_a_structured_output_fails_the_run() -> None:
    model = ScriptedModel([{"node": "draft", "text": "d"}, {"node": "verify", "text": "ok\npass"}])
    run = await run_graph(revise(publish_reads="{{draft.title}}"), "x", model=model)
    assert run.status == "failed"
    assert run.error is not None
    assert "template {{draft.title}}" in run.error
    assert "no field 'title'" in run.error


async def test_resume_carries_answers_history_and_setup_over() -> None:
    data = {
        "name": "two-asks",
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "agent", "prompt": "Draft {{input}} {{h2?}}", "next": "h1"},
            {"id": "h1", "type": "human", "ask": "First?", "next": "h2"},
            {"id": "h2", "type": "human", "ask": "Second? {{h1}}", "next": "loop"},
            {"id": "loop", "type": "verifier", "prompt": "{{h2}}",
             "verdicts": {"again": "a", "stop": "end"}},
            {"id": "end", "type": "agent", "prompt": "End {{a}}"},
        ],
    }  # fmt: skip
    model = ScriptedModel(
        [
            {"node": "a", "visit": 1, "text": "first"},
            {"node": "a", "visit": 2, "text": "second"},
            {"node": "loop", "visit": 1, "text": "again"},
            {"node": "loop", "text": "stop"},
            {"text": "the end"},
        ]
    )
    run = await run_graph(data, "x", model=model, answers={"h1": "yes"})
    assert run.waiting is not None and run.waiting.node == "h2"
    run = await resume_graph(run, "more")
    # The loop came back through h1 (answered up front) to h2, which asks again.
    assert run.waiting is not None and run.waiting.node == "h2"
    assert run.waiting.ask == "Second? yes"
    run = await resume_graph(run, "enough")
    assert run.status == "done", run.error
    assert run.output == "the end"
    a_calls = [c for c in model.calls if c.context.node == "a"]
    assert [c.context.visit for c in a_calls] == [1, 2]
    assert [m.content for m in a_calls[1].messages if m.role != "system"] == [
        "Draft x (no output yet)",
        "first",
        "Draft x more",
    ]


async def test_resume_rejects_unknown_options_and_needs_a_graph_without_one() -> None:
    nodes = [{"id": "h", "type": "human", "ask": "?"}]
    run = await run_graph({"name": "h", "entry": "h", "nodes": nodes})
    with pytest.raises(ConfigError, match="modle"):
        await resume_graph(run, "x", modle=None)
    bare = run.model_copy()
    rebuilt = type(run).model_validate(bare.model_dump())
    with pytest.raises(GraphError, match="needs graph="):
        await resume_graph(rebuilt, "x")
    done = await resume_graph(rebuilt, "x", graph={"name": "h", "entry": "h", "nodes": nodes})
    assert (done.status, done.output) == ("done", "x")


async def test_research_and_verify_example_runs_in_session() -> None:
    model = ScriptedModel.from_file(EXAMPLES / "research_and_verify.model.yaml")
    graph = EXAMPLES / "research_and_verify.json"
    run = await run_graph(graph, "the Q3 numbers", model=model)
    assert run.status == "waiting_human"
    assert run.waiting is not None
    assert run.waiting.ask.startswith("Approve publishing this?")
    run = await resume_graph(run, "yes, ship it")
    assert run.status == "done"
    assert [(s.node, s.verdict) for s in run.trajectory] == [
        ("draft", None),
        ("verify", "fail"),
        ("draft", None),
        ("verify", "pass"),
        ("review_human", None),
        ("publish", None),
    ]
    assert run.output.startswith("FINAL")
    assert str(run.trajectory[-1].prompt).endswith("Human decision: yes, ship it")

    upfront = await run_graph(
        load_graph(graph), "the Q3 numbers", model=model, answers={"review_human": "yes"}
    )
    assert upfront.status == "done"
    assert upfront.output == run.output


async def test_fan_out_map_example_runs_in_session() -> None:
    model = ScriptedModel.from_file(EXAMPLES / "fan_out_map.model.yaml")
    run = await run_graph(EXAMPLES / "fan_out_map.json", "Q3", model=model)
    assert run.status == "done", run.error
    assert [s.node for s in run.trajectory][:3] == ["begin", "researcher", "fanout"]
    assert sorted(s.node for s in run.trajectory[3:6]) == ["fetcher[0]", "fetcher[1]", "fetcher[2]"]
    assert [s.node for s in run.trajectory][6:] == ["fanin", "end"]
    assert "HTTP 503" in run.output
    assert "Page A" in run.output and "Page B" in run.output


async def test_an_on_step_error_comes_out_as_itself() -> None:
    def explode(step: TrajectoryStep) -> None:
        raise RuntimeError(f"tap broke at {step.node}")

    with pytest.raises(RuntimeError, match="tap broke at draft"):
        await run_graph(revise(), "x", model=ScriptedModel(NEVER), on_step=explode)


def test_the_in_session_example_script_runs() -> None:
    root = EXAMPLES.parent
    done = subprocess.run(
        [sys.executable, "examples/in_session.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env={**os.environ, "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stderr
    assert "waiting_human" in done.stdout
    assert "yes, ship it" in done.stdout
    assert "FINAL" in done.stdout
    assert "HTTP 503" in done.stdout
    assert done.stdout.count("done (completed)") == 2
