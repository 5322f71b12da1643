"""The schedule commands (run in this process, as :class:`Cli` with ``in_process`` does):
schedule, schedules, pause, resume, unschedule, and the one-line refusals (exit 2) of a
bad cron, zone or sink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runs.helpers import Cli

from .helpers import ONE_NODE


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    runner = Cli(tmp_path, in_process=True)
    graph = tmp_path / "report.json"
    graph.write_text(json.dumps(ONE_NODE))
    runner("graph", "import", str(graph))
    return runner


def test_schedule_list_pause_resume_unschedule(cli: Cli, tmp_path: Path) -> None:
    made = cli(
        "graph", "schedule", "assistant", "report", "--schedule", "0 8 * * 1",
        "--tz", "Europe/Berlin", "--input", "sales", "--deliver", "file:out.jsonl",
    )  # fmt: skip
    assert made.stdout.startswith("scheduled sch_")
    [listed] = cli.json("graph", "schedules")
    sid = listed["id"]
    assert made.stdout.split()[1] == f"{sid}:"
    assert (listed["cron"], listed["tz"], listed["catch_up"]) == (
        "0 8 * * 1",
        "Europe/Berlin",
        "one",
    )
    assert listed["deliver"] == f"file:{tmp_path / 'out.jsonl'}"  # absolute: workers run elsewhere
    header, row = cli("graph", "schedules").stdout.splitlines()
    assert header.split()[:4] == ["id", "graph", "next", "skipped"]  # a header row
    assert row.startswith(f"{sid}  assistant/report  in ")
    wide = cli("graph", "schedules", "-o", "wide").stdout
    assert " 08:00 CE" in wide  # the next Monday 08:00, Berlin time (CET or CEST)
    assert "Europe/Berlin" in wide and f"file:{tmp_path / 'out.jsonl'}" in wide
    assert cli("graph", "schedule-pause", sid).stdout.strip() == f"paused {sid}"
    assert cli.json("graph", "schedules")[0]["paused"] is True
    assert cli("graph", "schedule-resume", sid).stdout.startswith(f"resumed {sid}: next ")
    assert cli("graph", "unschedule", sid).stdout.strip() == f"unscheduled {sid} (assistant/report)"
    assert cli.json("graph", "schedules") == []
    gone = cli("graph", "unschedule", sid, ok=False)
    assert gone.returncode == 1 and f"no schedule {sid!r}" in gone.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--schedule", "0 8 * * 1", "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["--schedule", "0 25 * * 1"], "bad cron expression '0 25 * * 1'"),
        (["--schedule", "* * * * * *"], "bad cron expression '* * * * * *': it has 6 fields"),
        (
            ["--schedule", "0 8 * * 1", "--deliver", "webhook:http://169.254.169.254/latest"],
            "webhook host '169.254.169.254' is a cloud metadata address",
        ),
        (["--schedule", "0 8 * * 1", "--deliver", "file:/etc/cron.d/x"], "file sink '/etc/"),
        (["--schedule", "0 8 * * 1", "--deliver", "telegram:123"], "unknown sink 'telegram:123'"),
        (["--schedule", "0 8 * * 1", "--catch-up", "some"], "unknown --catch-up 'some'"),
        (["--schedule", "0 8 * * 1", "--secret", "a-b"], "bad secret name 'a-b'"),
    ],
)
def test_bad_schedules_are_refused_with_one_line_and_exit_2(
    cli: Cli, args: list[str], says: str
) -> None:
    argv = ["graph", "schedule", "assistant", "report", *args]
    if "--deliver" not in args:
        argv += ["--deliver", "webhook:http://127.0.0.1:9/hook"]
    done = cli(*argv, ok=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {says}")
    assert done.stderr.count("\n") == 1
    assert cli.json("graph", "schedules") == []


def test_scheduling_a_graph_not_stored_fails(cli: Cli) -> None:
    done = cli(
        "graph", "schedule", "assistant", "nope", "--schedule", "0 8 * * 1", "--deliver", "stdout",
        ok=False,
    )  # fmt: skip
    assert done.returncode == 1 and "nope" in done.stderr
