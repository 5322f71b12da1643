"""What a person sees from ``plait`` given hostile input: one line and an exit code, never a
traceback, and listings that skip a corrupt stored value with a warning naming its key.

Undecodable text goes through the console script as a real process (the bytes arrive in
its argv and environment); the other commands run in this process."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from tests._support.timing import scaled
from tests.runs.helpers import EXAMPLES, Cli

GRAPH = EXAMPLES / "research_and_verify.json"
SCRIPT = EXAMPLES / "research_and_verify.model.yaml"
BOMB = "name: g\nnodes: []\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def _no_traceback(done: object) -> None:
    assert "Traceback" not in str(getattr(done, "stdout", "")) + str(getattr(done, "stderr", ""))


def test_validate_json_reports_a_typo_once_with_its_line_and_a_guess(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    text = (
        '{\n  "name": "g",\n  "entry": "a",\n  "nodes": [\n'
        '    {"id": "a", "type": "agent", "prompt": "go", "next": "reveiw"},\n'
        '    {"id": "review", "type": "agent", "prompt": "{{a}}", "next": "c"},\n'
        '    {"id": "c", "type": "agent", "prompt": "{{review}"}\n  ]\n}\n'
    )
    (tmp_path / "g.json").write_text(text, encoding="utf-8")
    done = cli("graph", "validate", str(tmp_path / "g.json"), "--json", ok=False)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["warnings"] == []
    assert report["problems"] == [
        {
            "path": "nodes[0].next",
            "message": 'unknown target "reveiw"',
            "line": 5,
            "column": 50,
            "hint": 'did you mean "review"?',
        },
        {
            "path": "nodes[2].prompt",
            "message": "{{review} is not closed",
            "line": 7,
            "column": 34,
            "hint": 'close the reference with "}}"',
        },
    ]


def test_an_alias_bomb_fails_validate_quickly_in_one_line(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "bomb.yaml").write_text(BOMB, encoding="utf-8")
    began = time.monotonic()
    done = cli("graph", "validate", str(tmp_path / "bomb.yaml"), ok=False)
    assert time.monotonic() - began < scaled(10)  # the bomb took 63 s
    assert done.returncode == 1 and "aliases expand to over" in done.stdout
    _no_traceback(done)


def test_non_finite_budget_raises_and_undecodable_text_exit_2(tmp_path: Path) -> None:
    here, cli = Cli(tmp_path, in_process=True), Cli(tmp_path)
    done = here("graph", "raise-budget", "grun_x", "--dollars", "inf", ok=False)
    assert done.returncode == 2 and "--dollars must be a finite number, not inf" in done.stderr
    done = here("graph", "raise-budget", "grun_x", "--dollars", "nan", ok=False)
    assert done.returncode == 2 and "--dollars" in done.stderr  # nan is out of range
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    done = cli("graph", "run", "assistant", "g", "--input", bad, ok=False)
    assert done.returncode == 2 and "--input is not valid UTF-8" in done.stderr
    done = cli("decisions", "answer", "ask_x", "--text", bad, ok=False)
    assert done.returncode == 2 and "the answer is not valid UTF-8" in done.stderr
    cli.env["PLAIT_USER"] = bad
    done = cli("graph", "raise-budget", "grun_x", "--steps", "1", ok=False)
    assert done.returncode == 2 and "PLAIT_USER is not valid UTF-8" in done.stderr
    _no_traceback(done)


def _truncate(db: Path, key: str) -> None:
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        conn.execute("UPDATE kv SET value = ? WHERE key = ?", (value[: len(value) // 2], key))


def _keys(db: Path, prefix: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT key FROM kv WHERE key >= ? ORDER BY key", (prefix,))
        return [k for (k,) in rows if k.startswith(prefix)]


def test_corrupt_stored_values_are_skipped_by_listings_and_named_by_verify(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path, in_process=True)
    cli("graph", "import", str(GRAPH))
    model = f"scripted:{SCRIPT}"
    first = cli.json("graph", "run", "assistant", "research-and-verify", "--model", model)
    second = cli.json("graph", "run", "assistant", "research-and-verify", "--model", model)
    db = tmp_path / "mesh.db"
    bad_run = f"runindex/{first['run_id']}"
    bad_decision = f"decisions/{first['waiting']['decision_id']}"
    bad_event = _keys(db, f"runs/{second['run_id']}/audit/")[1]
    for key in (bad_run, bad_decision, bad_event, "graphs/assistant/research-and-verify"):
        _truncate(db, key)

    runs = cli("graph", "runs", "--json")
    assert [r["run_id"] for r in json.loads(runs.stdout)] == [second["run_id"]]
    assert runs.stderr.count("\n") == 1 and repr(bad_run) in runs.stderr
    decisions = cli("decisions", "list", "--json")
    assert [d["id"] for d in json.loads(decisions.stdout)] == [second["waiting"]["decision_id"]]
    assert repr(bad_decision) in decisions.stderr
    graphs = cli("graph", "list", "--json")
    assert json.loads(graphs.stdout) == []
    assert "graphs/assistant/research-and-verify" in graphs.stderr

    verify = cli("graph", "inspect", second["run_id"], "--verify", ok=False)
    assert verify.returncode == 1
    assert "audit event 2 fails verification: its stored value is unreadable" in verify.stderr
    for done in (runs, decisions, graphs, verify):
        _no_traceback(done)


def test_a_number_over_the_digit_limit_and_a_bad_program_ref_are_one_line(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path, in_process=True)
    huge = "9" * 5000
    for name, text in [
        ("g.json", '{"name": "g", "entry": "a", "nodes": [], "budget": ' + huge + "}"),
        ("g.yaml", f"name: g\nentry: a\nnodes: []\nbudget: {huge}\n"),
    ]:
        (tmp_path / name).write_text(text, encoding="utf-8")
        done = cli("graph", "validate", str(tmp_path / name), ok=False)
        assert done.returncode == 1, done.stderr
        assert "a number has over 4300 digits" in done.stdout + done.stderr
        _no_traceback(done)
    graph = {
        "name": "g",
        "entry": "p",
        "nodes": [{"id": "p", "type": "program", "ref": ".:x"}],
    }
    (tmp_path / "p.json").write_text(json.dumps(graph), encoding="utf-8")
    done = cli("graph", "validate", str(tmp_path / "p.json"), ok=False)
    assert done.returncode == 1, done.stderr
    assert "program ref '.:x' is not of the form pkg.module:function" in done.stdout
    _no_traceback(done)


def test_a_tool_process_is_refused_a_persons_commands_in_one_line(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "p.py").write_text("return 1\n")
    cli("programs", "save", "p", "p.py")
    cli("graph", "import", str(GRAPH))
    cli.env["PLAIT_TOOL_PROCESS"] = "1"  # what a model's command runs under
    for argv in [
        ("tokens", "create", "--human", "mallory"),
        ("programs", "promote", "p", "--version", "1"),
        ("graph", "schedule", "assistant", "research-and-verify", "--schedule", "0 8 * * 1",
         "--deliver", "stdout"),
    ]:  # fmt: skip
        done = cli(*argv, ok=False)
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr.startswith("error: refused: this process was started by a plait")
        assert done.stderr.count("\n") == 1, done.stderr
        _no_traceback(done)
    del cli.env["PLAIT_TOOL_PROCESS"]
    assert json.loads(cli("tokens", "list", "--json").stdout) == []  # nothing minted
    assert cli.json("graph", "schedules") == []
