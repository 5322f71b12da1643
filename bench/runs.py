"""Durable runs: transitions per second, Redis round trips per transition, resume latency.

Every run is served by this process, built with :func:`plait.runs.serve`, and answered
by an instant scripted model, so the figures are plait's own cost per node: claim,
execute, commit, wake. The run loop is ``draft -> verify -> (fail:
draft | pass: publish)`` with a verifier that fails a fixed number of times.

- ``runs_sqlite_transitions``: node transitions per second of one run at a time on a
  SQLite mesh, beside LangGraph running the same loop with ``SqliteSaver`` on a file
  with the same journal mode and ``synchronous`` level (bench/_langgraph_loop.py), each
  checkpoint written before the next node (``durability="sync"``), interleaved in the
  same process. ``runs_sqlite_vs_lg_async`` is the same against LangGraph's
  default, which writes checkpoints in the background. ``sqlite_fraction_of_limit``: the
  same figure over the commits per second of one SQLite connection (same file
  settings) committing a transaction of a transition's shape (an upsert and an insert)
  with nothing else around it, interleaved in the same process.
- ``runs_redis_roundtrips``: requests this process sent to Redis during one run, counted
  on the client, per transition (a cost: ``ratio`` is baseline / value).
- ``runs_sqlite_concurrent`` / ``runs_redis_concurrent``: transitions per second of 200
  runs at once on SQLite / Redis, against LangGraph with ``InMemorySaver`` running 200
  runs at once in this process; rounds interleaved, the best of three of each.
- ``runs_postgres_transitions``: transitions per second of one run at a time on a
  PostgreSQL mesh, beside LangGraph running the same loop with ``AsyncPostgresSaver``
  on the same server (``durability="sync"``), interleaved in the same process; skipped
  without langgraph-checkpoint-postgres. ``postgres_fraction_of_limit``: the same
  figure over the commits per second of one connection committing a transaction of
  the same shape (an upsert and an insert) with nothing else around it.
- ``runs_postgres_concurrent``: as ``runs_redis_concurrent``, on PostgreSQL.
- ``runs_sqlite_statements``: SQL statements per transition (and how many write).
- ``runs_length_growth``: the cost per transition of the last 50 steps of a 1,000-step
  run over its first 50 (a cost: ``ratio`` is 1.1 / value).
- ``parked_run_bytes``: host memory held per parked run (tracemalloc; ratio 4096 / value).
- ``resume_latency_ms``: median time from answering a parked run to its next claim.
- ``takeover_s``: two ``plait worker`` processes serve TAKEOVER_RUNS runs on Redis;
  the one running a slow node of some of them is SIGKILLed, and this is the median
  time from the kill until each of its runs commits again (on the other worker), a
  cost against the lease expiry + 2 s.

With ``--tracing``, only the cost of telemetry is measured:

- ``runs_tracing_on``: transitions per second of the SQLite loop with tracing on (every
  span through a batch processor to an exporter that drops them) and metrics counting,
  against the same loop with both off, in adjacent slices in this process: the median
  of 7 pairs' ratios (target 0.85).
- ``runs_tracing_off``: the loop with telemetry off in this tree against the same loop
  in the tree named by ``PLAIT_BENCH_BASELINE_TREE`` (a checkout from before telemetry),
  each in a fresh process of this interpreter (``bench/tracing_rate.py``): the median
  of 7 pairs' ratios (target 0.99); skipped without the variable.

The process tunes Python's cyclic garbage collector as a serving process does
(:func:`plait.actors.tune_gc_for_serving`, which ``plait worker`` calls too).

- ``redis_fraction_of_limit``: ``runs_redis_concurrent`` over the commit scripts per
  second Redis answers pipelined, 200 at a time, each of a transition's shape (a
  record put, an output insert, a wake published and one acked), measured in the same
  rounds (bench/_runs_processes.py).

With ``--processes N`` the concurrent figures are served by ``plait worker --processes
N`` and LangGraph's runs are split over N processes of this interpreter (the same
cores); ``--concurrent`` measures only the concurrent figures (``--backend`` narrows
them to one backend).

Run: ``python bench/runs.py [--json] [--seconds 1.0] [--tracing] [--concurrent]
[--processes N]``. Redis is read from
``PLAIT_BENCH_REDIS`` (default ``redis://127.0.0.1:6379/0``) under fresh key prefixes
that are removed afterwards, PostgreSQL from ``PLAIT_BENCH_POSTGRES`` in fresh
schemas dropped afterwards; the figures of a server that does not answer are skipped.
``--backend NAME`` measures only that backend's figures.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import redis.asyncio.connection as redis_connection
from _common import (
    LOOP,
    Cost,
    Figure,
    best_of,
    parse_args,
    postgres_mesh_url,
    postgres_scratch,
    redis_mesh_url,
    redis_scratch,
    report,
)
from _langgraph_loop import (
    SYNCHRONOUS_NAMES,
    LangGraphConcurrent,
    LangGraphLoop,
    LangGraphPostgres,
)
from _runs_processes import lg_processes_rate, pool_rate, redis_commit_ceiling
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from plait import telemetry
from plait.actors import tune_gc_for_serving
from plait.decisions import Human
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.mesh import _redis_scripts as redis_scripts
from plait.mesh.sqlite import SqliteMesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunRecord, Runs, serve
from plait.runs.record import record_key
from plait.runs.store import RunStore, read_record

BENCH = "runs"
FAILS = 48  # 49 drafts, 49 verdicts and a publish: 99 transitions, within the step cap
CONCURRENT_RUNS = 200
CONCURRENT_FAILS = 3  # 9 transitions per run
CONCURRENT_ROUNDS = 3
RESUMES = 21
LOOP_TARGET = 3.0
FRACTION_TARGET = 0.25
POSTGRES_TARGET = 2.0
REDIS_RT_BASELINE = 4.0
CONCURRENT_TARGET = 2.5
LONG_STEPS = 1000
GROWTH_TARGET = 1.1
PARKED = 200
PARKED_TARGET = 4096.0
RESUME_BASELINE_MS = 100.0
TAKEOVER_RUNS = 50
TAKEOVER_LEASE_S = 3.0
STATEMENTS_BASELINE = 17.9  # per SQLite transition before the two-write commit (9.1 writes)

APPROVE = {
    "name": "approve", "entry": "draft",
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "approve"},
        {"id": "approve", "type": "human", "ask": "Publish this? {{draft}}", "next": "publish"},
        {"id": "publish", "type": "agent", "prompt": "Publish {{draft}} ({{approve}})"},
    ],
}  # fmt: skip


def scripted(fails: int) -> ScriptedModel:
    """The instant model: the verifier fails ``fails`` times, then passes. It keeps
    its last few calls only: a test double's log is not the host's memory."""
    return ScriptedModel(
        [
            {"node": "verify", "visit": fails + 1, "text": "Good now.\npass"},
            {"node": "verify", "text": "Needs a source.\nfail"},
            {"text": "A draft."},
        ],
        keep_calls=8,
    )


class Watch(RunStore):
    """An owner services' store that tells when runs settle and when nodes are claimed.

    It learns both from the records the host commits (:meth:`RunStore.remember`), so
    waiting for a run adds no mesh traffic to what is measured.
    """

    def __init__(self, mesh: Mesh) -> None:
        super().__init__(mesh)
        self.latest: dict[str, RunRecord] = {}
        self.claimed: dict[tuple[str, str], float] = {}
        self.changed: dict[str, asyncio.Event] = {}
        self.pending: set[str] = set()
        self.executing: set[str] = set()
        self.all_settled = asyncio.Event()
        self.transitions = 0

    def remember(self, rec: RunRecord, version: int) -> None:
        """Cache the record as usual, and note claims and settled runs."""
        super().remember(rec, version)
        if rec.attempts:
            now = time.perf_counter()
            for node in rec.attempts:
                self.claimed.setdefault((rec.run_id, node), now)
            self.executing.add(rec.run_id)
        else:
            self.executing.discard(rec.run_id)
        self.latest[rec.run_id] = rec
        # The observer's own cost counts against plait's figure: no Event per commit.
        changed = self.changed.get(rec.run_id)
        if changed is not None:
            changed.set()
        if rec.terminal:
            self.transitions += sum(rec.visits.values())
            self.pending.discard(rec.run_id)
            if not self.pending:
                self.all_settled.set()

    async def until(self, run_id: str, done: Callable[[RunRecord], bool]) -> RunRecord:
        """The run's record once ``done`` holds for it."""
        changed = self.changed.setdefault(run_id, asyncio.Event())
        while True:
            rec = self.latest.get(run_id)
            if rec is not None and done(rec):
                return rec
            await changed.wait()
            changed.clear()


