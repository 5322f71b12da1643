"""``plait graph schedule``, ``schedules``, ``unschedule``, ``schedule-pause`` and
``schedule-resume``: runs of a stored graph started by cron, served by ``plait worker``."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated

import typer

from plait.cli._common import MeshOption, fail, print_json, run
from plait.cli._graph_app import graph_app
from plait.cli._ids import SCHEDULES, resolve
from plait.cli._input import InputJsonOption, run_input
from plait.cli._output import JsonFlag, Output, OutputOption, mode, rows, say, span
from plait.cli.runs import ModelOption, human
from plait.errors import ConfigError
from plait.mesh import open_mesh
from plait.schedules import CATCH_UP_MODES, Schedule, Schedules
from plait.schedules.cron import check_cron, zone
from plait.schedules.model import check_secret_name, parse_sink

IdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The schedule's id (or a prefix unique to it).")
]


def _when(at: float | None, tz: str) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, zone(tz)).strftime("%Y-%m-%d %H:%M %Z")


def _line(s: Schedule) -> str:
    state = "paused" if s.paused else f"next {_when(s.next_fire, s.tz)}"
    return (
        f"{s.id}  {s.agent}/{s.name}  {s.cron!r} {s.tz}  {state}  -> {s.deliver}  "
        f"(fired {s.fired}, catch-up {s.catch_up})"
    )


def _next(s: Schedule) -> str:
    """When it fires next, from now (``in 3h``), or ``paused``."""
    if s.paused or s.next_fire is None:
        return "paused"
    ahead = s.next_fire - time.time()
    return f"in {span(ahead)}" if ahead > 0 else "due"


def _last_run(s: Schedule) -> tuple[str, str]:
    """The latest run it started and that run's status as it is now."""
    if not s.runs:
        return "", ""
    last = max(s.runs, key=lambda r: r.fire_at)
    return last.run_id, last.run_status or "gone"


def _print_table(found: list[Schedule], wide: bool) -> None:
    table = []
    for s in found:
        last_run, last_status = _last_run(s)
        table.append(
            (
                s.id,
                f"{s.agent}/{s.name}",
                s.cron,
                _next(s),
                s.skipped,
                last_status,
                s.last_error or "",
                s.tz,
                _when(s.next_fire, s.tz),
                s.fired,
                s.catch_up,
                s.deliver,
                last_run,
            )
        )
    rows(
        (
            "id", "graph", "cron", "next", "skipped", "last run", "last error",
            "tz", "next fire", "fired", "catch-up", "sink", "last run id",
        ),
        table,
        narrow=(0, 1, 3, 4, 6),
        fit=(1, 6),
        ids=(0, 12),
        wide=wide,
    )  # fmt: skip


@graph_app.command("schedule")
def schedule_cmd(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The graph's agent.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The graph's name.")],
    cron: Annotated[
        str, typer.Option("--schedule", metavar="CRON", help='A cron expression: "0 8 * * 1".')
    ],
    deliver: Annotated[
        str,
        typer.Option(
            "--deliver", metavar="SINK", help="stdout (the worker's log), file:PATH or webhook:URL."
        ),
    ],
    input: Annotated[
        str | None,
        typer.Option(
            "--input",
            help="Each run's input: TEXT, or @FILE for a file's content (JSON if FILE ends "
            "in .json; @@ for a literal leading @).",
        ),
    ] = None,
    input_json: InputJsonOption = None,
    tz: Annotated[str, typer.Option("--tz", help="The cron's time zone (IANA).")] = "UTC",
    catch_up: Annotated[
        str,
        typer.Option(
            "--catch-up",
            metavar="|".join(CATCH_UP_MODES),
            help="Missed fires: none, one run for all (one), or one run each (all, at most 100).",
        ),
    ] = "one",
    model: ModelOption = None,
    secret: Annotated[
        str | None,
        typer.Option(
            "--secret",
            metavar="NAME",
            help="Sign webhook POSTs with the worker's env PLAIT_SECRET_<NAME> (HMAC-SHA256).",
        ),
    ] = None,
    mesh: MeshOption = None,
) -> None:
    """Run AGENT/NAME on a cron schedule; each run's result goes to --deliver when it ends."""
    try:
        check_cron(cron, tz)
        parse_sink(deliver)
        if catch_up not in CATCH_UP_MODES:
            raise ConfigError(f"unknown --catch-up {catch_up!r}: use none, one or all")
        if secret is not None:
            check_secret_name(secret)
    except ConfigError as exc:
        fail(str(exc), 2)
    given = run_input(input, input_json, default=None)
    by = human()

    async def main() -> Schedule:
        async with open_mesh(mesh) as m:
            return await Schedules(m).create(
                agent, name, cron=cron, tz=tz, input=given, deliver=deliver,
                catch_up=catch_up, model=model, secret=secret, by=by,  # type: ignore[arg-type]
            )  # fmt: skip

    made = run(main)
    say(f"scheduled {made.id}: {_line(made)}")


@graph_app.command("schedules")
def schedules_cmd(
    as_json: JsonFlag = False,
    output: OutputOption = None,
    mesh: MeshOption = None,
) -> None:
    """List schedules: id, graph, next fire, skipped fires and last error.

    ``-o wide`` adds the last run's status (as it is now) and id, the cron, time zone,
    sink, fires and catch-up.
    """
    shown = mode(output, as_json)

    async def main() -> list[Schedule]:
        async with open_mesh(mesh) as m:
            return await Schedules(m).list()

    found = run(main)
    if shown is Output.json:
        print_json([s.model_dump(mode="json") for s in found])
        return
    if not found:
        say("no schedules (create one with: plait graph schedule AGENT NAME --schedule CRON ...)")
        return
    _print_table(found, shown is Output.wide)


@graph_app.command("unschedule")
def unschedule_cmd(schedule_id: IdArgument, mesh: MeshOption = None) -> None:
    """Delete a schedule: it fires no more."""
    by = human()

    async def main() -> Schedule:
        async with open_mesh(mesh) as m:
            sid = await resolve(m, SCHEDULES, schedule_id)
            return await Schedules(m).delete(sid, by=by)

    gone = run(main)
    say(f"unscheduled {gone.id} ({gone.agent}/{gone.name})")


@graph_app.command("schedule-pause")
def pause_cmd(schedule_id: IdArgument, mesh: MeshOption = None) -> None:
    """Pause a schedule: nothing fires until schedule-resume (those fires are skipped)."""
    by = human()

    async def main() -> Schedule:
        async with open_mesh(mesh) as m:
            sid = await resolve(m, SCHEDULES, schedule_id)
            return await Schedules(m).pause(sid, by=by)

    say(f"paused {run(main).id}")


@graph_app.command("schedule-resume")
def resume_cmd(schedule_id: IdArgument, mesh: MeshOption = None) -> None:
    """Resume a paused schedule from its next fire time."""
    by = human()

    async def main() -> Schedule:
        async with open_mesh(mesh) as m:
            sid = await resolve(m, SCHEDULES, schedule_id)
            return await Schedules(m).resume(sid, by=by)

    s = run(main)
    say(f"resumed {s.id}: next {_when(s.next_fire, s.tz)}")


__all__ = ["pause_cmd", "resume_cmd", "schedule_cmd", "schedules_cmd", "unschedule_cmd"]
