"""Commands imported on first use: the tables match the commands, and starting is cheap.

``plait --help`` lists commands from :data:`plait.cli.COMMANDS` and ``plait graph --help``
from ``GRAPH_COMMANDS`` without importing them, so each table's help must be the
command's own, and every command the modules define must be in a table.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

import plait.cli
from plait.cli import COMMANDS, app
from plait.cli._graph_app import GRAPH_COMMANDS, graph_app
from plait.cli._lazy import LazyCommand, LazyGroup, every_command
from tests.cli.helpers import invoke

_CHILD = """
import sys
sys.argv = ["plait", *sys.argv[1:]]
from plait.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(sorted(sys.modules)))
"""


GRAPH_GROUP = graph_app.info.cls


def _first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())


def _every_cli_module() -> None:
    for info in pkgutil.iter_modules(plait.cli.__path__, "plait.cli."):
        importlib.import_module(info.name)


def _imported_by(*argv: str, cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())


@pytest.mark.parametrize(
    ("table", "path"), [(COMMANDS, []), (GRAPH_COMMANDS, ["graph"])], ids=["plait", "graph"]
)
def test_each_table_help_is_the_command_s_own(
    table: dict[str, LazyCommand], path: list[str]
) -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    for name in path:
        group = every_command(group)[name]
    assert isinstance(group, TyperGroup)
    commands = every_command(group)
    assert list(commands) == list(table)
    for name, entry in table.items():
        assert entry.help == _first_paragraph(commands[name].help), name


def test_every_command_the_modules_define_is_in_a_table() -> None:
    _every_cli_module()
    # `plait graph` finds each command through its table (checked above).
    registered = [info.name for info in graph_app.registered_commands]
    assert sorted(registered) == sorted(GRAPH_COMMANDS)
    groups = [
        value
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("plait.cli.")
        for value in vars(module).values()
        if isinstance(value, typer.Typer) and value.registered_commands
    ]
    listed = [
        getattr(importlib.import_module(entry.module), entry.attribute)
        for entry in COMMANDS.values()
    ]
    for group in groups:
        assert any(group is known for known in listed), group.info.help
    # A group's commands spread over modules are listed by `also`.
    for entry in COMMANDS.values():
        target = getattr(importlib.import_module(entry.module), entry.attribute)
        lazy = isinstance(target, typer.Typer) and target.info.cls is GRAPH_GROUP
        if isinstance(target, typer.Typer) and not lazy:
            homes = {info.callback.__module__ for info in target.registered_commands}
            assert homes == {entry.module, *entry.also}, entry


def test_help_lists_every_command_with_its_line() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    shown = " ".join(out.split())
    for name, entry in COMMANDS.items():
        assert f"{name} {entry.help.split()[0]}" in shown, name
    code, out, _ = invoke("graph", "--help")
    assert code == 0
    shown = " ".join(out.split())
    for name, entry in GRAPH_COMMANDS.items():
        assert f"{name} {entry.help.split()[0]}" in shown, name


def test_an_unknown_command_is_a_one_line_usage_error() -> None:
    code, _, err = invoke("nonesuch")
    assert code == 2
    assert "No such command 'nonesuch'" in err


def test_version_imports_no_command(tmp_path: Path) -> None:
    modules = _imported_by("--version", cwd=tmp_path)
    assert {m for m in modules if m.startswith("plait")} == {
        "plait",
        "plait.cli",
        "plait.cli._lazy",
    }
    assert not modules & {"pydantic", "rich", "redis", "ray", "httpx", "anyio"}


def test_listing_runs_imports_neither_engine_nor_service(tmp_path: Path) -> None:
    modules = _imported_by(
        "graph", "runs", "--mesh", f"sqlite:///{tmp_path / 'm.db'}", cwd=tmp_path
    )
    assert "plait.cli.run_list" in modules
    heavy = {
        "plait.graphs.engine",
        "plait.runs.service",
        "plait.runs.commit",
        "plait.cli.runs",
        "plait.actors",
        "redis",
        "ray",
        "httpx",
    }
    assert not modules & heavy
