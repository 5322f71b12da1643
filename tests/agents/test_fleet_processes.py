"""The fleet on SQLite and Redis with three real ``plait worker`` processes: tasks
published from outside are each claimed and done once; a worker SIGKILLed mid-stream
and started again loses nothing and doubles nothing (its uncommitted turns run again
elsewhere, and their writes land once)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from plait.mesh import open_mesh
from tests._support.deliveries import drain
from tests._support.meshes import make_url_factory
from tests._support.processes import LoggedProcess, stop_all
from tests._support.timing import scaled

from .fleet import MODEL, set_up_fleet

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PLAIT = "import sys; from plait.cli import main; sys.argv[0] = 'plait'; main()"
TASKS = 30


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    make, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield make()
    finally:
        cleanup()


class Workers:
    """``plait worker`` processes on one mesh, with short leases for fast takeovers."""

    def __init__(self, url: str, logs: Path) -> None:
        self.env = {**os.environ, "PLAIT_MESH": url, "PYTHONPATH": str(ROOT)}
        self.logs = logs
        self.procs: list[LoggedProcess] = []
        # the example's rules, a worker's work made slow enough for a kill to land mid-turn
        rules = yaml.safe_load(MODEL.read_text())["rules"]
        for rule in rules:
            if rule.get("node") == "worker" and rule.get("round") == 2:
                rule["delay_ms"] = 60
        self.model = logs / "fleet.model.yaml"
        self.model.write_text(yaml.safe_dump({"rules": rules}))

    def start(self) -> LoggedProcess:
        proc = LoggedProcess(
            [sys.executable, "-c", PLAIT, "worker", "--model", f"scripted:{self.model}",
             "--lease-s", "1", "--visibility-timeout", "1", "--drain-timeout", "1"],
            self.logs / f"worker{len(self.procs)}.log", env=self.env, cwd=ROOT,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        stop_all(self.procs)


async def test_workers_lose_and_double_nothing_across_a_sigkill(url: str, tmp_path: Path) -> None:
    workers = Workers(url, tmp_path)
    async with open_mesh(url) as mesh:
        await set_up_fleet(mesh, reporter=False)
        for _ in range(3):
            workers.start()
        try:
            for n in range(TASKS):
                await mesh.publish("tasks.new", "task", {"id": f"k{n}", "text": f"task {n}"})

            async def done() -> list[Any]:
                return [e async for e in mesh.scan("results/")]

            deadline = time.monotonic() + scaled(60)
            while len(await done()) < 5:  # some work is done, the rest is under way
                assert time.monotonic() < deadline, "no results"
                await anyio.sleep(0.02)
            workers.procs[0].sigkill()
            workers.start()  # a restart: it rejoins and takes its share again
            deadline = time.monotonic() + scaled(90)
            while len(await done()) < TASKS:
                assert time.monotonic() < deadline, f"{len(await done())} of {TASKS} done"
                await anyio.sleep(0.05)
            sub = mesh.subscribe("tasks.done", "check", "c", start="begin")
            async with sub:  # every result is in: what the topic holds before a marker
                finished = [d.data["id"] for d in await drain(mesh, sub, "tasks.done")]
            for n in range(TASKS):
                claim = await mesh.get(f"tasks/k{n}")
                result = await mesh.get(f"results/k{n}")
                assert claim is not None and claim.version == 1, claim
                assert result is not None and result.version == 1, result  # written once
                assert result.value["by"] == claim.value["claimed_by"]
        finally:
            workers.stop()
    assert sorted(finished) == sorted(f"k{n}" for n in range(TASKS))  # once each
