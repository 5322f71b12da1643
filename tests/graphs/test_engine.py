"""The pure step engine, driven directly: claim, complete, resume, budgets, fan-in."""

from __future__ import annotations

from typing import Any

import pytest

from plait.graphs import engine
from plait.graphs.compiled import CompiledGraph, compile_graph
from plait.graphs.engine import NodeResult
from plait.graphs.spec import GraphSpec
from plait.graphs.state import RunState, Waiting

NOW = 1_000.0


def spec_of(nodes: list[dict[str, Any]], **extra: Any) -> CompiledGraph:
    """The graph of ``nodes``, compiled: the engine takes nothing else."""
    return compile_graph(GraphSpec.model_validate({"name": "g", "nodes": nodes, **extra}))


def with_budget(graph: CompiledGraph, **update: Any) -> CompiledGraph:
    """``graph`` with its budget changed, compiled again."""
    budget = graph.budget.model_copy(update=update)
    return compile_graph(graph.spec.model_copy(update={"budget": budget}))


LOOP = spec_of(
    [
        {"id": "draft", "type": "agent", "prompt": "{{verify?}}", "next": "verify"},
        {
            "id": "verify",
            "type": "verifier",
            "prompt": "{{draft}}",
            "verdicts": {"pass": "publish", "fail": "draft"},
        },
        {"id": "publish", "type": "agent", "prompt": "{{draft}}"},
    ],
    entry="draft",
)

BROADCAST = spec_of(
    [
        {"id": "begin", "kind": "begin"},
        {
            "id": "fan",
            "kind": "fan_out",
            "specs": [{"kind": "broadcast", "target_node_id": "w", "count": 3}],
        },
        {"id": "w", "kind": "agent", "prompt": "work"},
        {"id": "join", "kind": "fan_in"},
        {"id": "end", "kind": "end"},
    ],
    edges=[
        {"source": "begin", "target": "fan"},
        {"source": "w", "target": "join"},
        {"source": "join", "target": "end"},
    ],
)


def step(
    spec: CompiledGraph, state: RunState, key: str, result: NodeResult | None = None
) -> tuple[RunState, list[engine.Event]]:
    """Claim ``key`` and complete it with ``result``."""
    state, attempt = engine.claim(spec, state, key, nonce=f"n-{key}", now=NOW)
    assert attempt is not None, state.ended_detail
    return engine.complete(spec, state, key, result or NodeResult(value=key), now=NOW)


def test_start_readies_the_entry_and_pins_the_graph() -> None:
    state = engine.start(LOOP, "r1", "topic", now=NOW)
    assert state.ready == ["draft"]
    assert state.status == "ready"
    assert state.input == "topic"
    assert state.graph.sha256 == LOOP.sha256
    assert engine.claimable(state) == ["draft"]


def test_claim_fences_a_visit_and_a_takeover_keeps_it_and_counts_a_retry() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    claimed, first = engine.claim(LOOP, state, "draft", nonce="a", now=NOW)
    assert first is not None
    assert (first.visit, first.nonce) == (1, "a")
    assert claimed.status == "running"
    assert engine.claimable(claimed) == []
    assert claimed.usage.retries == 0

    retaken, second = engine.claim(LOOP, claimed, "draft", nonce="b", now=NOW + 1)
    assert second is not None
    assert (second.visit, second.nonce) == (1, "b")
    assert retaken.usage.retries == 1
    assert retaken.attempts["draft"].nonce == "b"

    done, _ = engine.complete(LOOP, retaken, "draft", NodeResult(value="d"), now=NOW + 2)
    assert done.visits["draft"] == 1
    assert done.outputs["draft"].visit == 1
    assert done.usage.steps == 1


def test_a_retry_past_the_retry_budget_ends_the_run() -> None:
    spec = with_budget(LOOP, retries=0)
    state = engine.start(spec, "r1", None, now=NOW)
    state, _ = engine.claim(spec, state, "draft", nonce="a", now=NOW)
    state, attempt = engine.claim(spec, state, "draft", nonce="b", now=NOW)
    assert attempt is None
    assert state.status == "failed"
    assert state.ended_detail == "budget_exhausted"
    assert state.error is not None and "retries" in state.error


def test_claim_and_complete_never_mutate_their_input() -> None:
    state = engine.start(BROADCAST, "r1", {"x": [1]}, now=NOW)
    state, _ = step(BROADCAST, state, "begin")
    before = state.model_dump()
    claimed, _ = engine.claim(BROADCAST, state, "fan", nonce="n", now=NOW)
    assert state.model_dump() == before
    snapshot = claimed.model_dump()
    after, _ = engine.complete(BROADCAST, claimed, "fan", NodeResult(value={}), now=NOW)
    assert claimed.model_dump() == snapshot
    assert after.ready == ["w[0]", "w[1]", "w[2]"]
    for key in ("w[0]", "w[1]", "w[2]"):
        kept = after.model_dump()
        after, _ = step(BROADCAST, after, key, NodeResult(value=key))
        assert after.model_dump() != kept
    frozen = after.model_dump()
    engine.resume(after, now=NOW)
    engine.raise_budget(after, {"steps": 3}, now=NOW)
    engine.fail(after, "x", "y", now=NOW)
    engine.cancel(after, now=NOW)
    assert after.model_dump() == frozen


