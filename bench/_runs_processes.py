"""The concurrent runs benches on several cores, and Redis's pipelined commit ceiling.

- :func:`pool_rate`: transitions per second of ``runs`` runs served by ``plait worker
  --processes N`` (real processes sharing the partitions), to the last run's end as
  its record says: on Redis written while the children are stopped (SIGSTOP) and
  clocked from their SIGCONT; on SQLite (where a stopped child may hold the write
  lock) written while they serve, clocked from the first start (a figure that counts
  the starts against plait).
- :func:`lg_processes_rate`: LangGraph with ``InMemorySaver``, the same runs split over N
  processes of this interpreter (each its own event loop, started together once all
  have imported), the transitions of all over the span from the first start to the
  last end: the same cores as the pool.
- :func:`redis_commit_ceiling`: commit scripts per second Redis answers when they come
  pipelined, each of a transition's shape (a record put, an output insert, a wake
  published, a wake acked), over as many runs as the concurrent bench: what 200 runs
  could at most reach.

``python bench/_runs_processes.py lg RUNS FAILS`` is the LangGraph child.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from plait.actors.leases import Member, read_members
from plait.actors.partitions import load_partitions
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.mesh._base import AckOp, Delivery, Event, InsertOp, PublishOp, PutOp
from plait.mesh._redis_ops import commit_request
from plait.mesh.redis import RedisMesh
from plait.runs import Runs
from plait.runs.store import read_record

HERE = Path(__file__).resolve().parent


def model_rules(fails: int) -> dict[str, Any]:
    """The instant model of bench/runs.py as a rule file's content."""
    return {
        "rules": [
            {"node": "verify", "visit": fails + 1, "text": "Good now.\npass"},
            {"node": "verify", "text": "Needs a source.\nfail"},
            {"text": "A draft."},
        ]
    }


async def _until(check: Any, within_s: float, what: str) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def pool_rate(
    url: str, graph: dict[str, Any], runs: int, fails: int, processes: int, tmp: Path
) -> float:
    """Transitions per second of ``runs`` runs on ``url`` served by a worker pool."""
    model = tmp / f"concurrent-{fails}.model.json"
    model.write_text(json.dumps(model_rules(fails)))
    log = tmp / "pool.log"
    async with open_mesh(url) as mesh:
        await import_graph(mesh, load_graph(graph))
        count = await load_partitions(mesh)
        pool = _start_pool(url, model, processes, log)
        try:

            async def split() -> list[Member] | None:
                if pool.poll() is not None:
                    raise RuntimeError(f"the worker pool exited: {log.read_text()}")
                found = [m for m in await read_members(mesh) if m.serves == "all"]
                held = sorted(p for m in found for p in m.held)
                return found if len(found) == processes and held == list(range(count)) else None

            members = await _until(split, 120, "the pool to split the partitions")
            # On Redis the runs are written while the children are stopped, so the
            # clock measures transitions only, as the in-process bench's does; on
            # SQLite a stopped child may hold the write lock, so the clock starts
            # with the first start and the runs are written while the pool serves.
            pids = [m.pid for m in members] if url.startswith("redis") else []
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            started = time.time()
            try:
                ids = await _start_runs(mesh, runs)
            finally:
                if pids:
                    started = time.time()
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            return await _rate(mesh, ids, started)
        finally:
            pool.terminate()
            pool.wait()


def _start_pool(url: str, model: Path, processes: int, log: Path) -> subprocess.Popen[bytes]:
    plait = Path(sys.executable).with_name("plait")
    argv = [str(plait), "worker", "--mesh", url, "--model", f"scripted:{model}",
            "--processes", str(processes)]  # fmt: skip
    with log.open("wb") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)


async def _start_runs(mesh: Mesh, count: int) -> list[str]:
    front = Runs(mesh)
    gate = asyncio.Semaphore(50)

    async def start() -> str:
        async with gate:
            return (await front.start("assistant", "loop", "x")).run_id

    return list(await asyncio.gather(*(start() for _ in range(count))))


