"""Helpers shared by the benchmarks: timing loops and the output of figures.

A benchmark measures figures (a value beside the baseline it is judged against) and
prints them with :func:`report`: a readable table, or with ``--json`` one JSON object
per figure per line: ``{"bench", "metric", "value", "unit", "baseline", "ratio"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

_A = TypeVar("_A")
_B = TypeVar("_B")

REDIS_URL = os.environ.get("PLAIT_BENCH_REDIS", "redis://127.0.0.1:6379/0")
"""The Redis the benchmarks use (``PLAIT_BENCH_REDIS``)."""


@asynccontextmanager
async def redis_scratch() -> AsyncIterator[tuple[aioredis.Redis, str] | None]:
    """A client of :data:`REDIS_URL` and a fresh key prefix, whose keys are removed
    afterwards; None (and a line on stderr) if Redis does not answer."""
    prefix = f"plait-bench-{uuid.uuid4().hex[:12]}:"
    client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        print(f"skipping Redis: {REDIS_URL} does not answer ({exc})", file=sys.stderr)
        yield None
        return
    try:
        yield client, prefix
    finally:
        doomed = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if doomed:
            await client.delete(*doomed)
        await client.aclose()


POSTGRES_URL = os.environ.get("PLAIT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL database the benchmarks use (``PLAIT_BENCH_POSTGRES``)."""


@asynccontextmanager
async def postgres_scratch() -> AsyncIterator[str | None]:
    """A fresh schema name in :data:`POSTGRES_URL`, dropped afterwards with everything
    in it; None (and a line on stderr) if PostgreSQL or psycopg is not there."""
    try:
        import psycopg
    except ImportError:
        print("skipping PostgreSQL: pip install 'plait[postgres]'", file=sys.stderr)
        yield None
        return
    schema = f"plait_bench_{uuid.uuid4().hex[:12]}"
    try:
        conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)
    except psycopg.Error as exc:
        print(f"skipping PostgreSQL: {POSTGRES_URL} does not answer ({exc})", file=sys.stderr)
        yield None
        return
    try:
        yield schema
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


def postgres_mesh_url(schema: str) -> str:
    """The mesh URL of :data:`POSTGRES_URL` in ``schema``."""
    return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}"


def redis_mesh_url(prefix: str) -> str:
    """The mesh URL of :data:`REDIS_URL` under ``prefix``."""
    return f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}prefix={prefix}"


LOOP = {
    "name": "loop", "entry": "draft", "budget": {"steps": 100},
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}. {{verify?}}",
         "next": "verify"},
        {"id": "verify", "type": "verifier", "prompt": "Review: {{draft}}",
         "verdicts": {"pass": "publish", "fail": "draft"}},
        {"id": "publish", "type": "agent", "prompt": "Publish {{draft}}"},
    ],
}  # fmt: skip
"""The runs benches' graph: ``draft -> verify -> (fail: draft | pass: publish)``, the
loop bench/_langgraph_loop.py builds in LangGraph."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure.

    Attributes:
        bench: the benchmark's name (``"mesh_cas"``).
        metric: what was measured (``"redis_cas_sequential"``).
        value: the measurement.
        unit: its unit (``"ops/s"``).
        baseline: the figure it is judged against, measured in the same run or fixed.
        target: the ratio ``value / baseline`` should reach, shown in the table only.
        note: what the baseline is, shown in the table only.
    """

    bench: str
    metric: str
    value: float
    unit: str
    baseline: float
    target: float = 1.0
    note: str = ""

    @property
    def ratio(self) -> float:
        """``value / baseline`` (0 when there is no baseline)."""
        return self.value / self.baseline if self.baseline else 0.0

    def as_json(self) -> str:
        """The figure as one JSON line."""
        return json.dumps(
            {
                "bench": self.bench,
                "metric": self.metric,
                "value": round(self.value, 1),
                "unit": self.unit,
                "baseline": round(self.baseline, 1),
                "ratio": round(self.ratio, 3),
            }
        )


class Cost(Figure):
    """A figure where less is better: its ratio is ``baseline / value``."""

    __slots__ = ()

    @property
    def ratio(self) -> float:
        """``baseline / value`` (0 when the value is 0)."""
        return self.baseline / self.value if self.value else 0.0


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options every benchmark takes: ``--json`` and ``--seconds``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print one JSON object per figure")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="how long each figure is measured"
    )
    parser.add_argument(
        "--backend",
        choices=["memory", "sqlite", "redis", "postgres"],
        help="only the figures of this mesh backend (in benches that measure several)",
    )
    return parser.parse_args(argv)


Measure = Callable[[float], Awaitable[float]]
"""Runs something for about the given seconds and returns its operations per second."""


async def rate(op: Callable[[int], Awaitable[object]], seconds: float, *, tasks: int = 1) -> float:
    """Operations per second of ``op(task)`` awaited in a loop by ``tasks`` concurrent tasks."""

    async def loop(task: int, until: float) -> int:
        n = 0
        while time.perf_counter() < until:
            await op(task)
            n += 1
        return n

    started = time.perf_counter()
    counts = await asyncio.gather(*(loop(t, started + seconds) for t in range(tasks)))
    return sum(counts) / (time.perf_counter() - started)


def rate_sync(op: Callable[[], object], seconds: float) -> float:
    """Operations per second of ``op()`` called in a loop on this thread."""
    n = 0
    started = time.perf_counter()
    until = started + seconds
    while time.perf_counter() < until:
        op()
        n += 1
    return n / (time.perf_counter() - started)


async def best_of(
    measures: Sequence[Measure], seconds: float, *, rounds: int = 5, warmup: float = 0.1
) -> list[float]:
    """The best rate of each measure over ``rounds`` interleaved slices of ``seconds`` in all.

    Slices of the measures alternate, so a figure and its floor see the same machine
    load; the best slice of each is the one least disturbed by anything else running.
    """
    for measure in measures:
        await measure(warmup)
    best = [0.0] * len(measures)
    for _ in range(rounds):
        for i, measure in enumerate(measures):
            best[i] = max(best[i], await measure(seconds / rounds))
    return best


async def alternate(
    rounds: int, first: Callable[[], Awaitable[_A]], second: Callable[[], Awaitable[_B]]
) -> tuple[list[_A], list[_B]]:
    """The results of ``rounds`` rounds of ``first()`` then ``second()``, each a fixed
    amount of work: taken in turn, like :func:`best_of`'s slices, so a figure and its
    baseline see the same machine load."""
    firsts: list[_A] = []
    seconds: list[_B] = []
    for _ in range(rounds):
        firsts.append(await first())
        seconds.append(await second())
    return firsts, seconds


def report(figures: Sequence[Figure], *, as_json: bool, title: str = "") -> None:
    """Print ``figures`` as JSON lines, or as a table."""
    if as_json:
        for figure in figures:
            print(figure.as_json(), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None)
    for column in ("metric", "value", "baseline", "ratio", "target", "baseline is"):
        table.add_column(column, justify="left" if column in ("metric", "baseline is") else "right")
    for f in figures:
        ok = f.ratio >= f.target
        table.add_row(
            f.metric,
            f"{f.value:,.0f} {f.unit}",
            f"{f.baseline:,.0f}",
            f"[{'green' if ok else 'red'}]{f.ratio:.2f}[/]",
            f">= {f.target:.2f}",
            f.note,
        )
    console = Console()
    console.width = max(console.width, 112)  # a pipe reports 80 columns: too narrow
    console.print(table)


__all__ = [
    "Cost",
    "Figure",
    "Measure",
    "alternate",
    "best_of",
    "parse_args",
    "rate",
    "rate_sync",
    "report",
]
