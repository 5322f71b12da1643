"""The issue's release workflow, with stand-in commands for mypy and pytest: each
check and the release notes is an effect recorded in the run's workspace (see
:mod:`tests.workflows.effect`)."""

from __future__ import annotations

import sys
from pathlib import Path

import plait
from tests.workflows.effect import effect

EFFECT = f"{sys.executable} {Path(__file__).with_name('effect.py')}"
"""The stand-in command: ``EFFECT NAME`` records effect NAME (see effect.py)."""


async def notes_written(ctx: plait.Context, target: str) -> str | None:
    """The release notes' check: their text if their effect is there."""
    log = Path.cwd() / "effects.log"
    if log.exists() and "notes" in log.read_text().split():
        return f"notes for {target}"
    return None


@plait.step(on_indeterminate="verify", verify=notes_written)
async def release_notes(ctx: plait.Context, target: str) -> str:
    """Write the release notes (an effect)."""
    effect(Path.cwd(), "notes")
    return f"notes for {target}"


@plait.workflow(agent="assistant")
async def release(ctx: plait.Context, target: str, wait_s: float = 1.0) -> dict:
    """Check, review, ask, wait, then release ``target``."""
    types, tests = await plait.gather(
        ctx.tools.bash(f"{EFFECT} types {target}", on_indeterminate="retry"),
        ctx.tools.bash(f"{EFFECT} tests {target}", on_indeterminate="retry"),
    )
    if not (types["ok"] and tests["ok"]):
        return {"status": "failed", "types": types["ok"], "tests": tests["ok"]}
    review = await ctx.agents.run("Review the change to " + target)
    answer = await ctx.decisions.ask("Release " + target + "?", options=["yes", "no"])
    if answer.option != "yes":
        return {"status": "rejected"}
    await ctx.sleep(seconds=wait_s)
    return {
        "status": "released",
        "review": review["text"],
        "notes": await release_notes(ctx, target),
    }