def settled(rec: RunRecord) -> bool:
    """Done, failed, cancelled or waiting on a person."""
    return rec.terminal or rec.waiting is not None


@asynccontextmanager
async def hosted(mesh: Mesh, fails: int, *graphs: dict[str, Any]) -> AsyncIterator[Watch]:
    """Import ``graphs`` and serve runs on ``mesh`` in this process for the block."""
    for graph in graphs:
        await import_graph(mesh, load_graph(graph))
    watch = Watch(mesh)
    async with serve(mesh, model=scripted(fails), store=watch, beat=False):
        yield watch


async def run_once(runs: Runs, host: Watch, graph: str = "loop") -> RunRecord:
    """Start a run and wait until it settles."""
    rec = await runs.start("assistant", graph, "x")
    rec = await host.until(rec.run_id, settled)
    if rec.status != "done":
        raise RuntimeError(f"run {rec.run_id} ended {rec.status}: {rec.error}")
    return rec


# -- SQLite: one run at a time, beside LangGraph ----------------------------------------


async def sqlite_level(mesh: Mesh) -> tuple[str, int]:
    """The journal mode and ``synchronous`` level of the SQLite mesh's writer connection."""
    assert isinstance(mesh, SqliteMesh)

    def read(conn: Any) -> tuple[str, int]:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return str(mode).upper(), int(conn.execute("PRAGMA synchronous").fetchone()[0])

    found: tuple[str, int] = await mesh._write(read)
    return found


LIMIT_RECORD, LIMIT_STEP = b"r" * 600, b"s" * 300
"""The values of a commit-limit transaction: a record's and a log entry's size."""


