"""``plait worker --processes N``: N real serving processes under one supervisor.

The children split the mesh's partitions through the leases; SIGTERM to the parent
drains them all and it exits 0; a SIGKILLed child's partitions and runs are taken over
(each node committed once) and the parent starts another child; a SIGKILLed parent
takes its children with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from plait.actors.leases import Member, read_members
from plait.mesh import Mesh
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from tests._support.timing import scaled

from .helpers import DATA, Cli, poll
from .test_crash import with_mesh

pytestmark = pytest.mark.slow

SCRIPT = DATA / "slow_chain.model.yaml"
RUNS = 12
PARTITIONS = 16


def pool(cli: Cli, log: Path, count: int = 2) -> subprocess.Popen[str]:
    """``plait worker --processes COUNT`` with a short lease, its stderr in ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            cli.argv(
                "worker", "--processes", str(count), "--model", f"scripted:{SCRIPT}",
                "--lease-s", "2", "--visibility-timeout", "1",
                "--partitions", str(PARTITIONS),
            ),
            cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


def members(cli: Cli) -> list[Member]:
    async def read(mesh: Mesh) -> list[Member]:
        return await read_members(mesh)

    return with_mesh(cli.mesh_url, read)


def serving(cli: Cli, parent: subprocess.Popen[str], count: int = 2) -> list[Member] | None:
    """The live children of ``parent`` if ``count`` of them split every partition."""
    assert parent.poll() is None, f"the pool exited {parent.returncode}"
    found = [m for m in members(cli) if m.serves == "all"]
    held = [p for m in found for p in m.held]
    split = sorted(held) == list(range(PARTITIONS))
    ok = len(found) == count and split and all(m.pid != parent.pid for m in found)
    return found if ok else None


def start_runs(cli: Cli) -> list[str]:
    cli.setup("graph", "import", str(DATA / "slow_chain.json"))

    async def start(mesh: Mesh) -> list[str]:
        runs = Runs(mesh)
        return [(await runs.start("assistant", "slow-chain", f"r{i}")).run_id for i in range(RUNS)]

    return with_mesh(cli.mesh_url, start)


def records(cli: Cli, ids: list[str]) -> list[RunRecord]:
    async def read(mesh: Mesh) -> list[RunRecord]:
        runs = Runs(mesh)
        return [await runs.get(run_id) for run_id in ids]

    return with_mesh(cli.mesh_url, read)


def assert_each_node_committed_once(cli: Cli, ids: list[str]) -> None:
    async def check(mesh: Mesh) -> None:
        runs = Runs(mesh)
        for run_id in ids:
            await runs.verify(run_id)
            events = await read_events(mesh, run_id)
            committed = Counter(e.node for e in events if e.type == "node.committed")
            assert committed == {"first": 1, "second": 1, "third": 1}, (run_id, committed)

    with_mesh(cli.mesh_url, check)


def stop(proc: subprocess.Popen[str], log: Path) -> str:
    """SIGTERM the pool: it drains its children and exits 0. Its log."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert proc.returncode == 0, text
    return text


def gone(pid: int) -> bool:
    """True once ``pid`` is no process (or only a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def test_a_pool_splits_the_partitions_serves_runs_and_drains(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "pool.log"
    proc = pool(cli, log)
    try:
        children = poll(lambda: serving(cli, proc), timeout=60)
        ids = start_runs(cli)
        done = poll(lambda: all(r.terminal for r in records(cli, ids)), timeout=60)
        assert done
    finally:
        text = stop(proc, log)
    assert [r.status for r in records(cli, ids)] == ["done"] * RUNS
    assert_each_node_committed_once(cli, ids)
    assert "supervising 2 worker processes" in text
    assert text.count("stopped after handling") == 2, text
    assert all(gone(m.pid) for m in children)


def test_a_sigkilled_child_is_replaced_and_nothing_is_lost(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "pool.log"
    proc = pool(cli, log)
    try:
        children = poll(lambda: serving(cli, proc), timeout=60)
        pids = {m.pid for m in children}
        ids = start_runs(cli)

        def victim() -> tuple[int, list[str]] | None:
            # a child with the slow second node of some run in flight
            busy: dict[int, list[str]] = {}
            for rec in records(cli, ids):
                second = rec.attempts.get("second")
                for pid in pids:
                    if second is not None and f":{pid}:" in second.host:
                        busy.setdefault(pid, []).append(rec.run_id)
            return max(busy.items(), key=lambda kv: len(kv[1])) if busy else None

        doomed, interrupted = poll(victim, timeout=60)
        os.kill(doomed, signal.SIGKILL)
        poll(lambda: all(r.terminal for r in records(cli, ids)), timeout=90)
        # the pool started another child, and two children split the partitions again
        again = poll(
            lambda: (found := serving(cli, proc)) and doomed not in {m.pid for m in found},
            timeout=60,
        )
        assert again
    finally:
        text = stop(proc, log)
    finished = records(cli, ids)
    assert [r.status for r in finished] == ["done"] * RUNS
    assert_each_node_committed_once(cli, ids)
    assert f"worker process {doomed} exited -9; starting another" in text, text
    for rec in finished:
        if rec.run_id in interrupted:
            assert rec.usage.retries == 1  # the interrupted node ran again elsewhere


def test_a_sigkilled_pool_takes_its_children_with_it(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "pool.log"
    proc = pool(cli, log)
    try:
        children = poll(lambda: serving(cli, proc), timeout=60)
    finally:
        proc.kill()
        proc.wait()
    poll(lambda: all(gone(m.pid) for m in children), timeout=30)
