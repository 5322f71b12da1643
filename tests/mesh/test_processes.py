"""CAS holds across OS processes: eight processes race to increment one counter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from plait.mesh import open_mesh
from tests._support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROCESSES = 8
INCREMENTS = 40

# Each process opens the mesh, says "ready", waits for "go" (so that all of them race at
# once rather than one after another), then increments with read-modify-CAS-retry and
# prints the versions its writes produced and how many of its attempts lost.
RACER = textwrap.dedent(
    """
    import asyncio, json, sys

    from plait.errors import VersionConflict
    from plait.mesh import open_mesh

    async def main(url: str, increments: int) -> None:
        async with open_mesh(url) as mesh:
            await mesh.get("counter")
            print("ready", flush=True)
            sys.stdin.readline()
            won, conflicts = [], 0
            while len(won) < increments:
                entry = await mesh.get("counter")
                try:
                    written = await mesh.put(
                        "counter", entry.value + 1, if_version=entry.version
                    )
                except VersionConflict:
                    conflicts += 1
                    continue
                won.append(written.version)
            print(json.dumps({"won": won, "conflicts": conflicts}), flush=True)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


@pytest.mark.parametrize(
    "mesh_url", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)], indirect=True
)
async def test_counter_race_across_processes(mesh_url: str) -> None:
    async with open_mesh(mesh_url) as mesh:
        await mesh.put("counter", 0, if_version=0)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, mesh_url, str(INCREMENTS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None
            line = racer.stdout.readline()
            assert line == "ready\n", racer.communicate()[1]
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        won: list[int] = []
        conflicts = 0
        for racer in racers:
            out, err = racer.communicate(timeout=scaled(60))
            assert racer.returncode == 0, err
            report = json.loads(out)
            won += report["won"]
            conflicts += report["conflicts"]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.communicate()
    async with open_mesh(mesh_url) as mesh:
        final = await mesh.get("counter")
    total = PROCESSES * INCREMENTS
    assert final is not None and final.value == total and final.version == total + 1
    assert sorted([1, *won]) == list(range(1, total + 2))
    assert conflicts > 0, "the processes never raced"
