"""``plait workflow``: import, start (served in this process), journal, stale runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.mesh import open_mesh
from plait.profiles import AgentProfile
from plait.profiles.store import put_profile


def _plait(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def mesh_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def profile() -> None:
        async with open_mesh(url) as mesh:
            await put_profile(
                mesh, AgentProfile(name="assistant", tools=["bash"], pre_approved=["bash"])
            )

    asyncio.run(profile())
    return url


def test_import_start_journal_and_stale(mesh_url: str) -> None:
    code, out = _plait(
        "workflow", "import", "tests.workflows.flows:fan", "--mesh", mesh_url, "--json"
    )
    assert code == 0, out
    assert json.loads(out)["version"] == 1
    code, out = _plait(
        "workflow", "import", "tests.workflows.flows:fan", "--mesh", mesh_url, "--json"
    )
    assert json.loads(out)["version"] == 1  # the same code: the same version

    code, out = _plait(
        "workflow",
        "start",
        "tests.workflows.flows:fan",
        "--args",
        '{"n": 3, "limit": 3}',
        "--mesh",
        mesh_url,
        "--json",
    )
    assert code == 0, out
    done = json.loads(out.strip().splitlines()[-1])
    assert done["status"] == "done" and done["output"] == ["0", "1", "2"]

    code, out = _plait("workflow", "journal", done["run_id"], "--mesh", mesh_url, "--json")
    assert code == 0, out
    assert [s["name"] for s in json.loads(out)] == ["tools.bash"] * 3 + ["now", "uuid"]

    code, out = _plait("graph", "inspect", done["run_id"], "--mesh", mesh_url)
    assert code == 0 and "workflow" in out, out

    code, out = _plait("workflow", "runs", "--stale", "--mesh", mesh_url, "--json")
    assert code == 0 and json.loads(out) == []


def test_bad_refs_and_arguments_are_one_line_errors(mesh_url: str) -> None:
    code, out = _plait("workflow", "import", "no_such_module:fn", "--mesh", mesh_url)
    assert code == 2 and "cannot be imported" in out
    code, out = _plait("workflow", "import", "tests.workflows.flows:PLAIN", "--mesh", mesh_url)
    assert code == 2 and "is not a workflow" in out
    code, out = _plait(
        "workflow", "start", "tests.workflows.flows:fan", "--args", '{"m": 1}', "--mesh", mesh_url
    )
    assert code == 2 and "workflow fan: missing a required argument: 'n'" in out
