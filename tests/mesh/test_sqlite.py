"""What only the SQLite mesh has: its file, WAL, group commit and its error boundary."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgpack
import pytest

from plait.errors import ConfigError, MeshError, MeshUnavailable, VersionConflict
from plait.mesh import Mesh, open_mesh
from plait.mesh import _sqlite_worker as worker_module
from plait.mesh.sqlite import SqliteMesh
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mesh.db"


@pytest.fixture
async def mesh(db_path: Path) -> AsyncIterator[SqliteMesh]:
    async with SqliteMesh(db_path) as opened:
        yield opened


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """Records (requests, failed requests) of every batch the writer commits."""
    seen: list[tuple[int, int]] = []
    write = worker_module.Worker._write

    def recording(self: Any, conn: sqlite3.Connection, batch: Any) -> Any:
        outcomes = write(self, conn, batch)
        seen.append((len(batch), sum(not ok for ok, _ in outcomes)))
        return outcomes

    monkeypatch.setattr(worker_module.Worker, "_write", recording)
    yield seen


# -- the file -----------------------------------------------------------------------


async def test_creates_the_file_and_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "mesh.db"
    async with open_mesh(f"sqlite:///{path}") as mesh:
        await mesh.put("k", 1)
    assert path.is_file()


async def test_relative_path_is_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLAIT_MESH", raising=False)
    async with open_mesh("sqlite:///state/mesh.db") as mesh:
        assert mesh.url == "sqlite:///state/mesh.db"
        await mesh.put("k", 1)
    async with open_mesh() as default:
        await default.put("k", 1)
    assert (tmp_path / "state" / "mesh.db").is_file()
    assert (tmp_path / ".plait" / "mesh.db").is_file()


async def test_wal_is_on(mesh: SqliteMesh, db_path: Path) -> None:
    await mesh.put("k", 1)
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


# The schema of a version-2 file, as plait wrote it before values and events had a
# taint flag; version 1 differs only in keeping kv WITHOUT ROWID.
_SCHEMA_V2 = """
CREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX events_by_topic ON events (topic, seq);
CREATE TABLE consumer_groups (
    topic TEXT NOT NULL, grp TEXT NOT NULL, cursor INTEGER NOT NULL, PRIMARY KEY (topic, grp)
) WITHOUT ROWID;
CREATE TABLE pending (
    topic TEXT NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL, consumer TEXT NOT NULL,
    delivered_ms INTEGER NOT NULL, attempt INTEGER NOT NULL, PRIMARY KEY (topic, grp, seq)
) WITHOUT ROWID;
CREATE TABLE scheduled (
    skey TEXT PRIMARY KEY, due_ms INTEGER NOT NULL, topic TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX scheduled_by_due ON scheduled (due_ms);
"""


def _old_file(path: Path, version: int) -> None:
    """Write a mesh file of schema ``version`` (1 or 2) holding two keys (``a`` at
    version 1, ``b`` at 2), an event on ``old`` and a scheduled event on ``old`` already
    due, the way a plait of that version wrote them."""
    schema = _SCHEMA_V2
    if version == 1:
        schema = schema.replace("version INTEGER NOT NULL);", "version INTEGER NOT NULL)"
                                " WITHOUT ROWID;")  # fmt: skip
    big, three = msgpack.packb({"big": "x" * 3000}), msgpack.packb(3)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.executescript(schema)
        conn.execute("INSERT INTO kv VALUES ('a', ?, 1), ('b', ?, 2)", (big, three))
        conn.execute(
            "INSERT INTO events (topic, id, kind, data, at_ms) VALUES ('old', 'e1', 'n', ?, 1)",
            (msgpack.packb(1),),
        )
        conn.execute(
            "INSERT INTO scheduled VALUES ('ee2', 0, 'old', 'e2', 'n', ?, 1)",
            (msgpack.packb(2),),
        )
        conn.execute(f"PRAGMA user_version = {version}")
    finally:
        conn.close()


@pytest.mark.parametrize("version", [1, 2])
async def test_an_older_file_is_migrated_with_its_keys_and_events(
    db_path: Path, version: int
) -> None:
    _old_file(db_path, version)
    async with SqliteMesh(db_path) as mesh:
        a, b = await mesh.get("a"), await mesh.get("b")
        assert a is not None and a.value == {"big": "x" * 3000} and a.version == 1
        assert b is not None and b.value == 3 and b.version == 2
        assert not a.tainted and not b.tainted
        assert (await mesh.put("b", 4, if_version=2)).version == 3
        await mesh.put("c", "outside", tainted=True)
        c = await mesh.get("c")
        assert c is not None and c.tainted
        async with mesh.subscribe("old", "g", "c", start="begin") as sub:
            got = [await sub.__anext__() for _ in range(2)]
        assert [(d.data, d.event.tainted) for d in got] == [(1, False), (2, False)]
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"live", "live_heads"} <= tables  # version 4: the live channels
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'kv'").fetchone()[0]
        assert "WITHOUT ROWID" not in sql
    finally:
        conn.close()


async def test_a_newer_file_is_refused(db_path: Path) -> None:
    _old_file(db_path, 2)
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA user_version = 5")
    conn.close()
    with pytest.raises(ConfigError, match="schema version 5, newer"):
        async with SqliteMesh(db_path) as mesh:
            await mesh.get("a")


async def test_path_that_cannot_be_created_says_which_and_why(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = blocker / "mesh.db"
    with pytest.raises(ConfigError) as info:
        async with open_mesh(f"sqlite:///{path}"):
            pass
    assert str(path) in str(info.value) and "directory" in str(info.value)
    lazy = SqliteMesh(path)
    with pytest.raises(ConfigError):
        await lazy.put("k", 1)  # no open(): the first call reports it
    await lazy.close()


async def test_directory_or_foreign_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        await SqliteMesh(tmp_path).open()
    assert str(tmp_path) in str(info.value) and "unable to open" in str(info.value)
    foreign = tmp_path / "notes.txt"
    foreign.write_bytes(b"these are not the tables you are looking for" * 100)
    with pytest.raises(ConfigError) as info:
        await SqliteMesh(foreign).open()
    assert "not a database" in str(info.value)


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_mesh(f"sqlite:///{tmp_path}/m.db", busy_timeout=-1)
    with pytest.raises(ConfigError):
        SqliteMesh(tmp_path / "m.db", poll_interval_ms=1.5)  # type: ignore[arg-type]


# -- group commit -------------------------------------------------------------------


async def test_a_conflict_in_a_batch_leaves_the_others_alone(
    mesh: SqliteMesh, db_path: Path, batch_sizes: list[tuple[int, int]]
) -> None:
    for i in range(4):
        await mesh.put(f"taken/{i}", "old")  # version 1
    await mesh.put("tx/a", 1)
    # Another connection holds the write lock while every request queues up, so the
    # writer takes them all as one batch once it is released.
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    batch_sizes.clear()

    async def bad_transaction() -> None:
        async with mesh.transact() as tx:
            tx.put("tx/new", "never", if_version=0)  # applied, then rolled back
            tx.put("tx/a", 2, if_version=7)  # conflicts

    async def good_transaction() -> None:
        async with mesh.transact() as tx:
            tx.put("tx/b", "b", if_version=0)
            tx.put("tx/a", 2, if_version=1)

    calls: list[Any] = [mesh.put(f"fresh/{i}", i, if_version=0) for i in range(64)]
    calls += [mesh.put(f"taken/{i}", "new", if_version=0) for i in range(2)]
    calls += [mesh.put(f"taken/{i}", "new", if_version=5) for i in range(2, 4)]
    calls += [bad_transaction(), good_transaction(), mesh.delete("taken/0", if_version=9)]
    running = asyncio.gather(*calls, return_exceptions=True)
    await asyncio.sleep(0.2)
    blocker.execute("COMMIT")
    blocker.close()
    results: list[Any] = list(await running)

    assert [r.version for r in results[:64]] == [1] * 64
    conflicts = [*results[64:68], results[68], results[70]]
    assert all(isinstance(r, VersionConflict) for r in conflicts)
    assert [(c.key, c.expected, c.actual) for c in conflicts] == [
        ("taken/0", 0, 1),
        ("taken/1", 0, 1),
        ("taken/2", 5, 1),
        ("taken/3", 5, 1),
        ("tx/a", 7, 1),
        ("taken/0", 9, 1),
    ]
    assert results[69] is None
    assert max(size for size, _ in batch_sizes) >= 60
    assert any(failed >= 2 for _, failed in batch_sizes)
    assert [e.key async for e in mesh.scan("fresh/")] == sorted(f"fresh/{i}" for i in range(64))
    assert [(e.value, e.version) async for e in mesh.scan("taken/")] == [("old", 1)] * 4
    assert await mesh.get("tx/new") is None
    a, b = await mesh.get("tx/a"), await mesh.get("tx/b")
    assert a is not None and (a.value, a.version) == (2, 2)
    assert b is not None and b.value == "b"


# -- the error boundary -------------------------------------------------------------


async def test_a_lock_held_beyond_busy_timeout_is_mesh_unavailable(db_path: Path) -> None:
    async with SqliteMesh(db_path, busy_timeout=50) as mesh:
        await mesh.put("k", 1)
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(MeshUnavailable) as info:
                await mesh.put("k", 2)
            assert not isinstance(info.value, sqlite3.Error)
            assert info.value.retryable
            assert str(db_path) in str(info.value) and "busy_timeout (50 ms)" in str(info.value)
            with pytest.raises(MeshUnavailable):
                await mesh.publish("t", "kind", 1)
            got = await mesh.get("k")  # WAL: readers are not blocked by the writer's lock
            assert got is not None and got.value == 1
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        again = await mesh.put("k", 2, if_version=1)  # retrying works once the lock is gone
        assert again.version == 2


async def test_only_plait_errors_escape(mesh: SqliteMesh, db_path: Path) -> None:
    await mesh.put("k", 1)
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("DROP TABLE kv")
    finally:
        conn.close()
    with pytest.raises(MeshError) as info:
        await mesh.put("k", 2)
    assert not isinstance(info.value, sqlite3.Error)
    with pytest.raises(MeshError):
        await mesh.get("k")


async def test_close_is_idempotent_and_final(db_path: Path) -> None:
    mesh = SqliteMesh(db_path)
    await mesh.open()
    sub = mesh.subscribe("t", "g", "c")
    got: list[Any] = []

    async def consume() -> None:
        async for d in sub:
            got.append(d)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.1)
        await mesh.close()
    await mesh.close()
    assert got == []
    with pytest.raises(MeshUnavailable, match="closed"):
        await mesh.get("k")


# -- keys and topics ----------------------------------------------------------------


async def test_scan_prefix_with_like_wildcards(mesh: Mesh) -> None:
    for key in ["a%b", "a_b", "axb", "a\\b", "z\U0010ffff", "z\U0010ffff\U0010ffff/1", "zz"]:
        await mesh.put(key, key)
    assert [e.key async for e in mesh.scan("a%")] == ["a%b"]
    assert [e.key async for e in mesh.scan("a_")] == ["a_b"]
    assert [e.key async for e in mesh.scan("a\\")] == ["a\\b"]
    assert [e.key async for e in mesh.scan("z\U0010ffff")] == [
        "z\U0010ffff",
        "z\U0010ffff\U0010ffff/1",
    ]


async def test_two_mesh_objects_on_one_file_share_a_group(db_path: Path) -> None:
    async with SqliteMesh(db_path) as one, SqliteMesh(db_path) as two:
        a = one.subscribe("jobs", "workers", "a")
        b = two.subscribe("jobs", "workers", "b")
        await anyio.sleep(0.1)  # both have joined the group before anything is published
        ids = [await one.publish("jobs", "job", i) for i in range(40)]
        seen: dict[str, list[str]] = {"a": [], "b": []}
        all_in = anyio.Event()

        async def consume(name: str, sub: Any) -> None:
            async for d in sub:
                seen[name].append(d.id)
                await d.ack()
                if len(seen["a"]) + len(seen["b"]) >= len(ids):
                    all_in.set()

        with anyio.fail_after(scaled(10)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume, "a", a)
                tg.start_soon(consume, "b", b)
                await all_in.wait()
                tg.cancel_scope.cancel()
        assert sorted(seen["a"] + seen["b"]) == sorted(ids)  # each once, between them
        assert seen["b"], "the second object never received anything"


async def test_delayed_event_from_another_object_is_never_early(db_path: Path) -> None:
    # How late it comes is a figure of bench/mesh_delay.py, not a bound here.
    async with SqliteMesh(db_path) as publisher, SqliteMesh(db_path) as reader:
        sub = reader.subscribe("later", "g", "c")
        await anyio.sleep(0.1)
        published = time.time()
        await publisher.publish("later", "tick", "x", after_ms=300, key="tick")
        with anyio.fail_after(scaled(3)):
            d = await sub.__anext__()
        late_ms = (time.time() - published) * 1000 - 300
        assert d.data == "x" and late_ms >= 0
        await sub.close()


# -- commits on the event loop ------------------------------------------------------


@pytest.fixture
def loop_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int, int]]]:
    """Records (thread, requests, failed requests) of every batch committed anywhere."""
    seen: list[tuple[str, int, int]] = []
    write = worker_module.write_batch

    def recording(conn: sqlite3.Connection, batch: Any, *args: Any) -> Any:
        outcomes = write(conn, batch, *args)
        failed = sum(not ok for ok, _ in outcomes)
        seen.append((threading.current_thread().name, len(batch), failed))
        return outcomes

    monkeypatch.setattr(worker_module, "write_batch", recording)
    yield seen


def _where_and_level(conn: sqlite3.Connection) -> tuple[str, int]:
    return threading.current_thread().name, conn.execute("PRAGMA synchronous").fetchone()[0]


async def test_commits_run_on_the_loop_under_normal(mesh: SqliteMesh) -> None:
    # The loop's own connection opens on the reader thread just after the mesh opens,
    # and until it has, or while a batch handed to the writer thread is not committed
    # yet, a batch goes to that thread by design: once settled, commits are the loop's.
    loop_conn = mesh._on_loop()
    assert loop_conn is not None
    await loop_conn.open()
    seen = []
    for _ in range(20):
        seen.append(await mesh._write(_where_and_level))
        if seen[-1][0] == threading.current_thread().name:
            break
        await asyncio.sleep(0.05)
    assert seen[-1] == (threading.current_thread().name, 1), seen
    assert {level for _, level in seen} == {1}


async def test_synchronous_full_is_selectable_and_in_effect(db_path: Path) -> None:
    async with open_mesh(f"sqlite:///{db_path}?synchronous=full") as mesh:
        assert isinstance(mesh, SqliteMesh) and mesh.path == db_path
        where, level = await mesh._write(_where_and_level)
        assert (where, level) == ("plait-sqlite-writer", 2)  # fsyncs: off the loop
        entry = await mesh.put("k", 1, if_version=0)
        assert entry.version == 1
    async with SqliteMesh(db_path, synchronous="FULL") as mesh:
        assert (await mesh._write(_where_and_level))[1] == 2
    with pytest.raises(ConfigError, match="synchronous"):
        SqliteMesh(db_path, synchronous="off")
    with pytest.raises(ConfigError, match="unknown SQLite mesh URL option 'journal'"):
        open_mesh(f"sqlite:///{db_path}?journal=delete")


async def test_a_conflicting_transaction_in_a_loop_batch_leaves_the_others_alone(
    mesh: SqliteMesh, loop_batches: list[tuple[str, int, int]]
) -> None:
    await mesh.put("shared", 0)  # version 1
    loop_batches.clear()

    async def transaction(i: int) -> None:
        async with mesh.transact() as tx:
            tx.put(f"mine/{i}", i, if_version=0)
            tx.publish("done", "did", i)
            tx.put("shared", i, if_version=1 if i == 3 else 9)  # only 3 holds the version

    async def own(i: int) -> None:
        async with mesh.transact() as tx:
            tx.put(f"own/{i}", i, if_version=0)
            tx.put(f"own/{i}/b", i, if_version=0)

    results = await asyncio.gather(
        transaction(3), transaction(4), *(own(i) for i in range(8)), return_exceptions=True
    )
    assert results[0] is None and isinstance(results[1], VersionConflict)
    assert results[2:] == [None] * 8
    assert loop_batches == [(threading.current_thread().name, 10, 1)]  # one commit, on the loop
    shared = await mesh.get("shared")
    assert shared is not None and (shared.value, shared.version) == (3, 2)
    assert [e.key async for e in mesh.scan("mine/")] == ["mine/3"]
    assert len([e async for e in mesh.scan("own/")]) == 16


_OTHER_PROCESS = """
import asyncio, sys
from plait.errors import VersionConflict
from plait.mesh.sqlite import SqliteMesh

async def main(path, name, count):
    async with SqliteMesh(path) as mesh:
        print("ready", flush=True)
        sys.stdin.readline()

        async def one(task):
            for i in range(task, count, 8):
                await mesh.put(f"{name}/{i}", i, if_version=0)
                while True:
                    entry = await mesh.get("counter")
                    try:
                        await mesh.put("counter", entry.value + 1, if_version=entry.version)
                        break
                    except VersionConflict:
                        pass

        await asyncio.gather(*(one(t) for t in range(8)))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_two_processes_writing_one_file_lose_nothing(
    db_path: Path, batch_sizes: list[tuple[int, int]]
) -> None:
    count = 600
    async with SqliteMesh(db_path) as mesh:
        await mesh.put("counter", 0, if_version=0)
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _OTHER_PROCESS, str(db_path), "other", str(count),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert other.stdin is not None and other.stdout is not None
        with anyio.fail_after(scaled(20)):
            assert await other.stdout.readline() == b"ready\n"
        batch_sizes.clear()  # from here on, the writer thread serves only what met a lock
        other.stdin.write(b"go\n")
        await other.stdin.drain()

        async def one(task: int) -> None:
            for i in range(task, count, 8):
                await mesh.put(f"here/{i}", i, if_version=0)
                while True:
                    entry = await mesh.get("counter")
                    assert entry is not None
                    try:
                        await mesh.put("counter", entry.value + 1, if_version=entry.version)
                        break
                    except VersionConflict:
                        pass

        with anyio.fail_after(scaled(120)):
            await asyncio.gather(*(one(t) for t in range(8)))
            assert await other.wait() == 0
        counter = await mesh.get("counter")
        assert counter is not None and counter.value == 2 * count
        for name in ("here", "other"):
            assert len([e async for e in mesh.scan(f"{name}/")]) == count
    assert batch_sizes, "no batch met the other process's lock and moved to the writer thread"


async def test_the_wal_is_checkpointed_off_the_loop(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = db_path.with_name(db_path.name + "-wal")
    where: list[str] = []
    checkpoint = worker_module.checkpoint

    def recording(conn: sqlite3.Connection, restart: bool) -> Any:
        where.append(threading.current_thread().name)
        return checkpoint(conn, restart)

    monkeypatch.setattr(worker_module, "checkpoint", recording)
    async with SqliteMesh(db_path) as mesh:
        value = "x" * 3000  # about one page a put
        largest = 0
        for i in range(6000):
            await mesh.put(f"k/{i % 500}", value)
            largest = max(largest, wal.stat().st_size)
    # Without checkpoints the WAL would hold every one of the 6,000+ pages written: any
    # size under that is a WAL reset and reused (how soon depends on the machine's load).
    assert set(where) == {"plait-sqlite-reader", "plait-sqlite-writer"}, where
    assert largest < 6000 * 4096, largest


async def test_writes_wait_on_the_loop_while_the_writer_thread_holds_the_lock(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, loop_batches: list[tuple[str, int, int]]
) -> None:
    # While the writer thread copies the rest of the WAL holding the write lock, the
    # loop's writes do not go to that thread one small batch each: they wait on the
    # loop and commit there, together, once it is done.
    checkpoint = worker_module.checkpoint
    restarting, release = threading.Event(), threading.Event()

    def held(conn: sqlite3.Connection, restart: bool) -> Any:
        if restart:  # holds the write lock a while, as a long copy does
            conn.execute("BEGIN IMMEDIATE")
            restarting.set()
            release.wait(10)
            conn.execute("ROLLBACK")
        return checkpoint(conn, restart)

    monkeypatch.setattr(worker_module, "checkpoint", held)
    async with SqliteMesh(db_path) as mesh:
        loop_conn = mesh._on_loop()
        assert loop_conn is not None
        await loop_conn.open()
        loop_conn._checkpoint_pages = 1
        for i in range(64):  # past the threshold: once the WAL's size is read, a checkpoint
            await mesh.put(f"first/{i}", 0)
            if loop_conn._checkpointing:
                break
        with anyio.fail_after(scaled(5)):
            while not restarting.is_set():
                await asyncio.sleep(0.005)
        loop_batches.clear()

        async def one(i: int) -> None:
            async with mesh.transact() as tx:
                tx.put(f"during/{i}", i, if_version=0)
                tx.put(f"during/{i}/b", i, if_version=0)
            await asyncio.sleep(0)  # a second commit in a later loop iteration
            await mesh.put(f"during/{i}", i + 100, if_version=1)

        writes = asyncio.gather(*(one(i) for i in range(20)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not writes.done() and loop_batches == []  # nothing went to the thread
        loop_conn._checkpoint_pages = 10**9
        release.set()
        with anyio.fail_after(scaled(5)):
            await writes
        here = threading.current_thread().name
        assert [where for where, _, _ in loop_batches] == [here] * len(loop_batches)
        assert loop_batches[0][1] == 20  # the first commits of all 20 waited as one batch
        assert len([e async for e in mesh.scan("during/")]) == 40
        assert [(await mesh.get(f"during/{i}")).version for i in range(20)] == [2] * 20  # type: ignore[union-attr]