async def _rate(mesh: Mesh, ids: list[str], started: float) -> float:
    """Transitions per second of the runs ``ids`` from ``started`` to the last one's end."""
    pending = list(ids)
    ended, transitions = started, 0

    async def drained() -> bool:
        nonlocal ended, transitions
        while pending:  # one record at a time: the bench's reads stay out of the way
            rec, _ = await read_record(mesh, pending[0])
            if rec is None or not rec.terminal:
                return False
            if rec.status != "done":
                raise RuntimeError(f"run {rec.run_id} ended {rec.status}: {rec.error}")
            pending.pop(0)
            ended = max(ended, rec.updated_at)
            transitions += sum(rec.visits.values())
        return True

    await _until(drained, 300, "the runs to end")
    return transitions / (ended - started)


def lg_processes_rate(runs: int, fails: int, processes: int) -> float:
    """Transitions per second of LangGraph's loop, ``runs`` runs over ``processes``."""
    share = [runs // processes + (i < runs % processes) for i in range(processes)]
    children = [
        subprocess.Popen(
            [sys.executable, str(Path(__file__)), "lg", str(n), str(fails)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in share
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a LangGraph child did not start")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        spans = [json.loads(child.communicate()[0]) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    first = min(s["started"] for s in spans)
    last = max(s["ended"] for s in spans)
    return sum(s["transitions"] for s in spans) / (last - first)


async def _lg_child(runs: int, fails: int) -> None:
    from _langgraph_loop import LangGraphConcurrent

    lg = LangGraphConcurrent(fails)
    await lg.rate(1)  # warm: the compiled graph's first run
    before = lg.nodes
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.time()
    await lg.rate(runs)
    ended = time.time()
    print(json.dumps({"started": started, "ended": ended, "transitions": lg.nodes - before}))


async def _no(delivery: Delivery) -> None:
    raise AssertionError("the ceiling acks inside its commits only")


async def redis_commit_ceiling(mesh: Mesh, runs: int, seconds: float) -> float:
    """Transition-shaped commit scripts per second, ``runs`` at a time in one pipeline."""
    assert isinstance(mesh, RedisMesh)
    client = mesh._client
    topic, group = "bench.ceiling.{0}", "bench"
    stream = mesh._stream(topic)
    await client.xgroup_create(stream, group, id="$", mkstream=True)
    record, step, wake = b"r" * 600, b"s" * 300, b"w" * 120
    heads = [mesh._index, mesh._sched, mesh._schedp]
    seq = 0

    def call(run: int) -> tuple[list[str], bytes]:
        nonlocal seq
        seq += 1
        entry = f"{seq}-0"  # acking an id the group never delivered is a no-op, as cheap
        ops = [
            PutOp(f"runs/r{run}/record", record, None),
            InsertOp(f"runs/r{run}/steps/{seq}", step),
            PublishOp(topic, f"e{seq}", "wake", wake, 0, 0, None),
            AckOp(Delivery(Event(f"e{seq}", topic, "wake", None, 0), group, "c", 1, entry, _no)),
        ]
        keys, arg, _ = commit_request(ops, mesh._kv, heads, mesh._stream)
        return keys, arg

    sha = mesh._commit_script.sha
    keys, arg = call(0)
    await mesh._commit_script(keys, [arg])  # loads the script
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or not count:
        async with client.pipeline(transaction=False) as pipe:
            for run in range(runs):
                keys, arg = call(run)
                pipe.evalsha(sha, len(keys), *keys, arg)
            await pipe.execute()
        count += runs
    await client.xtrim(stream, maxlen=0)
    return count / elapsed


if __name__ == "__main__" and sys.argv[1:2] == ["lg"]:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(_lg_child(int(sys.argv[2]), int(sys.argv[3])))