def commits_per_second(commit: Callable[[int], Awaitable[None]]) -> Callable[[float], Any]:
    """A measure of how many times per second ``commit(seq)`` runs, ``seq`` counting up."""
    seq = 0

    async def measure(slice_s: float) -> float:
        nonlocal seq
        count, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < slice_s or not count:
            seq += 1
            await commit(seq)
            count += 1
        return count / elapsed

    return measure


def sqlite_commit_limit(path: Path, synchronous: int) -> Callable[[float], Any]:
    """A measure of the commits per second of one SQLite connection in WAL at
    ``synchronous``, each a transaction of an upsert and an insert with values of a
    transition's size."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {int(synchronous)}")
    conn.execute("CREATE TABLE IF NOT EXISTS limit_kv (key TEXT PRIMARY KEY, "
                 "value BLOB NOT NULL, version INTEGER NOT NULL)")  # fmt: skip
    conn.execute("CREATE TABLE IF NOT EXISTS limit_log (run TEXT, seq INTEGER, "
                 "data BLOB, PRIMARY KEY (run, seq))")  # fmt: skip

    async def commit(seq: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_SQLITE_LIMIT_UPSERT, ("run", LIMIT_RECORD))
        conn.execute("INSERT INTO limit_log (run, seq, data) VALUES (?, ?, ?)",
                     ("run", seq, LIMIT_STEP))  # fmt: skip
        conn.execute("COMMIT")

    measure = commits_per_second(commit)
    measure.close = conn.close  # type: ignore[attr-defined]
    return measure


_SQLITE_LIMIT_UPSERT = (
    "INSERT INTO limit_kv (key, value, version) VALUES (?, ?, 1) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value, version = limit_kv.version + 1"
)


async def sqlite_transitions(seconds: float, tmp: Path) -> list[Figure]:
    async with open_mesh(f"sqlite:///{tmp / 'plait.db'}") as mesh:
        mode, level = await sqlite_level(mesh)
        lg = LangGraphLoop(tmp / "langgraph.db", level, FAILS)
        lg_mode, lg_sync = lg.pragmas()
        if (lg_mode, lg_sync) != (mode, SYNCHRONOUS_NAMES[level]):
            raise RuntimeError(f"LangGraph's SQLite runs {lg_mode}/{lg_sync}, plait's {mode}")
        limit = sqlite_commit_limit(tmp / "limit.db", level)
        try:
            async with hosted(mesh, FAILS, LOOP) as host:
                runs = Runs(mesh)

                async def plait(slice_s: float) -> float:
                    count, started = 0, time.perf_counter()
                    while (elapsed := time.perf_counter() - started) < slice_s or not count:
                        count += sum((await run_once(runs, host)).visits.values())
                    return count / elapsed

                async def lg_sync_rate(slice_s: float) -> float:
                    return lg.rate(slice_s, "sync")

                async def lg_async_rate(slice_s: float) -> float:
                    return lg.rate(slice_s, "async")

                value, floor, lg_async, ceiling = await best_of(
                    [plait, lg_sync_rate, lg_async_rate, limit], seconds * 4
                )
        finally:
            lg.close()
            limit.close()  # type: ignore[attr-defined]
    pragmas = f"{mode}, synchronous={SYNCHRONOUS_NAMES[level]}"
    return [
        Figure(BENCH, "runs_sqlite_transitions", value, "transitions/s", floor, LOOP_TARGET,
               f"LangGraph SqliteSaver, durability=sync ({pragmas})"),
        Figure(BENCH, "runs_sqlite_vs_lg_async", value, "transitions/s", lg_async,
               LOOP_TARGET, f"LangGraph SqliteSaver, durability=async ({pragmas})"),
        Figure(BENCH, "sqlite_fraction_of_limit", value, "transitions/s", ceiling,
               FRACTION_TARGET, f"one connection committing an upsert and an insert ({pragmas})"),
    ]  # fmt: skip


class Statements:
    """Counts the SQL statements every SQLite connection opened in the block runs."""

    def __init__(self) -> None:
        self.all = 0
        self.writes = 0
        self.on = False

    def trace(self, sql: str) -> None:
        if self.on:
            self.all += 1
            head = sql.lstrip()[:7].upper()
            self.writes += head.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE"))

    @contextmanager
    def tracing(self) -> Iterator[None]:
        """Trace every connection ``sqlite3.connect`` opens while the block runs."""
        connect = sqlite3.connect

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(self.trace)
            return conn

        sqlite3.connect = traced  # type: ignore[assignment]
        try:
            yield
        finally:
            sqlite3.connect = connect


async def sqlite_statements(tmp: Path) -> list[Figure]:
    # Every statement the mesh's connections run during one run, per transition
    # (BEGIN and COMMIT included); writes are its INSERT, UPDATE and DELETE statements.
    counter = Statements()
    with counter.tracing():
        async with open_mesh(f"sqlite:///{tmp / 'statements.db'}") as mesh:
            async with hosted(mesh, FAILS, LOOP) as host:
                runs = Runs(mesh)
                await run_once(runs, host)  # warm: spec, groups
                counter.on = True
                rec = await run_once(runs, host)
                counter.on = False
    transitions = sum(rec.visits.values())
    return [
        Cost(BENCH, "runs_sqlite_statements", counter.all / transitions, "statements/transition",
             STATEMENTS_BASELINE, 1.0,
             f"{counter.writes / transitions:.2f} of them writes"),
    ]  # fmt: skip


# -- Redis ------------------------------------------------------------------------------


@asynccontextmanager
async def redis_mesh() -> AsyncIterator[Mesh | None]:
    """A Redis mesh under a fresh prefix, removed afterwards; None if Redis is not there."""
    async with redis_scratch() as scratch:
        if scratch is None:
            yield None
            return
        async with open_mesh(redis_mesh_url(scratch[1])) as mesh:
            yield mesh


class RoundTrips:
    """Counts the requests written to Redis in this process (each write of a connection
    is one), and their commands by name, read from the bytes sent: the mesh packs its
    commits and reads itself, the rest goes through redis-py's packing."""

    def __init__(self) -> None:
        self.requests = 0
        self.commands: Counter[str] = Counter()
        self.scripts = {
            hashlib.sha1(getattr(redis_scripts, name).encode()).hexdigest(): name
            for name in ("COMMIT", "POLL", "CREATE_GROUPS", "SCAN_PAGE", "EXTEND")
        }

    def _name(self, name: bytes, first: bytes) -> str:
        text = name.decode().upper()
        return f"EVALSHA {self.scripts.get(first.decode(), '?')}" if text == "EVALSHA" else text

    def _count(self, data: bytes) -> None:
        """Count each command of ``data`` (requests in the Redis protocol)."""
        at = 0
        while at < len(data):
            end = data.index(b"\r\n", at)
            words, at = int(data[at + 1 : end]), end + 2
            parts: list[bytes] = []
            for _ in range(words):
                end = data.index(b"\r\n", at)
                size, at = int(data[at + 1 : end]), end + 2
                if len(parts) < 2:
                    parts.append(data[at : at + size])
                at += size + 2
            self.commands[self._name(parts[0], parts[1] if len(parts) > 1 else b"")] += 1

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count from zero while the block runs."""
        cls = redis_connection.AbstractConnection
        send = cls.send_packed_command
        self.requests = 0
        self.commands.clear()

        async def counted_send(conn: Any, command: Any, check_health: bool = True) -> None:
            self.requests += 1
            self._count(command if isinstance(command, bytes) else b"".join(command))
            await send(conn, command, check_health)

        cls.send_packed_command = counted_send  # type: ignore[method-assign]
        try:
            yield
        finally:
            cls.send_packed_command = send  # type: ignore[method-assign]


async def redis_roundtrips() -> list[Figure]:
    # Counted on the client: every request redis-py writes to its sockets in this process
    # (a pipeline would be one), from just before Runs.start until the run is done; each
    # is answered before its connection sends again, so each is one round trip. The
    # server's INFO commandstats would also count every other client of a shared Redis
    # (and each command a Lua script runs), so it cannot single out this run. Idle
    # polling is not subtracted: it is measured apart and printed in the note, and
    # during a run the blocking reads end on the run's own wakes, not on their timeout.
    counter = RoundTrips()
    async with redis_mesh() as mesh:
        if mesh is None:
            return []
        async with hosted(mesh, FAILS, LOOP) as host:
            runs = Runs(mesh)
            await run_once(runs, host)  # warm: spec, groups, connections
            with counter.counting():
                idle_s = 1.0
                await asyncio.sleep(idle_s)
                idle = counter.requests / idle_s
            with counter.counting():
                rec = await run_once(runs, host)
    transitions = sum(rec.visits.values())
    value = counter.requests / transitions
    shares = ", ".join(f"{v / transitions:.2f} {k}" for k, v in counter.commands.most_common())
    return [
        Cost(BENCH, "runs_redis_roundtrips", value, "round trips/transition",
             REDIS_RT_BASELINE, 1.0,
             f"{value:.2f} = {shares}; idle: {idle:.0f}/s"),
    ]  # fmt: skip


async def concurrent_round(mesh: Mesh) -> tuple[float, float]:
    """Transitions per second of CONCURRENT_RUNS runs at once on ``mesh``, and the
    median number of runs with a node claimed meanwhile."""
    runs = Runs(mesh)
    await import_graph(mesh, load_graph(LOOP))
    # The runs are written before a runtime serves them, so the clock measures
    # transitions only; 50 starts at a time keep the setup short.
    gate = asyncio.Semaphore(50)

    async def start() -> str:
        async with gate:
            return (await runs.start("assistant", "loop", "x")).run_id

    ids = await asyncio.gather(*(start() for _ in range(CONCURRENT_RUNS)))
    async with hosted(mesh, CONCURRENT_FAILS) as host:
        host.pending.update(ids)
        busy: list[int] = []

        async def sample() -> None:
            while True:
                busy.append(len(host.executing))
                await asyncio.sleep(0.01)

        sampler = asyncio.ensure_future(sample())
        started = time.perf_counter()
        try:
            await asyncio.wait_for(host.all_settled.wait(), 120)
        finally:
            elapsed = time.perf_counter() - started
            sampler.cancel()
    return host.transitions / elapsed, statistics.median(busy or [0])


async def concurrent(
    name: str, meshes: Callable[[], Any], processes: int = 1, ceiling: bool = False
) -> list[Figure]:
    # Rounds of plait (each on a fresh mesh) and of LangGraph with InMemorySaver
    # (CONCURRENT_RUNS runs at once in this event loop) alternate; the best of each.
    # With processes > 1, plait's runs are served by `plait worker --processes N` and
    # LangGraph's are split over N processes: both get the same cores. With ceiling,
    # Redis's pipelined commit scripts per second are measured in each round too.
    async with meshes() as mesh:
        if mesh is None:
            return []  # its backend is not there (a line on stderr says so)
    lg = LangGraphConcurrent(CONCURRENT_FAILS)

    async def plait_round() -> tuple[float, float]:
        async with meshes() as mesh:
            if processes == 1:
                return await concurrent_round(mesh)
            with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
                rate = await pool_rate(
                    mesh.url, LOOP, CONCURRENT_RUNS, CONCURRENT_FAILS, processes, Path(tmp)
                )
            return rate, math.nan

    async def lg_round() -> float:
        if processes == 1:
            return await lg.rate(CONCURRENT_RUNS)
        return await asyncio.to_thread(
            lg_processes_rate, CONCURRENT_RUNS, CONCURRENT_FAILS, processes
        )

    ours: list[tuple[float, float]] = []
    theirs: list[float] = []
    limits: list[float] = []
    for _ in range(CONCURRENT_ROUNDS):
        ours.append(await plait_round())
        theirs.append(await lg_round())
        if ceiling:
            async with meshes() as mesh:
                limits.append(await redis_commit_ceiling(mesh, CONCURRENT_RUNS, 1.0))
    value, busy = max(ours)
    where = (
        f"median {busy:.0f} nodes in flight"
        if processes == 1
        else f"plait worker --processes {processes}; LangGraph in {processes} processes"
    )
    figures = [
        Figure(BENCH, name, value, "transitions/s", max(theirs), CONCURRENT_TARGET,
               f"LangGraph InMemorySaver, {CONCURRENT_RUNS} runs at once; {where}"),
    ]  # fmt: skip
    if limits:
        figures.append(
            Figure(BENCH, "redis_fraction_of_limit", value, "transitions/s", max(limits),
                   FRACTION_TARGET, f"commit scripts of a transition's shape, "
                   f"{CONCURRENT_RUNS} per pipeline, one connection; {where}")
        )  # fmt: skip
    return figures


@asynccontextmanager
async def sqlite_mesh(tmp: Path) -> AsyncIterator[Mesh]:
    """A fresh SQLite mesh under ``tmp``."""
    async with open_mesh(f"sqlite:///{tmp / f'concurrent-{time.monotonic_ns()}.db'}") as mesh:
        yield mesh


# -- PostgreSQL -----------------------------------------------------------------------------


@asynccontextmanager
async def postgres_mesh() -> AsyncIterator[Mesh | None]:
    """A PostgreSQL mesh in a fresh schema, dropped afterwards; None if it is not there."""
    async with postgres_scratch() as schema:
        if schema is None:
            yield None
            return
        async with open_mesh(postgres_mesh_url(schema)) as mesh:
            yield mesh


_LIMIT_UPSERT = (
    "INSERT INTO limit_kv (key, value, version) VALUES (%s, %s, 1) ON CONFLICT (key) "
    "DO UPDATE SET value = EXCLUDED.value, version = limit_kv.version + 1"
)
_LIMIT_INSERT = "INSERT INTO limit_log (run, seq, data) VALUES (%s, %s, %s)"


async def commit_limit(url: str, schema: str) -> Callable[[float], Any]:
    """A measure of the commits per second of one connection, each a transaction of an
    upsert and an insert with values of a transition's size."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(
        url, autocommit=True, options=f"-c search_path={schema}"
    )
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    await conn.execute("CREATE TABLE IF NOT EXISTS limit_kv (key text PRIMARY KEY, "
                       "value bytea NOT NULL, version bigint NOT NULL)")  # fmt: skip
    await conn.execute("CREATE TABLE IF NOT EXISTS limit_log (run text, seq bigint, "
                       "data bytea, PRIMARY KEY (run, seq))")  # fmt: skip

    async def commit(seq: int) -> None:
        async with conn.transaction():
            await conn.execute(_LIMIT_UPSERT, ("run", LIMIT_RECORD))
            await conn.execute(_LIMIT_INSERT, ("run", seq, LIMIT_STEP))

    measure = commits_per_second(commit)
    measure.close = conn.close  # type: ignore[attr-defined]
    return measure


