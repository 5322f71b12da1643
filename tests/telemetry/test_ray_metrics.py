"""Metrics of runs served on Ray hosts reach the operator: ``plait worker --runtime ray
--metrics-port`` serves every host's metrics, each sample labelled with its host.

Two hosts on the session's real Ray cluster serve runs on the real Redis; the runs are
counted in the hosts' processes, and one scrape of the worker's port shows them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from tests._support.timing import scaled
from tests.runs.helpers import poll, store
from tests.runs.test_crash import with_mesh
from tests.runs.test_ownership import COUNT, all_terminal, start_runs
from tests.runs.test_ray_hosts import logged_shares, ray_cli, ray_worker
from tests.runs.test_ray_hosts import pytestmark as RAY_HOSTS
from tests.telemetry.test_metrics import Samples, free_port, samples, value

pytestmark = RAY_HOSTS  # Ray, Redis, slow, in the Ray group, on a Redis mesh

CHAIN = {
    "name": "counted",
    "agent": "assistant",
    "entry": "a",
    "nodes": [
        {"id": "a", "type": "agent", "prompt": "Start {{input}}", "next": "b"},
        {"id": "b", "type": "agent", "prompt": "Go on from {{a}}", "next": "c"},
        {"id": "c", "type": "agent", "prompt": "End {{b}}"},
    ],
}
RUNS = 6


def total(found: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over every host, with ``labels``."""
    return sum(
        v
        for (n, lbls), v in found.items()
        if n == name and {k: x for k, x in lbls if k != "host"} == labels
    )


def test_a_ray_workers_metrics_port_serves_the_hosts_metrics(
    ray_cluster: str, mesh_url: str, tmp_path: Path
) -> None:
    cli = ray_cli(tmp_path, mesh_url)
    model_file = tmp_path / "ok.model.json"
    model_file.write_text(json.dumps({"rules": [{"text": "ok"}]}))
    model = f"scripted:{model_file}"
    with_mesh(cli.mesh_url, lambda mesh: store(mesh, CHAIN))
    namespace = f"t{uuid.uuid4().hex[:8]}"
    port = free_port()
    worker = ray_worker(
        cli, ray_cluster, namespace, 2, "--model", model, "--metrics-port", str(port)
    )
    url = f"http://127.0.0.1:{port}/metrics"

    def scraped() -> Samples | None:
        try:
            return samples(httpx.get(url, timeout=scaled(15)).text)
        except httpx.TransportError:
            return None

    try:
        poll(lambda: logged_shares(worker, 4, 4), timeout=60)
        run_ids = start_runs(cli.mesh_url, "counted", [f"x{i}" for i in range(RUNS)])
        done = all_terminal(cli.mesh_url, run_ids, timeout=90)
        after = poll(
            lambda: (
                (got := scraped())
                and total(got, "plait_runs_ended_total", status="done") == RUNS
                and got
            ),
            timeout=60,
        )
        said = worker.stop()
    finally:
        worker.kill()
    assert "drained 2 host(s)" in said
    assert [r.status for r in done] == ["done"] * RUNS
    hosts = {dict(lbls)["host"] for (_, lbls) in after if dict(lbls).get("host")}
    assert hosts == {"host-0", "host-1"}
    assert value(after, "plait_host_up", host="host-0") == 1
    assert value(after, "plait_host_up", host="host-1") == 1
    # What the runs did, counted where they were served, summed over the hosts.
    assert total(after, "plait_transitions_total") >= 3 * RUNS
    assert total(after, "plait_model_calls_total", model=model, outcome="ok") == 3 * RUNS
    tokens = total(after, "plait_model_tokens_total", model=model, type="output")
    assert tokens == sum(r.usage.output_tokens for r in done)
    assert total(after, "plait_mesh_commit_seconds_count", backend="redis") > 0
    assert total(after, "plait_partitions_held") == COUNT
    labels = {v for key in after for _, v in key[1]}
    assert not [v for v in labels for r in done if r.run_id in v]  # no run ids as labels
