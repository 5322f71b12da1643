"""The fleet example on Ray hosts: its README lines on a Redis mesh, served by ``plait
worker --runtime ray`` with two hosts on the session's Ray cluster. Each task is claimed
once and reported once; the reporter's sign-off waits for a person."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.runs.helpers import poll
from tests.runs.test_ray_hosts import logged_shares, named_hosts, ray_cli, ray_worker

from .fleet import MODEL
from .test_fleet_cli import run_fleet, set_up

pytestmark = [
    pytest.mark.ray,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),
    pytest.mark.parametrize("mesh_url", ["redis"], indirect=True),
]


def test_the_fleet_runs_on_ray_hosts(ray_cluster: str, mesh_url: str, tmp_path: Path) -> None:
    cli = ray_cli(tmp_path, mesh_url)
    set_up(cli)
    namespace = f"t{uuid.uuid4().hex[:8]}"
    worker = ray_worker(cli, ray_cluster, namespace, 2, "--model", f"scripted:{MODEL}")
    try:
        poll(lambda: logged_shares(worker, 4, 4), timeout=60)
        run_fleet(cli)
        worker.stop()
    finally:
        worker.kill()
    assert named_hosts(namespace) == []  # drained and ended on SIGTERM
