"""Durable Python workflows: ten cheap steps per workflow, and the cost of replay.

- ``workflows_sqlite_serial``: workflows of ten cheap ``@plait.step`` steps per second,
  one at a time, on a SQLite mesh served by this process, against DBOS Transact on
  SQLite (WAL, ``synchronous=NORMAL``) running the same workflow in this process, when
  ``dbos`` is installed (else no baseline: the figure is printed with baseline 0).
- ``workflows_sqlite_concurrent``: the same with 200 workflows at once.
- ``replay_1000_steps_ms``: a resume of a workflow with 1,000 journaled steps: its
  journal read from the SQLite log by a process that never saw it, the function run
  from the top over it to the question it parks on (a cost: baseline 50 ms).
- ``replay_1000_steps_warm_ms``: the same by the process that journaled it.

Rounds of plait and its baseline alternate, so both see the same machine load.

Run: ``python bench/workflows.py [--json]``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from _common import Cost, Figure, parse_args, report
from _wf_flows import ten, thousand

from plait.decisions import DecisionAsker
from plait.graphs.nodes.base import Visit
from plait.graphs.ports import ExecEnv
from plait.mesh import Mesh, open_mesh
from plait.runs import RunRecord, serve
from plait.runs.mesh_ports import RunDecisions
from plait.runs.store import RunStore
from plait.workflows import start_workflow
from plait.workflows.journal import JournalCache

BENCH = "workflows"
CONCURRENT = 200
ROUNDS = 3


class Watch(RunStore):
    """The serving store, telling when runs settle from the records it commits."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__(mesh)
        self.settled: dict[str, RunRecord] = {}
        self.waiters: dict[str, asyncio.Future[RunRecord]] = {}

    def remember(self, rec: RunRecord, version: int) -> None:
        """As :meth:`RunStore.remember`, resolving the run's waiter once it settles."""
        super().remember(rec, version)
        if rec.terminal or rec.waiting is not None:
            waiter = self.waiters.pop(rec.run_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(rec)
            else:
                self.settled[rec.run_id] = rec

    async def until_settled(self, run_id: str) -> RunRecord:
        """The run's record once it ended or parked."""
        if run_id in self.settled:
            return self.settled.pop(run_id)
        waiter = self.waiters[run_id] = asyncio.get_running_loop().create_future()
        return await waiter


@asynccontextmanager
async def served(path: Path) -> AsyncIterator[tuple[Mesh, Watch]]:
    """A SQLite mesh at ``path`` served by this process."""
    async with open_mesh(f"sqlite:///{path}") as mesh:
        watch = Watch(mesh)
        async with serve(mesh, store=watch, beat=False):
            yield mesh, watch


async def plait_workflows(mesh: Mesh, watch: Watch, count: int) -> float:
    """Workflows per second of ``count`` runs of ``ten`` started at once."""
    started = time.perf_counter()
    recs = await asyncio.gather(*(start_workflow(mesh, ten) for _ in range(count)))
    done = await asyncio.gather(*(watch.until_settled(r.run_id) for r in recs))
    elapsed = time.perf_counter() - started
    bad = [r for r in done if r.status != "done"]
    if bad:
        raise RuntimeError(f"run {bad[0].run_id} ended {bad[0].status}: {bad[0].error}")
    return count / elapsed


async def plait_serial(mesh: Mesh, watch: Watch, count: int) -> float:
    """Workflows per second of ``count`` runs of ``ten`` one after another."""
    started = time.perf_counter()
    for _ in range(count):
        rec = await start_workflow(mesh, ten)
        rec = await watch.until_settled(rec.run_id)
        if rec.status != "done":
            raise RuntimeError(f"run {rec.run_id} ended {rec.status}: {rec.error}")
    return count / (time.perf_counter() - started)


def dbos_runner(path: Path) -> Callable[[int, bool], Awaitable[float]] | None:
    """Runs of DBOS Transact's ten-step workflow on SQLite at ``path``: workflows per
    second of ``count`` at once (or one at a time); None if DBOS is not installed."""
    if importlib.util.find_spec("dbos") is None:
        print("no baseline: DBOS Transact is not installed (pip install dbos)", file=sys.stderr)
        return None
    from _wf_dbos import launch

    return launch(path)


async def replay_cost(mesh: Mesh, watch: Watch) -> tuple[float, float]:
    """Median ms of a cold and of a warm resume visit of a 1,000-step workflow."""
    rec = await start_workflow(mesh, thousand)
    rec = await watch.until_settled(rec.run_id)
    if rec.waiting is None:
        raise RuntimeError(f"run {rec.run_id} did not park: {rec.status} {rec.error}")
    env = ExecEnv(
        mesh=mesh,
        run_id=rec.run_id,
        human=RunDecisions(DecisionAsker(mesh), rec.run_id, mesh),
    )
    node = thousand.spec().nodes[0]
    v = Visit("workflow", node, rec.visits["workflow"] + 1, {}, _NoGraph())

    async def once(cold: bool) -> float:
        if cold:
            thousand._journals = JournalCache()
        started = time.perf_counter()
        result = await thousand.visit(env, rec, v, {})
        elapsed = (time.perf_counter() - started) * 1000
        if result.waiting is None:
            raise RuntimeError(f"the replay did not reach the question: {result}")
        return elapsed

    cold = [await once(True) for _ in range(7)]
    warm = [await once(False) for _ in range(7)]
    return statistics.median(cold), statistics.median(warm)


class _NoGraph:
    agent = "assistant"

    def predecessors(self, node_id: str) -> list[str]:
        return []

    def incoming(self, node_id: str) -> list[str]:
        return []


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        dbos = dbos_runner(here / "dbos.db")
        async with served(here / "plait.db") as (mesh, watch):
            await plait_serial(mesh, watch, 5)  # warm up: imports, caches
            serial_n = max(10, int(40 * args.seconds))
            plait_s, dbos_s, plait_c, dbos_c = [], [], [], []
            for _ in range(ROUNDS):
                plait_s.append(await plait_serial(mesh, watch, serial_n))
                if dbos is not None:
                    dbos_s.append(await dbos(serial_n, False))
                plait_c.append(await plait_workflows(mesh, watch, CONCURRENT))
                if dbos is not None:
                    dbos_c.append(await dbos(CONCURRENT, True))
            cold, warm = await replay_cost(mesh, watch)
    figures += [
        Figure(BENCH, "workflows_sqlite_serial", max(plait_s), "wf/s",
               max(dbos_s, default=0.0), 3.0, "DBOS Transact, SQLite WAL NORMAL"),
        Figure(BENCH, "workflows_sqlite_concurrent", max(plait_c), "wf/s",
               max(dbos_c, default=0.0), 3.0, "DBOS Transact, 200 at once"),
        Cost(BENCH, "replay_1000_steps_ms", cold, "ms", 50.0, 1.0, "target 50 ms"),
        Cost(BENCH, "replay_1000_steps_warm_ms", warm, "ms", 50.0, 1.0, "target 50 ms"),
    ]  # fmt: skip
    report(figures, as_json=args.json, title="durable workflows")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    asyncio.run(main())
