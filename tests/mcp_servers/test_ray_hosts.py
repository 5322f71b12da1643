"""MCP servers used from runs on Ray hosts (the session's real Ray cluster, the real
Redis): a host opens the declared servers it can start, its heartbeat advertises their
tools, and a run naming one waits for a host that offers it.

The server is declared by a relative command (``./mcp-time``), as one installed on some
machines only: hosts started from a directory without it cannot open it and offer none
of its tools; the run stays queued, no node of it run, until hosts started where the
server is installed serve the mesh and run it there.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import anyio

from plait.mesh import open_mesh
from plait.runs.heartbeats import Heartbeat, live_heartbeats
from tests._support.timing import scaled
from tests.runs.helpers import Cli, poll
from tests.runs.test_crash import record_of
from tests.runs.test_ray_hosts import pytestmark as RAY_ON_REDIS
from tests.runs.test_ray_hosts import ray_cli, ray_worker

from .servers import CLOCK_GRAPH, time_server

pytestmark = RAY_ON_REDIS  # Ray hosts share a mesh only on Redis


def ray_beats(cli: Cli, namespace: str) -> list[Heartbeat]:
    """The live heartbeats of the Ray hosts of ``namespace`` on the CLI's mesh."""

    async def read() -> list[Heartbeat]:
        async with open_mesh(cli.mesh_url) as mesh:
            beats = await live_heartbeats(mesh)
            return [b for b in beats if b.host.startswith(f"ray:{namespace}/")]

    return anyio.run(read)


def test_a_run_naming_an_mcp_tool_runs_on_the_ray_host_whose_server_opened(
    ray_cluster: str, mesh_url: str, tmp_path: Path
) -> None:
    bare, installed = tmp_path / "bare", tmp_path / "installed"
    bare.mkdir()
    installed.mkdir()
    command, *args = time_server()
    (installed / "mcp-time").symlink_to(command)
    without, with_server = ray_cli(bare, mesh_url), ray_cli(installed, mesh_url)
    # --mesh before the server's command, which takes everything after "--"
    subprocess.run(
        [*without.argv("mcp", "add", "time"), "--", "./mcp-time", *args],
        cwd=bare, env=without.env, check=True, capture_output=True, timeout=scaled(60),
    )  # fmt: skip
    without("agents", "put", "clock", "--tools", "time.*")
    (bare / "now.yaml").write_text(CLOCK_GRAPH)
    without("graph", "import", str(bare / "now.yaml"))  # known by its server's name

    first_ns, second_ns = f"t{uuid.uuid4().hex[:8]}", f"t{uuid.uuid4().hex[:8]}"
    first = ray_worker(without, ray_cluster, first_ns, 1)
    try:
        (beat,) = poll(lambda: ray_beats(without, first_ns) or None, timeout=90)
        assert beat.serves == "all"
        assert not [t for t in beat.tools if t.startswith("time.")]
        queued = without("graph", "run", "clock", "now", "--detach", "--json")
        run_id = json.loads(queued.stdout)["run_id"]
        said = " ".join(queued.stderr.split())
        assert "needs tool(s) time.get_current_time that no serving worker offers" in said
        assert "until a worker or Ray host where MCP server(s) time can start" in said
    finally:
        first.stop(timeout=60)
    rec = record_of(without.mesh_url, run_id)
    assert rec is not None and rec.visits == {} and not rec.terminal  # no node ran

    second = ray_worker(with_server, ray_cluster, second_ns, 1)
    try:
        (beat,) = poll(lambda: ray_beats(with_server, second_ns) or None, timeout=90)
        assert {"time.get_current_time", "time.convert_time"} <= set(beat.tools)
        done = poll(
            lambda: (r := record_of(with_server.mesh_url, run_id)) is not None and r.terminal and r,
            timeout=90,
        )
        assert done.status == "done", done.error
        assert done.visits == {"ask": 1}  # run once, on the only host offering the tool
        shown = with_server.json("graph", "inspect", run_id)
    finally:
        second.stop(timeout=60)
    assert shown["output"]["timezone"] == "UTC", second.text()
