"""Retry and fork of runs.

- a failed run retried goes on from the node that failed, on its pinned graph version,
  keeping every committed visit (none runs again), with a ``run.retried`` audit event;
- a run that did not fail is refused, and so is anyone but a person (as for cancel);
- a fork from a middle visit runs only what comes after it, on the same version, and
  its audit chain verifies and names the parent's event;
- a fork at a visit that is not there names the visits there are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait.decisions import Agent, Human
from plait.errors import NotPermitted, RunNotRetryable, VisitNotFound
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.audit import read_events
from plait.runs.replay import replay
from plait.runs.store import RunStore

from .helpers import ASKING_CHILD, Cli, agent_chain, commits, hosting, settle, store

ANA = Human("ana")


def _calls(model: ScriptedModel, run_id: str) -> list[tuple[str, int]]:
    return [(c.context.node, c.context.visit) for c in model.calls if c.context.run_id == run_id]


@pytest.mark.anyio
async def test_retry_goes_on_from_the_failed_node_keeping_committed_visits(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a", "b", "c"]))
    model = ScriptedModel(
        [
            {"node": "b", "visit": 1, "error": "the model fell over"},
            {"node": "b", "text": "b on its second visit"},
            {"node": "c", "match": "b on its second visit", "text": "c read the retry"},
            {"text": "ok"},
        ]
    )
    runs = Runs(mesh)
    async with hosting(mesh, model):
        started = await runs.start("assistant", "chain", "x")
        failed = await settle(runs, started.run_id)
        assert (failed.status, failed.error_node, failed.error_visit) == ("failed", "b", 1)
        # A new version stored meanwhile changes nothing: the retry stays on its own.
        await store(mesh, {**agent_chain("chain", ["a", "b", "c"]), "version": 2})
        retried = await runs.retry(started.run_id, by=ANA)
        assert retried.status == "running" and retried.graph == failed.graph
        done = await settle(runs, started.run_id)
    assert done.status == "done", done.error
    assert await runs.output(done) == "c read the retry"
    steps = await runs.trajectory(started.run_id)
    assert commits(steps) == [("a", 1), ("b", 1), ("b", 2), ("c", 1)]
    assert [s.status for s in steps] == ["done", "failed", "done", "done"]
    assert _calls(model, started.run_id) == [("a", 1), ("b", 1), ("b", 2), ("c", 1)]
    events = await read_events(mesh, started.run_id)
    kinds = [e.type for e in events]
    assert kinds.index("run.failed") < kinds.index("run.retried") < kinds.index("run.done")
    event = next(e for e in events if e.type == "run.retried")
    assert event.actor == "ana"
    assert event.detail["nodes"] == ["b"]
    assert event.detail["failed"]["node"] == "b"
    assert "the model fell over" in event.detail["failed"]["error"]
    assert await runs.verify(started.run_id) == len(events)


@pytest.mark.anyio
async def test_retry_refuses_a_run_that_did_not_fail(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a"]))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        done = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
    with pytest.raises(RunNotRetryable, match=r"is done: only a failed run can be retried"):
        await runs.retry(done.run_id, by=ANA)
    assert (await runs.get(done.run_id)).audit_seq == done.audit_seq  # nothing written


@pytest.mark.anyio
async def test_retry_is_a_persons_only(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a"]))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"error": "a fell over"}])):
        failed = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
    assert failed.status == "failed"
    with pytest.raises(NotPermitted, match="only a human may retry a run; agent 'ci' is not one"):
        await runs.retry(failed.run_id, by=Agent("ci"))
    assert (await runs.get(failed.run_id)).audit_seq == failed.audit_seq  # nothing written


@pytest.mark.anyio
async def test_retry_refuses_a_run_that_failed_on_its_budget(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a", "b"]) | {"budget": 1})
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        spent = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
    assert (spent.status, spent.ended_detail) == ("failed", "budget_exhausted")
    with pytest.raises(RunNotRetryable, match="failed on its budget"):
        await runs.retry(spent.run_id, by=ANA)


@pytest.mark.anyio
@pytest.mark.parametrize("on_failure", ["fail_fast", "drain_then_fail"])
async def test_retry_of_a_failed_fan_out_instance_runs_only_what_had_not_committed(
    mesh: Mesh, on_failure: str
) -> None:
    graph = {
        "name": "fan",
        "agent": "assistant",
        "entry": "split",
        "nodes": [
            {
                "id": "split",
                "type": "fan_out",
                "specs": [
                    {
                        "kind": "broadcast",
                        "target_node_id": "work",
                        "count": 3,
                        "on_failure": on_failure,
                    }
                ],
            },
            {"id": "work", "type": "agent", "prompt": "Work on {{input}}", "next": "join"},
            {"id": "join", "type": "fan_in", "next": "sum"},
            {"id": "sum", "type": "agent", "prompt": "Sum up {{join}}"},
        ],
    }
    await store(mesh, graph)
    failing: dict[str, Any] = {"node": "work[1]", "visit": 1, "error": "instance 1 broke"}
    model = ScriptedModel([failing, {"node": "sum", "text": "summed"}, {"text": "worked"}])
    runs = Runs(mesh)
    async with hosting(mesh, model):
        started = await runs.start("assistant", "fan", "x")
        failed = await settle(runs, started.run_id)
        assert failed.status == "failed", failed
        if on_failure == "fail_fast":
            assert failed.error_node == "work[1]"
        else:  # every sibling ended first
            assert failed.ended_detail == "fanin_upstream_failed"
            assert {k for k in failed.outputs if k.startswith("work[")} == {
                "work[0]", "work[1]", "work[2]"
            }  # fmt: skip
        before = {key for key, out in failed.outputs.items() if out.error is None}
        await runs.retry(started.run_id, by=ANA)
        done = await settle(runs, started.run_id)
    assert done.status == "done", done.error
    assert await runs.output(done) == "summed"
    calls = _calls(model, started.run_id)
    instances = [c.context.instance for c in model.calls if c.context.run_id == started.run_id]
    # An instance that had committed before the failure never ran again.
    for key in before - {"split"}:
        assert instances.count(key) == 1, (key, calls)
    assert instances.count("work[1]") == 2
    await runs.verify(started.run_id)


@pytest.mark.anyio
async def test_fork_from_a_middle_visit_runs_only_what_comes_after(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a", "b", "c"]))
    model = ScriptedModel(
        [
            {"node": "a", "text": "a's output"},
            {"node": "b", "match": "a's output", "text": "b's output"},
            {"node": "c", "match": "b's output", "text": "c's output"},
        ]
    )
    runs = Runs(mesh)
    async with hosting(mesh, model):
        parent = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
        assert parent.status == "done"
        await store(mesh, {**agent_chain("chain", ["a", "b", "c"]), "version": 2})
        fork = await runs.fork(parent.run_id, "a:1", by=ANA, input="another input")
        assert fork.run_id != parent.run_id and fork.graph == parent.graph
        done = await settle(runs, fork.run_id)
    assert done.status == "done", done.error
    assert await runs.output(done) == "c's output"
    assert _calls(model, fork.run_id) == [("b", 1), ("c", 1)]
    assert commits(await runs.trajectory(fork.run_id)) == [("b", 1), ("c", 1)]
    assert done.input == "another input"
    # The fork spent what its parent had up to there, then its own visits.
    assert done.usage.steps == 3
    events = await read_events(mesh, fork.run_id)
    first = events[0]
    assert first.type == "run.forked" and first.actor == "ana"
    parent_events = await read_events(mesh, parent.run_id)
    at = next(e for e in parent_events if e.type == "node.committed" and e.node == "a")
    assert first.detail["parent"] == {
        "run_id": parent.run_id,
        "seq": at.seq,
        "hash": at.hash,
        "node": "a",
        "visit": 1,
    }
    assert await runs.verify(fork.run_id) == len(events)
    assert await runs.verify(parent.run_id) == len(parent_events)  # the parent untouched

    # A fork's own chain starts from the state its first event pins: it forks again.
    async with hosting(mesh, model):
        again = await settle(runs, (await runs.fork(fork.run_id, "b", by=ANA)).run_id)
    assert again.status == "done" and await runs.output(again) == "c's output"
    assert _calls(model, again.run_id) == [("c", 1)]
    assert again.input == "another input" and again.usage.steps == 3
    await runs.verify(again.run_id)


@pytest.mark.anyio
async def test_fork_inside_a_revise_loop_keeps_the_visit_numbers(mesh: Mesh) -> None:
    graph = {
        "name": "loop",
        "agent": "assistant",
        "entry": "write",
        "nodes": [
            {"id": "write", "type": "agent", "prompt": "Write {{input}} {{check?}}",
             "next": "check"},
            {
                "id": "check",
                "type": "verifier",
                "prompt": "Check {{write}}",
                "verdicts": {"revise": "write", "pass": "ship"},
            },
            {"id": "ship", "type": "agent", "prompt": "Ship {{write}}"},
        ],
    }  # fmt: skip
    await store(mesh, graph)
    model = ScriptedModel(
        [
            {"node": "check", "visit": 1, "text": "too short. revise"},
            {"node": "check", "text": "fine. pass"},
            {"node": "write", "visit": 1, "text": "draft one"},
            {"node": "write", "text": "draft two"},
            {"node": "ship", "text": "shipped"},
        ]
    )
    runs = Runs(mesh)
    async with hosting(mesh, model):
        parent = await settle(runs, (await runs.start("assistant", "loop", "x")).run_id)
        assert commits(await runs.trajectory(parent.run_id)) == [
            ("write", 1), ("check", 1), ("write", 2), ("check", 2), ("ship", 1)
        ]  # fmt: skip
        fork = await runs.fork(parent.run_id, "check:1", by=ANA)
        done = await settle(runs, fork.run_id)
    assert done.status == "done", done.error
    assert _calls(model, fork.run_id) == [("write", 2), ("check", 2), ("ship", 1)]
    await runs.verify(fork.run_id)


@pytest.mark.anyio
async def test_fork_at_a_visit_that_is_not_there_lists_those_that_are(mesh: Mesh) -> None:
    await store(mesh, agent_chain("chain", ["a", "b"]))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        parent = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
    for at, says in (
        ("nope", "is no committed visit"),
        ("a:2", "is no committed visit"),
        ("b", "leaves nothing to run"),
    ):
        with pytest.raises(VisitNotFound, match=says) as caught:
            await runs.fork(parent.run_id, at, by=ANA)
        assert caught.value.committed == ["a:1"]
        assert "the visits to fork at are: a:1" in str(caught.value)
    assert len(await runs.list()) == 1  # nothing started


# -- the CLI (in this process: what its commands print and refuse) --------------------------


def test_graph_retry_and_fork_through_the_cli(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    graph = tmp_path / "chain.json"
    graph.write_text(json.dumps(agent_chain("chain", ["a", "b", "c"])))
    script = tmp_path / "model.json"
    rules = [{"node": "b", "visit": 1, "error": "b fell over"}, {"text": "ok"}]
    script.write_text(json.dumps(rules))
    cli("graph", "import", str(graph))
    failed = cli(
        "graph", "run", "assistant", "chain", "--model", f"scripted:{script}", "--json", ok=False
    )
    assert failed.returncode == 1
    run_id = json.loads(failed.stdout)["run_id"]

    cli.env["PLAIT_TOOL_PROCESS"] = "1"  # a command a model ran is no person's
    refused = cli("graph", "retry", run_id, ok=False)
    assert refused.returncode == 1 and "only a person may" in refused.stderr
    del cli.env["PLAIT_TOOL_PROCESS"]
    retried = cli.json("graph", "retry", run_id)
    assert retried["status"] == "done" and retried["output"] == "ok"
    again = cli("graph", "retry", run_id, ok=False)
    assert again.returncode == 1
    assert f"run {run_id} is done: only a failed run can be retried" in again.stderr
    assert "Traceback" not in again.stderr
    shown = cli.json("graph", "inspect", run_id, "--verify")
    assert shown["verified"] is True
    assert commits(shown["trajectory"]) == [("a", 1), ("b", 1), ("b", 2), ("c", 1)]

    forked = cli.json("graph", "fork", run_id, "--at", "b:2", "--input", "new")
    assert forked["status"] == "done" and forked["run_id"] != run_id
    fork_shown = cli.json("graph", "inspect", forked["run_id"], "--verify")
    assert fork_shown["verified"] is True
    assert fork_shown["forked_from"]["run_id"] == run_id
    assert (fork_shown["forked_from"]["node"], fork_shown["forked_from"]["visit"]) == ("b", 2)
    assert f"forked from {run_id} after b:2" in cli("graph", "inspect", forked["run_id"]).stdout
    assert commits(fork_shown["trajectory"]) == [("c", 1)]

    bad = cli("graph", "fork", run_id, "--at", "nope", ok=False)
    assert bad.returncode == 2, bad.stderr
    cli.env["PLAIT_TOOL_PROCESS"] = "1"  # a fork re-uses people's answers: theirs only
    refused = cli("graph", "fork", run_id, "--at", "b:2", ok=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "only a person may answer, resume, cancel, retry, fork" in refused.stderr
    del cli.env["PLAIT_TOOL_PROCESS"]
    assert "the visits to fork at are: a:1, b:2" in bad.stderr


@pytest.mark.anyio
async def test_a_failed_fork_is_retried_from_its_own_chain(mesh: Mesh) -> None:
    graph = agent_chain("chain", ["a", "b", "c"], c={"prompt": "Go on from {{b}} {{input}}"})
    await store(mesh, graph)
    model = ScriptedModel(
        [
            {"node": "c", "visit": 1, "match": "for the fork", "error": "c broke in the fork"},
            {"text": "ok"},
        ]
    )
    runs = Runs(mesh)
    async with hosting(mesh, model):
        parent = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
        # Its first visit fails: the retry replays from the state its first event pins.
        fork = await runs.fork(parent.run_id, "b", by=ANA, input="for the fork")
        failed = await settle(runs, fork.run_id)
        assert failed.status == "failed" and failed.error_node == "c"
        await store(mesh, agent_chain("chain", ["a", "b"]) | {"version": 2})
        await runs.retry(fork.run_id, by=ANA)
        done = await settle(runs, fork.run_id)
    assert done.status == "done", done.error
    assert _calls(model, fork.run_id) == [("c", 1), ("c", 2)]
    assert await runs.verify(fork.run_id) == len(await read_events(mesh, fork.run_id))


def _map_graph() -> dict[str, Any]:
    """begin -> researcher -> fan (map over its urls) ~> fetch[i] -> join -> end."""
    return {
        "name": "mapped",
        "agent": "assistant",
        "budget": 50,
        "nodes": [
            {"id": "begin", "kind": "begin"},
            {"id": "researcher", "kind": "agent", "prompt": "List {{input}}",
             "response_format": {"type": "object"}},
            {"id": "fan", "kind": "fan_out", "specs": [{"kind": "map", "target_node_id": "fetch",
             "source_node_id": "researcher", "source_path": "found.urls"}]},
            {"id": "fetch", "kind": "agent", "prompt": "Fetch {{item}}"},
            {"id": "join", "kind": "fan_in"},
            {"id": "end", "kind": "end"},
        ],
        "edges": [
            {"source": "begin", "target": "researcher"},
            {"source": "researcher", "target": "fan"},
            {"source": "fetch", "target": "join"},
            {"source": "join", "target": "end"},
        ],
    }  # fmt: skip


@pytest.mark.anyio
async def test_replay_walks_a_finished_run_to_its_record_and_forks_inside_a_map(
    mesh: Mesh,
) -> None:
    await store(mesh, _map_graph())
    listing = json.dumps({"found": {"urls": ["u0", "u1", "u2"]}})
    model = ScriptedModel(
        [
            {"node": "researcher", "text": listing},
            {"node": "fetch", "match": "Fetch u0", "text": "page 0", "delay_ms": 1},
            {"node": "fetch", "match": "Fetch u1", "text": "page 1", "delay_ms": 30},
            {"node": "fetch", "match": "Fetch u2", "text": "page 2", "delay_ms": 60},
        ]
    )
    runs = Runs(mesh)
    async with hosting(mesh, model):
        parent = await settle(runs, (await runs.start("assistant", "mapped", "x")).run_id)
        assert parent.status == "done", parent.error
        events = await read_events(mesh, parent.run_id)
        spec = await RunStore(mesh).graph(parent)
        state = (await replay(mesh, spec, parent, events)).state
        assert (state.status, state.ready, state.output_node) == ("done", [], parent.output_node)
        assert state.visits == parent.visits
        assert {k: (o.visit, o.seq, o.error) for k, o in state.outputs.items()} == {
            k: (o.visit, o.seq, o.error) for k, o in parent.outputs.items()
        }
        assert state.fanouts == parent.fanouts  # the map's items included

        first = next(e for e in events if e.type == "node.committed" and e.node == "fetch[0]")
        fork = await runs.fork(parent.run_id, f"{first.node}:{first.visit}", by=ANA)
        done = await settle(runs, fork.run_id)
    assert done.status == "done", done.error
    before = {e.node for e in events[: first.seq] if e.type == "node.committed"}
    left = sorted(f"Fetch u{i}" for i in range(3) if f"fetch[{i}]" not in before)
    prompts = sorted(c.context.prompt for c in model.calls if c.context.run_id == fork.run_id)
    assert prompts == left and "Fetch u0" not in left  # the items of the instances left
    assert await runs.output(done) == await runs.output(parent)
    await runs.verify(fork.run_id)


@pytest.mark.anyio
async def test_a_fork_keeps_a_persons_answer_before_it_and_asks_its_own_after(
    mesh: Mesh,
) -> None:
    await store(mesh, ASKING_CHILD)
    model = ScriptedModel([{"node": "draft", "text": "the draft"}, {"text": "shipped"}])
    runs = Runs(mesh)
    async with hosting(mesh, model):
        parked = await settle(runs, (await runs.start("assistant", "sign-off", "x")).run_id)
        assert parked.status == "waiting_human"
        await runs.resume(parked.run_id, "yes", by=ANA)
        parent = await settle(runs, parked.run_id, since=parked)
        assert parent.status == "done"

        after = await settle(runs, (await runs.fork(parent.run_id, "approve", by=ANA)).run_id)
        assert after.status == "done" and _calls(model, after.run_id) == [("ship", 1)]

        before = await settle(runs, (await runs.fork(parent.run_id, "draft", by=ANA)).run_id)
        assert before.status == "waiting_human"
        assert before.waiting is not None and parked.waiting is not None
        assert before.waiting.decision_id != parked.waiting.decision_id  # its own question
        assert (await runs.desk.get(before.waiting.decision_id)).status == "open"
        await runs.resume(before.run_id, "yes", by=ANA)
        done = await settle(runs, before.run_id, since=before)
    assert done.status == "done"
    assert _calls(model, before.run_id) == [("ship", 1)]
    await runs.verify(before.run_id)


# -- a fork re-uses what people decided: a person's act only --------------------------------

FOUR = {
    **ASKING_CHILD,
    "nodes": [
        *ASKING_CHILD["nodes"][:2],  # type: ignore[index]
        {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{approve}})",
         "next": "notify"},
        {"id": "notify", "type": "agent", "prompt": "Tell them about {{ship}}"},
    ],
}  # fmt: skip


@pytest.mark.anyio
async def test_only_a_person_forks_past_a_persons_answer(mesh: Mesh) -> None:
    await store(mesh, FOUR)
    runs = Runs(mesh)
    bot = Agent("ci")
    async with hosting(mesh, ScriptedModel([{"text": "fine"}])):
        parked = await settle(runs, (await runs.start("assistant", "sign-off", "x")).run_id)
        await runs.resume(parked.run_id, "yes", by=ANA)
        parent = await settle(runs, parked.run_id, since=parked)
        assert parent.status == "done"
        before = len(await runs.list())

        for at in ("approve", "ship", "ship:1"):
            with pytest.raises(NotPermitted, match=r"ana answered approve in run grun_"):
                await runs.fork(parent.run_id, at, by=bot)
        with pytest.raises(NotPermitted, match="only a human may fork a run past"):
            await runs.fork(parent.run_id, "approve", by=bot, input="something new")
        assert len(await runs.list()) == before  # nothing started

        # Before the answer the fork asks its own question: anyone may start that.
        asks_again = await settle(runs, (await runs.fork(parent.run_id, "draft", by=bot)).run_id)
        assert asks_again.status == "waiting_human"

        # A person's fork re-uses the answer; a bot's fork of that fork still may not.
        mine = await settle(runs, (await runs.fork(parent.run_id, "approve", by=ANA)).run_id)
        assert mine.status == "done"
        first = (await read_events(mesh, mine.run_id))[0]
        assert first.detail["persons"] == [f"ana answered approve in run {parent.run_id}"]
        with pytest.raises(NotPermitted, match=f"ana answered approve in run {parent.run_id}"):
            await runs.fork(mine.run_id, "ship", by=bot)


@pytest.mark.anyio
async def test_a_fork_inherits_a_persons_budget_raise_only_when_a_person_forks(
    mesh: Mesh,
) -> None:
    budget = {"steps": 1, "on_exhausted": "escalate"}
    await store(mesh, agent_chain("chain", ["a", "b", "c"]) | {"budget": budget})
    runs = Runs(mesh)
    bot = Agent("ci")
    async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
        parked = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
        assert parked.waiting is not None and parked.waiting.kind == "budget"
        await runs.raise_budget(parked.run_id, {"steps": 5}, by=ANA)
        parent = await settle(runs, parked.run_id, since=parked)
        assert parent.status == "done", parent.error

        with pytest.raises(NotPermitted, match="ana raised the budget of run"):
            await runs.fork(parent.run_id, "b", by=bot)
        # From before the raise the fork has only the graph's budget: it parks again.
        again = await settle(runs, (await runs.fork(parent.run_id, "a", by=bot)).run_id)
        assert again.waiting is not None and again.waiting.kind == "budget"
        raised = await settle(runs, (await runs.fork(parent.run_id, "b", by=ANA)).run_id)
    assert raised.status == "done", raised.error
