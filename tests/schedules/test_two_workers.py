"""Two workers serve one schedule over a simulated week: each fire time gets exactly one
run and one delivery, none is skipped. Real SQLite and Redis meshes, two LocalRuntimes
(each with its owner services), and a clock running a week in a few seconds."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest

from plait.actors import LocalRuntime
from plait.mesh import open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs, serve
from plait.schedules import SCHEDULE_KIND, Schedules
from plait.schedules.actor import handler
from plait.schedules.cron import fires_after
from plait.schedules.model import fire_run_id
from tests._support.meshes import make_url_factory
from tests._support.timing import scaled
from tests.runs.helpers import eventually, store

from .helpers import ONE_NODE, OPERATOR, RULES, FastClock

pytestmark = pytest.mark.anyio
WEEK = 7 * 86400
START = 1_748_844_000.0  # Mon 2025-06-02 06:00 UTC


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()


@asynccontextmanager
async def worker(url: str, clock: FastClock) -> AsyncIterator[LocalRuntime]:
    """A worker of its own: its own mesh connection, runtime and owner services."""
    schedules = functools.partial(LocalRuntime, handlers={SCHEDULE_KIND: handler(clock)})
    async with (
        open_mesh(url) as mesh,
        serve(
            mesh,
            runtime=schedules,
            model=ScriptedModel(RULES),
            visibility_timeout_ms=2_000,
            beat=False,
        ) as serving,
    ):
        yield serving.runtime


async def test_two_workers_fire_each_hour_of_a_week_exactly_once(
    shared_url: str, tmp_path: Path
) -> None:
    sink = tmp_path / "delivered.jsonl"
    async with open_mesh(shared_url) as mesh:
        await store(mesh, ONE_NODE)
        clock = FastClock(START, factor=WEEK / 8)  # a simulated week in 8 s
        made = await Schedules(mesh, clock=clock).create(
            "assistant", "report", cron="0 * * * *", input="sales", catch_up="all",
            deliver=f"file:{sink}", by=OPERATOR,
            tuning={"check_first_ms": 50, "check_max_ms": 200},
        )  # fmt: skip
        async with AsyncExitStack() as stack:
            workers = [await stack.enter_async_context(worker(shared_url, clock)) for _ in "ab"]
            with anyio.fail_after(scaled(60)):
                while clock.now() < START + WEEK:
                    await anyio.sleep(0.1)

            async def caught_up() -> bool:
                # a loaded machine lags the fast clock by some simulated hours; catch-up
                # fires them, so wait for the week's last hours before pausing
                schedule = await Schedules(mesh).get(made.id)
                return (schedule.last_fire or 0.0) >= START + WEEK - 3 * 3600

            await eventually(caught_up, timeout=30)
            await Schedules(mesh).pause(made.id, by=OPERATOR)

            async def all_delivered() -> list[dict[str, object]] | None:
                # runs started while the pause was being written count too
                schedule = await Schedules(mesh).get(made.id)
                lines = sink.read_text().splitlines() if sink.exists() else []
                settled = all(r.status == "delivered" for r in schedule.runs)
                started = max(schedule.fired, len(await Runs(mesh).list()))
                if not settled or len(lines) < started:
                    return None
                return [json.loads(line) for line in lines]

            delivered = await eventually(all_delivered, timeout=60)
            assert all(w.handled > 0 for w in workers)  # both took part
        assert made.next_fire is not None
        final = await Schedules(mesh).get(made.id)
        assert final.last_fire is not None
        fires = expected_fires(made.next_fire, final.last_fire)
        # the whole week: from its first hours to its last (a simulated hour is 48 ms)
        assert fires[0] <= START + 3 * 3600 and fires[-1] >= START + WEEK - 3 * 3600
        runs = await Runs(mesh).list()
        assert sorted(r.run_id for r in runs) == sorted(fire_run_id(made.id, f) for f in fires)
        per_fire = Counter(d["fire_at"] for d in delivered)
        assert per_fire == Counter(fires)  # one delivery per fire time, none twice
        assert {d["status"] for d in delivered} == {"done"}
        assert {d["output"] for d in delivered} == {"the report"}
        assert final.fired == len(fires) and final.skipped == 0


def expected_fires(first: float, last: float) -> list[float]:
    """Every hourly fire time from ``first`` up to ``last``."""
    fires = [first]
    for at in fires_after("0 * * * *", "UTC", first):
        if at > last:
            return fires
        fires.append(at)
    raise AssertionError("unreachable")
