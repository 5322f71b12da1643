"""Ownership across processes: real ``plait worker`` processes leasing mailbox partitions.

Workers run with a one-second lease on a mesh of 8 partitions, each logging its stderr
(where it prints ``holding N of P partitions: ...``) to a file of its own. One worker is
SIGKILLed with runs in flight, one SIGSTOPped past its lease and continued, workers of
different visibility timeouts serve side effects, a foreground run serves its own run
only, and three workers serve runs asking people. Every visit is committed once and
every audit chain verifies.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.actors import partition_of
from plait.actors.leases import read_leases
from plait.decisions import Human
from plait.mesh import Mesh, open_mesh
from plait.profiles import AgentProfile
from plait.runs import RunRecord, Runs
from plait.runs.audit import read_events
from plait.runs.record import owner_id, record_key
from tests._support.processes import STOP_S, LoggedProcess
from tests._support.timing import scaled

from .helpers import DATA, Cli, commits, poll, store
from .test_crash import record_of, with_mesh
from .test_heartbeats import committed_once

COUNT = 8
LEASED = ("--lease-s", f"{scaled(1):.2f}", "--partitions", str(COUNT))  # longer when busy
HOLDING = re.compile(r"holding (\d+) of (\d+) partitions: (.*)")
CHAIN = DATA / "slow_chain.json"
CHAIN_MODEL = f"scripted:{DATA / 'slow_chain.model.yaml'}"
CHAIN_VISITS = [("first", 1), ("second", 1), ("third", 1)]


class Worker(LoggedProcess):
    """One ``plait worker`` process whose stderr goes to ``<name>.log``."""

    def __init__(self, cli: Cli, name: str, *args: str) -> None:
        super().__init__(
            cli.argv("worker", *args), cli.cwd / f"{name}.log", cwd=cli.cwd, env=cli.env,
            stdout=False,
        )  # fmt: skip

    def holdings(self) -> list[int]:
        """How many partitions each ``holding`` line it printed so far says it holds."""
        return [int(m.group(1)) for m in HOLDING.finditer(self.text())]

    def holds(self, n: int) -> bool:
        """Whether its latest ``holding`` line says it holds ``n`` partitions."""
        found = self.holdings()
        return bool(found) and found[-1] == n

    def stop(self, timeout: float = STOP_S) -> str:  # type: ignore[override]
        """SIGTERM it; it must drain and exit 0. Its stderr."""
        code = super().stop(timeout)
        assert code == 0, self.text()
        return self.text()


def serving(workers: list[Worker], *shares: int) -> None:
    """Wait until each worker's latest ``holding`` line shows its share."""
    poll(lambda: all(w.holds(n) for w, n in zip(workers, shares, strict=True)), timeout=15)


def hosts_pid(host: str) -> int | None:
    """The process id in a host id (``hostname:pid:random``)."""
    parts = host.split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def records(url: str, run_ids: list[str]) -> list[RunRecord]:
    """The records of ``run_ids``, in order."""

    async def read(mesh: Mesh) -> list[RunRecord]:
        runs = Runs(mesh)
        return [await runs.get(run_id) for run_id in run_ids]  # type: ignore[arg-type]

    return with_mesh(url, read)


def start_runs(url: str, graph: str, inputs: list[str], model: str | None = None) -> list[str]:
    """Queue one run of ``graph`` per input; their ids."""

    async def start(mesh: Mesh) -> list[str]:
        runs = Runs(mesh)
        return [(await runs.start("assistant", graph, i, model=model)).run_id for i in inputs]

    return with_mesh(url, start)


def all_terminal(url: str, run_ids: list[str], timeout: float = 20.0) -> list[RunRecord]:
    """Wait until every run has ended; their records."""

    def ended() -> list[RunRecord] | None:
        found = records(url, run_ids)
        return found if all(r.terminal for r in found) else None

    return poll(ended, timeout=timeout)


