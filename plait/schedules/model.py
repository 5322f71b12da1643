"""What the mesh holds about a schedule, and the keys and ids derived from it.

A schedule is a record at ``schedules/<id>`` plus a durable actor ``schedule:<id>``
(kind :data:`SCHEDULE_KIND`). The record is the fence: every fire, every run started and
every delivery moves it on by compare-and-swap.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from plait.errors import ConfigError
from plait.ids import RUN_ID_PREFIX, RunId

CatchUp = Literal["none", "one", "all"]
"""What a fire found late does about the fires missed (now past it by more than the
grace, after a restart or an outage):

- ``none``: starts no run for missed fires; the schedule goes on with the next future one.
- ``one``: starts one run standing for every fire missed (the default).
- ``all``: starts one run per missed fire, at most :data:`~plait.schedules.cron.MAX_CATCH_UP`.
"""

CATCH_UP_MODES: tuple[str, ...] = get_args(CatchUp)
"""The catch-up modes, in order."""

DeliveryStatus = Literal["running", "delivering", "delivered", "undeliverable"]
"""Where a scheduled run's delivery stands:

- ``running``: the run has not ended; keyed ticks check on it, backing off.
- ``delivering``: it ended; a try to deliver its result is under way or failed.
- ``delivered``: the sink took it.
- ``undeliverable``: every try failed, or the run is gone.
"""

SCHEDULE_KIND = "plait.schedules.actor:handle"
"""The actor kind of every schedule."""

SECRET_ENV_PREFIX = "PLAIT_SECRET_"
"""A schedule's ``secret`` NAME is read from ``PLAIT_SECRET_<NAME>`` on the worker."""

_SECRET_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


class ScheduledRun(BaseModel):
    """A run a schedule started, and its delivery.

    Attributes:
        run_id: the run (derived from the schedule and ``fire_at``: see :func:`fire_run_id`).
        fire_at: the fire time it was started for (epoch seconds).
        covers: how many fire times it stands for (more than 1 under catch-up ``one``).
        status: its delivery.
        tries: delivery tries made so far.
        last_error: why the last try failed.
    """

    run_id: str
    fire_at: float
    covers: int = 1
    status: DeliveryStatus = "running"
    tries: int = 0
    last_error: str | None = None


class Schedule(BaseModel):
    """A stored schedule.

    Attributes:
        id: ``sch_`` and 10 hex digits.
        agent: the graph's agent.
        name: the graph's name (its newest version runs at each fire).
        cron: the cron expression.
        tz: the IANA time zone the expression is read in.
        input: each run's input.
        deliver: the sink: ``stdout``, ``file:/ABS/PATH`` or ``webhook:URL``.
        catch_up: see :data:`CatchUp`.
        model: a model spec for every run (default: each profile's).
        secret: the name of the webhook's signing secret (``PLAIT_SECRET_<NAME>``).
        paused: a paused schedule fires nothing (its runs in flight are delivered).
        created_at: epoch seconds.
        created_by: who created it.
        next_fire: the fire time its actor waits for (None while paused).
        last_fire: the latest fire time a run was started for.
        fired: runs started.
        skipped: fire times passed without a run of their own.
        last_error: why the last fire could not start a run, if it could not.
        runs: the runs whose delivery is pending, and the latest delivered ones.
    """

    id: str
    agent: str
    name: str
    cron: str
    tz: str = "UTC"
    input: Any = None
    deliver: str = "stdout"
    catch_up: CatchUp = "one"
    model: str | None = None
    secret: str | None = None
    paused: bool = False
    created_at: float = 0.0
    created_by: str = ""
    next_fire: float | None = None
    last_fire: float | None = None
    fired: int = 0
    skipped: int = 0
    last_error: str | None = None
    runs: list[ScheduledRun] = Field(default_factory=list)

    def run(self, run_id: str) -> ScheduledRun | None:
        """The entry of a run this schedule started, or None."""
        return next((r for r in self.runs if r.run_id == run_id), None)


KEPT_DELIVERED = 20
"""Delivered (or undeliverable) runs kept in a schedule's record, newest last."""


def prune_runs(runs: list[ScheduledRun]) -> list[ScheduledRun]:
    """``runs`` with only the newest :data:`KEPT_DELIVERED` finished deliveries."""
    done = [r for r in runs if r.status in ("delivered", "undeliverable")]
    dropped = {id(r) for r in done[: max(0, len(done) - KEPT_DELIVERED)]}
    return [r for r in runs if id(r) not in dropped]


SCHEDULES_PREFIX = "schedules/"
"""Where schedule records live: ``schedules/<schedule id>``."""

MESH_KEYS = (SCHEDULES_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def schedule_key(schedule_id: str) -> str:
    """The mesh key of a schedule's record."""
    return f"{SCHEDULES_PREFIX}{schedule_id}"


def schedule_actor(schedule_id: str) -> str:
    """The id of a schedule's actor."""
    return f"schedule:{schedule_id}"


def fire_key(schedule_id: str, at: float) -> str:
    """The schedule key of the message for one fire time: one pending message per fire."""
    return f"sched:{schedule_id}:{int(at)}"


def fire_run_id(schedule_id: str, at: float) -> RunId:
    """The run a fire time starts: the same for every worker, so a second start of one
    fire is a version conflict, not a second run."""
    return RunId(f"{RUN_ID_PREFIX}{schedule_id}_{int(at)}")


def parse_sink(text: str, *, cwd: Path | None = None) -> str:
    """A sink as stored: ``stdout``, ``file:`` with an absolute path (relative to
    ``cwd``, default this process's), or ``webhook:`` with an http(s) URL.

    Raises:
        ConfigError: anything else.
    """
    kind, _, rest = text.partition(":")
    if text == "stdout":
        return text
    if kind == "file" and rest:
        return f"file:{(cwd or Path.cwd()) / Path(rest).expanduser()}"
    if kind == "webhook":
        url = urlsplit(rest)
        if url.scheme in ("http", "https") and url.hostname:
            return f"webhook:{rest}"
    raise ConfigError(
        f"unknown sink {text!r}: use stdout, file:PATH or webhook:http(s)://HOST/PATH"
    )


def check_secret_name(name: str) -> None:
    """Refuse a secret name that cannot be an environment variable's suffix.

    Raises:
        ConfigError: it has characters other than letters, digits and ``_``.
    """
    if not _SECRET_NAME.fullmatch(name):
        raise ConfigError(
            f"bad secret name {name!r}: use letters, digits and _ "
            f"(the worker reads {SECRET_ENV_PREFIX}<NAME>)"
        )


__all__ = [
    "CATCH_UP_MODES",
    "KEPT_DELIVERED",
    "MESH_KEYS",
    "SCHEDULES_PREFIX",
    "SCHEDULE_KIND",
    "SECRET_ENV_PREFIX",
    "CatchUp",
    "DeliveryStatus",
    "Schedule",
    "ScheduledRun",
    "check_secret_name",
    "fire_key",
    "fire_run_id",
    "parse_sink",
    "prune_runs",
    "schedule_actor",
    "schedule_key",
]
