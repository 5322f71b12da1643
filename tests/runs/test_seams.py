"""The typed seams between rooms: engine events, progress and wakes each cross as one
model, from the engine to the audit chain and the log, and from the log to the CLI,
the API and the console."""

from __future__ import annotations

import re
import typing
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait.api.app import create_app
from plait.api.tokens import create_token
from plait.cli._common import err_console
from plait.cli.run_progress import progress_printer
from plait.decisions import Human
from plait.graphs import events as engine_events
from plait.graphs.compiled import CompiledGraph
from plait.graphs.events import Event
from plait.mesh.memory import MemoryMesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunCommit, Runs
from plait.runs.audit import AuditEvent, read_events
from plait.runs.log import read_log
from plait.runs.progress import Progress
from plait.runs.store import RunStore
from plait.runs.wake import Wake, wake

from .helpers import EXAMPLES, ROOT, hosting, settle, store

pytestmark = pytest.mark.anyio

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"
CONSOLE = ROOT / "plait" / "api" / "static" / "console.js"
_PINS = ("output_sha256", "outputs")
"""What a commit adds to an event's detail: the hashes of the outputs it pins."""


def test_run_commit_step_takes_the_engines_typed_events() -> None:
    hints = typing.get_type_hints(RunCommit.step)
    assert hints["events"] == list[Event]
    assert typing.get_type_hints(RunCommit.claim)["resumed"] == list[Event]
    assert "as_data" not in vars(engine_events)  # no stored-form list for a commit to take


def _expected(event: Event, stored: AuditEvent) -> AuditEvent:
    """The audit event ``event`` makes, at ``stored``'s place in the chain."""
    node, visit, verdict, error, usage, detail = event.audit()
    pins = {k: v for k, v in stored.detail.items() if k in _PINS}
    return AuditEvent(
        seq=stored.seq,
        type=event.type,
        node=node,
        visit=visit,
        verdict=verdict,
        error=error,
        usage=usage.as_data() if usage is not None else {},
        output_ref=stored.output_ref,
        detail={**detail, **pins},
        actor=stored.actor,
        at=stored.at,
        prev=stored.prev,
        mac=stored.mac,
        hash=stored.hash,
    )


async def test_a_transitions_events_reach_the_chain_and_the_log_as_the_engine_made_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, list[Any]]] = []
    step = RunCommit.step

    async def recording(self: RunCommit, spec: Any, before: Any, new: Any, *a: Any, **kw: Any):  # type: ignore[no-untyped-def]
        seen.append((new.audit_seq, list(a[1])))  # the chain head before, the events
        return await step(self, spec, before, new, *a, **kw)

    monkeypatch.setattr(RunCommit, "step", recording)
    mesh = MemoryMesh()
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        parked = await settle(
            runs, (await runs.start("assistant", "research-and-verify", "Q")).run_id
        )
        assert parked.status == "waiting_human"
        await runs.resume(parked.run_id, "yes, ship it", by=Human("ana"))
        done = await settle(runs, parked.run_id, since=parked)
    assert done.status == "done"

    chain = {e.seq: e for e in await read_events(mesh, done.run_id)}
    types = set()
    for head, events in seen:
        for offset, event in enumerate(events):
            # What the engine returned is what the commit got: typed events, no dicts.
            assert is_dataclass(event) and not isinstance(event, dict), event
            stored = chain[head + 1 + offset]
            assert stored == _expected(event, stored)
            types.add(event.type)
    assert {"node.committed", "node.waiting", "run.done"} <= types, types
    # The resume's own event came as a RunResumed too, and is in the chain as one.
    resumed = [e for e in chain.values() if e.type == "run.resumed"]
    assert [e.detail["answer"] for e in resumed] == ["yes, ship it"]
    assert await runs.verify(done.run_id) == len(chain)

    # Each log entry's progress is one typed Progress, and agrees with its events.
    async for entry in read_log(mesh, done.run_id):
        assert isinstance(entry.progress, Progress)
        committed = [e for e in entry.events if e["type"] == "node.committed"]
        if committed and entry.progress.node is not None:
            assert entry.progress.visit == committed[0]["visit"]
        assert entry.progress.audit_seq == entry.events[-1]["seq"]


