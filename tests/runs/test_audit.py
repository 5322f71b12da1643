"""The audit chain: any edit, drop or swap of a stored event is caught and named."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.decisions import Human
from plait.errors import AuditChainBroken
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import AuditEvent, Runs
from plait.runs.audit import AUDIT_KEY_ENV, event_hash, read_events
from plait.runs.log import split_ref
from plait.runs.record import audit_prefix, record_key

from .helpers import EXAMPLES, hosting, settle, store

Tamper = Callable[[Mesh, str, list[AuditEvent]], Awaitable[int]]
"""Breaks a run's stored history; returns the seq verification must name."""


def finished_run(url: str) -> str:
    """A research-and-verify run taken to done on the mesh at ``url``; its id."""

    async def main() -> str:
        async with open_mesh(url) as mesh:
            await store(mesh, EXAMPLES / "research_and_verify.json")
            runs = Runs(mesh)
            model = ScriptedModel.from_file(EXAMPLES / "research_and_verify.model.yaml")
            async with hosting(mesh, model):
                parked = await settle(
                    runs, (await runs.start("assistant", "research-and-verify", "Q3")).run_id
                )
                await runs.resume(parked.run_id, "yes", by=Human("ana"))
                rec = await settle(runs, parked.run_id, since=parked)
            assert rec.status == "done"
            return rec.run_id

    return anyio.run(main)


async def entry_holding(mesh: Mesh, run_id: str, seq: int) -> tuple[str, dict[str, Any], int]:
    """The log entry holding audit event ``seq``: its key, stored value and the event's
    index in it."""
    async for entry in mesh.scan(audit_prefix(run_id)):
        first = int(entry.key.rpartition("/")[2])
        if first <= seq < first + len(entry.value["events"]):
            return entry.key, entry.value, seq - first
    raise AssertionError(f"no log entry holds event {seq}")


async def put_event(mesh: Mesh, run_id: str, seq: int, value: Any) -> None:
    """Store ``value`` in the place of audit event ``seq``, in its log entry."""
    key, stored, index = await entry_holding(mesh, run_id, seq)
    events = list(stored["events"])
    events[index] = value
    await mesh.put(key, {**stored, "events": events})


async def drop_event(mesh: Mesh, run_id: str, seq: int) -> None:
    """Remove audit event ``seq`` from its log entry (the entry too, if it held only it)."""
    key, stored, index = await entry_holding(mesh, run_id, seq)
    events = [e for i, e in enumerate(stored["events"]) if i != index]
    if events:
        await mesh.put(key, {**stored, "events": events})
    else:
        await mesh.delete(key)


def committed(events: list[AuditEvent], node: str, visit: int) -> AuditEvent:
    return next(
        e for e in events if e.type == "node.committed" and (e.node, e.visit) == (node, visit)
    )


