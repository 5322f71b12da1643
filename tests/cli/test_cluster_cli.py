"""``plait cluster status`` on a mesh nobody serves: the backlog of each partition."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from plait.actors import load_partitions, mailbox_of, tell_tracked
from plait.actors.partitions import partition_of_topic
from plait.cli import app
from plait.mesh import open_mesh


def test_status_shows_the_mail_no_runtime_took_by_partition(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def send() -> list[int]:
        async with open_mesh(url) as mesh:
            await load_partitions(mesh, 8)
            for n in range(3):
                await tell_tracked(mesh, "agent:a", {"n": n})
            await tell_tracked(mesh, "agent:b", {"n": 0})
            return [partition_of_topic(mailbox_of(mesh, a)) or 0 for a in ("agent:a", "agent:b")]

    a, b = asyncio.run(send())
    result = CliRunner().invoke(app, ["cluster", "status", "--json", "--mesh", url])
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    expected = [0] * 8
    expected[a] += 3
    expected[b] += 1
    assert found["backlog"] == expected
    text = CliRunner().invoke(app, ["cluster", "status", "--mesh", url]).stdout
    assert "backlog 4 message(s) by partition: " in text
    assert f"{a}: {expected[a]}" in text
