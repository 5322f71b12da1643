"""What the mesh holds about a schedule, and the keys and ids derived from it.

A schedule is a record at ``schedules/<id>`` plus a durable actor ``schedule:<id>``
(kind :data:`SCHEDULE_KIND`). The record is the fence: every fire, every run started and
every delivery moves it on by compare-and-swap.
"""

from __future__ import annotations

import ipaddress
import os
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
        run_status: the run's own status (``running``, ``waiting_human``, ``done``...),
            read afresh whenever the schedule is read through
            :class:`~plait.schedules.Schedules` (None: the run is gone, or not yet read).
    """

    run_id: str
    fire_at: float
    covers: int = 1
    status: DeliveryStatus = "running"
    tries: int = 0
    last_error: str | None = None
    run_status: str | None = None


class Schedule(BaseModel):
    """A stored schedule.

    Attributes:
        id: ``sch_`` and 32 hex digits.
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
        deleted: deleted while runs of it were still to deliver: it fires nothing, is
            listed nowhere, and goes from the mesh once the last of them is delivered.
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
    deleted: bool = False
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

    def undelivered(self) -> list[ScheduledRun]:
        """The runs whose result is still to be handed to the sink."""
        return [r for r in self.runs if r.status in ("running", "delivering")]


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


_FIRE_RUN_ID = re.compile(rf"{RUN_ID_PREFIX}(sch_[0-9a-f]+)_([0-9]+)")


def schedule_of_run(run_id: str) -> tuple[str, float] | None:
    """The schedule that started ``run_id`` and the fire time it ran for, read from the
    id :func:`fire_run_id` gives it; None for a run no schedule started."""
    found = _FIRE_RUN_ID.fullmatch(run_id)
    return None if found is None else (found[1], float(found[2]))


SINK_DIR_ENV = "PLAIT_SINK_DIR"
"""The folder file sinks may write under (on the process creating a schedule and on
every worker); unset, file sinks are refused."""

WEBHOOK_ALLOW_ENV = "PLAIT_WEBHOOK_ALLOW_HOSTS"
"""Host names (comma-separated) a webhook may reach though they are not public."""


def sink_root() -> Path | None:
    """The folder of :data:`SINK_DIR_ENV`, resolved; None when it is unset."""
    value = os.environ.get(SINK_DIR_ENV)
    return Path(value).expanduser().resolve() if value else None


def webhook_allowed_hosts() -> frozenset[str]:
    """The host names of :data:`WEBHOOK_ALLOW_ENV`, lower-case."""
    value = os.environ.get(WEBHOOK_ALLOW_ENV, "")
    return frozenset(host.strip().lower() for host in value.split(",") if host.strip())


def confined_sink_file(path: Path) -> Path:
    """``path`` resolved (links followed), if it lies under :func:`sink_root`.

    Raises:
        ConfigError: file sinks are off here, or the path lies outside the folder.
    """
    root = sink_root()
    if root is None:
        raise ConfigError(
            f"file sinks are off: set {SINK_DIR_ENV} to the folder they may write under "
            "(here and on the workers)"
        )
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise ConfigError(f"file sink {str(path)!r} is outside the folder {SINK_DIR_ENV} names")
    return resolved


def webhook_refusal(host: str) -> str | None:
    """Why a webhook may not be sent to ``host`` as written (a loopback name, or an
    address that is not public), or None. Names are checked again where they
    resolve, when a worker delivers."""
    host = host.lower().strip("[]")
    if host in webhook_allowed_hosts():
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return "a loopback name"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    from plait.tools.http_guard import refusal  # lazily: it imports httpx

    why = refusal(address)
    return None if why is None else f"a {why} address"


def parse_sink(text: str, *, cwd: Path | None = None) -> str:
    """A sink as stored: ``stdout``, ``file:`` with an absolute path (relative to
    ``cwd``, default this process's) under :data:`SINK_DIR_ENV`, or ``webhook:`` with
    an http(s) URL whose host is public (or listed in :data:`WEBHOOK_ALLOW_ENV`).

    Raises:
        ConfigError: anything else.
    """
    kind, _, rest = text.partition(":")
    if text == "stdout":
        return text
    if kind == "file" and rest:
        path = confined_sink_file((cwd or Path.cwd()) / Path(rest).expanduser())
        return f"file:{path}"
    if kind == "webhook":
        url = urlsplit(rest)
        if url.scheme in ("http", "https") and url.hostname:
            why = webhook_refusal(url.hostname)
            if why is not None:
                raise ConfigError(
                    f"webhook host {url.hostname!r} is {why}: a sink posts to public "
                    f"hosts only, or to those {WEBHOOK_ALLOW_ENV} lists"
                )
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
    "SINK_DIR_ENV",
    "WEBHOOK_ALLOW_ENV",
    "CatchUp",
    "DeliveryStatus",
    "Schedule",
    "ScheduledRun",
    "check_secret_name",
    "confined_sink_file",
    "fire_key",
    "fire_run_id",
    "parse_sink",
    "prune_runs",
    "schedule_actor",
    "schedule_key",
    "schedule_of_run",
    "sink_root",
    "webhook_allowed_hosts",
    "webhook_refusal",
]