async def edit_a_field(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    event = committed(events, "verify", 1)
    stored = event.model_dump(mode="json")
    stored["verdict"] = "pass"  # as if the first review had passed
    await put_event(mesh, run_id, event.seq, stored)
    return event.seq


async def edit_and_rehash(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    event = committed(events, "verify", 1).model_copy(update={"verdict": "pass"})
    event.hash = event_hash(event)
    await put_event(mesh, run_id, event.seq, event.model_dump(mode="json"))
    return event.seq + 1  # the next event no longer follows it


async def drop_one(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    seq = committed(events, "draft", 2).seq
    await drop_event(mesh, run_id, seq)
    return seq


async def drop_the_last(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    await drop_event(mesh, run_id, events[-1].seq)
    return events[-1].seq


async def swap_two(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    first, second = committed(events, "draft", 1), committed(events, "verify", 1)
    await put_event(mesh, run_id, first.seq, second.model_dump(mode="json"))
    await put_event(mesh, run_id, second.seq, first.model_dump(mode="json"))
    return first.seq


async def renumber_a_swap(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    first, second = committed(events, "draft", 1), committed(events, "verify", 1)
    a = second.model_copy(update={"seq": first.seq})
    b = first.model_copy(update={"seq": second.seq})
    await put_event(mesh, run_id, first.seq, a.model_dump(mode="json"))
    await put_event(mesh, run_id, second.seq, b.model_dump(mode="json"))
    return first.seq


async def garbage(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    seq = committed(events, "publish", 1).seq
    await put_event(mesh, run_id, seq, {"seq": "nine", "type": ["?"]})
    return seq


async def edit_an_output(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    event = committed(events, "draft", 2)
    assert event.output_ref is not None
    key, node = split_ref(event.output_ref)
    stored = await mesh.get(key)
    assert stored is not None and node is not None
    outputs = stored.value["outputs"]
    outputs[node] = {**outputs[node], "value": "Q3 revenue rose 40%."}
    await mesh.put(key, stored.value)
    return event.seq


async def forge_an_output_pointer(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    entry = await mesh.get(record_key(run_id))
    assert entry is not None
    record = entry.value
    forged = f"runs/{run_id}/out/publish/forged"
    await mesh.put(forged, {"value": "Q3 revenue rose 40%.", "prompt": None, "error": None})
    record["outputs"]["publish"]["ref"] = forged
    await mesh.put(record_key(run_id), record)
    return int(record["audit_seq"])  # the record disagrees with the chain's head


async def forge_the_usage(mesh: Mesh, run_id: str, events: list[AuditEvent]) -> int:
    entry = await mesh.get(record_key(run_id))
    assert entry is not None
    record = entry.value
    record["usage"]["input_tokens"] = 1  # as if the run had cost next to nothing
    await mesh.put(record_key(run_id), record)
    return int(record["audit_seq"])


TAMPERS = [
    forge_an_output_pointer,
    forge_the_usage,
    edit_a_field,
    edit_and_rehash,
    drop_one,
    drop_the_last,
    swap_two,
    renumber_a_swap,
    garbage,
    edit_an_output,
]


@pytest.mark.parametrize("tamper", TAMPERS, ids=[t.__name__ for t in TAMPERS])
def test_inspect_verify_names_the_broken_event(tmp_path: Path, tamper: Tamper) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    run_id = finished_run(url)
    cli = CliRunner()
    clean = cli.invoke(app, ["graph", "inspect", run_id, "--verify", "--mesh", url])
    assert clean.exit_code == 0, clean.output
    assert "audit chain verified" in clean.output

    async def break_it() -> int:
        async with open_mesh(url) as mesh:
            return await tamper(mesh, run_id, await read_events(mesh, run_id))

    seq = anyio.run(break_it)
    broken = cli.invoke(app, ["graph", "inspect", run_id, "--verify", "--mesh", url])
    assert broken.exit_code == 1, broken.output
    assert broken.exception is None or isinstance(broken.exception, SystemExit)
    assert f"audit event {seq} fails verification" in broken.output

    as_json = cli.invoke(app, ["graph", "inspect", run_id, "--verify", "--json", "--mesh", url])
    assert as_json.exit_code == 1
    body: dict[str, Any] = json.loads(as_json.stdout)
    assert body["verified"] is False
    assert f"audit event {seq} fails" in body["verify_error"]

    async def verify() -> AuditChainBroken:
        async with open_mesh(url) as mesh:
            with pytest.raises(AuditChainBroken) as caught:
                await Runs(mesh).verify(run_id)
            return caught.value

    error = anyio.run(verify)
    assert (error.run_id, error.seq) == (run_id, seq)


def test_a_forged_output_pointer_is_named_and_its_output_not_trusted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    run_id = finished_run(url)

    async def forge() -> None:
        async with open_mesh(url) as mesh:
            await forge_an_output_pointer(mesh, run_id, [])

    anyio.run(forge)
    shown = CliRunner().invoke(
        app, ["graph", "inspect", run_id, "--verify", "--json", "--mesh", url]
    )
    body = json.loads(shown.stdout)
    assert body["verified"] is False
    assert "output 'publish' points at runs/" in body["verify_error"]
    assert "/out/publish/forged" in body["verify_error"]


def test_a_keyed_chain_is_an_hmac_that_verifies_only_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    monkeypatch.setenv(AUDIT_KEY_ENV, "s3cret")
    run_id = finished_run(url)

    async def check(*, rebuild_plain: bool = False) -> str | int:
        async with open_mesh(url) as mesh:
            if rebuild_plain:  # someone who can write the mesh but lacks the key
                events = await read_events(mesh, run_id)
                prev = ""
                for event in events:
                    event.mac, event.prev = None, prev
                    event.hash = event_hash(event)
                    prev = event.hash
                    await put_event(mesh, run_id, event.seq, event.model_dump(mode="json"))
                entry = await mesh.get(record_key(run_id))
                assert entry is not None
                await mesh.put(record_key(run_id), {**entry.value, "last_hash": prev})
            try:
                return await Runs(mesh).verify(run_id)
            except AuditChainBroken as exc:
                return str(exc)

    events = anyio.run(check)
    assert isinstance(events, int) and events > 5
    monkeypatch.setenv(AUDIT_KEY_ENV, "another")
    assert "does not match its HMAC" in str(anyio.run(check))
    monkeypatch.delenv(AUDIT_KEY_ENV)
    missing = anyio.run(check)
    assert "audit event 1 fails verification: the chain is an HMAC" in str(missing)
    assert f"set {AUDIT_KEY_ENV}" in str(missing)
    # Rebuilt as a plain sha256 chain without the key: it verifies only where no key is
    # asked for, which is why a keyed deployment sets one for every check.
    assert isinstance(anyio.run(lambda: check(rebuild_plain=True)), int)
    monkeypatch.setenv(AUDIT_KEY_ENV, "s3cret")
    rebuilt = anyio.run(check)
    assert "a plain sha256 event where PLAIT_AUDIT_KEY asks for an HMAC" in str(rebuilt)
