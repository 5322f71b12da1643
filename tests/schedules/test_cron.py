"""Next-fire computation: cron expressions read in a time zone, across DST changes."""

from __future__ import annotations

from datetime import datetime

import pytest

from plait.errors import ConfigError
from plait.schedules.cron import MAX_CATCH_UP, check_cron, due_fires, fires_after, zone

BERLIN = zone("Europe/Berlin")


def local(at: float, tz: str = "Europe/Berlin") -> str:
    return datetime.fromtimestamp(at, zone(tz)).strftime("%a %Y-%m-%d %H:%M %Z")


def test_monday_eight_in_berlin_stays_eight_across_dst() -> None:
    start = datetime(2025, 3, 20, 12, tzinfo=BERLIN).timestamp()
    it = fires_after("0 8 * * 1", "Europe/Berlin", start)
    assert [local(next(it)) for _ in range(3)] == [
        "Mon 2025-03-24 08:00 CET",
        "Mon 2025-03-31 08:00 CEST",  # summer time began on the 30th
        "Mon 2025-04-07 08:00 CEST",
    ]


def test_the_same_expression_in_another_zone_fires_at_another_instant() -> None:
    start = datetime(2025, 1, 1, tzinfo=BERLIN).timestamp()
    berlin = next(fires_after("0 8 * * *", "Europe/Berlin", start))
    utc = next(fires_after("0 8 * * *", "UTC", start))
    assert utc - berlin == 3600
    assert local(utc, "UTC") == "Wed 2025-01-01 08:00 UTC"


def test_next_fire_is_strictly_after() -> None:
    at = datetime(2025, 1, 6, 8, tzinfo=BERLIN).timestamp()
    assert next(fires_after("0 8 * * 1", "Europe/Berlin", at)) == at + 7 * 86400


def test_due_fires_lists_first_and_every_later_one_up_to_now_bounded() -> None:
    first = datetime(2025, 1, 1, tzinfo=BERLIN).timestamp()
    assert due_fires("0 * * * *", "Europe/Berlin", first, first + 3 * 3600 + 5) == [
        first, first + 3600, first + 7200, first + 10800,
    ]  # fmt: skip
    assert due_fires("0 * * * *", "Europe/Berlin", first, first + 10) == [first]
    long = due_fires("* * * * *", "UTC", first, first + 7 * 86400)
    assert len(long) == MAX_CATCH_UP and long[-1] == first + 7 * 86400
    assert long == sorted(long)


@pytest.mark.parametrize(
    ("cron", "tz", "says"),
    [
        ("0 8 * * 1", "Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        (
            "61 * * * *",
            "UTC",
            "bad cron expression '61 * * * *': 61 is out of range in the minute field '61' "
            "(allowed: 0-59)",
        ),
        (
            "0 8 1-32 * *",
            "UTC",
            "bad cron expression '0 8 1-32 * *': 32 is out of range in the day-of-month "
            "field '1-32' (allowed: 1-31)",
        ),
        (
            "0 8 * 13 *",
            "UTC",
            "bad cron expression '0 8 * 13 *': 13 is out of range in the month field '13' "
            "(allowed: 1-12 or",
        ),
        (
            "0 8 * * 9",
            "UTC",
            "bad cron expression '0 8 * * 9': 9 is out of range in the day-of-week field "
            "'9' (allowed: 0-6 or",
        ),
        (
            "0 x * * *",
            "UTC",
            "bad cron expression '0 x * * *': the hour field 'x' is not valid: it takes 0-23",
        ),
        ("every monday", "UTC", "bad cron expression"),
        (
            "* * * * * *",
            "UTC",
            "bad cron expression '* * * * * *': it has 6 fields, and plait "
            'reads five, "minute hour day-of-month month day-of-week" (no seconds)',
        ),
        ("0 8 * * 1 2026 x", "UTC", "bad cron expression '0 8 * * 1 2026 x': it has 7 fields"),
    ],
)
def test_bad_cron_or_zone_is_refused_with_one_line(cron: str, tz: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_cron(cron, tz)
    assert str(caught.value).startswith(says)
    assert "\n" not in str(caught.value)
