"""Prometheus metrics: ``plait worker --metrics-port`` and ``plait serve``'s ``/metrics``
give text ``prometheus_client.parser`` reads, whose counters move as runs run."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from plait.actors.partitions import load_partitions
from plait.api import metrics as api_metrics
from plait.api.app import create_app
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.runs import Runs
from tests._support.timing import scaled
from tests.runs.helpers import Cli, hosting, poll, settle, store
from tests.runs.test_crash import SCRIPT, record_when, stop

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of Prometheus text, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_worker_serves_metrics_that_move_as_its_runs_run(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    port = free_port()
    cli.setup(
        "graph", "import", str(Path(__file__).parents[1] / "runs" / "data" / "slow_chain.json")
    )
    worker = cli.spawn("worker", "--metrics-port", str(port), "--visibility-timeout", "1")
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def scraped() -> Samples | None:
            try:
                return samples(httpx.get(url, timeout=scaled(5)).text)
            except httpx.TransportError:
                return None

        before = poll(scraped)
        model = f"scripted:{SCRIPT}"
        cli("graph", "run", "assistant", "slow-chain", "--input", "x", "--model", model,
            "--detach", "--json")  # fmt: skip
        rec = record_when(cli.mesh_url, lambda r: r.terminal)
        after = poll(
            lambda: (
                (got := scraped()) and value(got, "plait_runs_ended_total", status="done") and got
            )
        )
    finally:
        stop(worker)
    assert rec.status == "done"
    assert value(before, "plait_transitions_total") == 0
    assert value(after, "plait_transitions_total") >= 3
    assert value(after, "plait_runs_ended_total", status="done") == 1
    assert value(after, "plait_model_calls_total", model=model, outcome="ok") == 3
    tokens = value(after, "plait_model_tokens_total", model=model, type="output")
    assert tokens == rec.usage.output_tokens
    assert value(after, "plait_partitions_held") > 0
    assert ("plait_mailbox_in_flight", ()) in after
    assert value(after, "plait_mesh_commit_seconds_count", backend="sqlite") > 0
    labels = {v for key in after for _, v in key[1]}
    assert not [v for v in labels if rec.run_id in v]  # no run ids as labels


HUMAN = {
    "name": "asks",
    "agent": "assistant",
    "entry": "a",
    "nodes": [
        {"id": "a", "type": "agent", "prompt": "Draft {{input}}", "next": "h"},
        {"id": "h", "type": "human", "ask": "Approve?"},
    ],
}
CHAIN = {
    "name": "chain",
    "agent": "assistant",
    "entry": "a",
    "nodes": [{"id": "a", "type": "agent", "prompt": "Go {{input}}"}],
}


async def test_serve_metrics_count_runs_and_decisions_on_the_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_metrics, "MESH_READ_S", 0.0)  # each scrape reads the mesh
    async with open_mesh(f"sqlite:///{tmp_path / 'mesh.db'}") as mesh:
        await store(mesh, HUMAN)
        await store(mesh, CHAIN)
        transport = httpx.ASGITransport(app=create_app(mesh))
        async with httpx.AsyncClient(transport=transport, base_url="http://plait.test") as api:
            before = samples((await api.get("/metrics")).text)  # no token: counts only
            runs = Runs(mesh)
            async with hosting(mesh, ScriptedModel([{"text": "ok"}])):
                done = await settle(runs, (await runs.start("assistant", "chain", "x")).run_id)
                parked = await settle(runs, (await runs.start("assistant", "asks", "y")).run_id)
            response = await api.get("/metrics")
        count = await load_partitions(mesh)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    after = samples(response.text)
    assert (done.status, parked.status) == ("done", "waiting_human")
    moved = value(after, "plait_transitions_total") - value(before, "plait_transitions_total")
    assert moved >= 3
    ended = value(after, "plait_runs_ended_total", status="done")
    assert ended - value(before, "plait_runs_ended_total", status="done") == 1
    parks = value(after, "plait_runs_parked_total", kind="human")
    assert parks - value(before, "plait_runs_parked_total", kind="human") == 1
    assert value(after, "plait_runs", status="done") == 1
    assert value(after, "plait_runs", status="waiting_human") == 1
    assert value(after, "plait_decisions_open") == 1
    assert value(after, "plait_decision_oldest_age_seconds") >= 0
    backlog = {k: v for k, v in after.items() if k[0] == "plait_mailbox_backlog"}
    assert {dict(k[1])["partition"] for k in backlog} == {str(n) for n in range(count)}
    assert sum(backlog.values()) == 0  # every wake acked
