"""Schedules as a service: create, list, pause, resume and delete them.

Creating a schedule writes its record, its actor and the message for its first fire in
one transaction; whichever ``plait worker`` takes that message (at the fire time) starts
the run (see :mod:`plait.schedules.actor`). Creating, deleting, pausing and resuming are
operator acts: a human only.
"""

from __future__ import annotations

import builtins
from typing import Any

from pydantic import ValidationError

from plait.actors import ActorRecord, actor_key, tell_in
from plait.decisions import Principal, require_human
from plait.errors import ConfigError, ScheduleNotFound, VersionConflict
from plait.graphs.store import get_graph
from plait.ids import new_id
from plait.mesh import Entry, Mesh, Transaction, skip_corrupt, skip_unreadable
from plait.models import check_model_spec
from plait.models.scripted import pin_model_spec
from plait.runs.record import index_key, listing_status
from plait.schedules.clock import WALL_CLOCK, Clock
from plait.schedules.cron import check_cron, next_fire
from plait.schedules.model import (
    CATCH_UP_MODES,
    SCHEDULE_KIND,
    CatchUp,
    Schedule,
    check_secret_name,
    fire_key,
    parse_sink,
    schedule_actor,
    schedule_key,
)

SCHEDULE_ID_PREFIX = "sch_"
"""Every schedule id starts so."""


def arm_fire(tx: Transaction, schedule_id: str, at: float, clock: Clock) -> None:
    """Add to ``tx`` the message firing a schedule at ``at`` (its key: one per fire time)."""
    tell_in(
        tx,
        schedule_actor(schedule_id),
        {"op": "fire", "at": at},
        after_ms=clock.delay_ms(at),
        key=fire_key(schedule_id, at),
    )


