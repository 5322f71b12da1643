"""``plait`` run in the test process (:func:`tests._support.cli.run_in_process`) answers
as the console script's own process does: the same stdout, stderr and exit status, the
same width from ``COLUMNS``, a logged warning on stderr, and the next test's modules of
the same name imported afresh."""

from __future__ import annotations

import importlib
import sqlite3
import sys
from pathlib import Path

import pytest

from tests._support.cli import as_a_process_would, run_in_process
from tests.runs.helpers import Cli


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("graph", "runs", "--status", "bogus"),  # a usage error: exit 2, one line on stderr
        ("graph", "runs", "-o", "json"),
        ("graph", "cancel", "grun_nosuch"),  # a refusal: exit 1
        ("graph", "run", "-h"),
    ],
    ids=lambda args: " ".join(args),
)
def test_in_process_answers_as_the_process_does(tmp_path: Path, args: tuple[str, ...]) -> None:
    process, here = Cli(tmp_path), Cli(tmp_path, in_process=True)
    process.env["COLUMNS"] = here.env["COLUMNS"] = "80"
    by_process, in_process = process(*args, ok=False), here(*args, ok=False)
    assert (in_process.returncode, in_process.stdout, in_process.stderr) == (
        by_process.returncode,
        by_process.stdout,
        by_process.stderr,
    )


def test_a_skipped_value_s_warning_reaches_stderr(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    assert cli.json("graph", "runs") == []
    with sqlite3.connect(tmp_path / "mesh.db") as db:
        db.execute("INSERT INTO kv (key, value, version) VALUES ('runindex/grun_x', x'c1', 1)")
    listed = cli("graph", "runs", "--json")
    assert "skipping the unreadable value at 'runindex/grun_x'" in listed.stderr


def test_a_module_of_the_working_directory_is_imported_afresh(tmp_path: Path) -> None:
    for n in (1, 2):
        cwd = tmp_path / str(n)
        cwd.mkdir()
        (cwd / "here_tools.py").write_text(f"N = {n}\n")
        with as_a_process_would(cwd):  # as a worker's --tools module is imported
            assert importlib.import_module("here_tools").N == n
        assert "here_tools" not in sys.modules


@pytest.mark.anyio
async def test_a_coroutine_is_told_to_start_a_process(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="synchronous test only"):
        run_in_process(["--version"], cwd=tmp_path, env={})
