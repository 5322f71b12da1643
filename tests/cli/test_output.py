"""What ``plait`` prints, piped, at 80 columns: run data shown exactly as stored (never
markup, never raw control characters), whole ids, plain rows, the help's shape,
``inspect``/``events`` and the progress lines.

The hostile replies and ``--version`` go through the console script as a real process;
the other commands run in this process (the same ``main``, the same output)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from plait.decisions.principals import os_user
from plait.profiles import AgentProfile
from tests._support.cli import run_in_process
from tests.runs.helpers import EXAMPLES, Cli

HOSTILE = [
    "[/closing]",
    "[bold red]x[/]",
    "[link=file:///etc/passwd]x[/link]",
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\x1b[8mhidden",
]
SHOWN = [
    "[/closing]",
    "[bold red]x[/]",
    "[link=file:///etc/passwd]x[/link]",
    "\\x1b[2J",
    "\\x1b]0;title\\x07",
    "\\x1b[8mhidden",
]
REPLY = " ".join(HOSTILE)
LONG = "word " * 40 + "end"  # longer than 80 columns: must stay on one line when piped


def at_80_columns(cli: Cli) -> Cli:
    cli.env["COLUMNS"] = "80"
    return cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``plait`` at 80 columns, piped, run in this process."""
    return at_80_columns(Cli(tmp_path, in_process=True))


@pytest.fixture
def process_cli(tmp_path: Path) -> Cli:
    """``plait`` at 80 columns, piped, as the console script's own process."""
    return at_80_columns(Cli(tmp_path))


