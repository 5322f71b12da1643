"""A resumable release graph written in Python: fetch, test, notes, approve, release.

Run durably, each node is one mailbox message of the run's owner, committed with the
run record's compare-and-swap, so the run survives a restart between any two nodes;
``approve`` raises one decision and parks the run (no process held) until a person
answers. Function nodes are referenced by import path: a worker that imports this
module runs them after any restart. ``release`` is idempotent — it looks for the
release it would record before recording it, so an interrupted visit is verified, not
repeated blindly — and its result names the run, its state key, the release key and,
run durably, the actor that owns the run and the topic its progress is published on.

From the repository root, on the embedded default (the scripted model writes the notes)::

    plait graph import examples.release_graph:graph
    plait graph run assistant release --input v1.4.0 \\
        --model scripted:examples/release_graph.model.yaml --json   # parks at approve
    plait graph resume RUN yes

In-session: ``python examples/release_graph.py`` (answers ``yes`` itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel

import plait
from plait.ids import RUN_ID_PREFIX
from plait.mesh import open_mesh
from plait.programs import MeshCapability
from plait.runs.record import owner_id

HERE = Path(__file__).resolve().parent

graph = plait.Graph("release", budget=20, description="fetch, test, notes, approve, release")


class Fetched(BaseModel):
    """What ``fetch`` found: the version and the changes since the last release."""

    version: str
    changes: list[str]


@graph.node(next="test", on_indeterminate="retry")  # reads only: safe to run again
async def fetch(input: str) -> Fetched:
    """The changes going into release ``input`` (fixed here; a real one reads git)."""
    return Fetched(
        version=input,
        changes=["prices: round half up", "total: tax each price", "docs: examples"],
    )


@graph.node(on_indeterminate="retry")
async def test(fetch: Fetched) -> dict[str, Any]:
    """Every change must name the area it touches (``area: what``)."""
    unnamed = [c for c in fetch.changes if ": " not in c]
    return {"ok": not unnamed, "checked": len(fetch.changes), "unnamed": unnamed}


def after_test(test: dict[str, Any]) -> Literal["notes", "stopped"]:
    """Notes for a release that passed, a stop with the evidence otherwise."""
    return "notes" if test["ok"] else "stopped"


graph.route(test, after_test)


@graph.node
async def stopped(test: dict[str, Any]) -> dict[str, Any]:
    """The failing node and its evidence."""
    return {"status": "failed", "node": "test", "evidence": test}


graph.agent(
    "notes",
    "Write release notes for {{fetch.version}} from these changes: {{fetch.changes}}",
    next="approve",
    tools=[],
)
graph.human("approve", "Release {{fetch.version}}?\n\n{{notes}}", next="release")


@graph.node(on_indeterminate="retry")  # it verifies its own effect before acting
async def release(fetch: Fetched, notes: str, approve: str, mesh: MeshCapability) -> dict[str, Any]:
    """Record the release once, if a person said yes."""
    me = await mesh.self()
    run = me["run"]
    report = {"run": run, "state": f"runs/{run}", "version": fetch.version}
    if run.startswith(RUN_ID_PREFIX):  # a durable run: an actor owns it (in-session: none)
        report.update(actor=owner_id(run))
    if not approve.strip().lower().startswith("yes"):
        return {**report, "status": "rejected", "answer": approve}
    key = f"releases/{fetch.version}"
    found = await mesh.get(key)
    if found is None:
        await mesh.put(key, {"version": fetch.version, "notes": notes}, if_version=0)
    elif found["value"]["version"] != fetch.version:
        raise ValueError(f"{key} holds another release: {found['value']!r}")
    return {**report, "status": "released", "key": key}


async def main() -> None:
    """Run the graph in this process, answer the sign-off with ``yes``, print each step."""
    async with open_mesh("memory://") as mesh:
        model = f"scripted:{HERE / 'release_graph.model.yaml'}"
        run = await graph.run("v1.4.0", model=model, mesh=mesh)
        assert run.waiting is not None
        print(f"{run.status}: {run.waiting.ask}")
        run = await graph.resume(run, "yes")
        for step in run.trajectory:
            print(f"{step.node:>12}  visit {step.visit}  {step.verdict or ''}")
        print(run.output)


if __name__ == "__main__":
    anyio.run(main)