def test_fan_in_waits_for_every_instance() -> None:
    state = engine.start(BROADCAST, "r1", None, now=NOW)
    state, _ = step(BROADCAST, state, "begin")
    state, _ = step(BROADCAST, state, "fan", NodeResult(value={}))
    assert state.ready == ["w[0]", "w[1]", "w[2]"]
    # Claim all three at once, as a concurrent runner does, then finish them out of order.
    for key in ("w[0]", "w[1]", "w[2]"):
        state, attempt = engine.claim(BROADCAST, state, key, nonce=key, now=NOW)
        assert attempt is not None
    state, _ = engine.complete(BROADCAST, state, "w[2]", NodeResult(value="c"), now=NOW)
    assert "join" not in state.ready
    state, _ = engine.complete(BROADCAST, state, "w[0]", NodeResult(value="a"), now=NOW)
    assert "join" not in state.ready
    assert state.status == "running"
    state, _ = engine.complete(BROADCAST, state, "w[1]", NodeResult(value="b"), now=NOW)
    assert state.ready == ["join"]
    assert state.outputs["w"].value == ["a", "b", "c"]  # by instance index, not commit order
    state, _ = step(BROADCAST, state, "join", NodeResult(value="joined"))
    state, events = step(BROADCAST, state, "end", NodeResult(value="joined"))
    assert state.status == "done"
    assert state.ended_detail == "completed"
    assert state.output_node == "end"
    assert events[-1].as_data() == {
        "type": "run.done",
        "status": "done",
        "ended_detail": "completed",
        "error": None,
    }


def test_verdicts_route_back_and_forward() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    state, _ = step(LOOP, state, "draft")
    state, events = step(LOOP, state, "verify", NodeResult(value="no\nfail", verdict="fail"))
    assert state.ready == ["draft"]
    assert events[0].type == "node.committed"
    assert events[0].verdict == "fail"
    state, _ = step(LOOP, state, "draft")
    assert state.visits["draft"] == 2
    state, _ = step(LOOP, state, "verify", NodeResult(value="ok\npass", verdict="pass"))
    assert state.ready == ["publish"]
    state, _ = step(LOOP, state, "publish", NodeResult(value="final"))
    assert state.status == "done"
    assert state.output_node == "publish"
    assert [state.outputs[k].seq for k in ("draft", "verify", "publish")] == [3, 4, 5]


def test_a_waiting_node_parks_the_run_and_resume_reruns_the_same_visit() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    state, _ = engine.claim(LOOP, state, "draft", nonce="n", now=NOW)
    waiting = Waiting(node="draft", kind="approval", ask="ok?", tool="t")
    state, events = engine.complete(LOOP, state, "draft", NodeResult(waiting=waiting), now=NOW)
    assert state.status == "waiting_approval"
    assert state.waiting == waiting
    assert engine.claimable(state) == []
    assert state.usage.steps == 0
    assert [e.type for e in events] == ["node.waiting"]
    resumed = engine.resume(state, now=NOW)
    assert resumed.status == "ready"
    assert resumed.waiting is None
    _, attempt = engine.claim(LOOP, resumed, "draft", nonce="m", now=NOW)
    assert attempt is not None and attempt.visit == 1


def test_the_step_budget_refuses_the_visit_past_it() -> None:
    spec = with_budget(LOOP, steps=3)
    state = engine.start(spec, "r1", None, now=NOW)
    state, _ = step(spec, state, "draft")
    state, _ = step(spec, state, "verify", NodeResult(verdict="fail"))
    state, _ = step(spec, state, "draft")
    state, attempt = engine.claim(spec, state, "verify", nonce="n", now=NOW)
    assert attempt is None
    assert state.status == "failed"
    assert state.ended_detail == "budget_exhausted"
    assert state.error == "steps: 3 of 3 used"
    assert engine.claimable(state) == []


def test_an_escalating_budget_parks_and_a_raise_unparks() -> None:
    spec = with_budget(LOOP, steps=1, on_exhausted="escalate")
    state = engine.start(spec, "r1", None, now=NOW)
    state, _ = step(spec, state, "draft")
    parked, attempt = engine.claim(spec, state, "verify", nonce="n", now=NOW)
    assert attempt is None
    assert parked.status == "waiting_human"
    assert parked.waiting is not None and parked.waiting.kind == "budget"
    assert engine.claimable(parked) == []
    raised = engine.raise_budget(parked, {"steps": 1}, now=NOW)
    assert raised.status == "ready"
    raised, attempt = engine.claim(spec, raised, "verify", nonce="n", now=NOW)
    assert attempt is not None