def hostile_run(cli: Cli, tmp_path: Path) -> tuple[str, str]:
    """Import a draft → human → publish graph, run it with a hostile draft; (run, stdout)."""
    graph = {
        "name": "hostile",
        "agent": "assistant",
        "entry": "draft",
        "nodes": [
            {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "ok"},
            {"id": "ok", "type": "human", "ask": "Ship {{draft}}?", "next": "publish"},
            {"id": "publish", "type": "agent", "prompt": "Publish {{draft}} {{ok}}"},
        ],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    rules = [{"node": "draft", "text": REPLY}, {"node": "publish", "text": LONG}]
    (tmp_path / "m.json").write_text(json.dumps(rules))
    cli("graph", "import", str(tmp_path / "g.json"))
    done = cli("graph", "run", "assistant", "hostile", "--model", f"scripted:{tmp_path}/m.json")
    run_id = re.search(r"run (grun_\w+)", done.stdout)
    assert run_id is not None, done.stdout
    return run_id.group(1), done.stdout + done.stderr


def test_hostile_replies_print_exactly_as_stored(process_cli: Cli, tmp_path: Path) -> None:
    cli = process_cli
    run_id, shown = hostile_run(cli, tmp_path)
    assert "MarkupError" not in shown and "Traceback" not in shown
    assert "\x1b" not in shown and "\x07" not in shown  # nothing reaches the terminal raw
    for text in SHOWN:
        assert text in shown  # markup kept literally, controls shown escaped
    listed = cli("decisions", "list")
    assert "\x1b" not in listed.stdout and SHOWN[0] in listed.stdout  # cut to 80 columns
    wide = cli("decisions", "list", "-o", "wide")  # every cell whole
    assert "\x1b" not in wide.stdout
    for text in SHOWN:
        assert text in wide.stdout
    # JSON carries the stored value itself.
    decisions = cli.json("decisions", "list")
    assert decisions[0]["title"] == f"Ship {REPLY}?"
    inspected = cli("graph", "inspect", run_id)
    assert "\x1b" not in inspected.stdout and "[/closing]" in inspected.stdout


def test_ids_are_whole_and_rows_plain_at_80_columns_and_piped(cli: Cli, tmp_path: Path) -> None:
    run_id, shown = hostile_run(cli, tmp_path)
    decision = cli.json("decisions", "list")[0]["id"]
    runs = cli("graph", "runs").stdout.splitlines()
    assert len(runs) == 2 and run_id in runs[1]  # a header and one row a line
    assert not any(ch in "".join(runs) for ch in "│┃━─┏")  # no borders
    rows = cli("decisions", "list").stdout.splitlines()
    assert len(rows) == 2 and decision in rows[1].split()
    assert f"plait decisions answer {decision} --text ANSWER" in shown
    assert f"plait graph resume {run_id} ANSWER" in shown
    wide = cli("decisions", "list", "-o", "wide").stdout
    assert f"Ship {SHOWN[0]}" in wide
    assert json.loads(cli("graph", "runs", "-o", "json").stdout)[0]["run_id"] == run_id

    resumed = cli("graph", "resume", run_id, "yes")
    assert resumed.stdout.splitlines()[-1] == LONG  # no newline put inside it


def test_json_on_cancel_answer_and_list(cli: Cli, tmp_path: Path) -> None:
    run_id, _ = hostile_run(cli, tmp_path)
    assert cli.json("graph", "list")[0]["name"] == "hostile"
    decision = cli.json("decisions", "list")[0]["id"]
    answered = cli.json("decisions", "answer", decision, "--text", "fine")
    assert answered["id"] == decision and answered["status"] == "answered"
    cancelled = cli.json("graph", "cancel", run_id)
    assert cancelled == {"run_id": run_id, "status": "cancelled", "ended_detail": "cancelled"}


def test_version_short_help_and_no_bool_in_help(cli: Cli) -> None:
    version = cli.argv("--version")[:2]

    done = subprocess.run(version, env=cli.env, capture_output=True, text=True, check=True)
    assert re.fullmatch(r"plait \d+\.\d+\.\d+.*\n", done.stdout)
    assert run_in_process(["--version"], cwd=cli.cwd, env=cli.env).stdout == done.stdout
    for command in (
        ["graph", "run"],
        ["graph", "runs"],
        ["graph", "inspect"],
        ["graph", "events"],
        ["graph", "cancel"],
        ["decisions", "list"],
        ["decisions", "answer"],
        ["worker"],
    ):
        shown = run_in_process([*command, "-h"], cwd=cli.cwd, env=cli.env).stdout
        assert "Usage: plait" in shown
        assert "<bool>" not in shown and "<str>" not in shown, command
    run_help = run_in_process(["graph", "run", "-h"], cwd=cli.cwd, env=cli.env).stdout
    assert "AGENT" in run_help and "SPEC" in run_help and "URL" in run_help


def test_inspect_and_events_show_each_visit(cli: Cli) -> None:
    cli("graph", "import", str(EXAMPLES / "research_and_verify.json"))
    model = f"scripted:{EXAMPLES / 'research_and_verify.model.yaml'}"
    started = cli("graph", "run", "assistant", "research-and-verify", "--model", model)
    progress = started.stderr
    # The verifier sent the flow back: its critique shows; the human node waits, not ✓.
    assert "critique: The 12% figure has no source; cite where it comes from." in progress
    assert "⏸ review_human (visit 1) · run waiting_human" in progress
    run_id = re.search(r"run (grun_\w+)", started.stdout)
    assert run_id is not None
    waiting = cli("graph", "inspect", run_id.group(1)).stdout
    assert "review_human (visit 1)" in waiting and "waiting" in waiting
    cli("graph", "resume", run_id.group(1), "yes")
    shown = cli("graph", "inspect", run_id.group(1)).stdout
    assert "critique: The 12% figure has no source" in shown
    assert re.search(r"✓ draft \(visit 1\) \d+\.\d\ds done", shown)
    assert re.search(
        rf"decision \S+ answered by {os_user()} \(as ana\) at \d{{4}}-\d\d-\d\d "
        r"\d\d:\d\d:\d\d UTC: yes",
        shown,
    )
    steps = cli.json("graph", "inspect", run_id.group(1))["trajectory"]
    assert all(isinstance(v, int) for s in steps for k, v in s["usage"].items() if k != "dollars")
    # The OS user answered; PLAIT_USER=ana is the label beside it.
    assert (steps[4]["decision"]["by"], steps[4]["decision"]["label"]) == (os_user(), "ana")
    assert steps[0]["status"] == "done"
    events = cli("graph", "events", run_id.group(1)).stdout.splitlines()
    assert events[0].split()[:1] == ["seq"] and "run.started" in events[1]
    chain = cli.json("graph", "events", run_id.group(1))
    assert [e["seq"] for e in chain] == list(range(1, len(chain) + 1))
    assert "node.committed" in {e["type"] for e in chain}


def test_budget_wait_names_the_cli_command(cli: Cli, tmp_path: Path) -> None:
    graph = {
        "name": "tight",
        "agent": "assistant",
        "entry": "one",
        "budget": {"steps": 1, "on_exhausted": "escalate"},
        "nodes": [
            {"id": "one", "type": "agent", "prompt": "{{input}}", "next": "two"},
            {"id": "two", "type": "agent", "prompt": "{{one}}"},
        ],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    (tmp_path / "m.json").write_text(json.dumps([{"text": "1"}]))
    cli("graph", "import", str(tmp_path / "g.json"))
    run_id = cli.json(
        "graph", "run", "assistant", "tight", "--model", f"scripted:{tmp_path}/m.json"
    )["run_id"]
    refused = cli("graph", "resume", run_id, "yes", ok=False)
    assert f"plait graph raise-budget {run_id} --steps N" in refused.stderr
    assert "raise_budget" not in refused.stderr


def test_inspect_shows_tool_calls_shortened_and_in_full(cli: Cli, tmp_path: Path) -> None:
    cli.profile(AgentProfile(name="assistant", tools=["read_file"]))
    tail = "the last words of the file"
    (tmp_path / "notes.txt").write_text(f"{REPLY} {'x' * 400} {tail}")
    graph = {
        "name": "reader",
        "agent": "assistant",
        "entry": "read",
        "nodes": [{"id": "read", "type": "agent", "prompt": "Read {{input}}"}],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    rules = [
        {"node": "read", "round": 1, "usage": {"input_tokens": 12, "output_tokens": 3},
         "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"node": "read", "round": 2, "usage": {"input_tokens": 40, "output_tokens": 2},
         "text": "read it"},
    ]  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps(rules))
    cli("graph", "import", str(tmp_path / "g.json"))
    model = f"scripted:{tmp_path}/m.json"
    run_id = cli.json("graph", "run", "assistant", "reader", "--model", model)["run_id"]

    shown = cli("graph", "inspect", run_id).stdout
    assert "\x1b" not in shown and "\x07" not in shown
    assert re.search(r"^ +tool read_file \{\"path\": \"notes.txt\"\}$", shown, re.M), shown
    result = next(row for row in shown.splitlines() if row.lstrip().startswith("→ "))
    for text in SHOWN:
        assert text in result  # the hostile file text, literally, its controls escaped
    assert tail not in result and "chars, --full" in result  # shortened
    assert "tokens 52 in, 5 out, $0.0000" in shown

    whole = cli("graph", "inspect", run_id, "--full").stdout
    assert "\x1b" not in whole
    result = next(row for row in whole.splitlines() if row.lstrip().startswith("→ "))
    assert result.endswith(tail) and "--full" not in result

    step = cli.json("graph", "inspect", run_id)["trajectory"][0]
    assert step["tools"] == [
        {
            "name": "read_file",
            "arguments": {"path": "notes.txt"},
            "result": (tmp_path / "notes.txt").read_text(),
        }
    ]
    assert step["usage"]["input_tokens"] == 52 and step["usage"]["output_tokens"] == 5
    assert all(type(v) is int for k, v in step["usage"].items() if k != "dollars")
    assert isinstance(step["usage"]["dollars"], float)