async def postgres_transitions(seconds: float) -> list[Figure]:
    async with postgres_scratch() as schema:
        if schema is None:
            return []
        url = postgres_mesh_url(schema)
        limit = await commit_limit(url.split("?", 1)[0], schema)
        lg: LangGraphPostgres | None = None
        try:
            lg = LangGraphPostgres(url.split("?", 1)[0], f"{schema}_lg", FAILS)
            await lg.open()
        except ImportError:
            print("skipping LangGraph on PostgreSQL: pip install langgraph-checkpoint-postgres",
                  file=sys.stderr)  # fmt: skip
            lg = None
        try:
            async with open_mesh(url) as mesh, hosted(mesh, FAILS, LOOP) as host:
                runs = Runs(mesh)

                async def plait(slice_s: float) -> float:
                    count, started = 0, time.perf_counter()
                    while (elapsed := time.perf_counter() - started) < slice_s or not count:
                        count += sum((await run_once(runs, host)).visits.values())
                    return count / elapsed

                measures = [plait, limit] + ([lg.rate_sync] if lg is not None else [])
                found = await best_of(measures, seconds * 4)
        finally:
            await limit.close()  # type: ignore[attr-defined]
            if lg is not None:
                await lg.close()
    value, ceiling = found[0], found[1]
    figures = [
        Figure(BENCH, "postgres_fraction_of_limit", value, "transitions/s", ceiling, 0.5,
               "one connection committing an upsert and an insert per transaction"),
    ]  # fmt: skip
    if lg is not None:
        figures.insert(
            0,
            Figure(BENCH, "runs_postgres_transitions", value, "transitions/s", found[2],
                   POSTGRES_TARGET, "LangGraph AsyncPostgresSaver, durability=sync"),
        )  # fmt: skip
    return figures


