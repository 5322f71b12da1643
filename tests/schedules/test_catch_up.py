"""Firing with a fake clock: on-time fires, missed fires under each catch-up mode,
duplicate and stale fire messages, pause and resume. On every mesh backend."""

from __future__ import annotations

from datetime import datetime

import pytest

from plait.mesh import Mesh
from plait.runs import Runs
from plait.schedules import Schedules
from plait.schedules.actor import ScheduleLogic
from plait.schedules.cron import zone
from plait.schedules.model import fire_run_id
from tests.runs.helpers import store

from .helpers import ONE_NODE, OPERATOR, FakeClock

pytestmark = pytest.mark.anyio
START = datetime(2025, 6, 2, 7, 30, tzinfo=zone("Europe/Berlin")).timestamp()  # a Monday


async def scheduled(mesh: Mesh, clock: FakeClock, catch_up: str) -> str:
    await store(mesh, ONE_NODE)
    made = await Schedules(mesh, clock=clock).create(
        "assistant", "report", cron="0 * * * *", tz="Europe/Berlin", input="sales",
        catch_up=catch_up, by=OPERATOR,  # type: ignore[arg-type]
    )  # fmt: skip
    assert made.next_fire == START + 1800  # 08:00 Berlin
    return made.id


async def test_an_on_time_fire_starts_its_run_once_and_arms_the_next(mesh: Mesh) -> None:
    clock = FakeClock(START)
    sid = await scheduled(mesh, clock, "one")
    logic = ScheduleLogic(mesh, clock=clock)
    clock.t = START + 1800.4
    assert await logic.fire(sid, START + 1800) == [fire_run_id(sid, START + 1800)]
    assert await logic.fire(sid, START + 1800) == []  # the same message again: stale
    schedule = await Schedules(mesh).get(sid)
    assert schedule.next_fire == START + 1800 + 3600
    assert (schedule.fired, schedule.skipped) == (1, 0)
    rec = await Runs(mesh).get(fire_run_id(sid, START + 1800))
    assert rec.graph.name == "report"


@pytest.mark.parametrize(
    ("mode", "runs", "covers", "skipped"),
    [("none", 0, [], 6), ("one", 1, [6], 0), ("all", 6, [1] * 6, 0)],
)
async def test_missed_fires_follow_catch_up(
    mesh: Mesh, mode: str, runs: int, covers: list[int], skipped: int
) -> None:
    clock = FakeClock(START)
    sid = await scheduled(mesh, clock, mode)
    first = START + 1800
    clock.t = first + 5 * 3600 + 120  # down from 08:00 to 13:02: six fires missed
    started = await ScheduleLogic(mesh, clock=clock).fire(sid, first)
    assert len(started) == runs
    assert started == [fire_run_id(sid, first + 3600 * i) for i in range(runs)]
    schedule = await Schedules(mesh).get(sid)
    assert [r.covers for r in schedule.runs] == covers
    assert schedule.skipped == skipped
    assert schedule.next_fire == first + 6 * 3600  # the next future one: 14:00
    assert len(await Runs(mesh).list()) == runs


async def test_catch_up_none_still_fires_within_the_grace(mesh: Mesh) -> None:
    clock = FakeClock(START)
    sid = await scheduled(mesh, clock, "none")
    clock.t = START + 1800 + 30
    assert len(await ScheduleLogic(mesh, clock=clock).fire(sid, START + 1800)) == 1


async def test_a_paused_schedule_fires_nothing_and_resumes_from_now(mesh: Mesh) -> None:
    clock = FakeClock(START)
    sid = await scheduled(mesh, clock, "all")
    schedules = Schedules(mesh, clock=clock)
    paused = await schedules.pause(sid, by=OPERATOR)
    assert paused.paused and paused.next_fire is None
    clock.t = START + 10 * 3600
    assert await ScheduleLogic(mesh, clock=clock).fire(sid, START + 1800) == []
    resumed = await schedules.resume(sid, by=OPERATOR)
    assert resumed.next_fire == START + 1800 + 10 * 3600  # 18:00, not 08:00
    assert await Runs(mesh).list() == []
    await schedules.delete(sid, by=OPERATOR)
    assert await schedules.list() == []
    assert await ScheduleLogic(mesh, clock=clock).fire(sid, resumed.next_fire) == []
