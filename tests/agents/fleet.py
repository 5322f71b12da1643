"""The fleet example's setup, shared by its tests and the benchmark."""

from __future__ import annotations

from pathlib import Path

from plait.agents import Agents
from plait.mesh import Mesh
from plait.profiles import AgentProfile, put_profile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"
MODEL = EXAMPLE / "fleet.model.yaml"
WORKERS = ("w1", "w2", "w3")

PROFILES = {
    "dispatcher": ["mesh_put", "mesh_publish"],
    "worker": ["mesh_get", "mesh_put", "mesh_publish"],
    "reporter": ["mesh_put", "decisions_raise", "decisions_wait"],
}


async def set_up_fleet(mesh: Mesh, *, reporter: bool = True) -> Agents:
    """The README's ``agents put`` and ``agents start`` lines."""
    for name, tools in PROFILES.items():
        text = (EXAMPLE / f"{name}.txt").read_text(encoding="utf-8")
        await put_profile(mesh, AgentProfile(name=name, tools=tools, system_prompt=text))
    agents = Agents(mesh)
    await agents.start("dispatcher")
    for name in WORKERS:
        await agents.start(name, profile="worker", topics=["tasks.new"])
    if reporter:
        await agents.start("reporter", topics=["tasks.done"])
    return agents
