"""``plait mesh publish|tail``: through the CLI runner, and ``tail`` as a real process
following events as they are published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests._support.timing import scaled
from tests.cli.helpers import invoke

ROOT = Path(__file__).resolve().parents[2]
PLAIT = "import sys; from plait.cli import main; sys.argv[0] = 'plait'; main()"


def test_publish_then_tail_from_earliest(mesh_args: list[str]) -> None:
    code, out, err = invoke(
        "mesh", "publish", "tasks.new", "task", "--data", '{"n": 1}', *mesh_args
    )
    assert code == 0, err
    first = out.strip()
    code, out, _ = invoke("mesh", "publish", "tasks.new", "task", "--data", "[2]", *mesh_args)
    assert code == 0
    code, out, err = invoke(
        "mesh", "tail", "tasks.new", "--json", "--from-earliest", "--count", "2", *mesh_args
    )
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["topic"], e["kind"], e["data"]) for e in events] == [
        ("tasks.new", "task", {"n": 1}),
        ("tasks.new", "task", [2]),
    ]
    assert events[0]["id"] == first


def test_publish_later_with_a_key_replaces_the_pending_event(mesh_args: list[str]) -> None:
    for n in (1, 2):
        code, _, err = invoke(
            "mesh",
            "publish",
            "t",
            "tick",
            "--data",
            str(n),
            "--after-ms",
            "50",
            "--key",
            "k",
            *mesh_args,
        )
        assert code == 0, err
    code, out, _ = invoke(
        "mesh", "tail", "t", "--json", "--from-earliest", "--count", "1", *mesh_args
    )
    assert code == 0 and json.loads(out)["data"] == 2


def test_bad_data_is_refused(mesh_args: list[str]) -> None:
    code, _, err = invoke("mesh", "publish", "t", "k", "--data", "{nope", *mesh_args)
    assert code == 1 and "not valid JSON" in err


def test_tail_escapes_control_characters(mesh_args: list[str]) -> None:
    invoke("mesh", "publish", "t", "k", "--data", json.dumps("\x1b[2Jboom"), *mesh_args)
    code, out, _ = invoke("mesh", "tail", "t", "--from-earliest", "--count", "1", *mesh_args)
    assert code == 0 and "\x1b" not in out and "\\x1b[2Jboom" in out


def test_tail_follows_events_as_they_come(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    env = {**os.environ, "PLAIT_MESH": url, "PYTHONPATH": str(ROOT)}
    assert invoke("mesh", "put", "x", "1", "--mesh", url)[0] == 0  # the mesh exists
    tail = subprocess.Popen(
        [sys.executable, "-c", PLAIT, "mesh", "tail", "news", "--json", "--count", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while tail.poll() is None and time.monotonic() < deadline:
            code, _, err = invoke("mesh", "publish", "news", "ping", "--data", "1", "--mesh", url)
            assert code == 0, err
            time.sleep(0.1)  # a publish rate, not a wait for an outcome
        out, err = tail.communicate(timeout=scaled(10))
    finally:
        if tail.poll() is None:
            tail.kill()
    assert tail.returncode == 0, err
    assert json.loads(out.splitlines()[0])["kind"] == "ping"


def test_publish_json_prints_the_event(mesh_args: list[str]) -> None:
    code, out, err = invoke(
        "mesh", "publish", "t", "tick", "--after-ms", "50", "--key", "k1", "--json", *mesh_args
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["topic"] == "t" and shown["kind"] == "tick" and shown["key"] == "k1"
    assert shown["after_ms"] == 50 and shown["id"]