class Schedules:
    """Create and manage the schedules of a mesh.

    Args:
        mesh: an open mesh.
        clock: the time fires are computed from (the wall clock but in tests).
    """

    def __init__(self, mesh: Mesh, *, clock: Clock = WALL_CLOCK) -> None:
        self.mesh = mesh
        self.clock = clock

    async def create(
        self,
        agent: str,
        name: str,
        *,
        cron: str,
        by: Principal,
        tz: str = "UTC",
        input: Any = None,
        deliver: str = "stdout",
        catch_up: CatchUp = "one",
        model: str | None = None,
        secret: str | None = None,
        tuning: dict[str, float] | None = None,
    ) -> Schedule:
        """Schedule runs of a stored graph (its newest version at each fire).

        ``tuning`` sets the actor's timings (see :mod:`plait.schedules.actor`). A
        relative ``scripted:`` model path is pinned as an absolute one (from the
        working directory), as a run started by hand pins its own.

        Raises:
            NotPermitted: ``by`` is not a human.
            ConfigError: a bad cron expression, time zone, sink, catch-up mode, model
                spec or secret name; nothing is written.
            GraphNotFound: no such graph is stored.
        """
        who = require_human(by, "create a schedule")
        check_cron(cron, tz)
        sink = parse_sink(deliver)
        if catch_up not in CATCH_UP_MODES:
            raise ConfigError(
                f"unknown catch-up {catch_up!r}: expected one of {', '.join(CATCH_UP_MODES)}"
            )
        if secret is not None:
            check_secret_name(secret)
            if not sink.startswith("webhook:"):
                raise ConfigError("--secret signs webhook deliveries: use it with webhook:URL")
        if model is not None:
            check_model_spec(model)
            # pinned here, as `graph run` pins a run's: a worker elsewhere finds the file
            model = pin_model_spec(model)
        await get_graph(self.mesh, agent, name)
        now = self.clock.now()
        schedule = Schedule(
            id=new_id(SCHEDULE_ID_PREFIX),
            agent=agent,
            name=name,
            cron=cron,
            tz=tz,
            input=input,
            deliver=sink,
            catch_up=catch_up,
            model=model,
            secret=secret,
            created_at=now,
            created_by=who.name,
            next_fire=next_fire(cron, tz, now),
        )
        actor = ActorRecord(
            id=schedule_actor(schedule.id),
            kind=SCHEDULE_KIND,
            config=dict(tuning or {}),
            created_at=now,
        )
        tx = self.mesh.transact()
        tx.put(schedule_key(schedule.id), schedule.model_dump(mode="json"), if_version=0)
        tx.put(actor_key(actor.id), actor.model_dump(), if_version=0)
        self._arm(tx, schedule)
        await tx.commit()
        return schedule

    def _arm(self, tx: Transaction, schedule: Schedule) -> None:
        """Add the message for the schedule's next fire to ``tx``."""
        assert schedule.next_fire is not None
        arm_fire(tx, schedule.id, schedule.next_fire, self.clock)

    async def get(self, schedule_id: str) -> Schedule:
        """A schedule.

        Raises:
            ScheduleNotFound: there is none.
        """
        schedule = (await self._entry(schedule_id))[0]
        await self._refresh([schedule])
        return schedule

    async def _entry(self, schedule_id: str) -> tuple[Schedule, Entry]:
        entry = await self.mesh.get(schedule_key(schedule_id))
        schedule = Schedule.model_validate(entry.value) if entry is not None else None
        if entry is None or schedule is None or schedule.deleted:
            raise ScheduleNotFound(
                f"no schedule {schedule_id!r} in {self.mesh.url}: list them with "
                "plait graph schedules"
            )
        return schedule, entry

    async def list(self) -> builtins.list[Schedule]:
        """Every schedule, oldest first (none deleted)."""
        found = []
        async for entry in self.mesh.scan("schedules/", on_corrupt=skip_corrupt):
            try:
                schedule = Schedule.model_validate(entry.value)
            except ValidationError as exc:
                skip_unreadable(entry.key, f"not a schedule ({exc.error_count()} problems)")
                continue
            if not schedule.deleted:  # deleted, its last deliveries still to make
                found.append(schedule)
        await self._refresh(found)
        return sorted(found, key=lambda s: s.created_at)

    async def _refresh(self, schedules: builtins.list[Schedule]) -> None:
        """Give each run of ``schedules`` its run's status as it is now (one read of
        the run listing for all of them): the record's copy is as old as its last write."""
        started = [run for schedule in schedules for run in schedule.runs]
        found = await self.mesh.get_many([index_key(run.run_id) for run in started])
        for run, entry in zip(started, found, strict=True):
            value = entry.value if entry is not None else None
            status = value.get("status") if isinstance(value, dict) else None
            run.run_status = listing_status(status) if isinstance(status, str) else None

    async def delete(self, schedule_id: str, *, by: Principal) -> Schedule:
        """Delete a schedule: it fires no more, and is gone from listings at once.

        Delivery is at least once: the runs it started that are not delivered yet (ended
        or in flight) still are. Until the last of them is, the record stays, marked
        ``deleted``, with its actor; the actor removes both after that delivery.
        """
        require_human(by, "delete a schedule")
        while True:
            schedule, entry = await self._entry(schedule_id)
            tx = self.mesh.transact()
            if schedule.next_fire is not None:
                tx.cancel(fire_key(schedule_id, schedule.next_fire))
            if schedule.undelivered():
                left = schedule.model_copy(
                    update={"deleted": True, "paused": True, "next_fire": None}
                )
                tx.put(schedule_key(schedule_id), left.model_dump(mode="json"), entry.version)
            else:
                tx.delete(schedule_key(schedule_id), if_version=entry.version)
                tx.delete(actor_key(schedule_actor(schedule_id)))
            try:
                await tx.commit()
            except VersionConflict:
                continue
            return schedule

    async def pause(self, schedule_id: str, *, by: Principal) -> Schedule:
        """Pause a schedule: it fires nothing until resumed (fires meanwhile are skipped)."""
        require_human(by, "pause a schedule")
        while True:
            schedule, entry = await self._entry(schedule_id)
            if schedule.paused:
                return schedule
            tx = self.mesh.transact()
            if schedule.next_fire is not None:
                tx.cancel(fire_key(schedule_id, schedule.next_fire))
            schedule.paused, schedule.next_fire = True, None
            tx.put(schedule_key(schedule_id), schedule.model_dump(mode="json"), entry.version)
            try:
                await tx.commit()
            except VersionConflict:
                continue
            return schedule

    async def resume(self, schedule_id: str, *, by: Principal) -> Schedule:
        """Resume a paused schedule from its next fire time after now."""
        require_human(by, "resume a schedule")
        while True:
            schedule, entry = await self._entry(schedule_id)
            if not schedule.paused:
                return schedule
            schedule.paused = False
            schedule.next_fire = next_fire(schedule.cron, schedule.tz, self.clock.now())
            tx = self.mesh.transact()
            tx.put(schedule_key(schedule_id), schedule.model_dump(mode="json"), entry.version)
            self._arm(tx, schedule)
            try:
                await tx.commit()
            except VersionConflict:
                continue
            return schedule


__all__ = ["SCHEDULE_ID_PREFIX", "Schedules", "arm_fire"]
