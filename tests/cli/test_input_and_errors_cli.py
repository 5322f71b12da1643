"""One clear line where the CLI is given something it cannot use, and inputs from files:
``graph run --input @FILE`` and ``--input-json`` (bad JSON named by file, line and
column), a failing program callable by its file and line, a relative ``scripted:`` path
of a schedule pinned where it was made; and a worker's banner one line when piped."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from plait.mesh import open_mesh
from plait.runs import Runs
from plait.schedules import Schedules
from tests._support.cli import run_in_process
from tests.cli.helpers import invoke
from tests.runs.helpers import Cli, store

CHAIN = {
    "name": "echo",
    "agent": "assistant",
    "entry": "ask",
    "nodes": [{"id": "ask", "type": "human", "ask": "Go on with {{input}}?"}],
}


@pytest.fixture
def mesh_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite mesh with the graph assistant/echo stored; the test's folder as cwd."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAIT_USER", "ana")
    monkeypatch.setenv("PLAIT_SINK_DIR", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def fill() -> None:
        async with open_mesh(url) as mesh:
            await store(mesh, CHAIN)

    anyio.run(fill)
    return url


def _input_of(url: str, out: str) -> object:
    run_id = out.split()[1]

    async def read() -> object:
        async with open_mesh(url) as mesh:
            return (await Runs(mesh).get(run_id)).input  # type: ignore[arg-type]

    return anyio.run(read)


def test_input_from_a_file_and_as_json(mesh_url: str, tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text('{"quarter": "Q3", "items": [1, 2]}')
    (tmp_path / "in.txt").write_text("the Q3 numbers\n")
    start = ("graph", "run", "assistant", "echo", "--detach", "--mesh", mesh_url)
    for given, expected in [
        (["--input", "@in.json"], {"quarter": "Q3", "items": [1, 2]}),
        (["--input", "@in.txt"], "the Q3 numbers\n"),
        (["--input-json", '{"n": 3}'], {"n": 3}),
        (["--input", "@@handle"], "@handle"),
        (["--input", "plain"], "plain"),
    ]:
        code, out, err = invoke(*start, *given)
        assert code == 0, err
        assert _input_of(mesh_url, out) == expected


def test_bad_input_json_is_one_line_with_file_line_and_column(
    mesh_url: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text('{\n  "a": 1,\n  "b": }\n')
    start = ("graph", "run", "assistant", "echo", "--detach", "--mesh", mesh_url)
    cases = [
        (
            ["--input", "@bad.json"],
            "error: bad.json is not valid JSON: Expecting value at line 3, column 8",
        ),
        (
            ["--input-json", "{'a': 1}"],
            "error: --input-json is not valid JSON: Expecting property name",
        ),
        (["--input", "@missing.json"], "error: cannot read the input file 'missing.json'"),
        (["--input", "x", "--input-json", "1"], "error: give --input or --input-json, not both"),
    ]  # fmt: skip
    for given, says in cases:
        code, _, err = invoke(*start, *given)
        assert code == 2 and err.startswith(says) and err.count("\n") == 1, err


def test_a_failing_program_callable_is_one_line_with_its_file_and_line(
    mesh_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pkg := tmp_path / "jobs").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fails.py").write_text(
        "def helper(n):\n    return 1 / n\n\n\nasync def run(input):\n    return helper(0)\n"
    )
    (pkg / "broken.py").write_text("def run(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = invoke("programs", "run", "jobs.fails:run", "--mesh", mesh_url)
    assert code == 1 and out == ""
    assert err == (
        f"error: program 'jobs.fails:run' failed: {pkg / 'fails.py'}:2: "
        "ZeroDivisionError: division by zero\n"
    )
    code, _, err = invoke("programs", "run", "jobs.broken:run", "--mesh", mesh_url)
    assert code == 1 and err.count("\n") == 1
    assert f"{pkg / 'broken.py'}:1: SyntaxError: " in err
    (tmp_path / "latin.py").write_bytes(b"x = 1\ny = '\xff'\n")
    code, _, err = invoke("exec", "latin.py", "--mesh", mesh_url)
    assert (
        code == 1
        and err == "error: latin.py:2: not UTF-8 text (byte 0xff): save the program as UTF-8\n"
    )


def test_a_schedule_pins_a_relative_scripted_model_path(mesh_url: str, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "echo.yaml").write_text("- text: ok\n")
    code, _, err = invoke(
        "graph", "schedule", "assistant", "echo", "--schedule", "0 8 * * 1",
        "--deliver", "stdout", "--model", "scripted:models/echo.yaml", "--mesh", mesh_url,
    )  # fmt: skip
    assert code == 0, err

    async def stored() -> str | None:
        async with open_mesh(mesh_url) as mesh:
            return (await Schedules(mesh).list())[0].model

    assert anyio.run(stored) == f"scripted:{tmp_path / 'models' / 'echo.yaml'}"


def test_the_worker_banner_is_one_line_when_piped(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    cli.env["COLUMNS"] = "80"
    run_in_process(["mesh", "migrate", "--mesh", cli.mesh_url], cwd=cli.cwd, env=cli.env)
    worker = cli.spawn("worker")
    try:
        assert worker.stderr is not None
        banner = ""
        while not banner.startswith("worker "):
            banner = worker.stderr.readline()
            assert banner, "the worker ended before its banner"
        assert len(banner.rstrip("\n")) > 80  # longer than the width, and not wrapped
        assert banner.rstrip("\n").endswith(" with tools bash, http_get, read_file")
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.communicate()


def test_the_quick_start_says_once_that_this_process_serves_the_run(tmp_path: Path) -> None:
    cli = Cli(tmp_path, in_process=True)
    cli.env["COLUMNS"] = "80"
    (tmp_path / "g.json").write_text(json.dumps(CHAIN))
    cli("graph", "import", str(tmp_path / "g.json"))
    started = cli("graph", "run", "assistant", "echo", "--input", "x", "--json")
    run_id = json.loads(started.stdout)["run_id"]
    assert started.stderr.count("this process serves run") == 1
    assert "no worker is serving" not in started.stderr  # information, not a warning
    resumed = cli("graph", "resume", run_id, "yes")
    assert "no worker is serving" not in resumed.stderr
    assert "this process serves run" not in resumed.stderr  # said once, at the start
    assert f"run {run_id} done" in resumed.stdout
