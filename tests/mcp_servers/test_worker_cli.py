"""The CLI end to end: ``plait mcp add`` a server from PyPI, a graph naming its tool is
imported before any worker lists it, a worker offers its tools (its heartbeat says so),
and a run calls it there; without a worker, ``plait graph run`` serves it itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio

from plait.mesh import open_mesh
from plait.runs.heartbeats import Heartbeat, live_heartbeats
from tests._support.processes import LoggedProcess
from tests._support.timing import scaled
from tests.runs.helpers import Cli, poll

from .servers import CLOCK_GRAPH, time_server


def beats(cli: Cli) -> list[Heartbeat]:
    async def read() -> list[Heartbeat]:
        async with open_mesh(cli.mesh_url) as mesh:
            return await live_heartbeats(mesh)

    return anyio.run(read)


def test_a_worker_offers_a_declared_servers_tools_and_runs_use_them(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    (tmp_path / "now.yaml").write_text(CLOCK_GRAPH)
    (tmp_path / "rules.yaml").write_text("rules: [{text: ok}]\n")
    # --mesh before the server's command, which takes everything after "--"
    subprocess.run(
        [*cli.argv("mcp", "add", "time"), "--", *time_server()],
        cwd=tmp_path, env=cli.env, check=True, capture_output=True, timeout=scaled(60),
    )  # fmt: skip
    cli(
        "agents",
        "put",
        "clock",
        "--tools",
        "time.*",
        "--model",
        f"scripted:{tmp_path / 'rules.yaml'}",
    )
    cli("graph", "import", str(tmp_path / "now.yaml"))  # known by its server's name

    # No worker: the foreground command serves the run, with the server's tools.
    alone = cli("graph", "run", "clock", "now", "--json")
    assert json.loads(alone.stdout)["output"]["timezone"] == "UTC"

    with LoggedProcess(
        cli.argv("worker"), tmp_path / "worker.log", cwd=tmp_path, env=cli.env
    ) as worker:
        (beat,) = poll(lambda: beats(cli) or None)
        assert {"time.get_current_time", "time.convert_time"} <= set(beat.tools)
        served = cli("graph", "run", "clock", "now", "--json", timeout=60)
        assert json.loads(served.stdout)["output"]["timezone"] == "UTC", worker.text()
        assert "no worker is serving" not in served.stderr
