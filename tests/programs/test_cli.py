"""``plait programs`` and ``plait exec``: ``exec`` with the bash tool as a real process,
the other commands run in this process (:class:`Cli` with ``in_process``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.runs.helpers import Cli

V1 = "import asyncio\nawait asyncio.sleep(0)\nreturn {'hello': payload.name}\n"
V2 = "return {'hi': payload.name, 'raw': '\\x1b[31m'}\n"


def test_save_list_show_diff_promote_run(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "p1.py").write_text(V1)
    (tmp_path / "p2.py").write_text(V2)
    assert "saved greet version 1" in cli("programs", "save", "greet", "p1.py").stdout
    assert "saved greet version 2" in cli("programs", "save", "greet", "p2.py").stdout
    listed = json.loads(cli("programs", "list", "--json").stdout)
    assert listed == [{"name": "greet", "latest": 2, "versions": [1, 2], "promoted": []}]
    shown = cli("programs", "show", "greet", "--version", "1").stdout
    assert "not promoted" in shown and "payload.name" in shown
    diff = cli("programs", "diff", "greet", "1", "2").stdout
    assert "--- greet@1" in diff and "+return {'hi'" in diff
    refused = cli(
        "programs", "run", "greet", "--input", '{"name": "bo"}', "--require-promoted", ok=False
    )
    assert "plait programs promote greet --version 2" in refused.stderr
    assert (
        "promoted greet version 2" in cli("programs", "promote", "greet", "--version", "2").stdout
    )
    out = cli(
        "programs", "run", "greet", "--input", '{"name": "bo"}', "--require-promoted", "--json"
    )
    assert json.loads(out.stdout) == {"result": {"hi": "bo", "raw": "\x1b[31m"}}
    plain = cli("programs", "run", "greet@1", "--input", '{"name": "bo"}').stdout
    assert plain.strip() == '{"hello": "bo"}'
    (tmp_path / "raw.py").write_text("return '\\x1b[31mred'\n")
    printed = cli("exec", "raw.py").stdout
    assert "\x1b" not in printed and "\\x1b[31mred" in printed  # run data printed escaped
    shown = json.loads(cli("programs", "show", "greet", "--json").stdout)
    assert shown["promotion"]["by"] and shown["version"] == 2


def test_promotion_from_a_tool_process_is_refused(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "p.py").write_text("return 1\n")
    cli("programs", "save", "p", "p.py")
    cli.env["PLAIT_TOOL_PROCESS"] = "1"
    refused = cli("programs", "promote", "p", "--version", "1", ok=False)
    assert "only a person may" in refused.stderr
    del cli.env["PLAIT_TOOL_PROCESS"]
    assert json.loads(cli("programs", "list", "--json").stdout)[0]["promoted"] == []


def test_exec_runs_a_file_with_payload_and_the_bash_tool(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    (tmp_path / "check.py").write_text(
        "import asyncio\n"
        "a, b = await asyncio.gather(tools.bash('echo ' + payload.target), tools.bash('exit 2'))\n"
        "if not a['ok'] or not b['ok']:\n"
        "    return {'status': 'failed', 'node': 'checks', 'a': a['stdout'], 'b': b['exit_code']}\n"
        "return {'status': 'success'}\n"
    )
    refused = cli("exec", "check.py", "--payload", "target=x", ok=False)
    assert "needs a person's approval" in refused.stderr
    out = cli("exec", "check.py", "--payload", "target=src", "--approve-tools", "--json")
    assert json.loads(out.stdout)["result"] == {
        "status": "failed",
        "node": "checks",
        "a": "src\n",
        "b": 2,
    }


def test_a_tool_process_may_not_import_a_graph_running_unpromoted_text(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    (tmp_path / "p.py").write_text("return 1\n")
    cli("programs", "save", "helper", "p.py")
    node = {"id": "p", "type": "program", "ref": "helper", "require_promoted": False}
    graph = {"name": "g", "agent": "assistant", "entry": "p", "nodes": [node]}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    cli.env["PLAIT_TOOL_PROCESS"] = "1"
    refused = cli("graph", "import", "g.json", ok=False)
    assert "agent 'tool-process' may not import or run a graph" in refused.stderr
    del cli.env["PLAIT_TOOL_PROCESS"]
    assert "imported" in cli("graph", "import", "g.json").stdout