# -- one long run, parked runs ------------------------------------------------------------


class Steps(Watch):
    """A Watch that notes when each transition of its runs committed."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__(mesh)
        self.at: dict[str, dict[int, float]] = {}

    def remember(self, rec: RunRecord, version: int) -> None:
        """As :meth:`Watch.remember`, noting the time of each new step."""
        self.at.setdefault(rec.run_id, {}).setdefault(rec.usage.steps, time.perf_counter())
        super().remember(rec, version)


async def length_growth(tmp: Path) -> list[Figure]:
    # One run of LONG_STEPS transitions: the cost per transition of its last 50 over
    # its first 50 (a record, an output or a conversation that grows would show here).
    # A graph's step budget is capped at import (100), so a person raises this run's
    # before it is served, as `plait graph raise-budget` would.
    async with open_mesh(f"sqlite:///{tmp / 'long.db'}") as mesh:
        await import_graph(mesh, load_graph(LOOP))
        runs = Runs(mesh)
        rec = await runs.start("assistant", "loop", "x")
        await runs.raise_budget(rec.run_id, {"steps": LONG_STEPS}, by=Human("bench"))
        host = Steps(mesh)
        host.pending.add(rec.run_id)
        async with serve(mesh, model=scripted(LONG_STEPS // 2 - 1), store=host, beat=False):
            done = await host.until(rec.run_id, lambda r: r.terminal)
    at = host.at[rec.run_id]
    last = max(at)
    first_cost = (at[51] - at[1]) / 50
    last_cost = (at[last] - at[last - 50]) / 50
    value = last_cost / first_cost
    return [
        Cost(BENCH, "runs_length_growth", value, "last/first cost", GROWTH_TARGET, 1.0,
             f"{done.usage.steps} steps, SQLite: steps 1-50 {first_cost * 1e6:.0f} us, "
             f"the last 50 {last_cost * 1e6:.0f} us per transition"),
    ]  # fmt: skip


async def parked_run_bytes(tmp: Path) -> list[Figure]:
    # Host memory per parked run: traced allocations still held once PARKED runs of
    # the approval graph wait on their person, over those held before they started.
    async with open_mesh(f"sqlite:///{tmp / 'parked.db'}") as mesh:
        async with hosted(mesh, 0, APPROVE) as host:
            runs = Runs(mesh)
            await run_once_parked(runs, host)  # warm: spec, groups
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.take_snapshot()
                ids = [
                    (await runs.start("assistant", "approve", "x")).run_id for _ in range(PARKED)
                ]
                host.pending.update(ids)
                for run_id in ids:
                    await host.until(run_id, settled)
                host.latest.clear()  # the bench's own bookkeeping, not the host's
                host.changed.clear()
                host.claimed.clear()
                gc.collect()
                after = tracemalloc.take_snapshot()
            finally:
                tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    value = held / PARKED
    return [
        Cost(BENCH, "parked_run_bytes", value, "bytes/run", PARKED_TARGET, 1.0,
             f"{PARKED} parked runs, SQLite, tracemalloc"),
    ]  # fmt: skip


# -- resume latency ---------------------------------------------------------------------


async def resume_latency(tmp: Path) -> list[Figure]:
    person = Human("bench")
    latencies: list[float] = []
    async with open_mesh(f"sqlite:///{tmp / 'resume.db'}") as mesh:
        async with hosted(mesh, 0, APPROVE) as host:
            runs = Runs(mesh)
            for _ in range(RESUMES):
                rec = await run_once_parked(runs, host)
                answered = time.perf_counter()
                await runs.resume(rec.run_id, "yes", by=person)
                done = await host.until(rec.run_id, lambda r: r.terminal)
                if done.status != "done":
                    raise RuntimeError(f"run {done.run_id} ended {done.status}: {done.error}")
                latencies.append((host.claimed[(rec.run_id, "publish")] - answered) * 1000)
    value = statistics.median(latencies[1:])  # the first one warms the caches
    return [
        Cost(BENCH, "resume_latency_ms", value, "ms", RESUME_BASELINE_MS, 1.0,
             f"{value:.2f} ms median of {len(latencies) - 1}, SQLite, in process"),
    ]  # fmt: skip


async def run_once_parked(runs: Runs, host: Watch) -> RunRecord:
    """Start a run of the approval graph and wait until it waits on its person."""
    rec = await runs.start("assistant", "approve", "x")
    rec = await host.until(rec.run_id, settled)
    if rec.waiting is None:
        raise RuntimeError(f"run {rec.run_id} ended {rec.status} before its question")
    return rec


# -- takeover after a SIGKILL -----------------------------------------------------------

SLOW_CHAIN = {
    "name": "slow", "entry": "first",
    "nodes": [
        {"id": "first", "type": "agent", "prompt": "Start {{input}}", "next": "second"},
        {"id": "second", "type": "agent", "prompt": "Think {{first}}", "next": "third"},
        {"id": "third", "type": "agent", "prompt": "End {{second}}"},
    ],
}  # fmt: skip
SLOW_MODEL = {"rules": [{"node": "second", "delay_ms": 3000, "text": "two"}, {"text": "ok"}]}


def worker(url: str, model: str, log: Path) -> subprocess.Popen[bytes]:
    """A ``plait worker`` process on ``url`` with a short lease, its stderr in ``log``."""
    plait = Path(sys.executable).with_name("plait")
    argv = [str(plait), "worker", "--mesh", url, "--model", model,
            "--lease-s", str(TAKEOVER_LEASE_S), "--visibility-timeout", "1",
            "--processes", "1"]  # fmt: skip
    with log.open("wb") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=log.parent)


async def until(check: Callable[[], Any], within_s: float, what: str) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    try:
        async with asyncio.timeout(within_s):
            while True:
                found = check()
                if asyncio.iscoroutine(found):
                    found = await found
                if found:
                    return found
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise RuntimeError(f"takeover: timed out waiting for {what}") from None


async def takeover(tmp: Path) -> list[Figure]:
    # Two workers split the partitions; the runs' second node takes 3 s, so a kill
    # lands on runs in flight. Each victim run's record version at the kill is noted;
    # its next version is the survivor's first commit of it.
    async with redis_scratch() as scratch:
        if scratch is None:
            return []
        url = redis_mesh_url(scratch[1])
        model_file = tmp / "slow.model.json"
        model_file.write_text(json.dumps(SLOW_MODEL))
        model = f"scripted:{model_file}"
        async with open_mesh(url) as mesh:
            await import_graph(mesh, load_graph(SLOW_CHAIN))
            logs = [tmp / f"takeover-{i}.log" for i in range(2)]
            procs = [worker(url, model, log) for log in logs]
            try:
                await until(lambda: all("holding" in p.read_text() for p in logs), 30, "leases")
                runs = Runs(mesh)
                ids = [(await runs.start("assistant", "slow", f"r{i}")).run_id
                       for i in range(TAKEOVER_RUNS)]  # fmt: skip

                async def in_flight() -> dict[str, int] | None:
                    held: dict[str, int] = {}
                    for run_id in ids:
                        rec, version = await read_record(mesh, run_id)
                        second = rec.attempts.get("second") if rec is not None else None
                        if second is not None and f":{procs[0].pid}:" in second.host:
                            held[run_id] = version
                    return held or None

                victims: dict[str, int] = await until(in_flight, 30, "runs in flight")
                os.kill(procs[0].pid, signal.SIGKILL)
                killed = time.perf_counter()
                procs[0].wait()
                times: dict[str, float] = {}

                async def moved() -> bool:
                    for run_id, version in victims.items():
                        if run_id not in times:
                            entry = await mesh.get(record_key(run_id))
                            if entry is not None and entry.version > version:
                                times[run_id] = time.perf_counter() - killed
                    return len(times) == len(victims)

                await until(moved, TAKEOVER_LEASE_S + 60, "the runs to move")
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
    value = statistics.median(times.values())
    return [
        Cost(BENCH, "takeover_s", value, "s", TAKEOVER_LEASE_S + 2.0, 1.0,
             f"median {value:.2f} s; {len(victims)} of {TAKEOVER_RUNS} runs on the killed "
             "worker, Redis, "
             f"lease {TAKEOVER_LEASE_S:g} s; slowest {max(times.values()):.2f} s"),
    ]  # fmt: skip


PAIRS = 7
"""Pairs of slices (or processes) the telemetry figures take the median ratio of."""


async def median_pair(
    first: Callable[[float], Any], second: Callable[[float], Any], seconds: float
) -> tuple[float, float]:
    """The rates of ``first`` and ``second`` in the pair (of :data:`PAIRS`, adjacent
    slices of ``seconds`` in all, their order alternating) whose ratio is the median:
    on a busy machine, a pair sees one load, where a best-of takes each from a
    different moment."""
    await first(0.1)
    await second(0.1)
    pairs = []
    for n in range(PAIRS):
        if n % 2:
            b = await second(seconds / PAIRS / 2)
            a = await first(seconds / PAIRS / 2)
        else:
            a = await first(seconds / PAIRS / 2)
            b = await second(seconds / PAIRS / 2)
        pairs.append((a, b))
    return sorted(pairs, key=lambda p: p[0] / p[1])[len(pairs) // 2]


TREE = Path(__file__).resolve().parents[1]
RATE_SCRIPT = TREE / "bench" / "tracing_rate.py"


class _Dropped(SpanExporter):
    """An exporter that drops every span: what is measured is plait's side of tracing."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def tracing_cost(seconds: float, tmp: Path) -> list[Figure]:
    """``runs_tracing_on`` and, with ``PLAIT_BENCH_BASELINE_TREE``, ``runs_tracing_off``."""
    async with open_mesh(f"sqlite:///{tmp / 'tracing.db'}") as mesh:
        async with hosted(mesh, FAILS, LOOP) as host:
            runs = Runs(mesh)

            def loop(on: bool) -> Callable[[float], Any]:
                async def measure(slice_s: float) -> float:
                    if on:
                        telemetry.enable_tracing(_Dropped())
                        telemetry.enable_metrics()
                    try:
                        count, started = 0, time.perf_counter()
                        while (elapsed := time.perf_counter() - started) < slice_s or not count:
                            count += sum((await run_once(runs, host)).visits.values())
                        return count / elapsed
                    finally:
                        telemetry.disable_tracing()
                        telemetry.STATE.metrics = False

                return measure

            on, off = await median_pair(loop(True), loop(False), seconds * 4)
    figures = [
        Figure(BENCH, "runs_tracing_on", on, "transitions/s", off, 0.85,
               "tracing and metrics off, same process, median of 7 adjacent pairs; spans "
               "batched to a dropping exporter"),
    ]  # fmt: skip
    tree = os.environ.get("PLAIT_BENCH_BASELINE_TREE")
    if tree:

        def rate_of(checkout: str) -> float:
            out = subprocess.run(
                [sys.executable, str(RATE_SCRIPT), checkout, str(seconds)],
                capture_output=True, text=True, check=True, timeout=600,
            )  # fmt: skip
            return float(out.stdout.strip().splitlines()[-1])

        pairs = []
        for n in range(PAIRS):  # alternating processes: both see the same machine load
            first, second = (str(TREE), tree) if n % 2 else (tree, str(TREE))
            rates = {first: rate_of(first), second: rate_of(second)}
            pairs.append((rates[str(TREE)], rates[tree]))
        mine, theirs = sorted(pairs, key=lambda p: p[0] / p[1])[len(pairs) // 2]
        figures.append(
            Figure(BENCH, "runs_tracing_off", mine, "transitions/s", theirs, 0.99,
                   f"the tree at {tree} (no telemetry): the median of {PAIRS} pairs of "
                   "processes")
        )  # fmt: skip
    return figures


async def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    only_tracing = "--tracing" in argv
    if only_tracing:
        argv.remove("--tracing")
    only_concurrent = "--concurrent" in argv
    if only_concurrent:
        argv.remove("--concurrent")
    processes = 1
    if "--processes" in argv:
        at = argv.index("--processes")
        processes = int(argv[at + 1])
        del argv[at : at + 2]
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    # This process hosts runs as `plait worker` does, so it tunes the collector the
    # same way; LangGraph runs in the same process under the same setting.
    tune_gc_for_serving()
    figures: list[Figure] = []
    if args.backend == "postgres":
        figures += await postgres_transitions(args.seconds)
        figures += await concurrent("runs_postgres_concurrent", postgres_mesh, processes)
        report(figures, as_json=args.json, title="durable runs on PostgreSQL")
        return
    if only_concurrent:
        if args.backend in (None, "sqlite"):
            with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
                figures += await concurrent(
                    "runs_sqlite_concurrent", lambda: sqlite_mesh(Path(tmp)), processes
                )
        if args.backend in (None, "redis"):
            figures += await concurrent("runs_redis_concurrent", redis_mesh, processes, True)
        report(figures, as_json=args.json, title="durable runs, 200 at once")
        return
    if args.backend == "redis":
        figures += await redis_roundtrips()
        figures += await concurrent("runs_redis_concurrent", redis_mesh, processes, True)
        report(figures, as_json=args.json, title="durable runs on Redis")
        return
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
            figures += await sqlite_transitions(args.seconds, Path(tmp))
        report(figures, as_json=args.json, title="durable runs on SQLite, one at a time")
        return
    if only_tracing:
        with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
            figures += await tracing_cost(args.seconds, Path(tmp))
        report(figures, as_json=args.json, title="durable runs: the cost of telemetry")
        return
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        figures += await sqlite_transitions(args.seconds, Path(tmp))
        figures += await resume_latency(Path(tmp))
        figures += await sqlite_statements(Path(tmp))
        figures += await length_growth(Path(tmp))
        figures += await parked_run_bytes(Path(tmp))
        figures += await concurrent(
            "runs_sqlite_concurrent", lambda: sqlite_mesh(Path(tmp)), processes
        )
    figures += await redis_roundtrips()
    figures += await concurrent("runs_redis_concurrent", redis_mesh, processes, True)
    figures += await postgres_transitions(args.seconds)
    figures += await concurrent("runs_postgres_concurrent", postgres_mesh)
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        figures += await takeover(Path(tmp))
    report(figures, as_json=args.json, title="durable runs")


if __name__ == "__main__":
    asyncio.run(main())
