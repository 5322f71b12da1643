"""The CLI at 80 columns, piped: tables fit with their main columns (``-o wide`` shows
every column whole), ids are whole piped and shortened on a terminal only to a prefix
unique among those shown, and every command taking an id takes a unique prefix of it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from plait.agents import Agents
from plait.api.tokens import PREFIX as TOKENS_PREFIX
from plait.api.tokens import create_token
from plait.cli._ids import AGENT_ACTORS, DECISIONS, RUNS, SCHEDULES, TOKENS
from plait.cli._output import rows, short_ids
from plait.decisions import DecisionAsker, Human
from plait.decisions.store import PREFIX as DECISIONS_PREFIX
from plait.mesh import open_mesh
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs
from plait.runs.record import INDEX_PREFIX
from plait.schedules import Schedules
from plait.schedules.model import SCHEDULES_PREFIX
from tests.cli.helpers import invoke
from tests.runs.helpers import store

ANA = Human("ana")
LONG = "a question a person is asked, long enough to run past eighty columns " * 3
CHAIN = {
    "name": "a-graph-with-a-rather-long-name",
    "agent": "assistant",
    "entry": "ask",
    "description": "what this graph does, said at a length no table column holds " * 2,
    "nodes": [{"id": "ask", "type": "human", "ask": "Go on?"}],
}


def test_id_kinds_name_the_services_own_key_prefixes() -> None:
    assert RUNS.key_prefix == INDEX_PREFIX
    assert DECISIONS.key_prefix == DECISIONS_PREFIX
    assert SCHEDULES.key_prefix == SCHEDULES_PREFIX
    assert TOKENS.key_prefix == TOKENS_PREFIX
    assert AGENT_ACTORS.key_prefix == "actors/" + "agent:"  # actor_key(agent_actor_id(NAME))


def test_short_ids_are_the_shortest_prefixes_unique_among_those_shown() -> None:
    ids = [
        "grun_01a2335f11110000000000000000000a",
        "grun_01a2335f11120000000000000000000b",
        "grun_01b0000000000000000000000000000c",
    ]
    short = short_ids(ids)
    assert short == {
        ids[0]: "grun_01a2335f1111",
        ids[1]: "grun_01a2335f1112",
        ids[2]: "grun_01b00000",  # the kind and 8 characters at least
    }
    assert all(sum(i.startswith(s) for i in ids) == 1 for s in short.values())
    assert short_ids(["sch_1", "sch_12"]) == {"sch_1": "sch_1", "sch_12": "sch_12"}


def _printed(headers: tuple[str, ...], table: list[tuple[str, ...]], **kw: object) -> list[str]:
    terminal = bool(kw.pop("terminal", False))
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=terminal, color_system=None)
    rows(headers, table, out=console, **kw)  # type: ignore[arg-type]
    return out.getvalue().splitlines()


def test_rows_narrow_fit_80_and_wide_keeps_every_column_whole() -> None:
    ids = [f"grun_01a2335f{n}{'7' * 23}" for n in range(3)]
    table = [(i, "waiting_human", "agent", LONG, "extra column") for i in ids]
    headers = ("run", "status", "agent", "title", "more")
    piped = _printed(headers, table, narrow=(0, 1, 3), fit=3, ids=(0,))
    assert piped[0].split() == ["run", "status", "title"]
    assert all(len(line) <= 80 for line in piped)
    assert [line.split()[0] for line in piped[1:]] == ids  # whole ids piped
    assert all(line.endswith("…") for line in piped[1:])  # the free text is cut to fit
    on_terminal = _printed(headers, table, narrow=(0, 1, 3), fit=3, ids=(0,), terminal=True)
    assert [line.split()[0] for line in on_terminal[1:]] == [i[:14] for i in ids]
    wide = _printed(headers, table, narrow=(0, 1, 3), fit=3, ids=(0,), wide=True, terminal=True)
    assert wide[0].split() == list(headers)
    assert all(i in line and LONG.strip() in line for i, line in zip(ids, wide[1:], strict=True))


@pytest.fixture
def mesh_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SQLite mesh holding three runs started at once (their ids share a long
    prefix), a decision each with a long title, a schedule, two agents and a token."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("PLAIT_USER", "ana")
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def fill() -> None:
        async with open_mesh(url) as mesh:
            await store(mesh, CHAIN)
            await put_profile(mesh, AgentProfile(name="assistant", tools=["bash", "http_get"]))
            await put_profile(mesh, AgentProfile(name="writer"))
            runs = Runs(mesh)
            for n in range(3):
                rec = await runs.start("assistant", CHAIN["name"], f"input {n}")  # type: ignore[arg-type]
                await DecisionAsker(mesh).raise_(
                    f"{LONG} ({n})", kind="choice", options=["yes", "no"], run_id=rec.run_id,
                    by=ANA,
                )  # fmt: skip
            await Schedules(mesh).create(
                "assistant",
                CHAIN["name"],
                cron="0 8 * * 1",
                by=ANA,  # type: ignore[arg-type]
            )
            agents = Agents(mesh)
            await agents.start("writer-one", profile="writer", topics=["tasks.new"])
            await agents.start("reader", profile="writer")
            await create_token(mesh, "human", "a token with a name longer than most " * 2)

    anyio.run(fill)
    yield url


def _lines(*args: str) -> list[str]:
    code, out, err = invoke(*args)
    assert code == 0, err
    return out.splitlines()


TABLES = [
    ("graph", "runs"),
    ("graph", "list"),
    ("graph", "schedules"),
    ("decisions", "list"),
    ("agents", "list"),
    ("tokens", "list"),
    ("mesh", "ls"),
]


@pytest.mark.parametrize("command", TABLES, ids=" ".join)
def test_every_table_fits_80_columns_piped(mesh_url: str, command: tuple[str, ...]) -> None:
    lines = _lines(*command, "--mesh", mesh_url)
    assert len(lines) >= 2  # a header row and rows
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long


def test_events_fit_and_wide_tables_keep_every_column(mesh_url: str) -> None:
    [run_id, *_] = [line.split()[0] for line in _lines("graph", "runs", "--mesh", mesh_url)[1:]]
    events = _lines("graph", "events", run_id, "--mesh", mesh_url)
    assert events[0].split() == ["seq", "type", "node", "visit", "detail"]
    assert all(len(line) <= 80 for line in events)
    wide_runs = _lines("graph", "runs", "-o", "wide", "--mesh", mesh_url)
    assert wide_runs[0].split() == [
        "run", "status", "agent", "graph", "version", "age", "created", "updated",
    ]  # fmt: skip
    wide_decisions = "\n".join(_lines("decisions", "list", "-o", "wide", "--mesh", mesh_url))
    assert f"{LONG} (0)".strip() in wide_decisions
    wide_schedules = _lines("graph", "schedules", "-o", "wide", "--mesh", mesh_url)
    for column in ("skipped", "last error", "tz", "sink", "fired", "catch-up"):
        assert column in wide_schedules[0]


def test_agents_list_shows_profiles_and_actors_apart(mesh_url: str) -> None:
    shown = "\n".join(_lines("agents", "list", "--mesh", mesh_url))
    profiles, actors = shown.split("\n\n")
    assert profiles.splitlines()[0] == "profiles"
    assert [line.split()[0] for line in profiles.splitlines()[2:]] == ["assistant", "writer"]
    assert actors.splitlines()[0] == "actors"
    assert actors.splitlines()[1].split() == ["name", "profile", "status", "backlog", "topics"]
    assert [line.split()[:2] for line in actors.splitlines()[2:]] == [
        ["reader", "writer"],
        ["writer-one", "writer"],
    ]


def test_a_unique_prefix_stands_for_the_id_everywhere(mesh_url: str) -> None:
    runs = [line.split()[0] for line in _lines("graph", "runs", "--mesh", mesh_url)[1:]]
    run_id = runs[0]
    unique = short_ids(runs)[run_id]  # what a terminal shows
    assert len(unique) < len(run_id) and [r for r in runs if r.startswith(unique)] == [run_id]
    inspected = json.loads(
        "\n".join(_lines("graph", "inspect", unique, "--json", "--mesh", mesh_url))
    )
    assert inspected["run_id"] == run_id
    assert _lines("graph", "events", unique, "--mesh", mesh_url)[1].split()[0] == "1"

    decisions = json.loads("\n".join(_lines("decisions", "list", "--json", "--mesh", mesh_url)))
    mine = next(d for d in decisions if d["run_id"] == run_id)
    answered = _lines(
        "decisions", "answer", mine["id"][: len(mine["id"]) - 3], "--option", "yes",
        "--mesh", mesh_url,
    )  # fmt: skip
    assert answered[0].startswith(f"decision {mine['id']} answered")

    schedule = json.loads("\n".join(_lines("graph", "schedules", "--json", "--mesh", mesh_url)))
    sid = schedule[0]["id"]
    assert _lines("graph", "schedule-pause", sid[:7], "--mesh", mesh_url) == [f"paused {sid}"]

    told = _lines("agents", "tell", "writer-", "hello", "--mesh", mesh_url)
    assert told[0].startswith("told agent:writer-one: message ")


def test_an_ambiguous_prefix_is_one_line_naming_the_ids(mesh_url: str) -> None:
    runs = [line.split()[0] for line in _lines("graph", "runs", "--mesh", mesh_url)[1:]]
    shared = _common_prefix(runs)
    code, out, err = invoke("graph", "inspect", shared, "--mesh", mesh_url)
    assert code == 1 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: ambiguous: 3 runs match {shared!r}: ")
    assert all(r in line for r in runs)
    code, _, err = invoke("decisions", "answer", "dec_", "--text", "x", "--mesh", mesh_url)
    assert code == 1 and "ambiguous: 3 decisions match 'dec_'" in err


def test_a_token_is_revoked_by_a_prefix_unique_to_it(mesh_url: str) -> None:
    async def second() -> str:
        async with open_mesh(mesh_url) as mesh:
            record, _ = await create_token(mesh, "service", "ci")
            return record.id

    other = anyio.run(second)
    listed = json.loads("\n".join(_lines("tokens", "list", "--json", "--mesh", mesh_url)))
    first = next(t["id"] for t in listed if t["id"] != other)
    shared = _common_prefix([first, other])
    code, _, err = invoke("tokens", "revoke", shared, "--mesh", mesh_url)
    assert code == 1 and f"ambiguous: 2 tokens match {shared!r}" in err
    unique = other[: len(shared) + 1]
    assert _lines("tokens", "revoke", unique, "--mesh", mesh_url) == [
        f"revoked token {other} (service 'ci')"
    ]
    listed = json.loads("\n".join(_lines("tokens", "list", "--json", "--mesh", mesh_url)))
    revoked = {t["id"]: t["revoked_at"] is not None for t in listed}
    assert revoked == {first: False, other: True}


def test_a_prefix_nothing_begins_is_not_found(mesh_url: str) -> None:
    code, _, err = invoke("graph", "inspect", "grun_zzz", "--mesh", mesh_url)
    assert code == 1 and "no run 'grun_zzz'" in err and len(err.splitlines()) == 1
    code, _, err = invoke("graph", "unschedule", "sch_zzz", "--mesh", mesh_url)
    assert code == 1 and "no schedule 'sch_zzz'" in err
    code, _, err = invoke("agents", "tell", "ghost", "hi", "--mesh", mesh_url)
    assert code == 1 and "no agent actor 'ghost'" in err


def _common_prefix(ids: list[str]) -> str:
    first, last = min(ids), max(ids)
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]
