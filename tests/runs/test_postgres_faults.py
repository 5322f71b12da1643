"""A worker on the PostgreSQL mesh whose connections the server ends mid-run
(``pg_terminate_backend``, as an administrator does), or whose server crashes and comes
back (a private server of the test's own): it reconnects, its runs finish, and every
visit is committed once."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
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


PG_BIN = Path("/usr/lib/postgresql/15/bin")
RETRYING = "mesh unreachable, retrying in"


class PrivatePostgres:
    """A PostgreSQL server of this test's own (Debian's binaries, run as the
    ``postgres`` user), which the test stops as a crash does and starts again."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.data = workdir / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?schema=plait"
        shutil.chown(workdir, "postgres")
        self._as_postgres(PG_BIN / "initdb", "-D", str(self.data), "-A", "trust", "-U",
                          "postgres", "--no-sync")  # fmt: skip

    @staticmethod
    def _as_postgres(*argv: str | Path) -> None:
        # No pipes: a server pg_ctl starts would hold them open after pg_ctl exits.
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *map(str, argv)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=scaled(60),
        )  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data}"
        log = self.data.parent / "server.log"
        self._as_postgres(
            PG_BIN / "pg_ctl", "-D", self.data, "-o", options, "-l", log, "-w", "start"
        )

    def crash(self) -> None:
        """Stop at once, as a crash does (no checkpoint): recovery replays the WAL."""
        self._as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "stop")

    def stop_for_good(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "stop")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    if os.geteuid() != 0 or shutil.which("runuser") is None or not (PG_BIN / "initdb").exists():
        pytest.skip("needs root, runuser and Debian's PostgreSQL 15 binaries")
    # Not under tmp_path: the postgres user cannot enter root's private test directories.
    workdir = Path(tempfile.mkdtemp(prefix="plait-test-pg-"))
    try:
        server = PrivatePostgres(workdir)
        server.start()
        yield server
        server.stop_for_good()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_worker_rides_out_a_postgres_restart_and_commits_each_visit_once(
    cli: Cli, private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    url = private_postgres.url
    cli.mesh_url = url
    cli.env["PLAIT_MESH"] = url
    start_runs(url, 3)
    log = tmp_path / "worker.err"
    worker = spawn(cli, log, "worker", "--visibility-timeout", "1")
    try:
        poll(lambda: (found := records(url)) and all("second" in r.attempts for r in found))
        private_postgres.crash()
        # It retries again and again instead of exiting: alive after its third retry line.
        poll(lambda: log.read_text().count(RETRYING) >= 3 or worker.poll() is not None)
        assert worker.poll() is None, log.read_text()
        private_postgres.start()  # recovery replays every commit from the WAL
        poll(lambda: all(r.terminal for r in records(url)), timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=scaled(15))
    err = log.read_text()
    assert worker.returncode == 0, err
    assert "Traceback" not in err, err
    assert_each_visit_committed_once(url, [r.run_id for r in records(url)])
