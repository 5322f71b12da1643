"""Live runs: how fast a run's streamed deltas reach watchers in another process.

Run: ``python bench/live.py [--json] [--seconds 1.0]``.

The writer is the serving process's own path (:class:`plait.runs.channel.RunChannels`:
a model's ``on_delta`` queues, a task appends to the mesh's live channel, the mesh wakes
the watchers); the watchers are ``live.watch`` readers in a second process, as the
API's server-sent events and ``plait graph watch`` read. On SQLite and Redis:

- ``live_first_token_overhead_ms``: from a delta handed over (a model's first chunk)
  to a watcher in the other process holding it; the median of spaced samples, judged
  against 5 ms.
- ``live_deltas_per_s``: deltas handed over back to back, delivered to one watcher per
  second, judged against 5,000 (20 runs at 250 tokens/s).
- ``live_watchers_spread_ms``: 100 watchers (one process, as one API server holding
  100 SSE connections) of a run streaming 250 deltas/s: the median, over deltas, of
  the time between the first and the last watcher holding a delta; judged against 50 ms.
- ``live_watchers_cpu_ratio``: the writer's CPU time for that stream with 100 watchers
  over with one; judged against 1.5.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from _common import Cost, Figure, parse_args, redis_mesh_url, redis_scratch, report

from plait.mesh import Mesh, open_mesh
from plait.runs.channel import RunChannels, channel_of
from plait.runs.progress import Progress

BENCH = "live"
PACE_S = 0.004
"""One delta per 4 ms: a fast model's 250 tokens/s, what 100 watchers watch stream."""
RUN = "grun_bench"

WATCHER = textwrap.dedent(
    """
    import asyncio, json, sys, time

    from plait.mesh import open_mesh

    async def main(url: str, channel: str, count: int) -> None:
        async with open_mesh(url) as mesh:
            got = [dict() for _ in range(count)]  # per watch: offset -> [recv ns, text]

            async def follow(index, watch) -> None:
                after = 0
                while True:
                    found = await watch.next(after, 60)
                    now = time.time_ns()
                    for item in found.items:
                        after = item.offset
                        data = item.data
                        if data.get("kind") == "progress":
                            return
                        if data.get("kind") == "delta":
                            got[index][item.offset] = [now, data["text"]]

            watches = [mesh.live.watch(channel) for _ in range(count)]
            for watch in watches:
                await watch.open()
            print("ready", flush=True)
            await asyncio.gather(*(follow(i, w) for i, w in enumerate(watches)))
            for watch in watches:
                await watch.close()
            print(json.dumps(got), flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


class Watchers:
    """``count`` watchers of the bench run's channel in a second process."""

    def __init__(self, url: str, count: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WATCHER, url, channel_of(RUN), str(count)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "ready\n", line

    def results(self) -> list[dict[str, list[Any]]]:
        out, _ = self.process.communicate(timeout=120)
        found: list[dict[str, list[Any]]] = json.loads(out)
        return found


async def until_watched(mesh: Mesh) -> None:
    assert mesh.live is not None
    while not mesh.live.watched(channel_of(RUN)):  # noqa: ASYNC110 -- learnt, not signalled
        await asyncio.sleep(0.005)


async def fresh_channel(mesh: Mesh) -> RunChannels:
    assert mesh.live is not None
    await mesh.live.drop(channel_of(RUN))
    return RunChannels(mesh, keep_bytes=4 << 20)


async def first_token(url: str, mesh: Mesh, samples: int) -> float:
    """The median ms from a delta handed over to the other process holding it."""
    channels = await fresh_channel(mesh)
    watchers = Watchers(url, 1)
    await until_watched(mesh)
    for _ in range(samples):
        channels.delta(RUN, "draft", 1, "c", str(time.time_ns()))
        await asyncio.sleep(0.01)  # each delta alone, as a reply's first chunk is
    channels.progress(RUN, Progress(status="done", audit_seq=1))
    [got] = await asyncio.to_thread(watchers.results)
    late = [(recv - int(text)) / 1e6 for recv, text in got.values()]
    return statistics.median(late[5:] or late)


async def stream(
    url: str, mesh: Mesh, deltas: int, watching: int, pace_s: float = 0.0
) -> tuple[float, float, list[float]]:
    """Deltas to ``watching`` watchers, back to back or one per ``pace_s``: delivered
    per second to the first, the writer's CPU seconds, and per delta the ms between
    the first and the last watcher holding it."""
    channels = await fresh_channel(mesh)
    watchers = Watchers(url, watching)
    await until_watched(mesh)
    cpu = time.process_time()
    started = time.time_ns()
    for n in range(deltas):
        channels.delta(RUN, "draft", 1, "c", f"tok{n} ")
        if pace_s:
            await asyncio.sleep(pace_s)
        elif n % 64 == 63:
            await asyncio.sleep(0)  # a model's chunks arrive between loop turns
    channels.progress(RUN, Progress(status="done", audit_seq=1))
    while channels._queues.get(RUN) is not None:  # noqa: ASYNC110 -- written out
        await asyncio.sleep(0.001)
    used = time.process_time() - cpu
    got = await asyncio.to_thread(watchers.results)
    first = got[0]
    rate = len(first) / ((max(recv for recv, _ in first.values()) - started) / 1e9)
    spread = [
        (max(w[o][0] for w in got) - min(w[o][0] for w in got)) / 1e6
        for o in first
        if all(o in w for w in got)
    ]
    return rate, used, spread


async def figures_of(backend: str, url: str, seconds: float) -> list[Figure]:
    samples = max(20, round(seconds * 100))
    deltas = max(2_000, round(seconds * 10_000))
    async with open_mesh(url) as mesh:
        overhead = await first_token(url, mesh, samples)
        rate, _, _ = await stream(url, mesh, deltas, 1)
        paced = max(100, round(seconds * 250))
        _, cpu_one, _ = await stream(url, mesh, paced, 1, PACE_S)
        _, cpu_many, spread = await stream(url, mesh, paced, 100, PACE_S)
    return [
        Cost(BENCH, f"{backend}_live_first_token_overhead_ms", overhead, "ms", 5.0, 1.0,
             "the issue's bound"),
        Figure(BENCH, f"{backend}_live_deltas_per_s", rate, "deltas/s", 5_000.0, 1.0,
               "20 runs at 250 tokens/s"),
        Cost(BENCH, f"{backend}_live_watchers_spread_ms", statistics.median(spread), "ms",
             50.0, 1.0, "100 watchers: first to last"),
        Cost(BENCH, f"{backend}_live_watchers_cpu_ratio", cpu_many / cpu_one, "x", 1.5, 1.0,
             "writer CPU, 100 watchers over 1"),
    ]  # fmt: skip


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    found: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        found += await figures_of("sqlite", f"sqlite:///{Path(tmp) / 'mesh.db'}", args.seconds)
    async with redis_scratch() as scratch:
        if scratch is not None:
            found += await figures_of("redis", redis_mesh_url(scratch[1]), args.seconds)
    report(found, as_json=args.json, title="live runs: deltas to watchers in another process")


if __name__ == "__main__":
    asyncio.run(main())
