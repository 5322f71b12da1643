"""``fleet_tasks``: tasks per second through the fleet example's claim-and-done loop.

Three worker agent actors subscribed to ``tasks.new`` race a CAS claim on ``tasks/<id>``
for each task published; the winner writes ``results/<id>`` and publishes
``tasks.done``. The instant scripted model of ``examples/fleet`` answers; one process
serves (a leased runtime and its topic router). Imported by ``bench/fleet.py``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path

from _common import Figure

from plait.actors import LeasedRuntime
from plait.agents import Agents
from plait.mesh import Mesh, open_mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import serve

MODEL = Path(__file__).resolve().parents[1] / "examples" / "fleet" / "fleet.model.yaml"
WORKERS = ("w1", "w2", "w3")


async def _done(mesh: Mesh, prefix: str) -> int:
    return len([e async for e in mesh.scan(prefix)])


async def _round(mesh: Mesh, tasks: int, tag: str) -> float:
    start = time.perf_counter()
    for n in range(tasks):
        await mesh.publish("tasks.new", "task", {"id": f"{tag}-{n}", "text": "x"})
    deadline = time.monotonic() + 300
    while await _done(mesh, f"results/{tag}-") < tasks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fleet round {tag} did not finish")
        await asyncio.sleep(0.01)
    return tasks / (time.perf_counter() - start)


async def fleet_tasks_figure(url: str, seconds: float, backend: str, floor: float) -> Figure:
    """Tasks/s through the claim-and-done loop on the mesh at ``url``."""
    async with open_mesh(url) as mesh:
        await put_profile(
            mesh, AgentProfile(name="worker", tools=["mesh_get", "mesh_put", "mesh_publish"])
        )
        runtime = functools.partial(LeasedRuntime, lease_s=5.0)
        model = ScriptedModel.from_file(MODEL)
        async with serve(mesh, runtime=runtime, model=model, beat=False):
            agents = Agents(mesh)
            for name in WORKERS:
                await agents.start(name, profile="worker", topics=["tasks.new"])
            await _round(mesh, 5, "warm")
            probe = await _round(mesh, 10, "probe")
            tasks = max(10, int(probe * seconds / 3))
            best = 0.0
            for r in range(3):
                best = max(best, await _round(mesh, tasks, f"r{r}"))
    return Figure(
        "fleet",
        f"{backend}_fleet_tasks",
        best,
        "tasks/s",
        floor,
        1.0,
        "fixed floor; 3 workers, instant scripted model",
    )


__all__ = ["fleet_tasks_figure"]
