"""The schedule actor: fires runs at their times and delivers their results when they end.

Every ``plait worker`` serves it (kind :data:`~plait.schedules.model.SCHEDULE_KIND`).
Its messages, each a delayed mailbox message with a stable key:

- ``{"op": "fire", "at": T}`` (key ``sched:<id>:<T>``): start the run of fire time
  ``T`` (and what catch-up asks for missed ones), then arm the next fire. The run id is
  derived from the schedule and the fire time, so a second start of one fire, on any
  worker, is a version conflict: already started. The record's ``next_fire`` is the fence:
  a fire message for any other time is stale and dropped.
- ``{"op": "check", "run": R, "n": k}``: has run R ended? If not, check again later,
  backing off (a run waiting on a person may wait long); if so, deliver.
- ``{"op": "deliver", "run": R, "try": n}``: try n to hand R's result to the sink. Each
  try is claimed in the record (CAS) together with the message of the next try, so a
  redelivered message does not deliver twice and a dead worker's try is retried.

Timings come from the actor's config (``tuning`` when the schedule was created):
``grace_s`` (a fire later than this is missed; default 60), ``check_first_ms`` (1000),
``check_max_ms`` (60000), ``retry_first_ms`` (2000, doubling), ``max_tries`` (8).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from plait.actors import ActorContext, Handler, Mail, actor_key, tell_in
from plait.errors import DeliveryFailed, MeshUnavailable, PlaitError, RunNotFound, VersionConflict
from plait.ids import RunId
from plait.mesh import Mesh, Transaction
from plait.runs import Runs
from plait.schedules import sinks
from plait.schedules.clock import WALL_CLOCK, Clock
from plait.schedules.cron import due_fires, next_fire
from plait.schedules.model import (
    Schedule,
    ScheduledRun,
    fire_run_id,
    prune_runs,
    schedule_actor,
    schedule_key,
)
from plait.schedules.service import arm_fire
from plait.telemetry import STATE, metrics

log = logging.getLogger("plait.schedules")


@dataclass(frozen=True)
class Tuning:
    """A schedule actor's timings (see the module docstring)."""

    grace_s: float = 60.0
    check_first_ms: int = 1_000
    check_max_ms: int = 60_000
    retry_first_ms: int = 2_000
    max_tries: int = 8

    @classmethod
    def of(cls, config: dict[str, Any]) -> Tuning:
        """The timings an actor's config sets (defaults for the rest)."""
        known = {k: v for k, v in config.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class ScheduleLogic:
    """What the schedule actor does, given a mesh, a clock and timings.

    Each method is idempotent: the actor may be handed one message more than once.
    """

    def __init__(self, mesh: Mesh, *, clock: Clock = WALL_CLOCK, tuning: Tuning | None = None):
        self.mesh = mesh
        self.runs = Runs(mesh)
        self.clock = clock
        self.tuning = tuning or Tuning()

    async def _load(self, schedule_id: str) -> tuple[Schedule, int] | None:
        entry = await self.mesh.get(schedule_key(schedule_id))
        if entry is None:
            return None
        return Schedule.model_validate(entry.value), entry.version

    @staticmethod
    def _put(tx: Transaction, schedule: Schedule, version: int) -> None:
        if schedule.deleted and not schedule.undelivered():
            # Deleted, and this was its last delivery to make: now it goes.
            tx.delete(schedule_key(schedule.id), if_version=version)
            tx.delete(actor_key(schedule_actor(schedule.id)))
            return
        schedule.runs = prune_runs(schedule.runs)
        tx.put(schedule_key(schedule.id), schedule.model_dump(mode="json"), if_version=version)

    def _after(self, first_ms: int, n: int, cap_ms: int) -> int:
        return int(min(first_ms * 2**n, cap_ms))

    # -- fires --------------------------------------------------------------------------

    async def fire(self, schedule_id: str, at: float) -> list[str]:
        """Handle the fire message for ``at``; the ids of the runs started for it."""
        # Kept across compare-and-swap retries: a run started is recorded even when a
        # pause or a delete won the race meanwhile, so it is still delivered.
        started: list[ScheduledRun] | None = None
        now, due, errors = 0.0, 0, list[str]()
        while True:
            loaded = await self._load(schedule_id)
            if loaded is None:
                return []
            schedule, version = loaded
            fresh = not schedule.paused and schedule.next_fire == at
            if fresh and started is None:
                now = self.clock.now()
                if now < at:  # a clock behind the one that armed it: wait the difference
                    await self._rearm(schedule_id, at)
                    return []
                due = len(due_fires(schedule.cron, schedule.tz, at, now))
                started = []
                for fire_at, covers in self._starts(schedule, at, now):
                    error = await self._start(schedule, fire_at, covers)
                    if error is None:
                        run_id = fire_run_id(schedule.id, fire_at)
                        started.append(ScheduledRun(run_id=run_id, fire_at=fire_at, covers=covers))
                    else:
                        errors.append(error)
            new_runs = [r for r in started or () if schedule.run(r.run_id) is None]
            if not fresh and not new_runs:
                return []  # stale: paused, resumed, deleted or already fired
            tx = self.mesh.transact()
            if fresh:
                schedule.next_fire = next_fire(schedule.cron, schedule.tz, now)
                schedule.skipped += max(0, due - sum(r.covers for r in started or ()))
                schedule.last_error = errors[-1] if errors else schedule.last_error
                arm_fire(tx, schedule.id, schedule.next_fire, self.clock)
            schedule.runs.extend(new_runs)
            schedule.fired += len(new_runs)
            fired_at = [r.fire_at for r in new_runs] + [schedule.last_fire or 0.0]
            schedule.last_fire = max(fired_at) or None
            self._put(tx, schedule, version)
            for run in new_runs:
                self._tell_check(tx, schedule.id, run.run_id, 0)
            try:
                await tx.commit()
            except VersionConflict:
                continue  # another message moved the record: look again
            if STATE.metrics:
                skipped = max(0, due - sum(r.covers for r in started or ())) if fresh else 0
                metrics.schedules(fired=len(new_runs), skipped=skipped)
            return [run.run_id for run in new_runs]

    async def _rearm(self, schedule_id: str, at: float) -> None:
        tx = self.mesh.transact()
        arm_fire(tx, schedule_id, at, self.clock)
        await tx.commit()

    def _starts(self, schedule: Schedule, at: float, now: float) -> list[tuple[float, int]]:
        """The (fire time, fire times it covers) of the runs fire ``at`` starts at ``now``."""
        due = due_fires(schedule.cron, schedule.tz, at, now)
        if schedule.catch_up == "all":
            return [(fire_at, 1) for fire_at in due]
        if schedule.catch_up == "one":
            return [(at, len(due))]
        on_time = [fire_at for fire_at in due if now - fire_at <= self.tuning.grace_s]
        return [(on_time[-1], 1)] if on_time else []

    async def _start(self, schedule: Schedule, fire_at: float, covers: int) -> str | None:
        """Start the run of one fire time; why it could not be, or None."""
        run_id = fire_run_id(schedule.id, fire_at)
        try:
            await self.runs.start(
                schedule.agent, schedule.name, schedule.input, model=schedule.model, run_id=run_id
            )
        except VersionConflict:
            return None  # this fire's run was started already, here or on another worker
        except MeshUnavailable:
            raise
        except PlaitError as exc:
            # The fire is spent either way: a graph gone or a bad model must not stop the
            # schedule, whose next fire is armed all the same.
            log.warning("schedule %s could not start run %s: %s", schedule.id, run_id, exc)
            return f"{run_id}: {exc}"
        log.info("schedule %s started run %s (covers %d fire(s))", schedule.id, run_id, covers)
        return None

    # -- checks and deliveries ----------------------------------------------------------

    def _tell_check(self, tx: Transaction, schedule_id: str, run_id: str, n: int) -> None:
        tell_in(
            tx,
            schedule_actor(schedule_id),
            {"op": "check", "run": run_id, "n": n},
            after_ms=self._after(self.tuning.check_first_ms, n, self.tuning.check_max_ms),
            key=f"sched:{schedule_id}:check:{run_id}:{n}",
        )

    async def check(self, schedule_id: str, run_id: str, n: int) -> None:
        """Handle check ``n`` of a run: check later, or deliver once it has ended."""
        loaded = await self._load(schedule_id)
        if loaded is None:
            return
        schedule, version = loaded
        entry = schedule.run(run_id)
        if entry is None or entry.status != "running":
            return
        try:
            rec = await self.runs.get(RunId(run_id))
        except RunNotFound:
            entry.status, entry.last_error = "undeliverable", "the run is gone"
            tx = self.mesh.transact()
            self._put(tx, schedule, version)
            await tx.commit()
            return
        if not rec.terminal:
            tx = self.mesh.transact()
            self._tell_check(tx, schedule_id, run_id, n + 1)
            await tx.commit()
            return
        await self.deliver(schedule_id, run_id, 1)

    async def deliver(self, schedule_id: str, run_id: str, attempt: int) -> None:
        """Handle delivery try ``attempt`` of a run that ended."""
        while True:
            loaded = await self._load(schedule_id)
            if loaded is None:
                return
            schedule, version = loaded
            entry = schedule.run(run_id)
            if entry is None or entry.status in ("delivered", "undeliverable"):
                return
            if entry.tries >= attempt:
                return  # this try was claimed already
            entry.status, entry.tries = "delivering", attempt
            tx = self.mesh.transact()
            self._put(tx, schedule, version)
            retry = f"sched:{schedule_id}:deliver:{run_id}:{attempt + 1}"
            if attempt < self.tuning.max_tries:
                tell_in(
                    tx,
                    schedule_actor(schedule_id),
                    {"op": "deliver", "run": run_id, "try": attempt + 1},
                    after_ms=self._after(self.tuning.retry_first_ms, attempt - 1, 3_600_000),
                    key=retry,
                )
            try:
                await tx.commit()
            except VersionConflict:
                continue
            break
        error = None
        try:
            await sinks.deliver(
                schedule.deliver, await self.result(schedule, entry), secret=schedule.secret
            )
        except DeliveryFailed as exc:
            error = str(exc)
            log.warning("schedule %s: delivery %d of run %s failed: %s", schedule_id, attempt,
                        run_id, error)  # fmt: skip
        await self._settle(schedule_id, run_id, attempt, error, retry)

    async def _settle(
        self, schedule_id: str, run_id: str, attempt: int, error: str | None, retry: str
    ) -> None:
        """Record how try ``attempt`` went (delivered: the next try is cancelled)."""
        while True:
            loaded = await self._load(schedule_id)
            if loaded is None:
                return
            schedule, version = loaded
            entry = schedule.run(run_id)
            if entry is None or entry.status != "delivering" or entry.tries != attempt:
                return
            tx = self.mesh.transact()
            if error is None:
                entry.status, entry.last_error = "delivered", None
                tx.cancel(retry)
            else:
                entry.last_error = error
                if attempt >= self.tuning.max_tries:
                    entry.status = "undeliverable"
            self._put(tx, schedule, version)
            try:
                await tx.commit()
            except VersionConflict:
                continue
            return

    async def result(self, schedule: Schedule, entry: ScheduledRun) -> dict[str, Any]:
        """What a sink receives about an ended run."""
        rec = await self.runs.get(RunId(entry.run_id))
        return {
            "run_id": rec.run_id,
            "status": rec.status,
            "output": await self.runs.output(rec),
            "error": rec.ended_detail if rec.status != "done" else None,
            "schedule_id": schedule.id,
            "fire_at": entry.fire_at,
            "covers": entry.covers,
            "agent": schedule.agent,
            "graph": schedule.name,
        }

    async def handle(self, schedule_id: str, body: Any) -> None:
        """Handle one message of a schedule's actor (unknown ones are logged and dropped)."""
        op = body.get("op") if isinstance(body, dict) else None
        if op == "fire":
            await self.fire(schedule_id, float(body["at"]))
        elif op == "check":
            await self.check(schedule_id, str(body["run"]), int(body["n"]))
        elif op == "deliver":
            await self.deliver(schedule_id, str(body["run"]), int(body["try"]))
        else:
            log.warning("schedule %s: dropped an unknown message %r", schedule_id, body)


def handler(clock: Clock = WALL_CLOCK) -> Handler:
    """The schedule actor's handler, reading time from ``clock``."""

    async def handle(ctx: ActorContext, mail: Mail) -> None:
        schedule_id = ctx.id.removeprefix(schedule_actor(""))
        logic = ScheduleLogic(ctx.mesh, clock=clock, tuning=Tuning.of(ctx.record.config))
        await logic.handle(schedule_id, mail.body)

    return handle


handle = handler()
"""The handler every worker resolves for :data:`~plait.schedules.model.SCHEDULE_KIND`."""

__all__ = ["ScheduleLogic", "Tuning", "handle", "handler"]
