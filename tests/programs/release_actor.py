"""The release actor example's programs, saved and promoted, and its start program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plait.agents import Agents
from plait.decisions import Human
from plait.mesh import Mesh
from plait.programs import grant_all, promote, run_source, save_program

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "release_actor"
NODES = ("step", "fetch", "test", "approve", "release")
"""The programs ``graph-<name>`` the example saves (``step`` is the actor's own)."""


async def save_and_promote(mesh: Mesh) -> None:
    """Save each ``graph-<name>`` program of the example and promote it, as a person."""
    for name in NODES:
        stored = await save_program(mesh, f"graph-{name}", (EXAMPLE / f"{name}.py").read_text())
        await promote(mesh, stored.name, stored.version, by=Human("ana"))


async def start(mesh: Mesh, **payload: str) -> Any:
    """Run ``start.py`` as ``plait exec`` does, with ``payload``."""
    grants = grant_all(mesh, by="program by ana", agents=Agents(mesh))
    text = (EXAMPLE / "start.py").read_text()
    return await run_source(text, payload, grants, filename="start.py")