def test_token_and_dollar_budgets_end_the_run_after_the_commit() -> None:
    for field, result in (
        ("tokens", NodeResult(value="x", input_tokens=8, output_tokens=3)),
        ("dollars", NodeResult(value="x", dollars=0.02)),
    ):
        update = {"tokens": 10} if field == "tokens" else {"dollars": 0.01}
        spec = with_budget(LOOP, **update)
        state = engine.start(spec, "r1", None, now=NOW)
        state, events = step(spec, state, "draft", result)
        assert state.status == "failed", field
        assert state.ended_detail == "budget_exhausted"
        assert state.error is not None and state.error.startswith(field)
        assert "draft" in state.outputs  # the visit that overspent still committed
        assert [e.type for e in events] == ["node.committed", "run.failed"]


def test_a_failed_node_ends_the_run_with_its_detail() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    result = NodeResult(error="rejected", detail="tool_execution_failed")
    state, events = step(LOOP, state, "draft", result)
    assert state.status == "failed"
    assert state.ended_detail == "tool_execution_failed"
    assert state.error == "draft: rejected"
    assert state.ready == []
    assert events[-1].type == "run.failed"


def test_cancel_stops_everything() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    state, _ = engine.claim(LOOP, state, "draft", nonce="n", now=NOW)
    cancelled = engine.cancel(state, now=NOW)
    assert cancelled.status == "cancelled"
    assert cancelled.terminal
    assert engine.claimable(cancelled) == []
    assert cancelled.attempts == {}


@pytest.mark.parametrize("policy", ["collect", "drain_then_fail"])
def test_failed_instances_wait_for_their_siblings(policy: str) -> None:
    data = BROADCAST.spec.model_dump()
    data["nodes"][1]["specs"][0]["on_failure"] = policy
    spec = compile_graph(GraphSpec.model_validate(data))
    state = engine.start(spec, "r1", None, now=NOW)
    state, _ = step(spec, state, "begin")
    state, _ = step(spec, state, "fan", NodeResult(value={}))
    state, _ = step(spec, state, "w[1]", NodeResult(error="boom"))
    assert state.status == "ready"
    state, _ = step(spec, state, "w[0]", NodeResult(value="a"))
    state, _ = step(spec, state, "w[2]", NodeResult(value="c"))
    if policy == "collect":
        assert state.outputs["w"].value == ["a", {"instance": "w[1]", "error": "boom"}, "c"]
        assert state.ready == ["join"]
    else:
        assert state.status == "failed"
        assert state.ended_detail == "fanin_upstream_failed"
        assert state.error == "w[1]: boom"


def test_visits_in_flight_count_against_the_step_budget() -> None:
    data = BROADCAST.spec.model_dump()
    data["budget"]["steps"] = 4
    spec = compile_graph(GraphSpec.model_validate(data))
    state = engine.start(spec, "r1", None, now=NOW)
    state, _ = step(spec, state, "begin")
    state, _ = step(spec, state, "fan", NodeResult(value={}))
    state, first = engine.claim(spec, state, "w[0]", nonce="a", now=NOW)
    state, second = engine.claim(spec, state, "w[1]", nonce="b", now=NOW)
    assert first is not None and second is not None
    state, third = engine.claim(spec, state, "w[2]", nonce="c", now=NOW)
    assert third is None
    assert state.ended_detail == "budget_exhausted"
    assert state.error == "steps: 2 of 4 used, 2 in flight"


def test_a_run_that_ended_takes_no_claim_and_no_late_result() -> None:
    state = engine.start(LOOP, "r1", None, now=NOW)
    state, _ = engine.claim(LOOP, state, "draft", nonce="n", now=NOW)
    failed = engine.fail(state, "node_failed", "x", now=NOW)
    late, events = engine.complete(LOOP, failed, "draft", NodeResult(value="d"), now=NOW)
    assert events == []
    assert late.model_dump() == failed.model_dump()
    again, attempt = engine.claim(LOOP, failed, "draft", nonce="m", now=NOW)
    assert attempt is None
    assert again.model_dump() == failed.model_dump()


class _Record(RunState):
    """A run record that carries more than the engine knows of (as durable runs do)."""

    owner: str = ""


def test_steps_keep_the_record_type_and_its_own_fields() -> None:
    state = engine.start(LOOP, "r1", "topic", now=NOW)
    record = _Record(**state.model_dump(), owner="host-1")
    claimed, _ = engine.claim(LOOP, record, "draft", nonce="n", now=NOW)
    done, _ = engine.complete(LOOP, claimed, "draft", NodeResult(value="d"), now=NOW)
    assert isinstance(done, _Record)
    assert done.owner == "host-1"
    assert {"status", "attempts", "outputs", "owner"} <= done.model_fields_set
    assert _Record.model_validate(done.model_dump()) == done