def committers(url: str, run_id: str) -> dict[tuple[str, int], str]:
    """Who committed each (node, visit) of the run (its host id)."""

    async def read(mesh: Mesh) -> dict[tuple[str, int], str]:
        events = await read_events(mesh, run_id)
        return {(e.node, e.visit): e.actor for e in events if e.type == "node.committed"}  # type: ignore[misc]

    return with_mesh(url, read)


def holder_pid(url: str, run_id: str) -> int | None:
    """The process id of the worker leasing the partition of ``run_id``'s owner."""

    async def read(mesh: Mesh) -> int | None:
        lease, _ = (await read_leases(mesh))[partition_of(owner_id(run_id), COUNT)]
        return hosts_pid(lease.holder or "")

    return with_mesh(url, read)


def record_version(url: str, run_id: str) -> int:
    """The version of the run's record in the mesh: any write moves it."""

    async def read(mesh: Mesh) -> int:
        entry = await mesh.get(record_key(run_id))
        assert entry is not None
        return entry.version

    return with_mesh(url, read)


def bash_graph(name: str, command: str) -> dict[str, Any]:
    """A one-node graph running ``command`` with bash, retried if its process died."""
    return {
        "name": name,
        "agent": "assistant",
        "entry": "effect",
        "nodes": [
            {"id": "effect", "type": "tool", "tool": "bash", "on_indeterminate": "retry",
             "args": {"command": command, "timeout_s": 30}},
        ],
    }  # fmt: skip


