"""When a schedule fires: cron expressions in a time zone, as epoch seconds.

Cron through croniter, five fields exactly (croniter would also read a sixth as seconds,
and "* * * * * *" would fire every second), time zones through :mod:`zoneinfo`, so
"0 8 * * 1" in Europe/Berlin fires at 08:00 Berlin time across daylight-saving changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, croniter

from plait.errors import ConfigError

MAX_CATCH_UP = 100
"""At most this many missed fires are started one run each under ``catch_up="all"``."""


def zone(tz: str) -> ZoneInfo:
    """The time zone named ``tz`` (an IANA name such as ``Europe/Berlin``).

    Raises:
        ConfigError: there is no such zone.
    """
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone {tz!r}: pass an IANA name such as Europe/Berlin or UTC"
        ) from exc


def check_cron(expression: str, tz: str) -> None:
    """Refuse a cron expression or a time zone that cannot work.

    Raises:
        ConfigError: ``tz`` is unknown, or ``expression`` is not a valid cron expression.
    """
    zone(tz)
    fields = len(expression.split())
    if fields != 5:
        raise ConfigError(
            f"bad cron expression {expression!r}: it has {fields} field"
            f"{'' if fields == 1 else 's'}, and plait reads five, "
            '"minute hour day-of-month month day-of-week" (no seconds), as in "0 8 * * 1"'
        )
    if not croniter.is_valid(expression):
        raise ConfigError(f"bad cron expression {expression!r}: {_bad_field(expression)}")


_FIELDS = (
    ("minute", 0, 59, ""),
    ("hour", 0, 23, ""),
    ("day-of-month", 1, 31, ""),
    ("month", 1, 12, " or JAN-DEC"),
    ("day-of-week", 0, 6, " or SUN-SAT (7 is Sunday too)"),
)
"""Each field of a cron expression: its name, its range and the names it takes."""


def _bad_field(expression: str) -> str:
    """What is wrong with the first field of ``expression`` that cannot work."""
    fields = expression.split()
    for index, (name, low, high, names) in enumerate(_FIELDS):
        alone = ["*"] * 5
        alone[index] = fields[index]
        if croniter.is_valid(" ".join(alone)):
            continue
        allowed = f"{low}-{high}{names}"
        numbers = [int(n) for n in re.findall(r"\d+", fields[index].split("/")[0])]
        outside = [n for n in numbers if not low <= n <= high]
        if outside:
            return (
                f"{outside[0]} is out of range in the {name} field {fields[index]!r} "
                f"(allowed: {allowed})"
            )
        return (
            f"the {name} field {fields[index]!r} is not valid: it takes {allowed}, as a "
            "value, a list (1,15), a range (1-5), a step (*/10) or *"
        )
    return 'expected five fields "minute hour day-of-month month day-of-week", as "0 8 * * 1"'


def fires_after(expression: str, tz: str, after: float) -> Iterator[float]:
    """The fire times strictly after epoch second ``after``, in order, as epoch seconds."""
    start = datetime.fromtimestamp(after, zone(tz))
    try:
        it = croniter(expression, start, ret_type=float)
    except CroniterBadCronError as exc:
        raise ConfigError(f"bad cron expression {expression!r}: {exc}") from exc
    while True:
        yield float(it.get_next(float))


def next_fire(expression: str, tz: str, after: float) -> float:
    """The first fire time strictly after ``after``."""
    return next(fires_after(expression, tz, after))


def due_fires(expression: str, tz: str, first: float, now: float) -> list[float]:
    """``first`` and every later fire time up to ``now``, in order: at most the last
    :data:`MAX_CATCH_UP` of them (``first`` is dropped only when more are due)."""
    # Walked back from now, so a schedule long asleep costs MAX_CATCH_UP steps, not one
    # per missed second.
    it = croniter(expression, datetime.fromtimestamp(now + 0.001, zone(tz)), ret_type=float)
    later: list[float] = []
    while len(later) < MAX_CATCH_UP:
        at = float(it.get_prev(float))
        if at <= first:
            break
        later.append(at)
    later.reverse()
    return [first, *later][-MAX_CATCH_UP:]


__all__ = ["MAX_CATCH_UP", "check_cron", "due_fires", "fires_after", "next_fire", "zone"]
