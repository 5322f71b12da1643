"""A worker on the PostgreSQL mesh whose connections the server ends mid-run
(``pg_terminate_backend``, as a restart or an administrator does): it reconnects, its
runs finish, and every visit is committed once."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests._support.meshes import (
    POSTGRES_URL,
    drop_postgres_schema,
    postgres_url,
    require_postgres,
)
from tests._support.timing import scaled

from .helpers import Cli, poll
from .test_mesh_outage import assert_each_visit_committed_once, records, spawn, start_runs

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A mesh URL in a schema of this test's own, its connections named for it."""
    require_postgres()
    schema = f"plait_test_{uuid.uuid4().hex[:12]}"
    yield postgres_url(schema) + f"&application_name={schema}"
    drop_postgres_schema(schema)


def terminate(app_name: str) -> int:
    """End every backend of ``app_name``'s connections; how many there were."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app_name,),
        ).fetchall()
    return len(rows)


def test_a_worker_whose_connections_are_killed_mid_run_finishes_each_run_once(
    cli: Cli, pg_url: str, tmp_path: Path
) -> None:
    cli.mesh_url = pg_url
    cli.env["PLAIT_MESH"] = pg_url
    app_name = pg_url.rsplit("application_name=", 1)[1]
    start_runs(pg_url, 3)
    log = tmp_path / "worker.err"
    worker = spawn(cli, log, "worker", "--visibility-timeout", "1")
    try:
        poll(lambda: (found := records(pg_url)) and all("second" in r.attempts for r in found))
        killed = 0
        # Again and again while the runs go on: commits in flight, idle pooled
        # connections and the listener all lose their backends.
        while not all(r.terminal for r in records(pg_url)):
            killed += terminate(app_name)
            poll(lambda: worker.poll() is not None or terminate_ready(app_name), timeout=10)
            assert worker.poll() is None, log.read_text()
            if killed > 200:
                break
        assert killed > 0
        poll(lambda: all(r.terminal for r in records(pg_url)), timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=scaled(15))
    err = log.read_text()
    assert worker.returncode == 0, err
    assert "Traceback" not in err, err
    assert_each_visit_committed_once(pg_url, [r.run_id for r in records(pg_url)])


def terminate_ready(app_name: str) -> bool:
    """Whether the worker has connected again since its backends were ended."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        ).fetchone()
    return bool(row and row[0])
