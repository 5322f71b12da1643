"""The release actor end to end with real processes: the programs saved and promoted
with ``plait programs``, the graph started with ``plait exec``, served by ``plait
worker`` processes SIGKILLed and started again between every two nodes (and while the
sign-off waits), the sign-off answered with ``plait decisions answer``. Each node's
effect lands once and one decision is raised."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.agents.store import last_turns
from plait.decisions import DecisionAnswerer
from plait.mesh import Mesh, open_mesh
from tests._support.meshes import make_url_factory
from tests._support.processes import LoggedProcess
from tests._support.timing import scaled
from tests.runs.helpers import Cli

from .release_actor import EXAMPLE, NODES

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    make, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield make()
    finally:
        cleanup()


class Worker:
    """One ``plait worker`` at a time, with short leases for fast takeovers."""

    def __init__(self, cli: Cli, logs: Path) -> None:
        self.cli, self.logs = cli, logs
        self.proc: LoggedProcess | None = None
        self.started = 0

    def start(self) -> None:
        argv = self.cli.argv("worker", "--lease-s", "1", "--visibility-timeout", "1")
        self.proc = LoggedProcess(
            [*argv, "--drain-timeout", "1"], self.logs / f"worker{self.started}.log",
            cwd=self.cli.cwd, env=self.cli.env,
        )  # fmt: skip
        self.started += 1

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.sigkill()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


async def until(mesh: Mesh, check: Any, what: str, timeout_s: float = 40.0) -> dict[str, Any]:
    """Poll the graph record until ``check(record)``; the record. ``timeout_s`` is
    stretched on a busy machine."""
    deadline = time.monotonic() + scaled(timeout_s)
    value: Any = None
    while time.monotonic() < deadline:
        entry = await mesh.get("runs/r1/graph")
        value = entry.value if entry is not None else None
        if value is not None and check(value):
            return dict(value)
        await anyio.sleep(0.02)
    raise AssertionError(f"not {what} within {timeout_s}s (record: {value!r})")


async def test_a_worker_killed_between_every_two_nodes_loses_and_doubles_nothing(
    url: str, tmp_path: Path
) -> None:
    cli = Cli(tmp_path, url)
    for name in NODES:
        saved = cli("programs", "save", f"graph-{name}", str(EXAMPLE / f"{name}.py")).stdout
        assert f"saved graph-{name} version 1" in saved
        cli("programs", "promote", f"graph-{name}", "--version", "1")
    started = cli.json("exec", str(EXAMPLE / "start.py"), "--payload", "run=r1")["result"]
    assert started == {
        "run": "r1",
        "key": "runs/r1/graph",
        "actor": "agent:graph-r1",
        "topic": "graph.r1",
    }
    worker = Worker(cli, tmp_path)
    async with open_mesh(url) as mesh:
        try:
            worker.start()
            for node in ("fetch", "test"):  # a restart once each node's result is recorded
                await until(mesh, lambda r, n=node: n in r["results"], f"past {node}")
                worker.kill()
                worker.start()
            at_approve = await until(mesh, lambda r: r.get("decisionId"), "asking")
            worker.kill()  # while the sign-off waits: the restart asks no second time
            worker.start()
            answered = cli(
                "decisions", "answer", at_approve["decisionId"], "--option", "yes"
            ).stdout
            assert "answered" in answered
            await until(mesh, lambda r: "approve" in r["results"], "past approve")
            worker.kill()
            worker.start()
            done = await until(mesh, lambda r: r["status"] == "done", "done", timeout_s=60)
            decisions = await DecisionAnswerer(mesh).list()
            effects = {n: await mesh.get(f"releases/r1/{n}") for n in ("fetch", "test", "release")}
            turns = await last_turns(mesh, "graph-r1", 20)
        finally:
            worker.stop()
    assert list(done["results"]) == ["fetch", "test", "approve", "release"]
    assert done["results"]["approve"]["ok"] is True and done["results"]["approve"]["by"]
    assert [d.id for d in decisions] == ["release-r1"]  # raised once across the restarts
    for node, effect in effects.items():
        assert effect is not None and effect.version == 1, node  # each effect once
    release = done["results"]["release"]
    assert release["release_key"] == "releases/r1/release" and release["version"] == "r1"
    shown = json.loads(cli("agents", "show", "graph-r1", "--json").stdout)
    assert shown["name"] == "graph-r1" and turns