async def test_progress_is_one_schema_for_the_cli_the_api_and_the_console() -> None:
    mesh = MemoryMesh()
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel.from_file(SCRIPT)):
        run_id = (await runs.start("assistant", "research-and-verify", "Q")).run_id
        parked = await settle(runs, run_id)
    logged = [entry.progress async for entry in read_log(mesh, run_id) if entry.progress]
    assert logged and logged[-1].status == "waiting_human"

    # The CLI: Runs.wait hands the display Progress objects, and it prints from them.
    shown: list[Progress] = []
    await runs.wait(run_id, on_progress=shown.append, timeout=10)
    assert shown == logged
    with err_console.capture() as captured:
        with progress_printer(True) as show:
            for progress in shown:
                show(progress)
    assert "⏸ review_human (visit 1) · run waiting_human" in captured.get()

    # The API: the same progress, by the Progress schema in its OpenAPI document.
    app = create_app(mesh)
    schema = app.openapi()
    component = schema["components"]["schemas"]["Progress"]
    assert set(component["properties"]) == set(Progress.model_fields)
    route = schema["paths"]["/api/runs/{run_id}/progress"]["get"]
    items = route["responses"]["200"]["content"]["application/json"]["schema"]["items"]
    assert items == {"$ref": "#/components/schemas/Progress"}
    _, token = await create_token(mesh, "human", "ana")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://plait.test",
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        got = (await client.get(f"/api/runs/{run_id}/progress")).json()
        assert [Progress.model_validate(p) for p in got] == logged
        after = logged[-2].audit_seq
        tail = (await client.get(f"/api/runs/{run_id}/progress", params={"after": after})).json()
        assert [Progress.model_validate(p) for p in tail] == logged[-1:]
    assert parked.audit_seq == logged[-1].audit_seq

    # The console: every field it reads of a progress is one of the schema's.
    script = CONSOLE.read_text()
    assert "/progress?after=" in script
    read = set(re.findall(r"\bprogress\.(\w+)", script))
    assert read and read <= set(component["properties"])
    visit = schema["components"]["schemas"]["StartedVisit"]["properties"]
    assert set(re.findall(r"\bv\.(\w+)", script)) <= set(visit)


def test_a_wake_is_parsed_once_into_one_model() -> None:
    tick = Wake.parse({"run": "grun_a", "why": "tick", "backoff": 3}, "grun_b")
    assert (tick.run, tick.why, tick.backoff, tick.traceparent) == ("grun_a", "tick", 3, None)
    traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sent = Wake(run="grun_a", why="next", traceparent=traced).body()
    assert sent == {"run": "grun_a", "why": "next", "traceparent": traced}
    assert Wake.parse(sent, "grun_b").traceparent == traced
    # A wake of an older version (its sweep), or no wake at all: the record decides.
    assert Wake.parse({"run": "grun_a", "why": "sweep"}, "grun_b").why == "next"
    assert Wake.parse("garbage", "grun_b") == Wake(run="grun_b")
    for why, backoff in (("start", 0), ("tick", 2), ("takeover", 0)):
        built = Wake(run="grun_a", why=why, backoff=backoff)  # type: ignore[arg-type]
        assert wake("grun_a", why, backoff=backoff) == built.body()  # type: ignore[arg-type]
        assert Wake.parse(built.body(), "grun_b") == built


async def test_runs_carry_the_compiled_graph_read_once_per_process() -> None:
    mesh = MemoryMesh()
    await store(mesh, GRAPH)
    rec = await Runs(mesh).start("assistant", "research-and-verify", "Q")
    reads = RunStore(mesh)
    graph = await reads.graph(rec)
    assert isinstance(graph, CompiledGraph)
    assert await reads.graph(rec) is graph
    assert "_compiled" not in graph.spec.__dict__  # nothing rides on the spec


def test_no_runs_module_probes_a_node_with_getattr() -> None:
    runs_dir = ROOT / "plait" / "runs"
    probing = [p.name for p in Path(runs_dir).glob("*.py") if "getattr(node" in p.read_text()]
    assert probing == []
