"""The fabric seed's in-session graph, made resumable by one decorator.

The seed's in-session form is one program whose nodes are calls and whose edges are
``if`` and a bounded gather; it must finish in one turn. Its resumable form is a
durable actor that reads and CASes its own record, one node per message, raising and
re-checking its decision by hand. Here the program stays a program: ``@plait.workflow``
journals each call (both checks, the review, the approval, the release), so a restart
or another host resumes it after the last committed step, the approval parks the run
holding no process, and ``release`` runs once (its check finds an interrupted release).

In session (scripted review, stand-in checks), from the repository root::

    FABRIC_TYPECHECK=true FABRIC_TESTS=true python examples/fabric_workflow.py

Durably, against a mesh a worker serves::

    plait workflow import examples.fabric_workflow:checked_release
    plait workflow start examples.fabric_workflow:checked_release --args '{"target": "src"}'
    plait graph resume RUN yes
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

import plait

TYPECHECK = os.environ.get("FABRIC_TYPECHECK", "bun run typecheck")
TESTS = os.environ.get("FABRIC_TESTS", "bunx vitest run")
RELEASED = Path(os.environ.get("FABRIC_RELEASED", "released.txt"))
"""Where ``release`` records what it released (its effect, checked after a crash)."""


async def _released(ctx: plait.Context, target: str) -> str | None:
    """The release already recorded for ``target``, if an interrupted step made it."""
    found = anyio.Path(RELEASED)
    done = (await found.read_text()).split() if await found.exists() else []
    return target if target in done else None


@plait.step(on_indeterminate="verify", verify=_released)
async def release(ctx: plait.Context, target: str) -> str:
    """Release ``target`` (here: record it), once."""
    async with await anyio.open_file(RELEASED, "a") as out:
        await out.write(target + "\n")
    return target


@plait.workflow(agent="assistant")
async def checked_release(ctx: plait.Context, target: str) -> dict[str, Any]:
    """The seed's in-session graph, then its approve and release nodes."""
    types, tests = await plait.gather(
        ctx.tools.bash(TYPECHECK, on_indeterminate="retry"),
        ctx.tools.bash(TESTS + " " + target, on_indeterminate="retry"),
        limit=2,
    )
    if not types["ok"] or not tests["ok"]:
        return {"status": "failed", "node": "checks", "types": types["ok"], "tests": tests["ok"]}
    review = await ctx.agents.run(
        "Review the change to " + target + " for correctness. Reply APPROVE or a list of blockers."
    )
    text = review.get("text") or ""
    if not text.startswith("APPROVE"):
        return {"status": "partial", "review": text}
    answer = await ctx.decisions.ask("Release " + target + "?", options=["yes", "no"])
    if answer.option != "yes":
        return {"status": "rejected", "review": text}
    return {"status": "success", "review": text, "released": await release(ctx, target)}


async def main() -> None:
    """Run it in this process with a scripted review and a yes (stand-in checks:
    ``FABRIC_TYPECHECK=true FABRIC_TESTS=true python examples/fabric_workflow.py``)."""
    value, steps = await checked_release.session(
        {"target": "src"},
        model=plait.ScriptedModel([{"text": "APPROVE"}]),
        answers={"Release src?": "yes"},
        approve_tools=True,
    )
    for step in steps:
        print(step.pos, step.name, "error: " + step.error if step.error else "ok")
    print(value)


if __name__ == "__main__":
    anyio.run(main)
