"""``plait mesh get|put|ls`` through the CLI runner, on a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import invoke


def test_put_get_json_and_ls(mesh_args: list[str]) -> None:
    code, out, _ = invoke("mesh", "put", "greeting", '{"text": "hi", "n": [1, 2]}', *mesh_args)
    assert code == 0 and "version 1" in out
    code, out, _ = invoke("mesh", "put", "other", "7", *mesh_args)
    assert code == 0
    code, out, _ = invoke("mesh", "get", "greeting", "--json", *mesh_args)
    assert code == 0
    assert json.loads(out) == {
        "key": "greeting",
        "value": {"text": "hi", "n": [1, 2]},
        "version": 1,
    }
    code, out, _ = invoke("mesh", "ls", *mesh_args)
    assert code == 0 and out.split() == ["key", "version", "greeting", "1", "other", "1"]
    code, out, _ = invoke("mesh", "ls", "gr", *mesh_args)
    assert out.split() == ["key", "version", "greeting", "1"]


def test_version_conflict_exits_nonzero_with_both_versions(mesh_args: list[str]) -> None:
    assert invoke("mesh", "put", "k", "1", *mesh_args)[0] == 0
    assert invoke("mesh", "put", "k", "2", "--if-version", "1", *mesh_args)[0] == 0
    code, _, err = invoke("mesh", "put", "k", "3", "--if-version", "1", *mesh_args)
    assert code == 1
    assert "expected version 1" in err and "actual version 2" in err
    code, _, err = invoke("mesh", "put", "k", "3", "--if-version", "0", *mesh_args)
    assert code == 1 and "expected version 0" in err
    code, out, _ = invoke("mesh", "get", "k", "--json", *mesh_args)
    assert json.loads(out)["value"] == 2


def test_bad_input_is_a_clear_error(mesh_args: list[str]) -> None:
    code, _, err = invoke("mesh", "put", "k", "{not json", *mesh_args)
    assert code == 1 and "not valid JSON" in err
    code, _, err = invoke("mesh", "get", "missing", *mesh_args)
    assert code == 1 and "no key 'missing'" in err
    code, _, err = invoke("mesh", "get", "k", "--mesh", "ftp://x")
    assert code == 1 and "sqlite://" in err and "Traceback" not in err


def test_mesh_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_MESH", f"sqlite:///{tmp_path / 'env.db'}")
    assert invoke("mesh", "put", "from-env", '"yes"')[0] == 0
    assert (tmp_path / "env.db").exists()
    code, out, _ = invoke("mesh", "get", "from-env", "--json")
    assert code == 0 and json.loads(out)["value"] == "yes"


def test_keys_are_printed_as_data(mesh_args: list[str]) -> None:
    key = "tasks/\x1b[2J[bold]t1"  # what an agent's mesh_put may name
    code, out, _ = invoke("mesh", "put", key, "1", *mesh_args)
    assert code == 0 and "\x1b" not in out and "\\x1b[2J[bold]t1 version 1" in out
    code, out, _ = invoke("mesh", "ls", "tasks/", *mesh_args)
    assert code == 0 and "\x1b" not in out and "\\x1b[2J[bold]t1" in out
