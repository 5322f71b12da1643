"""``plait graph``: validate, import, list, show and schema, through the CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from plait.cli import app
from plait.graphs.loader import load_graph_file
from plait.graphs.spec import NODE_TYPES
from plait.graphs.validate import validate_graph
from plait.mesh import open_mesh
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile, put_profile
from plait.tools import default_registry
from tests._support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "research_and_verify.json"

BROKEN: dict[str, Any] = {
    "name": "broken",
    "agent": "assistant",
    "entry": "a",
    "budget": 500,
    "nodes": [
        {"id": "a", "type": "agent", "prompt": "{{nowhere}}", "next": "b", "tools": ["teleport"]},
        {"id": "b", "type": "verifier", "prompt": "x", "verdicts": {"pass": "zzz"}},
        {"id": "c", "type": "wizard"},
        {"id": "d", "type": "agent", "prompt": "hi", "agent": "ghost"},
    ],
}


@pytest.fixture
def mesh_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mesh.db'}"


@pytest.fixture
def cli(mesh_url: str) -> Any:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        env = {"PLAIT_MESH": mesh_url, "COLUMNS": "200"}
        return runner.invoke(app, ["graph", *args], env=env)

    return invoke


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_validate_accepts_the_example(cli: Any) -> None:
    result = cli("validate", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    assert "ok (assistant/research-and-verify version 1)" in result.stdout

    result = cli("validate", str(EXAMPLE), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"ok": True, "problems": [], "warnings": []}


def test_validate_lists_every_problem_and_exits_1(cli: Any, tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.json", BROKEN)
    expected = validate_graph(
        BROKEN,
        agents={"assistant": DEFAULT_ASSISTANT},
        tool_is_known=default_registry().__contains__,
    )
    assert len(expected.problems) >= 6

    result = cli("validate", str(broken))
    assert result.exit_code == 1
    assert f"{len(expected.problems)} problem(s)" in result.stdout
    for problem in expected.problems:
        assert problem in result.stdout
    for needle in ('nodes[1].verdicts.pass: unknown target "zzz"', "teleport", "ghost", "wizard"):
        assert needle in result.stdout
    assert 'warning: nodes[2]: "c" is unreachable' in result.stderr
    assert "Traceback" not in result.output

    result = cli("validate", str(broken), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["warnings"] == expected.warnings
    assert [(p["path"], p["message"], p["hint"]) for p in report["problems"]] == [
        (p.path, p.message, p.hint) for p in expected.problems
    ]
    assert all(isinstance(p["line"], int) for p in report["problems"])


def test_validate_reports_unreadable_files(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"name": ', encoding="utf-8")
    result = cli("validate", str(tmp_path / "bad.json"))
    assert result.exit_code == 1
    assert "invalid JSON" in result.stdout and "line 1" in result.stdout
    result = cli("validate", str(tmp_path / "missing.json"), "--json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert problems == [
        {
            "path": "(file)",
            "message": "cannot read: No such file or directory",
            "line": None,
            "column": None,
            "hint": None,
        }
    ]


def test_validate_uses_the_agent_profiles_in_the_mesh(
    cli: Any, mesh_url: str, tmp_path: Path
) -> None:
    data = {**load_graph_file(EXAMPLE), "agent": "critic"}
    path = write(tmp_path / "critic.json", data)
    result = cli("validate", str(path))
    assert result.exit_code == 1
    assert 'agent: unknown agent "critic"' in result.stdout

    async def add_critic() -> None:
        async with open_mesh(mesh_url) as mesh:
            await put_profile(mesh, AgentProfile(name="critic", tools=["read_file"]))

    anyio.run(add_critic)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.output


def test_import_list_show(cli: Any, tmp_path: Path) -> None:
    result = cli("import", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("imported assistant/research-and-verify version 1 (sha256 ")
    sha_prefix = result.stdout.split("sha256 ", 1)[1][:12]

    second = {**load_graph_file(EXAMPLE), "version": 2, "description": "with sources"}
    result = cli("import", str(write(tmp_path / "v2.json", second)))
    assert result.exit_code == 0, result.output
    assert "version 2" in result.stdout

    result = cli("list")
    assert result.exit_code == 0, result.output
    cells = ("agent", "description", "assistant", "research-and-verify", "1, 2", "with sources")
    for cell in cells:
        assert cell in result.stdout
    listed = json.loads(cli("list", "--json").stdout)
    assert listed == [
        {
            "agent": "assistant",
            "name": "research-and-verify",
            "latest": 2,
            "versions": [1, 2],
            "description": "with sources",
        }
    ]
    assert json.loads(cli("list", "--agent", "critic", "--json").stdout) == []
    assert "no graphs stored for agent 'critic'" in cli("list", "--agent", "critic").stdout

    result = cli("show", "assistant", "research-and-verify")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["description"] == "with sources"
    assert "version 2" in result.stderr

    result = cli("show", "assistant", "research-and-verify", "--version", "1", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["version"] == 1 and record["sha256"].startswith(sha_prefix)
    assert record["spec"]["nodes"][0]["id"] == "draft"

    result = cli("show", "assistant", "research-and-verify", "--mermaid")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "flowchart LR"
    assert any("-->|fail|" in line for line in lines)


def test_import_refuses_problems_and_version_clashes(cli: Any, tmp_path: Path) -> None:
    result = cli("import", str(write(tmp_path / "broken.json", BROKEN)))
    assert result.exit_code == 1
    assert 'nodes[1].verdicts.pass: unknown target "zzz"' in result.stderr
    assert "was not imported" in result.stderr
    assert json.loads(cli("list", "--json").stdout) == []

    assert cli("import", str(EXAMPLE)).exit_code == 0
    again = cli("import", str(EXAMPLE))
    assert again.exit_code == 0
    assert "already stored and unchanged" in again.stdout

    changed = {**load_graph_file(EXAMPLE), "description": "edited in place"}
    result = cli("import", str(write(tmp_path / "changed.json", changed)))
    assert result.exit_code == 1
    assert "version 1 is already stored" in result.stderr
    assert "bump the version" in result.stderr
    assert "Traceback" not in result.output


def test_show_and_list_errors_are_short(cli: Any) -> None:
    result = cli("show", "assistant", "nothing-here")
    assert result.exit_code == 1
    assert "no graph assistant/nothing-here" in result.stderr
    assert "Traceback" not in result.output

    result = CliRunner().invoke(app, ["graph", "list", "--mesh", "bogus://x"])
    assert result.exit_code == 1
    assert "unsupported mesh URL" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_schema_is_json_naming_every_node_type(cli: Any) -> None:
    result = cli("schema")
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert {"name", "nodes"} <= set(schema["required"])
    spelled = {
        name
        for node in schema["$defs"].values()
        if "type" in node.get("properties", {}) and "enum" in node["properties"]["type"]
        for name in node["properties"]["type"]["enum"]
    }
    assert set(NODE_TYPES) <= spelled


def test_the_console_script_validates_the_example(tmp_path: Path) -> None:
    plait = ROOT / ".venv" / "bin" / "plait"
    if not plait.exists():
        plait = Path(sys.executable).with_name("plait")
    env = {**os.environ, "PLAIT_MESH": f"sqlite:///{tmp_path / 'mesh.db'}"}
    done = subprocess.run(
        [str(plait), "graph", "validate", "examples/research_and_verify.json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ok (assistant/research-and-verify version 1)" in done.stdout
