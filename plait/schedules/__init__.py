"""Schedules: runs of a stored graph started by cron, their results delivered to a sink.

:class:`Schedules` creates and manages them; the schedule actor
(:mod:`plait.schedules.actor`), served by every worker, fires them and delivers.
"""

from __future__ import annotations

from plait.schedules.clock import WALL_CLOCK, Clock, WallClock
from plait.schedules.model import CATCH_UP_MODES, SCHEDULE_KIND, CatchUp, Schedule, ScheduledRun
from plait.schedules.service import Schedules

__all__ = [
    "CATCH_UP_MODES",
    "SCHEDULE_KIND",
    "WALL_CLOCK",
    "CatchUp",
    "Clock",
    "Schedule",
    "ScheduledRun",
    "Schedules",
    "WallClock",
]
