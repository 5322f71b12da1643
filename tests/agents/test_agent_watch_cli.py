"""``plait agents watch NAME`` as a person runs it (a ``plait`` subprocess on a SQLite
file) while an agent actor answers in this process: the turn's line, its reply as it
streams with every control character shown escaped, its end; ``--json`` one object per
event, resumable with ``--after``; an unknown actor is one line and exit 1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plait.agents import Agents
from plait.agents.live import agent_channel
from plait.mesh import open_mesh
from tests._support.timing import scaled
from tests.runs.helpers import Cli

from .conftest import eventually, profile, serving

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TEXT = "".join(f"word{n} " for n in range(30)) + "\x1b[2J\x07 done"
RULES = [{"node": "helper", "text": TEXT, "chunks": 30, "chunk_delay_ms": 2}]


async def test_watch_shows_a_turn_as_it_streams(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    assert cli("agents", "watch", "nobody", "--turns", "1", ok=False).returncode == 1
    async with open_mesh(cli.mesh_url) as mesh:
        assert mesh.live is not None
        live = mesh.live
        await profile(mesh, "helper", [])
        agents = Agents(mesh)
        await agents.start("helper")
        watcher = cli.spawn("agents", "watch", "helper", "--turns", "1")
        try:

            async def watched() -> bool:
                return live.watched(agent_channel("helper"))

            await eventually(watched)
            async with serving(mesh, RULES):
                message = await agents.tell("helper", "go \x1b]0;title\x07")
                out, err = await asyncio.to_thread(watcher.communicate, timeout=scaled(60))
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()
    assert watcher.returncode == 0, err
    assert "\x1b" not in out and "\x07" not in out  # nothing reaches the terminal raw
    lines = out.splitlines()
    assert lines[0].startswith(f"  ▶ {message}: go ")
    assert lines[1].startswith("word0 word1 ") and lines[1].endswith(" \\x1b[2J\\x07 done")
    assert lines[2].startswith("  ✓ turn 1 answered (") and lines[2].endswith(" tokens)")
    # --json from offset 0: one object per event, then again after one of them
    whole = cli("agents", "watch", "helper", "--json", "--after", "0", "--turns", "1")
    shown = [json.loads(line) for line in whole.stdout.splitlines()]
    assert [e["kind"] for e in shown] == ["turn"] + ["delta"] * 30 + ["end"]
    assert "".join(e["text"] for e in shown[1:-1]) == TEXT == shown[-1]["summary"]["text"]
    k = shown[5]["offset"]
    tail = cli("agents", "watch", "helper", "--json", "--after", str(k), "--turns", "1")
    assert [json.loads(line)["offset"] for line in tail.stdout.splitlines()] == [
        e["offset"] for e in shown[6:]
    ]
