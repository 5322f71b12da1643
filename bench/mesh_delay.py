"""How late a delayed event arrives on each mesh backend, against the bound its test
used to hold (250 ms late at most), now a figure here rather than a timed test.

An event published with ``after_ms=DELAY_MS`` is read by one subscriber; its lateness
is the time from publish to delivery, less the delay (never negative: the conformance
suite checks that it is never early). Figures are the median and the worst of the
samples, in milliseconds; ``ratio`` is baseline / value (above 1: within the bound).

Run: ``python bench/mesh_delay.py [--json] [--seconds 1.0]`` (about ``--seconds`` of
samples per backend). Redis is read from ``PLAIT_BENCH_REDIS`` under a fresh key prefix
removed afterwards; its figures are skipped if it does not answer.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from _common import Cost, Figure, parse_args, redis_mesh_url, redis_scratch, report

from plait.mesh import Mesh, open_mesh

BENCH = "mesh_delay"
DELAY_MS = 200
BOUND_MS = 250.0
"""The bound ``test_delayed_event_is_never_early_and_barely_late`` held."""


async def lateness(mesh: Mesh, samples: int) -> list[float]:
    """The lateness in ms of ``samples`` delayed events, published one after another."""
    sub = mesh.subscribe("delayed", "bench", "c")
    late: list[float] = []
    try:
        for n in range(samples):
            published = time.perf_counter()
            await mesh.publish("delayed", "tick", n, after_ms=DELAY_MS)
            delivery = await asyncio.wait_for(sub.__anext__(), timeout=10)
            late.append((time.perf_counter() - published) * 1000 - DELAY_MS)
            await delivery.ack()
    finally:
        await sub.close()
    return late


def figures(backend: str, late: list[float]) -> list[Figure]:
    """The median and worst lateness of one backend."""
    return [
        Cost(BENCH, f"{backend}_late_median", statistics.median(late), "ms", BOUND_MS, 1.0,
             "the old test's bound"),
        Cost(BENCH, f"{backend}_late_max", max(late), "ms", BOUND_MS, 1.0,
             "the old test's bound"),
    ]  # fmt: skip


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else BENCH, argv)
    samples = max(3, round(args.seconds * 1000 / DELAY_MS))
    found: list[Figure] = []
    async with redis_scratch() as scratch:
        if scratch is not None:
            async with open_mesh(redis_mesh_url(scratch[1])) as mesh:
                found += figures("redis", await lateness(mesh, samples))
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as tmp:
        async with open_mesh(f"sqlite:///{Path(tmp) / 'mesh.db'}") as mesh:
            found += figures("sqlite", await lateness(mesh, samples))
    async with open_mesh("memory://") as mesh:
        found += figures("memory", await lateness(mesh, samples))
    report(found, as_json=args.json, title="delayed events: ms late")


if __name__ == "__main__":
    asyncio.run(main())
