"""A run served on a Ray host streams to a watcher in another process on the Redis mesh.

``plait worker --runtime ray`` serves the mesh from one Ray host (a process of the
session's Ray cluster); the test process starts a run whose draft streams 100 chunks
and follows the run's live channel: it gets every delta in order, then the commit that
supersedes them, then the run's end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait.mesh import Mesh
from plait.runs import Runs
from plait.runs.channel import LiveEvent
from plait.runs.watch import follow_run

from .helpers import agent_chain, poll, store
from .test_crash import with_mesh
from .test_ray_hosts import logged_shares, namespace, ray_cli, ray_worker

__all__ = ["namespace"]  # the fixture, used by name

pytestmark = [
    pytest.mark.ray,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),
    pytest.mark.parametrize("mesh_url", ["redis"], indirect=True),
]

CHUNKS = 100
TEXT = "".join(f"token{n} " for n in range(CHUNKS))


def test_a_watcher_on_the_redis_mesh_sees_a_ray_hosts_tokens(
    ray_cluster: str, mesh_url: str, namespace: str, tmp_path: Path
) -> None:
    cli = ray_cli(tmp_path, mesh_url)
    model = tmp_path / "stream.model.json"
    rules = [{"node": "draft", "text": TEXT, "chunks": CHUNKS, "chunk_delay_ms": 10}]
    model.write_text(json.dumps({"rules": rules}))
    with_mesh(cli.mesh_url, lambda mesh: store(mesh, agent_chain("one", ["draft"])))
    worker = ray_worker(cli, ray_cluster, namespace, 1, "--model", f"scripted:{model}")

    async def watch(mesh: Mesh) -> tuple[list[LiveEvent], str, object]:
        runs = Runs(mesh)
        rec = await runs.start("assistant", "one", "x")
        events = [event async for event in follow_run(mesh, rec.run_id)]
        done = await runs.get(rec.run_id)
        assert done is not None
        return events, done.status, await runs.output(done)

    try:
        poll(lambda: logged_shares(worker, 8), timeout=60)
        events, status, drafted = with_mesh(cli.mesh_url, watch)
        worker.stop()
    finally:
        worker.kill()
    assert status == "done"
    deltas = [e for e in events if e.kind == "delta" and e.node == "draft"]
    # The watcher came while the host queued the draft (nobody watched yet): all of it.
    assert len(deltas) == CHUNKS
    assert "".join(e.text or "" for e in deltas) == TEXT == drafted
    assert [e.offset for e in events] == sorted(e.offset for e in events)
    committed = [e for e in events if e.progress and e.progress.node == "draft"]
    assert committed and committed[0].offset > deltas[-1].offset
    assert events[-1].ends and events[-1].progress is not None
    assert events[-1].progress.status == "done"
