"""Deliveries: a signed webhook retried after a 500, a file sink, and a scheduled run that
waits on a person delivered only after the answer. The fire is driven with a fake
clock; the run and the schedule actor's checks and deliveries are served by a real
runtime with its owner services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait.actors import actor_key
from plait.errors import ConfigError, DeliveryFailed, ScheduleNotFound
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.schedules import Schedules, sinks
from plait.schedules.actor import ScheduleLogic, Tuning
from plait.schedules.model import Schedule, parse_sink, schedule_actor, schedule_key
from tests.runs.helpers import eventually, hosting, store

from .helpers import ASKING, FAST, ONE_NODE, OPERATOR, RULES, FakeClock, webhook_receiver

pytestmark = pytest.mark.anyio
START = 1_748_844_000.0


async def fire_once(mesh: Mesh, graph: dict[str, object], **kw: object) -> tuple[Schedule, str]:
    """Store ``graph``, schedule it hourly, and fire its first fire time: the run id."""
    await store(mesh, graph)
    clock = FakeClock(START)
    made = await Schedules(mesh, clock=clock).create(
        "assistant", str(graph["name"]), cron="0 * * * *", input="sales", by=OPERATOR,
        tuning=FAST, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    assert made.next_fire is not None
    clock.t = made.next_fire + 1
    [run_id] = await ScheduleLogic(mesh, clock=clock, tuning=Tuning(**FAST)).fire(
        made.id, made.next_fire
    )
    return made, run_id


async def test_webhook_is_signed_retried_after_a_500_and_posted_once(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_SECRET_HOOK", "s3cret")
    with webhook_receiver("s3cret", fail_first=1) as hook:
        async with hosting(mesh, ScriptedModel(RULES)) as (runtime, _):
            made, run_id = await fire_once(
                mesh, ONE_NODE, deliver=f"webhook:{hook.url}", secret="HOOK"
            )

            async def delivered() -> Schedule | None:
                schedule = await Schedules(mesh).get(made.id)
                return schedule if schedule.runs[0].status == "delivered" else None

            schedule = await eventually(delivered)
            await runtime.wait_idle()
        assert hook.answered == [500, 200]  # every POST was signed right (no 401)
        [post] = hook.posts
        assert post == {
            "run_id": run_id, "status": "done", "output": "the report", "error": None,
            "schedule_id": made.id, "fire_at": made.next_fire, "covers": 1,
            "agent": "assistant", "graph": "report",
        }  # fmt: skip
        assert schedule.runs[0].tries == 2


async def test_a_webhook_without_its_secret_on_the_worker_is_not_posted(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_SECRET_HOOK", raising=False)
    with webhook_receiver("s3cret") as hook:
        async with hosting(mesh, ScriptedModel(RULES)):
            made, _ = await fire_once(mesh, ONE_NODE, deliver=f"webhook:{hook.url}", secret="HOOK")

            async def failed_once() -> str | None:
                entry = (await Schedules(mesh).get(made.id)).runs[0]
                return entry.last_error if entry.tries >= 1 else None

            error = await eventually(failed_once)
        assert error == "secret 'HOOK' is not set on this worker: export PLAIT_SECRET_HOOK"
        assert hook.answered == []


async def test_file_sink_gets_one_line_per_ended_run(mesh: Mesh, tmp_path: Path) -> None:
    sink = tmp_path / "out" / "runs.jsonl"
    sink.parent.mkdir()
    async with hosting(mesh, ScriptedModel(RULES)) as (runtime, _):
        _, run_id = await fire_once(mesh, ONE_NODE, deliver=f"file:{sink}")

        async def lines() -> list[str] | None:
            return sink.read_text().splitlines() if sink.exists() else None

        [line] = await eventually(lines)
        await runtime.wait_idle()
    assert json.loads(line)["run_id"] == run_id
    assert json.loads(line)["output"] == "the report"
    assert len(sink.read_text().splitlines()) == 1


async def test_a_run_waiting_on_a_person_delivers_only_after_the_answer(
    mesh: Mesh, tmp_path: Path
) -> None:
    sink = tmp_path / "runs.jsonl"
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel(RULES)) as (runtime, _):
        made, run_id = await fire_once(mesh, ASKING, deliver=f"file:{sink}")

        async def waiting() -> bool:
            return (await runs.get(run_id)).status == "waiting_human"

        await eventually(waiting)
        seen = runtime.handled

        async def checked_again() -> bool:  # the schedule's backing-off checks went on
            return runtime.handled >= seen + 3

        await eventually(checked_again)
        assert not sink.exists()
        listed = (await Schedules(mesh).get(made.id)).runs[0]
        # still to deliver, and its run's own status as it is now, not a stale "running"
        assert (listed.status, listed.run_status) == ("running", "waiting_human")
        await runs.resume(run_id, "yes", by=OPERATOR)

        async def lines() -> list[str] | None:
            return sink.read_text().splitlines() if sink.exists() else None

        [line] = await eventually(lines)
    assert json.loads(line)["status"] == "done"
    assert json.loads(line)["output"] == "sent"
    assert (await Schedules(mesh).list())[0].runs[0].run_status == "done"


async def test_deleting_a_schedule_still_delivers_the_runs_it_started(
    mesh: Mesh, tmp_path: Path
) -> None:
    sink = tmp_path / "runs.jsonl"
    runs, schedules = Runs(mesh), Schedules(mesh)
    async with hosting(mesh, ScriptedModel(RULES)) as (runtime, _):
        made, run_id = await fire_once(mesh, ASKING, deliver=f"file:{sink}")

        async def waiting() -> bool:
            return (await runs.get(run_id)).status == "waiting_human"

        await eventually(waiting)
        deleted = await schedules.delete(made.id, by=OPERATOR)
        assert deleted.id == made.id
        assert await schedules.list() == []
        with pytest.raises(ScheduleNotFound):
            await schedules.get(made.id)
        await runs.resume(run_id, "yes", by=OPERATOR)  # the run ends after the delete

        async def lines() -> list[str] | None:
            return sink.read_text().splitlines() if sink.exists() else None

        [line] = await eventually(lines)

        async def forgotten() -> bool:  # once delivered, the schedule and its actor go
            return await mesh.get(schedule_key(made.id)) is None

        await eventually(forgotten)
        await runtime.wait_idle()
    assert json.loads(line)["run_id"] == run_id
    assert await mesh.get(actor_key(schedule_actor(made.id))) is None


async def test_a_deleted_schedule_with_nothing_to_deliver_goes_at_once(mesh: Mesh) -> None:
    await store(mesh, ONE_NODE)
    schedules = Schedules(mesh)
    made = await schedules.create(
        "assistant", "report", cron="0 * * * *", deliver="stdout", by=OPERATOR
    )
    await schedules.delete(made.id, by=OPERATOR)
    assert await mesh.get(schedule_key(made.id)) is None
    assert await mesh.get(actor_key(schedule_actor(made.id))) is None


async def test_sinks_refuse_internal_hosts_and_files_outside_their_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_WEBHOOK_ALLOW_HOSTS")
    for url, why in [
        ("http://169.254.169.254/latest/meta-data", "a cloud metadata address"),
        ("http://127.0.0.1:8700/api", "a loopback address"),
        ("http://[::1]/x", "a loopback address"),
        ("http://localhost/x", "a loopback name"),
        ("https://10.1.2.3/x", "a private address"),
    ]:
        with pytest.raises(ConfigError, match=f"is {why}: a sink posts to public hosts only"):
            parse_sink(f"webhook:{url}")
    assert parse_sink("webhook:https://example.com/hook") == "webhook:https://example.com/hook"
    result = {"run_id": "grun_x"}
    with pytest.raises(DeliveryFailed, match="does not resolve to a public address"):
        await sinks.deliver("webhook:http://localhost.:9/hook", result)  # checked where it connects

    inside = tmp_path / "out.jsonl"
    assert parse_sink("file:out.jsonl", cwd=tmp_path) == f"file:{inside.resolve()}"
    (tmp_path / "link").symlink_to("/etc")
    for outside in ("/etc/passwd", "../elsewhere.jsonl", "link/cron.d/x"):
        with pytest.raises(ConfigError, match="is outside the folder PLAIT_SINK_DIR names"):
            parse_sink(f"file:{outside}", cwd=tmp_path)
    with pytest.raises(DeliveryFailed, match="is outside the folder PLAIT_SINK_DIR names"):
        await sinks.deliver(f"file:{tmp_path.parent / 'x.jsonl'}", result)  # the worker's check
    monkeypatch.delenv("PLAIT_SINK_DIR")
    with pytest.raises(ConfigError, match="file sinks are off: set PLAIT_SINK_DIR"):
        parse_sink("file:out.jsonl", cwd=tmp_path)
