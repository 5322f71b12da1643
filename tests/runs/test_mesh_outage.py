"""A Redis outage: ``plait worker`` and ``plait graph run`` ride it out and lose nothing.

Each test starts a Redis server of its own on a free port, its data in an append-only
file synced on every write, so that a restart keeps what was committed: SIGKILL and a
restart, or SIGSTOP longer than the reply timeout and SIGCONT. A command that cannot
reach the mesh at all fails in seconds with one line.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest
import redis

from plait.mesh import Mesh, open_mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from tests._support.timing import scaled

from .helpers import DATA, Cli, poll, store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

SCRIPT = DATA / "slow_chain.model.yaml"  # its second node takes 1.5 s
PASSWORD = "s3cret-pw"
RETRYING = "mesh unreachable, retrying in"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PrivateRedis:
    """A redis-server of this test's own, which the test kills, restarts and pauses."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0?prefix=t&password={PASSWORD}"
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir()

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--requirepass", PASSWORD, "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, password=PASSWORD, socket_connect_timeout=0.2)
        try:
            poll(lambda: self._answers(client), timeout=10)
        finally:
            client.close()

    @staticmethod
    def _answers(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def kill(self) -> None:
        assert self.process is not None
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=scaled(10))

    def stop_for_good(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=scaled(10))


@pytest.fixture
def server(tmp_path: Path) -> PrivateRedis:
    started = PrivateRedis(tmp_path / "redis")
    started.start()
    yield started  # type: ignore[misc]
    started.stop_for_good()


def with_mesh(url: str, body: Callable[[Mesh], Awaitable[T]]) -> T:
    async def main() -> T:
        async with open_mesh(url) as mesh:
            return await body(mesh)

    return anyio.run(main)


def records(url: str) -> list[RunRecord]:
    async def read(mesh: Mesh) -> list[RunRecord]:
        runs = Runs(mesh)
        return [await runs.get(s.run_id) for s in await runs.list()]

    return with_mesh(url, read)


def start_runs(url: str, count: int) -> None:
    async def start(mesh: Mesh) -> None:
        await store(mesh, DATA / "slow_chain.json")
        for i in range(count):
            await Runs(mesh).start("assistant", "slow-chain", f"x{i}", model=f"scripted:{SCRIPT}")

    with_mesh(url, start)


def spawn(cli: Cli, log: Path, *args: str) -> subprocess.Popen[str]:
    """``plait ARGS`` as a process, its stderr going to ``log`` (read while it runs)."""
    with log.open("w") as err:
        return subprocess.Popen(
            cli.argv(*args), cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE, stderr=err
        )


def assert_each_visit_committed_once(url: str, run_ids: list[str]) -> None:
    async def check(mesh: Mesh) -> None:
        runs = Runs(mesh)
        for run_id in run_ids:
            rec = await runs.get(run_id)
            assert rec.status == "done", rec
            assert rec.visits == {"first": 1, "second": 1, "third": 1}
            events = await read_events(mesh, run_id)
            committed = Counter((e.node, e.visit) for e in events if e.type == "node.committed")
            assert committed == {("first", 1): 1, ("second", 1): 1, ("third", 1): 1}
            await runs.verify(run_id)

    with_mesh(url, check)


def on_redis(cli: Cli, url: str) -> None:
    cli.mesh_url = url
    cli.env["PLAIT_MESH"] = url


def test_a_worker_rides_out_a_redis_restart_and_loses_nothing(
    cli: Cli, server: PrivateRedis, tmp_path: Path
) -> None:
    on_redis(cli, server.url)
    start_runs(server.url, 3)
    log = tmp_path / "worker.err"
    worker = spawn(cli, log, "worker", "--visibility-timeout", "1")
    try:
        poll(lambda: (found := records(server.url)) and all("second" in r.attempts for r in found))
        server.kill()
        # It retries again and again instead of exiting: alive after its third retry line.
        poll(lambda: log.read_text().count(RETRYING) >= 3 or worker.poll() is not None)
        assert worker.poll() is None, log.read_text()
        server.start()  # the same port; its append-only file brings every commit back
        poll(lambda: all(r.terminal for r in records(server.url)), timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=scaled(15))
    err = log.read_text()
    assert worker.returncode == 0, err
    assert "Traceback" not in err and "Error:" not in err, err
    start_line = err.splitlines()[0]
    assert f"serving redis://127.0.0.1:{server.port}/0?prefix=t&password=***" in start_line
    assert PASSWORD not in err
    assert_each_visit_committed_once(server.url, [r.run_id for r in records(server.url)])


def test_graph_run_rides_out_a_redis_pause_longer_than_its_timeout(
    cli: Cli, server: PrivateRedis, tmp_path: Path
) -> None:
    url = server.url + "&timeout=0.5"
    on_redis(cli, url)
    with_mesh(url, lambda mesh: store(mesh, DATA / "slow_chain.json"))
    log = tmp_path / "run.err"
    run = spawn(
        cli, log, "graph", "run", "assistant", "slow-chain", "--input", "x",
        "--model", f"scripted:{SCRIPT}", "--json",
    )  # fmt: skip
    try:
        poll(lambda: (found := records(url)) and "second" in found[0].attempts)
        server.signal(signal.SIGSTOP)
        paused_at = time.monotonic()
        # past the reply timeout twice over: the node's commit, due meanwhile, times out
        poll(lambda: log.read_text().count(RETRYING) >= 2 and time.monotonic() - paused_at > 2)
        assert "Timeout" in log.read_text() and run.poll() is None, log.read_text()
        server.signal(signal.SIGCONT)
        out, _ = run.communicate(timeout=scaled(30))
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    err = log.read_text()
    assert run.returncode == 0, err
    assert "Traceback" not in err, err
    assert '"status": "done"' in out
    assert_each_visit_committed_once(url, [r.run_id for r in records(url)])


def test_a_command_that_cannot_reach_the_mesh_fails_in_seconds_with_one_line(cli: Cli) -> None:
    port = free_port()
    nothing = f"redis://:{PASSWORD}@127.0.0.1:{port}/0?password={PASSWORD}"
    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        mute = f"redis://127.0.0.1:{silent.getsockname()[1]}/0?connect_timeout=1"
        for url, shown, why in (
            (nothing, f"redis://:***@127.0.0.1:{port}/0?password=***", "Connect call failed"),
            (mute, mute, "no answer within 1s"),
        ):
            on_redis(cli, url)
            started = time.monotonic()
            done = cli("graph", "runs", ok=False)
            assert time.monotonic() - started < scaled(10)  # stretched on a busy machine
            assert done.returncode == 1 and done.stdout == ""
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            assert lines[0].startswith(f"error: cannot reach the Redis mesh at {shown}: ")
            assert why in lines[0] and "--mesh or PLAIT_MESH" in lines[0]
            assert PASSWORD not in lines[0]
