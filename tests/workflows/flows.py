"""Small workflows the tests change under running runs: ``gate`` as first written,
``gate_patched`` (a change guarded by ``ctx.patched``) and ``gate_changed`` (a change
that is not), all named ``gate``."""

from __future__ import annotations

from typing import Any

import plait


@plait.workflow
async def gate(ctx: plait.Context, target: str) -> dict[str, Any]:
    """Check, then ask twice."""
    first = await ctx.tools.bash("echo one")
    go = await ctx.decisions.ask("Go " + target + "?", options=["yes", "no"])
    done = await ctx.decisions.ask("Finish " + target + "?", options=["yes", "no"])
    return {"first": first["stdout"].strip(), "go": go.option, "done": done.option}


@plait.workflow(name="gate")
async def gate_patched(ctx: plait.Context, target: str) -> dict[str, Any]:
    """``gate`` with a lint step added where runs in flight may be."""
    first = await ctx.tools.bash("echo one")
    lint = None
    if ctx.patched("lint"):
        lint = (await ctx.tools.bash("echo lint"))["stdout"].strip()
    go = await ctx.decisions.ask("Go " + target + "?", options=["yes", "no"])
    done = await ctx.decisions.ask("Finish " + target + "?", options=["yes", "no"])
    return {"first": first["stdout"].strip(), "go": go.option, "done": done.option, "lint": lint}


@plait.workflow(name="gate")
async def gate_changed(ctx: plait.Context, target: str) -> dict[str, Any]:
    """``gate`` whose first step became another: runs in flight cannot follow."""
    first = await ctx.agents.run("one")
    go = await ctx.decisions.ask("Go " + target + "?", options=["yes", "no"])
    return {"first": first["text"], "go": go.option}


@plait.workflow
async def fan(ctx: plait.Context, n: int, limit: int) -> list[str]:
    """``n`` echoes, at most ``limit`` at once, then the time and an id."""
    outs = await plait.gather(*(ctx.tools.bash(f"echo {i}") for i in range(n)), limit=limit)
    stamp, ident = ctx.now(), ctx.uuid()
    assert stamp > 0 and len(ident) == 32
    return [o["stdout"].strip() for o in outs]


@plait.step(on_indeterminate="escalate")
async def deploy(ctx: plait.Context, what: str) -> str:
    """An effect nobody can check: interrupted, a person decides whether to redo it."""
    return f"deployed {what}"


@plait.workflow
async def careful(ctx: plait.Context, what: str) -> str:
    """One escalating step."""
    return await deploy(ctx, what)


@plait.step
async def count(ctx: plait.Context, i: int) -> int:
    """A cheap step."""
    return i


@plait.workflow(name="long", budget=3)
async def long(ctx: plait.Context, n: int) -> int:
    """``n`` steps one after another, within a budget of three visits."""
    return sum([await count(ctx, i) for i in range(n)])


@plait.workflow
async def asks(ctx: plait.Context) -> str:
    """One question."""
    return (await ctx.decisions.ask("Proceed?", options=["yes", "no"])).text


@plait.workflow
async def parent(ctx: plait.Context) -> str:
    """Runs ``asks`` as a child run and awaits it, then draws, stamps and writes."""
    got = await ctx.runs.workflow(asks)
    draw, ident = ctx.random(), ctx.uuid()
    put = await ctx.mesh.put(f"notes/{ident}", {"got": got, "draw": draw})
    read = await ctx.mesh.get(f"notes/{ident}")
    assert read is not None and read["version"] == put["version"]
    return "parent got " + str(read["value"]["got"])


@plait.workflow
async def relay(ctx: plait.Context) -> str:
    """Fetch outside content, then publish it."""
    page = await ctx.tools.call("fetch", {})
    await ctx.tools.call("publish", {"text": page}, on_indeterminate="retry")
    return str(page)


PLAIN = "not a workflow"