def bash_ready(cli: Cli, graph: dict[str, Any]) -> None:
    """Store ``graph`` and an agent whose bash needs no approval."""
    cli.profile(AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"]))
    with_mesh(cli.mesh_url, lambda mesh: store(mesh, graph))


def effects(path: Path) -> Counter[str]:
    """How many times each run's side effect ran (one line per run input)."""
    return Counter(path.read_text().split()) if path.exists() else Counter()


# -- 1. a worker SIGKILLed with runs in flight ------------------------------------------


def marked_chain(marks: Path) -> dict[str, Any]:
    """Three nodes whose middle one, a bash call, marks its run's input when it starts."""
    return {
        "name": "marked-chain",
        "agent": "assistant",
        "entry": "first",
        "nodes": [
            {"id": "first", "type": "agent", "prompt": "Start on {{input}}", "next": "second"},
            {"id": "second", "type": "tool", "tool": "bash", "on_indeterminate": "retry",
             "args": {"command": f"echo {{{{input}}}} >> {marks}; sleep 3; echo two",
                      "timeout_s": 30},
             "next": "third"},
            {"id": "third", "type": "agent", "prompt": "Wrap up {{second}}"},
        ],
    }  # fmt: skip


def test_a_sigkilled_workers_runs_finish_on_the_other(cli: Cli, tmp_path: Path) -> None:
    marks = tmp_path / "started.txt"
    bash_ready(cli, marked_chain(marks))
    workers = [Worker(cli, f"w{i}", "--visibility-timeout", "1", *LEASED) for i in range(2)]
    inputs = [f"r{i}" for i in range(6)]
    try:
        serving(workers, 4, 4)
        run_ids = start_runs(cli.mesh_url, "marked-chain", inputs, CHAIN_MODEL)

        def victim() -> tuple[Worker, list[str]] | None:
            # A run is in flight on a worker once its middle node has started there: a
            # node claimed by the previous commit but not yet started is not.
            claimed: dict[int, list[tuple[str, str]]] = {}
            for rec, given in zip(records(cli.mesh_url, run_ids), inputs, strict=True):
                if "second" in rec.attempts:
                    pid = hosts_pid(rec.attempts["second"].host) or 0
                    claimed.setdefault(pid, []).append((rec.run_id, given))
            started = effects(marks)
            for w in workers:
                running = [run_id for run_id, given in claimed.get(w.pid, []) if started[given]]
                if running:
                    return w, running
            return None

        doomed, doomed_runs = poll(victim)
        doomed.sigkill()
        survivor = next(w for w in workers if w is not doomed)
        poll(lambda: survivor.holds(COUNT), timeout=15)
        done = all_terminal(cli.mesh_url, run_ids, timeout=40)
    finally:
        for w in workers:
            w.kill()
    ran = effects(marks)
    for rec, given in zip(done, inputs, strict=True):
        assert rec.status == "done", (rec, survivor.text())
        assert rec.attempts == {} and rec.ended_detail == "completed"
        assert committed_once(cli.mesh_url, rec.run_id) == CHAIN_VISITS
        # A wake delivered to the killed worker counts one retry, whether or not its
        # effect had started there; an effect never runs more often than that.
        assert rec.usage.retries <= 1 and 1 <= ran[given] <= 1 + rec.usage.retries, (
            given, ran, rec.usage,
        )  # fmt: skip
    for run_id in doomed_runs:
        who = committers(cli.mesh_url, run_id)
        assert hosts_pid(who[("second", 1)]) == survivor.pid
        assert hosts_pid(who[("third", 1)]) == survivor.pid
    for rec, given in zip(done, inputs, strict=True):
        if rec.run_id in doomed_runs:  # started on the killed worker, then again
            assert rec.usage.retries == 1 and ran[given] == 2, (given, ran, rec.usage)


# -- 2. a worker SIGSTOPped past its lease is fenced, then rejoins ----------------------


def test_a_stopped_worker_is_fenced_and_rejoins(cli: Cli, tmp_path: Path) -> None:
    marks = tmp_path / "effects.txt"
    bash_ready(cli, bash_graph("nap", f"echo {{{{input}}}} >> {marks}; sleep 3"))
    workers = [Worker(cli, f"w{i}", "--visibility-timeout", "1", *LEASED) for i in range(2)]
    try:
        serving(workers, 4, 4)
        (run_id,) = start_runs(cli.mesh_url, "nap", ["nap1"])
        poll(lambda: effects(marks))  # the node runs
        stopped = next(w for w in workers if w.pid == holder_pid(cli.mesh_url, run_id))
        other = next(w for w in workers if w is not stopped)
        seen = len(stopped.holdings())
        os.kill(stopped.pid, signal.SIGSTOP)
        poll(lambda: other.holds(COUNT), timeout=15)
        (done,) = all_terminal(cli.mesh_url, [run_id], timeout=20)
        assert done.status == "done", other.text()
        before = committers(cli.mesh_url, run_id)
        version = record_version(cli.mesh_url, run_id)
        assert hosts_pid(before[("effect", 1)]) == other.pid

        os.kill(stopped.pid, signal.SIGCONT)
        # It wakes having lost everything, then rejoins and gets its share back.
        poll(lambda: 0 in stopped.holdings()[seen:] and stopped.holds(4), timeout=15)
        poll(lambda: other.holds(4), timeout=15)
        status = cli.json("cluster", "status")
        members = {m["pid"]: m for m in status["members"]}
        assert len(members[stopped.pid]["held"]) == 4 and len(members[other.pid]["held"]) == 4
        after = record_of(cli.mesh_url, run_id)
        assert record_version(cli.mesh_url, run_id) == version
    finally:
        for w in workers:
            w.kill()
    assert after == done
    assert committed_once(cli.mesh_url, run_id) == [("effect", 1)]
    assert committers(cli.mesh_url, run_id) == before


# -- 3. workers of different visibility timeouts run each side effect once --------------


def test_short_and_long_visibility_timeouts_run_each_side_effect_once(
    cli: Cli, tmp_path: Path
) -> None:
    marks = tmp_path / "effects.txt"
    bash_ready(cli, bash_graph("mark", f"echo {{{{input}}}} >> {marks}; sleep 1"))
    workers = [
        Worker(cli, "short", "--visibility-timeout", "0.2", *LEASED),
        Worker(cli, "long", "--visibility-timeout", "10", *LEASED),
    ]
    try:
        serving(workers, 4, 4)
        inputs = [f"run{i}" for i in range(3)]
        run_ids = start_runs(cli.mesh_url, "mark", inputs)
        done = all_terminal(cli.mesh_url, run_ids)
        for w in workers:
            w.stop()
    finally:
        for w in workers:
            w.kill()
    assert [r.status for r in done] == ["done"] * 3
    assert effects(marks) == Counter(inputs)
    for rec in done:
        assert committed_once(cli.mesh_url, rec.run_id) == [("effect", 1)]
        assert rec.usage.retries == 0


# -- 4. a foreground run serves its own run only, and hands it to a worker --------------


# Long enough that the foreground's default lease (10 s, beating every 2.5 s) notices the
# worker and releases the partition before the run ends: up to two beats.
STEPS = [f"s{i}" for i in range(1, 13)]
LONG_CHAIN = {
    "name": "long-chain",
    "agent": "assistant",
    "entry": STEPS[0],
    "nodes": [
        {"id": s, "type": "agent", "prompt": f"Step {s} of {{{{input}}}}",
         **({"next": STEPS[i + 1]} if i + 1 < len(STEPS) else {})}
        for i, s in enumerate(STEPS)
    ],
}  # fmt: skip


def test_a_foreground_run_serves_its_own_run_then_a_worker_takes_over(
    cli: Cli, tmp_path: Path
) -> None:
    model = tmp_path / "long.model.json"
    model.write_text(
        json.dumps({"rules": [{"node": s, "text": s, "delay_ms": 800} for s in STEPS]})
    )
    with_mesh(cli.mesh_url, lambda mesh: store(mesh, LONG_CHAIN))
    cli.setup("graph", "import", str(CHAIN))
    queued = cli("graph", "run", "assistant", "slow-chain", "--model", CHAIN_MODEL,
                 "--detach", "--json")  # fmt: skip
    other = json.loads(queued.stdout)["run_id"]
    proc = cli.spawn("graph", "run", "assistant", "long-chain", "--input", "x",
                     "--model", f"scripted:{model}", "--json")  # fmt: skip
    worker: Worker | None = None
    try:

        def mine() -> RunRecord | None:
            found = with_mesh(cli.mesh_url, lambda mesh: Runs(mesh).list())
            run = next((s for s in found if s.graph == "long-chain"), None)
            rec = record_of(cli.mesh_url, run.run_id) if run else None
            return rec if rec is not None and rec.visits.get("s1") else None

        first = poll(mine)
        untouched = record_of(cli.mesh_url, other)
        assert untouched is not None and untouched.visits == {} and not untouched.terminal
        # Its entry node was claimed when it was queued; no process has started it.
        assert [a.host for a in untouched.attempts.values()] == [""]
        worker = Worker(cli, "late", "--visibility-timeout", "1", "--lease-s", "1")
        out, err = proc.communicate(timeout=scaled(30))
        assert proc.returncode == 0, err
        assert "serves run" in err and first.run_id in err
        others = all_terminal(cli.mesh_url, [other])
        worker.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if worker is not None:
            worker.kill()
    assert json.loads(out)["status"] == "done" and others[0].status == "done"
    assert committed_once(cli.mesh_url, first.run_id) == [(s, 1) for s in STEPS]
    assert committed_once(cli.mesh_url, other) == CHAIN_VISITS
    who = committers(cli.mesh_url, first.run_id)
    assert hosts_pid(who[("s1", 1)]) == proc.pid
    assert hosts_pid(who[(STEPS[-1], 1)]) == worker.pid, who  # the worker took over
    assert {hosts_pid(a) for a in committers(cli.mesh_url, other).values()} == {worker.pid}


# -- 5. partitions as they change, and cluster status ----------------------------------


def test_workers_print_partitions_as_they_change_and_cluster_status_lists_them(
    cli: Cli,
) -> None:
    first = Worker(cli, "first", *LEASED)
    second: Worker | None = None
    try:
        serving([first], COUNT)
        assert f"holding {COUNT} of {COUNT} partitions: 0-{COUNT - 1}" in first.text()
        second = Worker(cli, "second", *LEASED)
        serving([first, second], 4, 4)
        status = cli.json("cluster", "status")
        text = cli("cluster", "status").stdout
    finally:
        for w in (first, second):
            if w is not None:
                w.kill()
    lines = [m.group(0) for m in HOLDING.finditer(first.text())]
    assert lines[0] == f"holding {COUNT} of {COUNT} partitions: 0-{COUNT - 1}"
    assert lines[-1].startswith(f"holding 4 of {COUNT} partitions: ")
    assert status["partitions"] == COUNT and status["unheld"] == []
    assert status["backlog"] == [0] * COUNT  # nothing was sent: every partition is empty
    assert "backlog 0 message(s) by partition: none" in text
    members = {m["pid"]: m for m in status["members"]}
    assert set(members) == {first.pid, second.pid}
    held = [set(m["held"]) for m in members.values()]
    assert [len(h) for h in held] == [4, 4] and held[0] | held[1] == set(range(COUNT))
    assert all(m["serves"] == "all" for m in members.values())
    for m in members.values():
        assert f"pid {m['pid']}  serves all  holding 4 of {COUNT} partitions: " in text
    assert "unheld" not in text


# -- 6. three workers, runs asking people, answered from a fourth process ---------------

RUNS = 30
ASKING = {
    "name": "sign",
    "agent": "assistant",
    "entry": "draft",
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "approve"},
        {"id": "approve", "type": "human", "ask": "Ship {{draft}}?", "next": "ship"},
        {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{approve}})"},
    ],
}  # fmt: skip
ASKING_VISITS = [("draft", 1), ("approve", 1), ("ship", 1)]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(
    "mesh_url",
    [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_three_workers_serve_asking_runs_each_visit_once(
    mesh_url: str, tmp_path: Path
) -> None:
    model = tmp_path / "sign.model.json"
    rules = [
        rule
        for i in range(RUNS)
        for rule in (
            {"node": "draft", "match": f"<{i}>", "text": f"draft<{i}>", "delay_ms": 50},
            {"node": "ship", "match": f"draft<{i}> (yes)", "text": f"ship<{i}>"},
        )
    ]
    model.write_text(json.dumps({"rules": rules}))
    cli = Cli(tmp_path, mesh_url)
    workers = [
        Worker(cli, f"w{i}", "--visibility-timeout", "1", *LEASED, "--model", f"scripted:{model}")
        for i in range(3)
    ]
    async with open_mesh(mesh_url) as mesh:
        await store(mesh, ASKING)
        runs = Runs(mesh)
        try:
            with anyio.fail_after(scaled(20)):
                while not all(w.holdings() and sum(w.holds(n) for n in (2, 3)) for w in workers):
                    await anyio.sleep(0.05)
            ids = [
                (await runs.start("assistant", "sign", f"item <{i}>")).run_id for i in range(RUNS)
            ]
            answered: set[str] = set()
            with anyio.fail_after(scaled(45)):
                while True:
                    found = [await runs.get(run_id) for run_id in ids]
                    for rec in found:
                        asked = rec.waiting.decision_id if rec.waiting else None
                        if asked and asked not in answered:
                            await runs.resume(rec.run_id, "yes", by=Human("tester"))
                            answered.add(asked)
                    if all(rec.terminal for rec in found):
                        break
                    await anyio.sleep(0.05)
            for w in workers:
                w.stop()
        finally:
            for w in workers:
                w.kill()
        hosts: set[int | None] = set()
        for i, rec in enumerate(found):
            assert rec.status == "done", (i, rec.error)
            assert await runs.output(rec) == f"ship<{i}>"
            assert await runs.verify(rec.run_id) >= len(ASKING_VISITS)
            assert commits(await runs.trajectory(rec.run_id)) == ASKING_VISITS
            events = await read_events(mesh, rec.run_id)
            committed = [(e.node, e.visit) for e in events if e.type == "node.committed"]
            assert Counter(committed) == Counter(ASKING_VISITS), (i, committed)
            hosts |= {hosts_pid(e.actor) for e in events if e.type == "node.committed"}
        assert hosts == {w.pid for w in workers}
